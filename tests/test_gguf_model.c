// tests/test_gguf_model.c — a GGUF file as a model: formats/gguf_hf (config,
// tokenizer, tensors under Hugging Face names), pq_model_open / pq_tok_load
// on a .gguf, and eval/convert.
//
// The stories260K fixture is written here as a llama GGUF the way llama.cpp's
// converter writes one (Q/K rows permuted per head, F32 norms, a
// SentencePiece vocabulary with scores and token types, no output.weight),
// then read back: every tensor must equal the fixture's bit for bit, the
// tokenizer's merges must be the fixture's and its ids on the TinyStories
// text the fixture tokenizer's, and the engine's logits identical. Variants:
// Q8_0 weights, a qwen2 file (not permuted, with q/k/v biases), synthetic
// gpt2 vocabularies for each pre-tokenizer, and one broken file per rule.
//
//   test_gguf_model                                   the checks
//   test_gguf_model --write FIXTURE OUT TYPE [BROKEN] writes the fixture GGUF
//       (TYPE f16|f32|q8_0; BROKEN count|offset|ttype|arch|pre|strlen) for
//       tests/cli/test_cli_gguf.sh
//   test_gguf_model --corpus DIR                      writes the fuzz seeds
//   test_gguf_model --tokenizer-json FILE.gguf DIR    writes its tokenizer.json
//   test_gguf_model --tok-oracle FILE.gguf DIR        pq vs the tokenizers library
//       (tests/cli/test_gguf_smollm2_oracle.sh)
//   test_gguf_model --logits-oracle FILE.gguf CONVERTED DIR   pq vs transformers
//       (tests/oracles/test_smollm2_transformers.sh)
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/half.h"
#include "common/sys.h"
#include "eval/convert.h"
#include "eval/engine.h"
#include "formats/config.h"
#include "formats/gguf_hf.h"
#include "formats/tokenizer/pretok.h"
#include "formats/tokenizer/tokenizer.h"
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

// ---- the checks ------------------------------------------------------------------

static char TMP[64];

static const char *save(const char *name, const gw_buf *f) {
    static char path[8][256];
    static int slot;
    char *p = path[slot++ & 7];
    snprintf(p, 256, "%s/%s", TMP, name);
    if (gw_save(f, p) != 0) p[0] = '\0';
    return p;
}

static const char *fixture_gguf(const char *fixture, const char *name, const char *type, fx_kind kind) {
    gw_buf f = {0};
    if (write_fixture(fixture, type, kind, &f) != 0) return "";
    const char *p = save(name, &f);
    free(f.p);
    return p;
}

static void check_view(const char *fixture, const char *path) {
    pq_gguf_hf *hf = NULL;
    pq_st *st = NULL;
    pq_status s = pq_gguf_hf_open(path, &hf);
    PQ_CHECK(s == PQ_OK, "the fixture written as a llama GGUF (F16, F32 norms) opens as a Hugging Face view (%s)",
             s == PQ_OK ? "" : pq_last_error());
    if (s != PQ_OK || pq_st_open(fixture, &st) != PQ_OK) return pq_gguf_hf_free(hf);
    const pq_st *v = pq_gguf_hf_st(hf);
    int same = pq_st_count(v) == pq_st_count(st), bad = -1;
    for (int i = 0; same && i < pq_st_count(st); i++) {
        const pq_tensor *a = pq_st_at(st, i), *b = pq_st_find(v, a->name);
        same = b && b->ndim == a->ndim && b->shape[0] == a->shape[0] && (a->ndim == 1 || b->shape[1] == a->shape[1]);
        if (same && a->ndim == 2) same = b->dtype == PQ_DT_F16 && memcmp(a->data, b->data, a->nbytes) == 0;
        for (int64_t k = 0; same && a->ndim == 1 && k < a->numel; k++)
            same = b->dtype == PQ_DT_F32 && ((const float *)b->data)[k] == pq_fp16_to_f32(((const uint16_t *)a->data)[k]);
        if (!same) bad = i;
    }
    PQ_CHECK(same, "all %d tensors equal the fixture's under their Hugging Face names, Q/K rows un-permuted (first "
             "differing: %s)", pq_st_count(st), bad >= 0 ? pq_st_at(st, bad)->name : "none");
    pq_config a, b;
    const char *cfg = pq_gguf_hf_file(hf, "config.json");
    char cpath[1024];
    snprintf(cpath, sizeof cpath, "%s/config.json", fixture);
    int ok = pq_config_load(cpath, &a) == PQ_OK && pq_config_parse(cfg, strlen(cfg), "view", &b) == PQ_OK;
    ok = ok && a.arch == b.arch && a.hidden == b.hidden && a.intermediate == b.intermediate && a.n_layers == b.n_layers &&
         a.n_heads == b.n_heads && a.n_kv_heads == b.n_kv_heads && a.head_dim == b.head_dim && a.vocab == b.vocab &&
         a.max_pos == b.max_pos && a.rms_eps == b.rms_eps && a.rope_theta == b.rope_theta &&
         a.tie_embeddings == b.tie_embeddings && a.qkv_bias == b.qkv_bias && a.bos_id == b.bos_id && a.eos_id == b.eos_id;
    PQ_CHECK(ok && strstr(cfg, "\"rms_norm_eps\": 1e-5") && strstr(cfg, "\"torch_dtype\": \"float16\""),
             "config.json from the metadata equals the fixture's (sizes, eps 1e-5 not 9.99999975e-06, theta, tied)");
    char tpath[1024];
    snprintf(tpath, sizeof tpath, "%s/tokenizer.json", fixture);
    json_t *want = json_load_file(tpath, 0, NULL), *got = json_loads(pq_gguf_hf_file(hf, "tokenizer.json"), 0, NULL);
    json_t *wm = json_object_get(want, "model"), *gm = json_object_get(got, "model");
    PQ_CHECK(json_equal(json_object_get(wm, "merges"), json_object_get(gm, "merges")) &&
                 json_equal(json_object_get(wm, "vocab"), json_object_get(gm, "vocab")) &&
                 json_equal(json_object_get(want, "normalizer"), json_object_get(got, "normalizer")) &&
                 json_equal(json_object_get(want, "decoder"), json_object_get(got, "decoder")),
             "tokenizer.json from scores: the fixture's %zu merges in order, its vocabulary, normalizer and decoder",
             json_array_size(json_object_get(wm, "merges")));
    json_decref(want), json_decref(got);
    PQ_CHECK(pq_gguf_hf_file(hf, "generation_config.json") && strstr(pq_gguf_hf_file(hf, "tokenizer_config.json"),
                                                                     "\"add_bos_token\": true"),
             "generation_config.json and tokenizer_config.json (add_bos_token true) are made");
    pq_st_close(st);
    pq_gguf_hf_free(hf);
}

static char *slurp(const char *path, size_t cap, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *p = malloc(cap + 1);
    *len = fread(p, 1, cap, f);
    fclose(f);
    while (*len && ((unsigned char)p[*len - 1] & 0xC0) == 0x80) (*len)--; // whole characters
    if (*len) (*len)--;
    return p;
}

static void check_tokenizer(const char *fixture, const char *path) {
    pq_tokenizer *a = NULL, *b = NULL;
    size_t len = 0;
    char *text = slurp(pq_test_path("data/tinystories_val_prefix.txt"), 200000, &len);
    int ok = text && pq_tok_load(fixture, &a) == PQ_OK && pq_tok_load(path, &b) == PQ_OK;
    PQ_CHECK(ok, "pq_tok_load reads the tokenizer of a .gguf (%s)", ok ? "" : pq_last_error());
    size_t n = 0;
    for (int special = 0; ok && special < 2; special++) {
        int32_t *x = NULL, *y = NULL;
        size_t nx = 0, ny = 0;
        int same = pq_tok_encode(a, text, len, special, &x, &nx) == PQ_OK && pq_tok_encode(b, text, len, special, &y, &ny) == PQ_OK &&
                   nx == ny && memcmp(x, y, nx * 4) == 0;
        char *dx = NULL, *dy = NULL;
        size_t lx = 0, ly = 0;
        same = same && pq_tok_decode(a, x, nx, 0, &dx, &lx) == PQ_OK && pq_tok_decode(b, y, ny, 0, &dy, &ly) == PQ_OK &&
               lx == ly && memcmp(dx, dy, lx) == 0;
        PQ_CHECK(same, "%zu ids of %zu bytes of TinyStories (add_special %d) equal the fixture tokenizer's; so does "
                 "decoding them", nx, len, special);
        n = nx;
        free(x), free(y), free(dx), free(dy);
    }
    PQ_CHECK(ok && n > 1000 && pq_tok_bos(b) == 1 && pq_tok_eos(b) == 2 && pq_tok_adds_bos(b) && pq_tok_vocab_size(b) == 512,
             "BOS 1, EOS 2, BOS added, 512 ids");
    pq_tok_free(a), pq_tok_free(b);
    free(text);
}

static void check_logits(const char *fixture, const char *path) {
    pq_model *a = NULL, *b = NULL;
    pq_engine *ea = NULL, *eb = NULL;
    pq_engine_params p = pq_engine_default_params();
    p.device = PQ_DEVICE_CPU;
    p.nthreads = 1;
    int ok = pq_model_open(fixture, &a) == PQ_OK && pq_model_open(path, &b) == PQ_OK &&
             pq_engine_create(a, &p, &ea) == PQ_OK && pq_engine_create(b, &p, &eb) == PQ_OK;
    PQ_CHECK(ok, "pq_model_open opens the .gguf (%s)", ok ? "" : pq_last_error());
    enum { T = 48 };
    int32_t tok[T];
    for (int i = 0; i < T; i++) tok[i] = (int32_t)(1 + pq_test_u64() % 511);
    float *la = malloc(sizeof(float) * T * 512), *lb = malloc(sizeof(float) * T * 512);
    ok = ok && pq_engine_forward(ea, tok, T, 0) == PQ_OK && pq_engine_logits(ea, 0, T, la) == PQ_OK &&
         pq_engine_forward(eb, tok, T, 0) == PQ_OK && pq_engine_logits(eb, 0, T, lb) == PQ_OK;
    PQ_CHECK(ok && memcmp(la, lb, sizeof(float) * T * 512) == 0,
             "logits of %d random tokens through the .gguf equal the fixture directory's bit for bit", T);
    free(la), free(lb);
    pq_engine_free(ea), pq_engine_free(eb);
    pq_model_free(a), pq_model_free(b);
}

static void check_q8(const char *fixture, const char *path) {
    pq_gguf_hf *hf = NULL;
    pq_st *st = NULL;
    int ok = pq_gguf_hf_open(path, &hf) == PQ_OK && pq_st_open(fixture, &st) == PQ_OK;
    PQ_CHECK(ok, "a Q8_0 GGUF opens (%s)", ok ? "" : pq_last_error());
    if (!ok) return pq_gguf_hf_free(hf), pq_st_close(st);
    const char *names[] = {"model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight",
                           "model.embed_tokens.weight"};
    for (int i = 0; i < 3; i++) {
        const pq_tensor *a = pq_st_find(st, names[i]), *b = pq_st_find(pq_gguf_hf_st(hf), names[i]);
        int rows = (int)a->shape[0], cols = (int)a->shape[1];
        float *x = malloc(sizeof(float) * cols), *want = malloc(sizeof(float) * rows * cols);
        uint8_t *q = malloc((size_t)cols / 32 * 34);
        for (int r = 0; r < rows; r++) { // Q8_0 of the Hugging Face row, dequantized by the formula
            for (int c = 0; c < cols; c++) x[c] = pq_fp16_to_f32(((const uint16_t *)a->data)[(size_t)r * cols + c]);
            q8_0_row(x, cols, q);
            for (int c = 0; c < cols; c++) {
                uint16_t h;
                memcpy(&h, q + (c / 32) * 34, 2);
                want[(size_t)r * cols + c] = (float)(int8_t)q[(c / 32) * 34 + 2 + c % 32] * pq_fp16_to_f32(h);
            }
        }
        PQ_CHECK(b && b->dtype == PQ_DT_F32 && b->nbytes == (size_t)rows * cols * 4 &&
                     memcmp(b->data, want, b->nbytes) == 0,
                 "Q8_0 %s: dequantized to F32 exactly, rows un-permuted", names[i]);
        free(x), free(want), free(q);
    }
    const pq_tensor *d = pq_st_find(pq_gguf_hf_st(hf), "model.layers.0.mlp.down_proj.weight");
    const pq_tensor *d16 = pq_st_find(st, "model.layers.0.mlp.down_proj.weight");
    int wide = d && d->dtype == PQ_DT_F32 && d->numel == d16->numel;
    for (int64_t i = 0; wide && i < d->numel; i++)
        wide = ((const float *)d->data)[i] == pq_fp16_to_f32(((const uint16_t *)d16->data)[i]);
    PQ_CHECK(wide, "a matrix llama.cpp keeps in F16 next to Q8_0 ones (172 columns are not whole blocks) is widened "
             "exactly to F32: the linears share one dtype");
    PQ_CHECK(strstr(pq_gguf_hf_file(hf, "config.json"), "\"torch_dtype\": \"float32\"") != NULL,
             "config.json says float32 for dequantized weights");
    pq_st_close(st);
    pq_gguf_hf_free(hf);
}

static void check_qwen2(const char *fixture, const char *path) {
    pq_model *m = NULL;
    pq_st *st = NULL;
    int ok = pq_model_open(path, &m) == PQ_OK && pq_st_open(fixture, &st) == PQ_OK;
    PQ_CHECK(ok, "a qwen2 GGUF with q/k/v biases opens as a model (%s)", ok ? "" : pq_last_error());
    if (!ok) return pq_model_free(m), pq_st_close(st);
    const pq_tensor *a = pq_st_find(st, "model.layers.2.self_attn.k_proj.weight"),
                    *b = pq_st_find(m->st, "model.layers.2.self_attn.k_proj.weight"),
                    *bias = pq_st_find(m->st, "model.layers.2.self_attn.k_proj.bias");
    PQ_CHECK(m->cfg.arch == PQ_ARCH_QWEN2 && m->cfg.qkv_bias && b && memcmp(a->data, b->data, a->nbytes) == 0 &&
                 b->data != a->data && bias && bias->dtype == PQ_DT_F32 && bias->shape[0] == 32 &&
                 m->layers[2].lin[PQ_K].bias[5] == pq_fp16_to_f32(((const uint16_t *)a->data)[5 * 64]),
             "Qwen2ForCausalLM: rows stored as Hugging Face's are not permuted, biases map to *_proj.bias");
    pq_st_close(st);
    pq_model_free(m);
}

static void expect_refused(const char *path, const char *want, const char *what) {
    pq_model *m = NULL;
    pq_status s = pq_model_open(path, &m);
    PQ_CHECK(s == PQ_ERR_FORMAT && !m && strstr(pq_last_error(), path) && strstr(pq_last_error(), want),
             "%s: %s", what, s == PQ_OK ? "accepted" : pq_last_error());
    pq_model_free(m);
}

static void check_broken(const char *fixture) {
    static const struct { fx_kind kind; const char *want, *what; } B[] = {
        {FX_COUNT, "a tensor name: string length", "a tensor count one too high (the data read as a tensor info)"},
        {FX_OFFSET, "run past the end of the file", "an offset past the end"},
        {FX_TTYPE, "tensor 'token_embd.weight' has unknown ggml type 77", "an unknown tensor type"},
        {FX_ARCH, "architecture 'gpt9' is not supported", "an unknown architecture"},
        {FX_PRE, "pre-tokenizer 'mystery' is not supported", "an unknown pre-tokenizer"},
        {FX_STRLEN, "string length 1099511627776", "a string length past the end"},
        {FX_ROPE_FREQS, "tensor 'rope_freqs.weight' is not one pq knows", "a tensor pq does not know"},
        {FX_IQ2, "tensor 'output.weight' has type IQ2_XXS, which pq cannot read", "a type pq cannot dequantize"},
        {FX_EXPERTS, "a mixture of 8 experts is not supported", "experts"},
        {FX_ROPE_SCALING, "rope scaling 'linear'", "rope scaling"},
    };
    for (size_t i = 0; i < sizeof B / sizeof B[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "broken_%s.gguf", FX_NAMES[B[i].kind]);
        expect_refused(fixture_gguf(fixture, name, "f16", B[i].kind), B[i].want, B[i].what);
    }
    gw_buf f = {0};
    if (write_fixture(fixture, "f16", FX_OK, &f) == 0) {
        f.n = f.n * 2 / 3;
        expect_refused(save("truncated.gguf", &f), "run past the end of the file", "a file cut at two thirds");
        f.n = 1000;
        expect_refused(save("truncated_header.gguf", &f), "truncated", "a file cut inside its header");
    }
    free(f.p);
}

// ---- gpt2 vocabularies ------------------------------------------------------------

// A byte-level vocabulary: the 256 byte characters, "Ġt", "he", "Ġthe", and
// two added tokens (a control one and a user-defined one), in a GGUF.
static gw_buf gpt2_file(const char *pre, int merges, const char *bad_merge, int dup, int add_bos_no_id) {
    gw w = {0};
    gw_kv_str(&w, "tokenizer.ggml.model", "gpt2");
    if (pre) gw_kv_str(&w, "tokenizer.ggml.pre", pre);
    char bytes[256][8];
    for (int b = 0; b < 256; b++) {
        pq_tbuf t = {0};
        char c = (char)b;
        pq_bytelevel_map(&c, 1, &t);
        snprintf(bytes[b], sizeof bytes[b], "%.*s", (int)t.len, t.p);
        pq_tbuf_free(&t);
    }
    const char *extra[] = {"\xc4\xa0t", "he", "\xc4\xa0the", "<|endoftext|>", "<|user|>"};
    gw_arr(&w, "tokenizer.ggml.tokens", GW_STR, 261);
    for (int b = 0; b < 256; b++) gw_str(&w.kv, dup && b == 255 ? bytes[0] : bytes[b]);
    for (int i = 0; i < 5; i++) gw_str(&w.kv, extra[i]);
    gw_arr(&w, "tokenizer.ggml.token_type", GW_I32, 261);
    for (int i = 0; i < 261; i++) gw_u32(&w.kv, i == 259 ? 3 : i == 260 ? 4 : 1);
    if (merges) {
        gw_arr(&w, "tokenizer.ggml.merges", GW_STR, 3);
        gw_str(&w.kv, "\xc4\xa0 t");
        gw_str(&w.kv, bad_merge ? bad_merge : "h e");
        gw_str(&w.kv, "\xc4\xa0t he");
    }
    if (!add_bos_no_id) gw_kv_u32(&w, "tokenizer.ggml.bos_token_id", 259);
    gw_kv_u32(&w, "tokenizer.ggml.eos_token_id", 259);
    gw_kv_str(&w, "tokenizer.chat_template", "{{ messages }}");
    gw_buf f = gw_finish(&w);
    gw_free(&w);
    return f;
}

static pq_status gpt2_json(const gw_buf *f, json_t **tok, json_t **cfg) {
    pq_gguf *g = NULL;
    char *t = NULL, *c = NULL;
    pq_status s = pq_gguf_open_buffer(f->p, f->n, "v.gguf", &g);
    if (s == PQ_OK) s = pq_gguf_tokenizer_json(g, &t, &c);
    if (s == PQ_OK) {
        pq_tokenizer *pt = NULL;
        s = pq_tok_load_json(t, strlen(t), c, strlen(c), "v.gguf", &pt);
        pq_tok_free(pt);
    }
    *tok = t ? json_loads(t, 0, NULL) : NULL;
    *cfg = c ? json_loads(c, 0, NULL) : NULL;
    free(t), free(c);
    pq_gguf_close(g);
    return s;
}

static const char *pre_type(json_t *tok, int i) {
    json_t *p = json_object_get(tok, "pre_tokenizer");
    if (i >= 0) p = json_array_get(json_object_get(p, "pretokenizers"), (size_t)i);
    return json_string_value(json_object_get(p, "type"));
}

static void check_gpt2(void) {
    static const struct { const char *pre, *t0, *t1; int bos, nfc; } P[] = {
        {"gpt-2", "ByteLevel", NULL, 0, 0}, {"smollm", "Digits", "ByteLevel", 0, 0}, {"starcoder", "Digits", "ByteLevel", 0, 0},
        {"llama-bpe", "Split", "ByteLevel", 1, 0}, {"qwen2", "Split", "ByteLevel", 0, 1},
    };
    for (size_t i = 0; i < sizeof P / sizeof P[0]; i++) {
        gw_buf f = gpt2_file(P[i].pre, 1, NULL, 0, 0);
        json_t *tok = NULL, *cfg = NULL;
        pq_status s = gpt2_json(&f, &tok, &cfg);
        json_t *model = json_object_get(tok, "model"), *added = json_object_get(tok, "added_tokens");
        int ok = s == PQ_OK && !strcmp(P[i].t1 ? "Sequence" : P[i].t0, pre_type(tok, -1) ? pre_type(tok, -1) : "") &&
                 (!P[i].t1 || (!strcmp(pre_type(tok, 0), P[i].t0) && !strcmp(pre_type(tok, 1), P[i].t1))) &&
                 json_is_true(json_object_get(cfg, "add_bos_token")) == P[i].bos &&
                 json_is_null(json_object_get(tok, "post_processor")) == !P[i].bos &&
                 json_is_true(json_object_get(model, "ignore_merges")) == P[i].bos &&
                 json_is_null(json_object_get(tok, "normalizer")) == !P[i].nfc &&
                 json_array_size(json_object_get(model, "merges")) == 3 && json_array_size(added) == 2 &&
                 json_is_true(json_object_get(json_array_get(added, 0), "special")) &&
                 json_is_false(json_object_get(json_array_get(added, 1), "special")) &&
                 !strcmp(json_string_value(json_object_get(cfg, "chat_template")), "{{ messages }}");
        PQ_CHECK(ok, "gpt2 vocabulary, pre-tokenizer %s: %s%s%s, added tokens, chat template; pq loads it (%s)",
                 P[i].pre, P[i].t1 ? "Sequence of " : "", P[i].t0, P[i].bos ? ", BOS added, ignore_merges" : "",
                 s == PQ_OK ? "" : pq_last_error());
        json_decref(tok), json_decref(cfg);
        free(f.p);
    }
    static const struct { const char *pre; int merges; const char *bad; int dup, nobos; const char *want; } B[] = {
        {"default", 1, NULL, 0, 0, "pre-tokenizer 'default' is not supported for the gpt2 tokenizer"},
        {"mystery", 1, NULL, 0, 0, "pre-tokenizer 'mystery' is not supported"},
        {NULL, 1, NULL, 0, 0, "pre-tokenizer 'default' is not supported"},
        {"gpt-2", 0, NULL, 0, 0, "metadata key 'tokenizer.ggml.merges' is missing"},
        {"gpt-2", 1, "he", 0, 0, "tokenizer.ggml.merges[1] 'he' is not two tokens separated by one space"},
        {"gpt-2", 1, NULL, 1, 0, "appears twice (ids 0 and 255)"},
        {"llama-bpe", 1, NULL, 0, 1, "add_bos_token is set but there is no bos_token_id"},
    };
    for (size_t i = 0; i < sizeof B / sizeof B[0]; i++) {
        gw_buf f = gpt2_file(B[i].pre, B[i].merges, B[i].bad, B[i].dup, B[i].nobos);
        json_t *tok = NULL, *cfg = NULL;
        pq_status s = gpt2_json(&f, &tok, &cfg);
        PQ_CHECK(s == PQ_ERR_FORMAT && strstr(pq_last_error(), "v.gguf: ") && strstr(pq_last_error(), B[i].want),
                 "refused: %s", s == PQ_OK ? "accepted" : pq_last_error());
        json_decref(tok), json_decref(cfg);
        free(f.p);
    }
}

static void check_convert(const char *fixture, const char *path) {
    char out[300];
    snprintf(out, sizeof out, "%s/converted", TMP);
    pq_convert_params p = pq_convert_default_params();
    p.gguf = path;
    p.out = out;
    p.dtype = "f16";
    pq_convert_result r;
    pq_status s = pq_convert_gguf(&p, NULL, NULL, &r);
    pq_st *a = NULL, *b = NULL;
    int ok = s == PQ_OK && r.tensors == 47 && pq_st_open(fixture, &a) == PQ_OK && pq_st_open(out, &b) == PQ_OK;
    for (int i = 0; ok && i < pq_st_count(a); i++) {
        const pq_tensor *x = pq_st_at(a, i), *y = pq_st_find(b, x->name);
        ok = y && y->dtype == PQ_DT_F16 && y->nbytes == x->nbytes && memcmp(x->data, y->data, x->nbytes) == 0;
    }
    PQ_CHECK(ok, "pq convert --dtype f16 writes the fixture's model.safetensors tensors byte for byte (%s)",
             s == PQ_OK ? "" : pq_last_error());
    pq_st_close(a), pq_st_close(b);
    s = pq_convert_gguf(&p, NULL, NULL, &r);
    PQ_CHECK(s == PQ_ERR_ARG, "an existing output is not replaced without force (%s)", pq_last_error());
    p.force = 1;
    p.dtype = "f8";
    s = pq_convert_gguf(&p, NULL, NULL, &r);
    PQ_CHECK(s == PQ_ERR_ARG && strstr(pq_last_error(), "'f8' is not one of f16, bf16, f32"), "a bad dtype is refused (%s)",
             pq_last_error());
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

// pq convert refuses a non-finite value by tensor name: a NaN as stored,
// and a finite F32 value that overflows F16 with --dtype f16.
static void check_convert_nonfinite(void) {
    static const struct { float v; const char *dtype, *want; } C[] = {
        {NAN, NULL, "tensor 'model.layers.0.self_attn.v_proj.weight' element 5 is not finite"},
        {1e6f, "f16", "tensor 'model.layers.0.self_attn.v_proj.weight' element 5 is not finite in F16"},
    };
    for (int i = 0; i < 2; i++) {
        gw_buf f = tiny_model("llama", "llama", "default", PQ_GGML_F32, FX_OK);
        pq_gguf *g = NULL;
        if (pq_gguf_open_buffer(f.p, f.n, "x", &g) == PQ_OK) {
            const pq_gguf_tensor *t = pq_gguf_tensor_find(g, "blk.0.attn_v.weight");
            memcpy(f.p + ((const uint8_t *)t->data - f.p) + 5 * 4, &C[i].v, 4);
        }
        pq_gguf_close(g);
        char out[300];
        snprintf(out, sizeof out, "%s/nonfinite", TMP);
        pq_convert_params p = pq_convert_default_params();
        p.gguf = save("nonfinite.gguf", &f);
        p.out = out;
        p.dtype = C[i].dtype;
        pq_convert_result r;
        pq_status s = pq_convert_gguf(&p, NULL, NULL, &r);
        struct stat sb;
        PQ_CHECK(s == PQ_ERR_NUMERIC && strstr(pq_last_error(), C[i].want) && stat(out, &sb) != 0,
                 "convert%s%s of a weight holding %g: refused, nothing written (%s)", C[i].dtype ? " --dtype " : "",
                 C[i].dtype ? C[i].dtype : "", (double)C[i].v, s == PQ_OK ? "accepted" : pq_last_error());
        free(f.p);
    }
}

// ---- the SmolLM2 tokenizer oracle (tests/cli/test_gguf_smollm2_oracle.sh) ---------

// tokenizer.json and tokenizer_config.json of a .gguf into dir.
static int write_tokenizer_json(const char *path, const char *dir) {
    pq_gguf *g = NULL;
    char *t = NULL, *c = NULL, out[1024];
    int rc = pq_gguf_open(path, &g) == PQ_OK && pq_gguf_tokenizer_json(g, &t, &c) == PQ_OK ? 0 : 1;
    if (rc) fprintf(stderr, "test_gguf_model: %s\n", pq_last_error());
    snprintf(out, sizeof out, "%s/tokenizer.json", dir);
    gw_buf b = {(uint8_t *)t, t ? strlen(t) : 0, 0};
    rc = rc || gw_save(&b, out);
    snprintf(out, sizeof out, "%s/tokenizer_config.json", dir);
    b = (gw_buf){(uint8_t *)c, c ? strlen(c) : 0, 0};
    rc = rc || gw_save(&b, out);
    free(t), free(c);
    pq_gguf_close(g);
    return rc;
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    *len = fread(p, 1, (size_t)n, f);
    p[*len] = '\0';
    fclose(f);
    return p;
}

// pq's tokenizer read from the .gguf against the tokenizers library's ids
// on the converted tokenizer.json: dir/wiki.{txt,ids,dec} (the whole text)
// and dir/c4.{txt,ids,lens} (each document, separated by a blank line).
static int tok_oracle(const char *path, const char *dir) {
    pq_tokenizer *tok = NULL;
    pq_status st = pq_tok_load(path, &tok);
    PQ_CHECK(st == PQ_OK, "pq_tok_load %s (%s)", path, st == PQ_OK ? "" : pq_last_error());
    if (st != PQ_OK) return pq_test_done();
    char f[1024];
    size_t tl = 0, il = 0, dl = 0, ll = 0;
    snprintf(f, sizeof f, "%s/wiki.txt", dir);
    char *text = read_all(f, &tl);
    snprintf(f, sizeof f, "%s/wiki.ids", dir);
    char *want = read_all(f, &il);
    snprintf(f, sizeof f, "%s/wiki.dec", dir);
    char *dec = read_all(f, &dl);
    int32_t *ids = NULL;
    size_t n = 0;
    double t0 = pq_now();
    int same = text && want && dec && pq_tok_encode(tok, text, tl, 1, &ids, &n) == PQ_OK && n * 4 == il &&
               memcmp(ids, want, il) == 0;
    double secs = pq_now() - t0;
    size_t first = 0;
    while (!same && ids && first < n && first * 4 < il && ids[first] == ((int32_t *)want)[first]) first++;
    PQ_CHECK(same, "wiki.test.raw: %zu ids from the .gguf equal the tokenizers library's on the converted "
             "tokenizer.json (%zu bytes, pq %.1f s; first difference at %zu)", n, tl, secs, same ? n : first);
    char *back = NULL;
    size_t bl = 0;
    PQ_CHECK(same && pq_tok_decode(tok, ids, n, 0, &back, &bl) == PQ_OK && bl == dl && memcmp(back, dec, dl) == 0,
             "wiki.test.raw: pq's decoding of the ids equals the library's");
    free(back), free(ids), free(text), free(want), free(dec);
    snprintf(f, sizeof f, "%s/c4.txt", dir);
    text = read_all(f, &tl);
    snprintf(f, sizeof f, "%s/c4.ids", dir);
    want = read_all(f, &il);
    snprintf(f, sizeof f, "%s/c4.lens", dir);
    char *lens = read_all(f, &ll);
    size_t docs = 0, off = 0, total = 0, bad_doc = (size_t)-1;
    for (const char *p = text, *end = text ? text + tl : NULL; text && want && lens && p <= end; docs++) {
        const char *sep = strstr(p, "\n\n");
        size_t len = sep ? (size_t)(sep - p) : (size_t)(end - p);
        int32_t k = docs * 4 < ll ? ((int32_t *)lens)[docs] : -1;
        ids = NULL;
        int ok = k >= 0 && pq_tok_encode(tok, p, len, 1, &ids, &n) == PQ_OK && n == (size_t)k &&
                 (off + n) * 4 <= il && memcmp(ids, (int32_t *)want + off, n * 4) == 0;
        free(ids);
        if (!ok && bad_doc == (size_t)-1) bad_doc = docs;
        off += k > 0 ? (size_t)k : 0;
        total += n;
        if (!sep) break;
        p = sep + 2;
    }
    docs++;
    PQ_CHECK(bad_doc == (size_t)-1 && docs * 4 == ll && off * 4 == il,
             "c4_validation_2k.txt: %zu documents, %zu ids, each document's ids equal the library's (first differing "
             "document: %lld)", docs, total, bad_doc == (size_t)-1 ? -1LL : (long long)bad_doc);
    free(text), free(want), free(lens);
    pq_tok_free(tok);
    return pq_test_done();
}

// ---- the transformers oracle (tests/oracles/test_smollm2_transformers.sh) ---------

// Logits of tokens[0..T) through model path (CPU, all threads) into a new array.
static float *model_logits(const char *path, const int32_t *tok, int T, int *vocab) {
    pq_model *m = NULL;
    pq_engine *e = NULL;
    pq_engine_params p = pq_engine_default_params();
    p.device = PQ_DEVICE_CPU;
    p.max_ctx = T;
    float *out = NULL;
    if (pq_model_open(path, &m) == PQ_OK && pq_engine_create(m, &p, &e) == PQ_OK) {
        *vocab = m->cfg.vocab;
        out = malloc(sizeof(float) * (size_t)T * (size_t)*vocab);
        if (pq_engine_forward(e, tok, T, 0) != PQ_OK || pq_engine_logits(e, 0, T, out) != PQ_OK) free(out), out = NULL;
    }
    if (!out) printf("# %s: %s\n", path, pq_last_error());
    pq_engine_free(e);
    pq_model_free(m);
    return out;
}

// dir/window.ids (int32) and dir/window.logits (f32 [T][vocab], transformers
// float32 on the converted checkpoint) against pq on the .gguf and on the
// converted checkpoint.
static int logits_oracle(const char *gguf, const char *converted, const char *dir) {
    char f[1024];
    size_t il = 0, ll = 0;
    snprintf(f, sizeof f, "%s/window.ids", dir);
    int32_t *tok = (int32_t *)read_all(f, &il);
    snprintf(f, sizeof f, "%s/window.logits", dir);
    float *want = (float *)read_all(f, &ll);
    int T = (int)(il / 4), va = 0, vb = 0;
    float *a = tok ? model_logits(gguf, tok, T, &va) : NULL, *b = tok ? model_logits(converted, tok, T, &vb) : NULL;
    size_t n = (size_t)T * (size_t)va;
    int ok = a && b && want && va == vb && ll == n * 4;
    double rel = ok ? pq_rel_l2(a, want, n) : -1;
    // fp32 throughout on both sides; the difference is summation order over
    // K <= 1536 terms per dot product and 30 layers: ~1e-6 relative
    PQ_CHECK(ok && rel <= 1e-4, "pq's logits of a %d-token wiki.test.raw window on the .gguf vs transformers float32 "
             "on the converted checkpoint: relative L2 %.3g (<= 1e-4)", T, rel);
    PQ_CHECK(ok && memcmp(a, b, n * 4) == 0, "pq's logits on the .gguf and on the converted F32 checkpoint are "
             "bit-identical (%d x %d)", T, va);
    free(a), free(b), free(tok), free(want);
    return pq_test_done();
}

static void rm_tree(const char *dir) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("# could not remove %s\n", dir);
}

int main(int argc, char **argv) {
    if (argc >= 5 && strcmp(argv[1], "--write") == 0) {
        fx_kind kind = FX_OK;
        for (size_t i = 0; argc > 5 && i < sizeof FX_NAMES / sizeof FX_NAMES[0]; i++)
            if (strcmp(argv[5], FX_NAMES[i]) == 0) kind = (fx_kind)i;
        gw_buf f = {0};
        int rc = write_fixture(argv[2], argv[4], kind, &f) == 0 && gw_save(&f, argv[3]) == 0 ? 0 : 1;
        if (rc) fprintf(stderr, "test_gguf_model: cannot write %s from %s\n", argv[3], argv[2]);
        free(f.p);
        return rc;
    }
    if (argc == 4 && strcmp(argv[1], "--tokenizer-json") == 0) return write_tokenizer_json(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "--tok-oracle") == 0) return tok_oracle(argv[2], argv[3]);
    if (argc == 5 && strcmp(argv[1], "--logits-oracle") == 0) return logits_oracle(argv[2], argv[3], argv[4]);
    if (argc == 3 && strcmp(argv[1], "--corpus") == 0) {
        pq_test_rng_state = 20240601; // the same seeds every time
        return write_corpus(argv[2]);
    }
    pq_test_seed();
    check_gpt2();
    const char *fixture = pq_test_path("fixtures/stories260K");
    struct stat sb;
    if (stat(fixture, &sb) != 0) {
        pq_test_skip("stories260K GGUF checks: no fixture at %s", fixture);
        return pq_test_done();
    }
    snprintf(TMP, sizeof TMP, "/tmp/pq-gguf-model-XXXXXX");
    if (!mkdtemp(TMP)) return printf("FAIL - cannot make a temporary directory\n"), 1;
    char f16[300];
    snprintf(f16, sizeof f16, "%s", fixture_gguf(fixture, "f16.gguf", "f16", FX_OK));
    check_view(fixture, f16);
    check_tokenizer(fixture, f16);
    check_logits(fixture, f16);
    check_q8(fixture, fixture_gguf(fixture, "q8.gguf", "q8_0", FX_OK));
    check_qwen2(fixture, fixture_gguf(fixture, "qwen2.gguf", "f16", FX_QWEN2));
    check_broken(fixture);
    check_convert(fixture, f16);
    check_convert_nonfinite();
    rm_tree(TMP);
    return pq_test_done();
}
