// tests/gguf_fixture.h — GGUF files for the tests (tests/test_gguf_model.c)
// and the fuzz corpus: the stories260K fixture written as llama.cpp's
// converter writes a llama model (Q/K rows permuted per head, F32 norms, a
// SentencePiece vocabulary with scores and token types, no output.weight),
// with weights in F16, F32 or Q8_0 and one variant per way a file can be
// broken or unsupported; and tiny one-layer models (SentencePiece or
// byte-level vocabularies, every weight type) as fuzz seeds.
#ifndef PQ_TEST_GGUF_FIXTURE_H
#define PQ_TEST_GGUF_FIXTURE_H

#include <jansson.h>
#include <math.h>

#include "common/half.h"
#include "formats/config.h"
#include "formats/safetensors.h"
#include "formats/tokenizer/pretok.h"
#include "kernels/ggml_blocks.h"
#include "tests/gguf_writer.h"
#include "tests/test.h"

typedef enum { FX_OK, FX_COUNT, FX_OFFSET, FX_TTYPE, FX_ARCH, FX_PRE, FX_STRLEN, FX_QWEN2, FX_ROPE_FREQS,
               FX_IQ2, FX_EXPERTS, FX_ROPE_SCALING } fx_kind;

static const char *const FX_NAMES[] = {"ok", "count", "offset", "ttype", "arch", "pre", "strlen", "qwen2",
                                       "rope_freqs", "iq2", "experts", "rope_scaling"};

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_BYTE = 6 };

// GGUF row k of a head of hd rows holds Hugging Face row (k % 2) * hd/2 + k / 2.
static int hf_row_of(int k, int hd) { return (k % 2) * (hd / 2) + k / 2; }

// Q8_0 of one row of n (a multiple of 32) values, as ggml's reference quantizes.
static void q8_0_row(const float *x, int n, uint8_t *out) {
    for (int b = 0; b < n / 32; b++, x += 32, out += 34) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127, id = d ? 1 / d : 0;
        uint16_t h = pq_f32_to_fp16(d);
        memcpy(out, &h, 2);
        for (int j = 0; j < 32; j++) out[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
    }
}

// A tensor of the fixture (F16 [rows, cols] or [n]) as a GGUF tensor of
// `type`, rows permuted per head of hd when perm_heads > 0.
static void put_weight(gw *w, const char *name, const pq_tensor *t, const char *type, int perm_heads, int hd,
                       uint32_t type_override) {
    int rows = (int)t->shape[0], cols = t->ndim == 2 ? (int)t->shape[1] : 1;
    float *v = malloc((size_t)rows * cols * sizeof *v);
    const uint16_t *h = t->data;
    for (int r = 0; r < rows; r++) {
        int src = perm_heads ? (r / hd) * hd + hf_row_of(r % hd, hd) : r;
        for (int c = 0; c < cols; c++) v[(size_t)r * cols + c] = pq_fp16_to_f32(h[(size_t)src * cols + c]);
    }
    uint64_t ne[2] = {(uint64_t)cols, (uint64_t)rows};
    int nd = t->ndim;
    if (nd == 1) ne[0] = (uint64_t)rows;
    size_t n = (size_t)rows * cols;
    uint8_t *buf = malloc(n * 4 + 64);
    uint32_t gt;
    size_t bytes;
    if (nd == 1 || strcmp(type, "f32") == 0) {
        memcpy(buf, v, n * 4), gt = PQ_GGML_F32, bytes = n * 4;
    } else if (strcmp(type, "q8_0") == 0 && cols % 32 == 0) {
        for (int r = 0; r < rows; r++) q8_0_row(v + (size_t)r * cols, cols, buf + (size_t)r * (cols / 32) * 34);
        gt = PQ_GGML_Q8_0, bytes = n / 32 * 34;
    } else {
        for (size_t i = 0; i < n; i++) ((uint16_t *)buf)[i] = pq_f32_to_fp16(v[i]);
        gt = PQ_GGML_F16, bytes = n * 2;
    }
    gw_tensor(w, name, nd, ne, type_override ? type_override : gt, buf, bytes);
    free(v), free(buf);
}

// The fixture's tokenizer.json as tokenizer.ggml.* (SentencePiece, scores -id).
static int put_tokenizer(gw *w, const char *fixture, fx_kind kind) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizer.json", fixture);
    json_t *root = json_load_file(path, 0, NULL);
    json_t *vocab = json_object_get(json_object_get(root, "model"), "vocab");
    if (!vocab) return json_decref(root), -1;
    int n = (int)json_object_size(vocab);
    const char **tok = calloc((size_t)n, sizeof *tok);
    float *score = calloc((size_t)n, sizeof *score);
    int32_t *type = calloc((size_t)n, sizeof *type);
    const char *k;
    json_t *v;
    json_object_foreach(vocab, k, v) if (json_integer_value(v) < n) tok[json_integer_value(v)] = k;
    for (int i = 0; i < n; i++) {
        int byte = tok[i] && strncmp(tok[i], "<0x", 3) == 0 && strlen(tok[i]) == 6;
        type[i] = i == 0 ? TT_UNKNOWN : i < 3 ? TT_CONTROL : byte ? TT_BYTE : TT_NORMAL;
        score[i] = type[i] == TT_NORMAL ? -(float)i : 0.0f;
    }
    gw_kv_str(w, "tokenizer.ggml.model", "llama");
    gw_kv_str(w, "tokenizer.ggml.pre", kind == FX_PRE ? "mystery" : "default");
    gw_arr(w, "tokenizer.ggml.tokens", GW_STR, (uint64_t)n);
    for (int i = 0; i < n; i++) gw_str(&w->kv, tok[i] ? tok[i] : "");
    gw_arr(w, "tokenizer.ggml.scores", GW_F32, (uint64_t)n);
    gw_put(&w->kv, score, (size_t)n * 4);
    gw_arr(w, "tokenizer.ggml.token_type", GW_I32, (uint64_t)n);
    gw_put(&w->kv, type, (size_t)n * 4);
    gw_kv_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gw_kv_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gw_kv_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    gw_kv_bool(w, "tokenizer.ggml.add_bos_token", 1);
    gw_kv_bool(w, "tokenizer.ggml.add_space_prefix", 1);
    free(tok), free(score), free(type);
    json_decref(root);
    return 0;
}

// The stories260K fixture as llama.cpp would write it (or a broken / other
// variant of that). Returns 0 on success.
static int write_fixture(const char *fixture, const char *type, fx_kind kind, gw_buf *out) {
    pq_config c;
    pq_st *st = NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/config.json", fixture);
    if (pq_config_load(path, &c) != PQ_OK || pq_st_open(fixture, &st) != PQ_OK) return -1;
    gw w = {0};
    const char *arch = kind == FX_QWEN2 ? "qwen2" : "llama";
    char key[128];
#define AKEY(s) (snprintf(key, sizeof key, "%s.%s", arch, s), key)
    gw_kv_str(&w, "general.architecture", kind == FX_ARCH ? "gpt9" : arch);
    if (kind == FX_STRLEN) {
        gw_key(&w, "general.name", GW_STR);
        gw_u64(&w.kv, 1ull << 40);
        gw_put(&w.kv, "stories", 7);
    } else {
        gw_kv_str(&w, "general.name", "stories260K");
    }
    gw_kv_u32(&w, AKEY("block_count"), (uint32_t)c.n_layers);
    gw_kv_u32(&w, AKEY("context_length"), (uint32_t)c.max_pos);
    gw_kv_u32(&w, AKEY("embedding_length"), (uint32_t)c.hidden);
    gw_kv_u32(&w, AKEY("feed_forward_length"), (uint32_t)c.intermediate);
    gw_kv_u32(&w, AKEY("attention.head_count"), (uint32_t)c.n_heads);
    gw_kv_u32(&w, AKEY("attention.head_count_kv"), (uint32_t)c.n_kv_heads);
    gw_kv_f32(&w, AKEY("rope.freq_base"), c.rope_theta);
    gw_kv_f32(&w, AKEY("attention.layer_norm_rms_epsilon"), c.rms_eps);
    gw_kv_u32(&w, AKEY("rope.dimension_count"), (uint32_t)c.head_dim);
    if (kind == FX_EXPERTS) gw_kv_u32(&w, AKEY("expert_count"), 8);
    if (kind == FX_ROPE_SCALING) gw_kv_str(&w, AKEY("rope.scaling.type"), "linear");
    gw_kv_u32(&w, "general.alignment", 32);
    if (put_tokenizer(&w, fixture, kind) != 0) return pq_st_close(st), gw_free(&w), -1;
    int perm = kind != FX_QWEN2;
    put_weight(&w, "token_embd.weight", pq_st_find(st, "model.embed_tokens.weight"), type, 0, 0,
               kind == FX_TTYPE ? 77 : 0);
    put_weight(&w, "output_norm.weight", pq_st_find(st, "model.norm.weight"), type, 0, 0, 0);
    static const char *const MAP[][2] = {
        {"attn_norm.weight", "input_layernorm.weight"}, {"attn_q.weight", "self_attn.q_proj.weight"},
        {"attn_k.weight", "self_attn.k_proj.weight"},   {"attn_v.weight", "self_attn.v_proj.weight"},
        {"attn_output.weight", "self_attn.o_proj.weight"}, {"ffn_gate.weight", "mlp.gate_proj.weight"},
        {"ffn_up.weight", "mlp.up_proj.weight"},       {"ffn_down.weight", "mlp.down_proj.weight"},
        {"ffn_norm.weight", "post_attention_layernorm.weight"},
    };
    for (int l = 0; l < c.n_layers; l++)
        for (size_t i = 0; i < sizeof MAP / sizeof MAP[0]; i++) {
            char g[96], h[96];
            snprintf(g, sizeof g, "blk.%d.%s", l, MAP[i][0]);
            snprintf(h, sizeof h, "model.layers.%d.%s", l, MAP[i][1]);
            int heads = i == 1 ? c.n_heads : i == 2 ? c.n_kv_heads : 0;
            put_weight(&w, g, pq_st_find(st, h), type, perm ? heads : 0, c.head_dim, 0);
            if (kind == FX_QWEN2 && i >= 1 && i <= 3) { // biases: the weight's first column, as F32
                const pq_tensor *t = pq_st_find(st, h);
                int rows = (int)t->shape[0];
                float *b = malloc((size_t)rows * 4);
                for (int r = 0; r < rows; r++) b[r] = pq_fp16_to_f32(((const uint16_t *)t->data)[(size_t)r * t->shape[1]]);
                uint64_t ne[1] = {(uint64_t)rows};
                snprintf(g, sizeof g, "blk.%d.%s", l, MAP[i][0]);
                memcpy(g + strlen(g) - 6, "bias", 5);
                gw_tensor(&w, g, 1, ne, PQ_GGML_F32, b, (size_t)rows * 4);
                free(b);
            }
        }
    if (kind == FX_ROPE_FREQS) {
        float f[4] = {1, 1, 1, 1};
        gw_tensor(&w, "rope_freqs.weight", 1, (uint64_t[]){4}, PQ_GGML_F32, f, sizeof f);
    }
    if (kind == FX_IQ2) {
        uint8_t blk[66] = {0};
        gw_tensor(&w, "output.weight", 2, (uint64_t[]){256, 1}, PQ_GGML_IQ2_XXS, blk, sizeof blk);
    }
#undef AKEY
    if (kind == FX_COUNT) w.n_t++;
    if (kind == FX_OFFSET) { // the last tensor's offset (the info's last 8 bytes) past the end
        uint64_t off = w.data.n + 4096;
        memcpy(w.info.p + w.info.n - 8, &off, 8);
    }
    *out = gw_finish(&w);
    gw_free(&w);
    pq_st_close(st);
    return 0;
}

// ---- the fuzz corpus -------------------------------------------------------------

static float frand(void) { return (float)((pq_test_u64() >> 40) * (2.0 / 16777216.0) - 1.0) * 0.1f; }

// Random data of a tensor of ggml type t: random codes, small finite scales.
static void rand_tensor(gw *w, const char *name, int nd, const uint64_t *ne, uint32_t t) {
    const pq_ggml_type_info *ti = pq_ggml_type_get(t);
    uint64_t n = 1;
    for (int i = 0; i < nd; i++) n *= ne[i];
    size_t bytes = (size_t)(n / (uint64_t)ti->block) * (size_t)ti->bytes;
    uint8_t *d = malloc(bytes);
    int halves[2] = {-1, -1}; // the fp16 fields of a block
    switch (t) {
    case PQ_GGML_Q4_0: case PQ_GGML_Q5_0: case PQ_GGML_Q8_0: case PQ_GGML_IQ2_XXS: halves[0] = 0; break;
    case PQ_GGML_Q4_1: case PQ_GGML_Q5_1: case PQ_GGML_Q4_K: case PQ_GGML_Q5_K: halves[0] = 0, halves[1] = 2; break;
    case PQ_GGML_Q2_K: halves[0] = 80, halves[1] = 82; break;
    case PQ_GGML_Q3_K: halves[0] = 108; break;
    case PQ_GGML_Q6_K: halves[0] = 208; break;
    default: break;
    }
    for (size_t i = 0; i < bytes; i++) d[i] = (uint8_t)pq_test_u64();
    for (uint64_t i = 0; i < n && ti->block == 1; i++) {
        float x = frand();
        if (t == PQ_GGML_F32) memcpy(d + 4 * i, &x, 4);
        else ((uint16_t *)d)[i] = t == PQ_GGML_F16 ? pq_f32_to_fp16(x) : pq_f32_to_bf16(x);
    }
    for (size_t b = 0; ti->block > 1 && b < bytes / (size_t)ti->bytes; b++)
        for (int k = 0; k < 2; k++)
            if (halves[k] >= 0) {
                uint16_t h = pq_f32_to_fp16(frand() * 0.01f);
                memcpy(d + b * (size_t)ti->bytes + halves[k], &h, 2);
            }
    gw_tensor(w, name, nd, ne, t, d, bytes);
    free(d);
}

// A one-layer model (hidden 32, 2 heads of 16, 1 kv head, ffn 64) of
// architecture arch with a "llama" (SentencePiece) or "gpt2" vocabulary,
// its 2-D weights in type wt, for the fuzzer to start from.
static gw_buf tiny_model(const char *arch, const char *tok, const char *pre, uint32_t wt, fx_kind kind) {
    gw w = {0};
    char key[96];
#define K(s) (snprintf(key, sizeof key, "%s.%s", arch, s), key)
    gw_kv_str(&w, "general.architecture", kind == FX_ARCH ? "gpt9" : arch);
    gw_kv_u32(&w, K("block_count"), 1);
    gw_kv_u32(&w, K("context_length"), 64);
    gw_kv_u32(&w, K("embedding_length"), 32);
    gw_kv_u32(&w, K("feed_forward_length"), 64);
    gw_kv_u32(&w, K("attention.head_count"), 2);
    gw_kv_u32(&w, K("attention.head_count_kv"), 1);
    gw_kv_f32(&w, K("attention.layer_norm_rms_epsilon"), 1e-5f);
    gw_kv_f32(&w, K("rope.freq_base"), 10000.0f);
#undef K
    int spm = strcmp(tok, "llama") == 0, n = spm ? 264 : 261;
    gw_kv_str(&w, "tokenizer.ggml.model", tok);
    gw_kv_str(&w, "tokenizer.ggml.pre", kind == FX_PRE ? "mystery" : pre);
    const char *spm_extra[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "\xe2\x96\x81" "a", "ab"};
    const char *bpe_extra[] = {"\xc4\xa0t", "he", "\xc4\xa0the", "<|endoftext|>", "<|user|>"};
    gw_arr(&w, "tokenizer.ggml.tokens", GW_STR, (uint64_t)n);
    for (int i = 0; spm && i < 3; i++) gw_str(&w.kv, spm_extra[i]);
    for (int b = 0; b < 256; b++) {
        char s[8];
        pq_tbuf t = {0};
        char c = (char)b;
        if (spm) snprintf(s, sizeof s, "<0x%02X>", b);
        else pq_bytelevel_map(&c, 1, &t), snprintf(s, sizeof s, "%.*s", (int)t.len, t.p);
        pq_tbuf_free(&t);
        gw_str(&w.kv, s);
    }
    for (int i = 3; spm && i < 8; i++) gw_str(&w.kv, spm_extra[i]);
    for (int i = 0; !spm && i < 5; i++) gw_str(&w.kv, bpe_extra[i]);
    gw_arr(&w, "tokenizer.ggml.token_type", GW_I32, (uint64_t)n);
    for (int i = 0; i < n; i++)
        gw_u32(&w.kv, spm ? (i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1) : (i == 259 ? 3 : i == 260 ? 4 : 1));
    if (spm) {
        gw_arr(&w, "tokenizer.ggml.scores", GW_F32, (uint64_t)n);
        for (int i = 0; i < n; i++) {
            float sc = i < 259 ? 0.0f : -(float)i;
            gw_put(&w.kv, &sc, 4);
        }
    } else {
        gw_arr(&w, "tokenizer.ggml.merges", GW_STR, 3);
        gw_str(&w.kv, "\xc4\xa0 t"), gw_str(&w.kv, "h e"), gw_str(&w.kv, "\xc4\xa0t he");
    }
    gw_kv_u32(&w, "tokenizer.ggml.bos_token_id", spm ? 1 : 259);
    gw_kv_u32(&w, "tokenizer.ggml.eos_token_id", spm ? 2 : 259);
    if (kind == FX_STRLEN) gw_key(&w, "general.name", GW_STR), gw_u64(&w.kv, 1ull << 40), gw_put(&w.kv, "x", 1);
    uint64_t emb[2] = {32, (uint64_t)n}, vec[1] = {32}, q[2] = {32, 32}, kv[2] = {32, 16}, up[2] = {32, 64},
             down[2] = {64, 32};
    rand_tensor(&w, "token_embd.weight", 2, emb, kind == FX_TTYPE ? PQ_GGML_F16 : wt);
    rand_tensor(&w, "output_norm.weight", 1, vec, PQ_GGML_F32);
    rand_tensor(&w, "blk.0.attn_norm.weight", 1, vec, PQ_GGML_F32);
    rand_tensor(&w, "blk.0.attn_q.weight", 2, q, wt);
    rand_tensor(&w, "blk.0.attn_k.weight", 2, kv, wt);
    rand_tensor(&w, "blk.0.attn_v.weight", 2, kv, wt);
    rand_tensor(&w, "blk.0.attn_output.weight", 2, q, wt);
    if (strcmp(arch, "qwen2") == 0) {
        uint64_t b16[1] = {16};
        rand_tensor(&w, "blk.0.attn_q.bias", 1, vec, PQ_GGML_F32);
        rand_tensor(&w, "blk.0.attn_k.bias", 1, b16, PQ_GGML_F32);
        rand_tensor(&w, "blk.0.attn_v.bias", 1, b16, PQ_GGML_F32);
    }
    rand_tensor(&w, "blk.0.ffn_gate.weight", 2, up, wt);
    rand_tensor(&w, "blk.0.ffn_up.weight", 2, up, wt);
    rand_tensor(&w, "blk.0.ffn_down.weight", 2, down, wt);
    rand_tensor(&w, "blk.0.ffn_norm.weight", 1, vec, PQ_GGML_F32);
    if (kind == FX_TTYPE) memcpy(w.info.p + 8 + strlen("token_embd.weight") + 4 + 16, &(uint32_t){77}, 4);
    if (kind == FX_COUNT) w.n_t++;
    if (kind == FX_OFFSET) memcpy(w.info.p + w.info.n - 8, &(uint64_t){w.data.n + 64}, 8);
    gw_buf f = gw_finish(&w);
    gw_free(&w);
    return f;
}

// Every metadata value type and a tensor of every type pq dequantizes (and
// one it does not), without a model around them.
static gw_buf all_types(void) {
    gw w = {0};
    gw_key(&w, "t.u8", GW_U8), gw_u8(&w.kv, 7);
    gw_key(&w, "t.i8", GW_I8), gw_u8(&w.kv, 0xf9);
    gw_key(&w, "t.u16", GW_U16), gw_u8(&w.kv, 1), gw_u8(&w.kv, 2);
    gw_key(&w, "t.i16", GW_I16), gw_u8(&w.kv, 0xff), gw_u8(&w.kv, 0xff);
    gw_kv_u32(&w, "t.u32", 123456);
    gw_key(&w, "t.i32", GW_I32), gw_u32(&w.kv, (uint32_t)-5);
    gw_kv_f32(&w, "t.f32", 0.5f);
    gw_kv_bool(&w, "t.bool", 1);
    gw_kv_str(&w, "t.str", "hello");
    gw_key(&w, "t.u64", GW_U64), gw_u64(&w.kv, 1ull << 50);
    gw_key(&w, "t.i64", GW_I64), gw_u64(&w.kv, (uint64_t)-9);
    gw_key(&w, "t.f64", GW_F64), gw_put(&w.kv, &(double){2.5}, 8);
    gw_arr(&w, "t.arr_str", GW_STR, 2), gw_str(&w.kv, "a"), gw_str(&w.kv, "");
    gw_arr(&w, "t.arr_f32", GW_F32, 2), gw_put(&w.kv, (float[]){1, 2}, 8);
    gw_arr(&w, "t.arr_bool", GW_BOOL, 2), gw_u8(&w.kv, 0), gw_u8(&w.kv, 1);
    gw_arr(&w, "t.arr_empty", GW_I64, 0);
    gw_kv_u32(&w, "general.alignment", 64);
    w.align = 64;
    const uint32_t types[] = {PQ_GGML_F32, PQ_GGML_F16, PQ_GGML_BF16, PQ_GGML_Q8_0, PQ_GGML_Q4_0, PQ_GGML_Q4_1,
                              PQ_GGML_Q5_0, PQ_GGML_Q5_1, PQ_GGML_Q2_K, PQ_GGML_Q3_K, PQ_GGML_Q4_K, PQ_GGML_Q5_K,
                              PQ_GGML_Q6_K, PQ_GGML_IQ2_XXS};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%zu.%s", i, pq_ggml_type_get(types[i])->name);
        uint64_t ne[2] = {(uint64_t)pq_ggml_type_get(types[i])->block * (types[i] <= PQ_GGML_F16 ? 8 : 1), 2};
        rand_tensor(&w, name, 2, ne, types[i]);
    }
    gw_buf f = gw_finish(&w);
    gw_free(&w);
    return f;
}

static int write_corpus(const char *dir) {
    static const struct { const char *name, *arch, *tok, *pre; uint32_t wt; fx_kind kind; } S[] = {
        {"llama_spm_f16", "llama", "llama", "default", PQ_GGML_F16, FX_OK},
        {"llama_spm_q8_0", "llama", "llama", "default", PQ_GGML_Q8_0, FX_OK},
        {"llama_spm_q4_1", "llama", "llama", "default", PQ_GGML_Q4_1, FX_OK},
        {"llama_gpt2_smollm_q4_0", "llama", "gpt2", "smollm", PQ_GGML_Q4_0, FX_OK},
        {"llama_gpt2_llama3_q5_0", "llama", "gpt2", "llama-bpe", PQ_GGML_Q5_0, FX_OK},
        {"llama_gpt2_gpt2_bf16", "llama", "gpt2", "gpt-2", PQ_GGML_BF16, FX_OK},
        {"qwen2_gpt2_q5_1", "qwen2", "gpt2", "qwen2", PQ_GGML_Q5_1, FX_OK},
        {"bad_count", "llama", "llama", "default", PQ_GGML_F16, FX_COUNT},
        {"bad_offset", "llama", "llama", "default", PQ_GGML_F16, FX_OFFSET},
        {"bad_ttype", "llama", "llama", "default", PQ_GGML_F16, FX_TTYPE},
        {"bad_arch", "llama", "llama", "default", PQ_GGML_F16, FX_ARCH},
        {"bad_pre", "llama", "gpt2", "smollm", PQ_GGML_F16, FX_PRE},
        {"bad_strlen", "llama", "llama", "default", PQ_GGML_F16, FX_STRLEN},
    };
    char path[1024];
    int rc = 0;
    for (size_t i = 0; i < sizeof S / sizeof S[0]; i++) {
        gw_buf f = tiny_model(S[i].arch, S[i].tok, S[i].pre, S[i].wt, S[i].kind);
        snprintf(path, sizeof path, "%s/%s", dir, S[i].name);
        rc |= gw_save(&f, path);
        if (i == 0) // truncations of the first
            for (int k = 1; k <= 3; k++) {
                gw_buf cut = {f.p, f.n * (size_t)k / 4, 0};
                snprintf(path, sizeof path, "%s/bad_truncated_%d", dir, k);
                rc |= gw_save(&cut, path);
            }
        free(f.p);
    }
    gw_buf f = all_types();
    snprintf(path, sizeof path, "%s/all_types", dir);
    rc |= gw_save(&f, path);
    free(f.p);
    return rc ? 1 : 0;
}

#endif
