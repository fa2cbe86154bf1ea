// tests/test_gguf_model.c — a GGUF file as a model: formats/gguf_hf (config,
// tokenizer, tensors under Hugging Face names), pq_model_open / pq_tok_load
// on a .gguf, and eval/convert.
//
// The stories260K fixture is written (tests/gguf_fixture.h) as a llama GGUF the way llama.cpp's
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
#include "tests/gguf_fixture.h"
#include "tests/test.h"

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
