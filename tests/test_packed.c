// The packed checkpoint end to end on the stories260K fixture, for every
// scheme: pq_quantize -> files -> pq_model_open; the engine's dequantized
// weights (pq_linear_rows) equal the quantizer's bit for bit; config.json's
// quantization_config and the tensor names / dtypes / shapes are those
// compressed-tensors writes; OUT is atomic (existing OUT, --force, NaN, a
// missing parent leave nothing behind); the reader refuses inconsistent
// checkpoints naming the file and tensor. Also SHA-256 test vectors.
#include "tests/test.h"

#include <dirent.h>
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/half.h"
#include "common/sys.h"
#include "eval/model.h"
#include "formats/fileio.h"
#include "formats/packed.h"
#include "formats/sha256.h"
#include "quant/quantize.h"
#include "quant/rtn.h"

// RTN into a new quantized tensor q (the caller frees it, also on error).
static pq_status rtn_new(const float *w, int rows, int cols, const pq_scheme *s, pq_dtype dt, const char *name,
                         pq_pool *pool, pq_qtensor *q, double *err) {
    pq_status st = pq_qtensor_init(q, s, rows, cols, dt);
    return st != PQ_OK ? st : pq_rtn_quantize(w, s, name, pool, q, err);
}

static char tmp[256];
static const char *fixture;

static const char *tpath(const char *name) {
    static char buf[4][1024];
    static int slot;
    char *b = buf[slot++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", tmp, name);
    return b;
}

// No "*.pq-tmp-*" or "*.pq-old-*" left in the scratch directory.
static int no_leftovers(void) {
    DIR *d = opendir(tmp);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".pq-tmp-") != NULL || strstr(e->d_name, ".pq-old-") != NULL;
    if (d) closedir(d);
    return n == 0;
}

static void rm_rf(const char *path) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) printf("# could not remove %s\n", path);
}

static pq_status quantize(const char *out, const char *scheme, int group, int sym, int fp8_tensor, int force) {
    pq_quantize_request p = pq_quantize_default_request();
    p.model = fixture, p.out = out, p.scheme.name = scheme, p.scheme.group = group, p.scheme.sym = sym;
    p.scheme.fp8_tensor = fp8_tensor, p.force = force, p.nthreads = 2;
    pq_quantize_result r;
    return pq_quantize(&p, NULL, NULL, &r);
}

// Every linear of `out` as the engine dequantizes it equals what RTN of the
// source gives (pq_linear_rows_ref of the quantizer's own pq_qtensor).
static int roundtrip_exact(const char *out, const pq_scheme *s, int *n_checked) {
    pq_model *src = NULL, *m = NULL;
    int ok = pq_model_open(fixture, &src) == PQ_OK && pq_model_open(out, &m) == PQ_OK;
    if (!ok) printf("    %s\n", pq_last_error());
    *n_checked = 0;
    for (int l = 0; ok && l < src->cfg.n_layers; l++)
        for (int k = 0; ok && k < PQ_NLINEAR; k++) {
            const pq_linear *S = &src->layers[l].lin[k], *L = &m->layers[l].lin[k];
            size_t n = (size_t)S->rows * S->cols;
            float *w = malloc(n * 4), *want = malloc(n * 4), *got = malloc(n * 4), *ref = malloc(n * 4);
            pq_linear_rows(S, 0, S->rows, w);
            pq_qtensor q;
            ok = rtn_new(w, S->rows, S->cols, s, PQ_DT_F16, "src", NULL, &q, NULL) == PQ_OK;
            if (ok) {
                pq_linear Q = pq_qtensor_linear(&q);
                pq_linear_rows_ref(&Q, 0, S->rows, want);
                pq_test_poison(got, n);
                pq_linear_rows(L, 0, L->rows, got);
                pq_linear_rows_ref(L, 0, L->rows, ref);
                ok = L->fmt == pq_scheme_wformat(s) && memcmp(got, want, n * 4) == 0 && memcmp(ref, want, n * 4) == 0;
                if (!ok) printf("    layer %d %s differs\n", l, pq_linear_slot_name((pq_linear_slot)k));
                pq_qtensor_free(&q);
                (*n_checked)++;
            }
            free(w), free(want), free(got), free(ref);
        }
    ok = ok && m->lm_head.fmt == PQ_W_DENSE && m->embed.fmt == PQ_W_DENSE && m->quant.quantized &&
         m->quant.scheme.id == s->id && m->quant.scheme.group == s->group && m->quant.scheme.sym == s->sym;
    pq_model_free(src);
    pq_model_free(m);
    return ok;
}

static json_t *load_qc(const char *out, json_t **root) {
    char path[1024];
    snprintf(path, sizeof path, "%s/config.json", out);
    *root = json_load_file(path, 0, NULL);
    return json_object_get(*root, "quantization_config");
}

// The fields compressed-tensors reads, as it writes them.
static int config_ok(const char *out, const pq_scheme *s) {
    json_t *root, *qc = load_qc(out, &root);
    json_t *g = json_object_get(json_object_get(qc, "config_groups"), "group_0");
    json_t *w = json_object_get(g, "weights"), *in = json_object_get(g, "input_activations");
    const char *strategy = s->group > 0 ? "group" : s->group == PQ_GROUP_TENSOR ? "tensor" : "channel";
    int ok = qc && !strcmp(json_string_value(json_object_get(qc, "quant_method")), "compressed-tensors") &&
             !strcmp(json_string_value(json_object_get(qc, "format")), pq_scheme_format(s)) &&
             !strcmp(json_string_value(json_object_get(qc, "quantization_status")), "compressed") &&
             json_is_null(json_object_get(qc, "kv_cache_scheme")) &&
             json_array_size(json_object_get(qc, "ignore")) == 1 &&
             !strcmp(json_string_value(json_array_get(json_object_get(qc, "ignore"), 0)), "lm_head") &&
             !strcmp(json_string_value(json_array_get(json_object_get(g, "targets"), 0)), "Linear") &&
             json_integer_value(json_object_get(w, "num_bits")) == s->bits &&
             !strcmp(json_string_value(json_object_get(w, "type")), s->is_float ? "float" : "int") &&
             json_is_true(json_object_get(w, "symmetric")) == s->sym &&
             !strcmp(json_string_value(json_object_get(w, "strategy")), strategy) &&
             (s->group > 0 ? json_integer_value(json_object_get(w, "group_size")) == s->group
                           : json_is_null(json_object_get(w, "group_size"))) &&
             json_is_false(json_object_get(w, "dynamic")) &&
             (s->act == PQ_ACT_NONE ? json_is_null(in)
                                    : json_is_true(json_object_get(in, "dynamic")) &&
                                          !strcmp(json_string_value(json_object_get(in, "strategy")), "token") &&
                                          !strcmp(json_string_value(json_object_get(in, "type")),
                                                  s->act == PQ_ACT_FP8_TOKEN ? "float" : "int")) &&
             json_integer_value(json_object_get(root, "hidden_size")) == 64;
    json_decref(root);
    return ok;
}

static int expect(const pq_st *st, const char *name, pq_dtype dt, int ndim, int64_t d0, int64_t d1) {
    int64_t shape[2] = {d0, d1};
    const pq_tensor *t;
    if (pq_st_expect(st, name, dt, ndim, shape, &t) == PQ_OK) return 1;
    printf("    %s\n", pq_last_error());
    return 0;
}

// down_proj (in 172) of layer 0: names, dtypes, shapes as compressed-tensors writes them.
static int tensors_ok(const char *out, const pq_scheme *s) {
    char path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    pq_st *st;
    if (pq_st_open(path, &st) != PQ_OK) return printf("    %s\n", pq_last_error()), 0;
    const char *M = "model.layers.0.mlp.down_proj";
    char n[256];
    int ok = 1, ng = s->group > 0 ? (172 + s->group - 1) / s->group : 1;
    if (pq_scheme_wformat(s) == PQ_W_QPACK) {
        snprintf(n, sizeof n, "%s.weight_packed", M), ok &= expect(st, n, PQ_DT_I32, 2, 64, (172 + 32 / s->bits - 1) / (32 / s->bits));
        snprintf(n, sizeof n, "%s.weight_scale", M), ok &= expect(st, n, PQ_DT_F16, 2, 64, ng);
        snprintf(n, sizeof n, "%s.weight_shape", M), ok &= expect(st, n, PQ_DT_I64, 1, 2, 0);
        const pq_tensor *t = pq_st_find(st, n);
        int64_t v[2] = {0, 0};
        if (t) memcpy(v, t->data, 16);
        ok &= v[0] == 64 && v[1] == 172;
        snprintf(n, sizeof n, "%s.weight_zero_point", M);
        ok &= s->sym ? pq_st_find(st, n) == NULL : expect(st, n, PQ_DT_I32, 2, 64 / (32 / s->bits), ng);
    } else {
        snprintf(n, sizeof n, "%s.weight", M);
        ok &= expect(st, n, s->is_float ? PQ_DT_F8_E4M3 : PQ_DT_I8, 2, 64, 172);
        snprintf(n, sizeof n, "%s.weight_scale", M);
        ok &= s->group == PQ_GROUP_TENSOR ? expect(st, n, PQ_DT_F16, 1, 1, 0) : expect(st, n, PQ_DT_F16, 2, 64, 1);
    }
    snprintf(n, sizeof n, "%s.weight", M);
    ok &= pq_scheme_wformat(s) != PQ_W_QPACK || pq_st_find(st, n) == NULL;
    ok &= expect(st, "model.embed_tokens.weight", PQ_DT_F16, 2, 512, 64) && pq_st_find(st, "lm_head.weight") == NULL;
    const char *fmt = pq_st_metadata(st, "format"), *method = pq_st_metadata(st, "pq.method");
    ok &= fmt && !strcmp(fmt, "pt") && method && !strcmp(method, "rtn") && pq_st_metadata(st, "pq.source_sha256");
    pq_st_close(st);
    return ok;
}

static void test_schemes(void) {
    struct { const char *scheme; int group, sym, tensor; } cases[] = {
        {"w4a16", 32, 1, 0},  {"w4a16", 64, 1, 0},  {"w4a16", 128, 1, 0},  {"w4a16", PQ_GROUP_CHANNEL, 1, 0},
        {"w4a16", 32, 0, 0},  {"w4a16", 64, 0, 0},  {"w4a16", 128, 0, 0},  {"w4a16", PQ_GROUP_CHANNEL, 0, 0},
        {"w8a16", PQ_GROUP_DEFAULT, 1, 0}, {"w8a16", 128, 1, 0}, {"w8a8", PQ_GROUP_DEFAULT, 1, 0},
        {"fp8", PQ_GROUP_DEFAULT, 1, 0}, {"fp8", PQ_GROUP_DEFAULT, 1, 1}, {"fp8-dynamic", PQ_GROUP_DEFAULT, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pq_scheme s;
        pq_scheme_make(cases[i].scheme, cases[i].tensor ? PQ_GROUP_TENSOR : cases[i].group, cases[i].sym, &s);
        char desc[64], out[512];
        pq_scheme_describe(&s, desc, sizeof desc);
        snprintf(out, sizeof out, "%s/out%zu", tmp, i);
        pq_status st = quantize(out, cases[i].scheme, cases[i].group, cases[i].sym, cases[i].tensor, 0);
        PQ_CHECK(st == PQ_OK, "%s: pq_quantize writes %s %s", desc, out, st ? pq_last_error() : "");
        if (st != PQ_OK) continue;
        int n;
        PQ_CHECK(roundtrip_exact(out, &s, &n) && n == 35,
                 "%s: all %d linears read back by pq_model_open equal the quantizer's values bit for bit", desc, n);
        PQ_CHECK(config_ok(out, &s), "%s: config.json quantization_config fields", desc);
        PQ_CHECK(tensors_ok(out, &s), "%s: tensor names, dtypes and shapes; __metadata__ format pt", desc);
        rm_rf(out);
    }
}

// Copies dir src to dst with config.json's text edited (old -> new, first hit).
static void copy_edit_config(const char *src, const char *dst, const char *old, const char *new) {
    char cmd[2200], path[1024], *text;
    size_t len;
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", dst, src, dst);
    if (system(cmd) != 0) return;
    snprintf(path, sizeof path, "%s/config.json", dst);
    if (pq_file_read(path, 1 << 20, &text, &len) != PQ_OK) return;
    char *hit = strstr(text, old);
    FILE *f = fopen(path, "w");
    if (hit) fprintf(f, "%.*s%s%s", (int)(hit - text), text, new, hit + strlen(old));
    fclose(f);
    free(text);
}

// dst = a copy of src whose model.safetensors has src's tensors minus
// `drop`, plus `extra` (dtype dt, n elements of data) if not NULL, and with
// every F16 tensor converted to `to` (BF16 or F32; F16: unchanged).
static pq_status rewrite_tensors(const char *src, const char *dst, const char *drop, const char *extra,
                                 pq_dtype dt, int64_t n, const void *data, pq_dtype to) {
    char path[1024], cmd[2200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", dst, src, dst);
    if (system(cmd) != 0) return PQ_ERR_IO;
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    pq_st *st;
    PQ_TRY(pq_st_open(path, &st));
    snprintf(path, sizeof path, "%s/model.safetensors", dst);
    pq_st_writer *w;
    pq_status s = pq_st_writer_create(path, &w);
    for (int i = 0; s == PQ_OK && i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        pq_dtype d = t->dtype == PQ_DT_F16 ? to : t->dtype;
        if (!drop || strcmp(t->name, drop)) s = pq_st_writer_declare(w, t->name, d, t->ndim, t->shape);
    }
    if (s == PQ_OK && extra) s = pq_st_writer_declare(w, extra, dt, 1, &n);
    if (s == PQ_OK) s = pq_st_writer_begin(w);
    for (int i = 0; s == PQ_OK && i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        if (drop && !strcmp(t->name, drop)) continue;
        if (to != PQ_DT_F16 && t->dtype == PQ_DT_F16) {
            char *b = malloc((size_t)t->numel * 4);
            for (int64_t k = 0; k < t->numel; k++) {
                uint16_t h, bf;
                memcpy(&h, (const char *)t->data + 2 * k, 2);
                float f = pq_fp16_to_f32(h);
                bf = pq_f32_to_bf16(f);
                if (to == PQ_DT_F32) memcpy(b + 4 * k, &f, 4);
                else memcpy(b + 2 * k, &bf, 2);
            }
            s = pq_st_writer_put(w, t->name, b, (size_t)t->numel * pq_dtype_size(to));
            free(b);
        } else {
            s = pq_st_writer_put(w, t->name, t->data, t->nbytes);
        }
    }
    if (s == PQ_OK && extra) s = pq_st_writer_put(w, extra, data, (size_t)n * pq_dtype_size(dt));
    if (s == PQ_OK) s = pq_st_writer_commit(w, 0);
    pq_st_writer_free(w);
    pq_st_close(st);
    return s;
}

// dst = a copy of src whose model.safetensors header has pad more spaces:
// the same checkpoint with every tensor pad bytes later in the file.
static int shift_data(const char *src, const char *dst, int pad) {
    char path[1100], cmd[3400], *img = NULL;
    size_t len;
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", dst, src, dst);
    if (system(cmd) != 0) return 0;
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    if (pq_file_read(path, (size_t)1 << 28, &img, &len) != PQ_OK) return 0;
    uint64_t hl = 0;
    for (int k = 7; k >= 0; k--) hl = hl << 8 | (uint8_t)img[k];
    snprintf(path, sizeof path, "%s/model.safetensors", dst);
    FILE *f = fopen(path, "wb");
    uint64_t nl = hl + (uint64_t)pad;
    for (int k = 0; f && k < 8; k++) fputc((int)(nl >> (8 * k)) & 255, f);
    int ok = f && fwrite(img + 8, 1, hl, f) == hl;
    for (int k = 0; ok && k < pad; k++) fputc(' ', f);
    ok = ok && fwrite(img + 8 + hl, 1, len - 8 - hl, f) == len - 8 - hl;
    if (f) ok = fclose(f) == 0 && ok;
    free(img);
    return ok;
}

// dst = src plus an identity weight_g_idx (group = column / 32) for every
// packed linear; with bump >= 0, element 100 of layer 0's down_proj is bump.
static int with_g_idx(const char *src, const char *dst, int bump) {
    char path[1100], cmd[3400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", dst, src, dst);
    if (system(cmd) != 0) return 0;
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    pq_st *st;
    if (pq_st_open(path, &st) != PQ_OK) return 0;
    snprintf(path, sizeof path, "%s/model.safetensors", dst);
    pq_st_writer *w;
    pq_status s = pq_st_writer_create(path, &w);
    int32_t g[172];
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && s == PQ_OK) s = pq_st_writer_begin(w);
        for (int i = 0; s == PQ_OK && i < pq_st_count(st); i++) {
            const pq_tensor *t = pq_st_at(st, i);
            const char *suffix = strstr(t->name, ".weight_packed");
            char name[600];
            if (pass == 0) s = pq_st_writer_declare(w, t->name, t->dtype, t->ndim, t->shape);
            else s = pq_st_writer_put(w, t->name, t->data, t->nbytes);
            if (!suffix || s != PQ_OK) continue;
            snprintf(name, sizeof name, "%.*s.weight_g_idx", (int)(suffix - t->name), t->name);
            int64_t cols = strstr(t->name, "down_proj") ? 172 : 64;
            for (int c = 0; c < cols; c++) g[c] = c / 32;
            if (bump >= 0 && strcmp(name, "model.layers.0.mlp.down_proj.weight_g_idx") == 0) g[100] = bump;
            if (pass == 0) s = pq_st_writer_declare(w, name, PQ_DT_I32, 1, &cols);
            else s = pq_st_writer_put(w, name, g, (size_t)cols * 4);
        }
    }
    if (s == PQ_OK) s = pq_st_writer_commit(w, 0);
    pq_st_writer_free(w);
    pq_st_close(st);
    return s == PQ_OK;
}

static void expect_open_fails(const char *dir, const char *needle, const char *what) {
    pq_model *m;
    pq_status s = pq_model_open(dir, &m);
    PQ_CHECK(s == PQ_ERR_FORMAT && strstr(pq_last_error(), needle), "%s refused: %s", what, pq_last_error());
    if (s == PQ_OK) pq_model_free(m);
}

static void test_reader(void) {
    char good[1024], bad[1024];
    snprintf(good, sizeof good, "%s", tpath("good"));
    snprintf(bad, sizeof bad, "%s", tpath("bad"));
    if (quantize(good, "w4a16", 32, 0, 0, 0) != PQ_OK) {
        PQ_CHECK(0, "quantize for the reader tests: %s", pq_last_error());
        return;
    }
    copy_edit_config(good, bad, "\"group_size\": 32", "\"group_size\": 64");
    expect_open_fails(bad, "q_proj.weight_scale': shape [64,2], expected [64,1]",
                      "a group_size that disagrees with the tensors");
    copy_edit_config(good, bad, "\"num_bits\": 4", "\"num_bits\": 9");
    expect_open_fails(bad, "9-bit int weights are not supported", "9-bit weights");
    copy_edit_config(good, bad, "\"compressed-tensors\"", "\"gptq\"");
    expect_open_fails(bad, "quant_method \"gptq\"", "another quant_method");
    copy_edit_config(good, bad, "\"pack-quantized\"", "\"marlin-24\"");
    expect_open_fails(bad, "format \"marlin-24\"", "an unknown format");
    // issue 10 item 14: zero points in a checkpoint whose config says
    // symmetric were ignored (one of the two is wrong: PPL 2608)
    copy_edit_config(good, bad, "\"symmetric\": false", "\"symmetric\": true");
    expect_open_fails(bad, "weight_zero_point' is present, but quantization_config says symmetric: true",
                      "item 14: zero points with symmetric: true");
    pq_model *m = NULL;
    copy_edit_config(good, bad, "\"lm_head\"", "\"re:.*mlp.*\"");
    pq_status st = pq_model_open(bad, &m);
    PQ_CHECK(st != PQ_OK && strstr(pq_last_error(), "mlp.gate_proj.weight' is missing"),
             "ignore \"re:.*mlp.*\" makes the MLP dense: %s", pq_last_error());
    PQ_CHECK(rewrite_tensors(good, bad, "model.layers.3.self_attn.k_proj.weight_shape", NULL, 0, 0, NULL, PQ_DT_F16) == PQ_OK,
             "a checkpoint without one tensor");
    expect_open_fails(bad, "model.layers.3.self_attn.k_proj.weight_shape' is missing", "a missing weight_shape");
    // two spaces more in the header shift every tensor off 4-byte alignment in the file
    PQ_CHECK(shift_data(good, bad, 2), "a checkpoint with misaligned codes");
    pq_model *a = NULL, *b = NULL;
    int ok = pq_model_open(good, &a) == PQ_OK && pq_model_open(bad, &b) == PQ_OK;
    if (ok) {
        const pq_linear *La = &a->layers[0].lin[PQ_DOWN], *Lb = &b->layers[0].lin[PQ_DOWN];
        size_t n = (size_t)La->rows * La->cols;
        float *x = malloc(n * 4), *y = malloc(n * 4);
        pq_linear_rows(La, 0, La->rows, x);
        pq_linear_rows(Lb, 0, Lb->rows, y);
        const pq_tensor *t = pq_st_find(b->st, "model.layers.0.mlp.down_proj.weight_packed");
        ok = t && t->offset % 4 != 0 && ((uintptr_t)Lb->q.packed & 3) == 0 && memcmp(x, y, n * 4) == 0;
        free(x), free(y);
    }
    PQ_CHECK(ok, "misaligned codes are read through an aligned copy, same weights");
    pq_model_free(b);
    // GPTQ act-order: weight_g_idx maps columns to groups; the identity order reads the same weights
    char bad2[1100];
    snprintf(bad2, sizeof bad2, "%s", tpath("bad2"));
    ok = with_g_idx(good, bad, -1) && a;
    copy_edit_config(bad, bad2, "\"actorder\": null", "\"actorder\": \"group\"");
    ok = ok && pq_model_open(bad2, &b) == PQ_OK;
    if (ok) {
        const pq_linear *La = &a->layers[0].lin[PQ_DOWN], *Lb = &b->layers[0].lin[PQ_DOWN];
        size_t n = (size_t)La->rows * La->cols;
        float *x = malloc(n * 4), *y = malloc(n * 4);
        pq_linear_rows(La, 0, La->rows, x);
        pq_linear_rows_ref(Lb, 0, Lb->rows, y);
        ok = Lb->q.g_idx && Lb->q.g_idx[171] == 5 && memcmp(x, y, n * 4) == 0;
        free(x), free(y);
        pq_model_free(b);
    }
    PQ_CHECK(ok, "weight_g_idx is read (identity order: same weights) (%s)", ok ? "ok" : pq_last_error());
    // item 14: g_idx without actorder "group" in the config, and the reverse
    expect_open_fails(bad, "weight_g_idx' is present, but quantization_config's actorder is null",
                      "item 14: g_idx tensors under actorder null");
    copy_edit_config(good, bad2, "\"actorder\": null", "\"actorder\": \"group\"");
    expect_open_fails(bad2, "says actorder \"group\" but tensor 'model.layers.0.self_attn.q_proj.weight_g_idx' is missing",
                      "item 14: actorder group without g_idx");
    ok = with_g_idx(good, bad, 6);
    copy_edit_config(bad, bad2, "\"actorder\": null", "\"actorder\": \"group\"");
    expect_open_fails(bad2, "weight_g_idx'[100] = 6 is not a group in [0, 6)", "a g_idx out of range");
    // item 13: tensors the config does not account for are refused, not
    // ignored -- here an input scale beside dynamic (no) activation quantization
    float one = 1;
    ok = rewrite_tensors(good, bad, NULL, "model.layers.1.mlp.up_proj.input_scale", PQ_DT_F32, 1, &one, PQ_DT_F16) == PQ_OK;
    expect_open_fails(bad, "tensor 'model.layers.1.mlp.up_proj.input_scale' is not part of the LlamaForCausalLM",
                      "item 13: an input_scale a weight-only scheme does not use");
    pq_model_free(a);
    rm_rf(bad2);
    rm_rf(bad);
    rm_rf(good);
}

// A copy of the fixture with one F16 NaN poked into element `elem` of a tensor.
// A copy of the fixture at dst with element elem of tensor set to the F16 bits v.
static int make_nan_fixture(const char *dst, const char *tensor, int elem, uint16_t v) {
    char path[1100], cmd[2200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", dst, fixture, dst);
    if (system(cmd) != 0) return 0;
    snprintf(path, sizeof path, "%s/model.safetensors", dst);
    FILE *f = fopen(path, "r+b");
    uint64_t hlen = 0;
    char *header = NULL;
    int ok = f && fread(&hlen, 8, 1, f) == 1 && hlen < (1 << 24) && (header = calloc(1, hlen + 1)) &&
             fread(header, 1, hlen, f) == hlen;
    json_t *root = ok ? json_loads(header, 0, NULL) : NULL;
    json_t *range = json_object_get(json_object_get(root, tensor), "data_offsets");
    long off = json_is_array(range) ? (long)(8 + hlen + json_integer_value(json_array_get(range, 0))) : -1;
    ok = ok && off > 0 && fseek(f, off + 2L * elem, SEEK_SET) == 0 && fwrite(&v, 2, 1, f) == 1;
    json_decref(root);
    free(header);
    if (f) fclose(f);
    return ok;
}

// A BF16 / F32 copy of the fixture: scales are stored in that dtype and read back exactly.
static void test_dtype(pq_dtype dt) {
    const char *dtname = dt == PQ_DT_BF16 ? "bfloat16" : "float32";
    char src[1024], out[1024], cfg[1100];
    snprintf(src, sizeof src, "%s", tpath("bf16model"));
    snprintf(out, sizeof out, "%s", tpath("bf16out"));
    int ok = rewrite_tensors(fixture, src, NULL, NULL, 0, 0, NULL, dt) == PQ_OK;
    snprintf(cfg, sizeof cfg, "%s/config.json", src);
    json_t *root = json_load_file(cfg, 0, NULL);
    ok = ok && root && json_object_set_new(root, "torch_dtype", json_string(dtname)) == 0 &&
         json_dump_file(root, cfg, JSON_INDENT(2)) == 0;
    json_decref(root);
    pq_quantize_request p = pq_quantize_default_request();
    p.model = src, p.out = out, p.scheme.name = "w4a16", p.scheme.group = 32, p.scheme.sym = 0;
    pq_quantize_result r;
    ok = ok && pq_quantize(&p, NULL, NULL, &r) == PQ_OK;
    pq_model *s = NULL, *m = NULL;
    ok = ok && pq_model_open(src, &s) == PQ_OK && pq_model_open(out, &m) == PQ_OK;
    char path[1100];
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    pq_st *st = NULL;
    ok = ok && pq_st_open(path, &st) == PQ_OK &&
         pq_st_find(st, "model.layers.2.mlp.up_proj.weight_scale")->dtype == dt &&
         pq_st_find(st, "model.embed_tokens.weight")->dtype == dt;
    if (ok) {
        const pq_linear *S = &s->layers[2].lin[PQ_UP], *L = &m->layers[2].lin[PQ_UP];
        size_t n = (size_t)S->rows * S->cols;
        float *w = malloc(n * 4), *want = malloc(n * 4), *got = malloc(n * 4);
        pq_linear_rows(S, 0, S->rows, w);
        pq_scheme sc;
        pq_scheme_make("w4a16", 32, 0, &sc);
        pq_qtensor q;
        ok = rtn_new(w, S->rows, S->cols, &sc, dt, "dt", NULL, &q, NULL) == PQ_OK;
        pq_linear Q = pq_qtensor_linear(&q);
        pq_linear_rows_ref(&Q, 0, S->rows, want);
        pq_linear_rows(L, 0, L->rows, got);
        ok = ok && memcmp(want, got, n * 4) == 0;
        pq_qtensor_free(&q);
        free(w), free(want), free(got);
    }
    PQ_CHECK(ok, "%s model: %s scales written and read back, weights bit-exact", dtname, pq_dtype_name(dt));
    pq_st_close(st);
    pq_model_free(s);
    pq_model_free(m);
    rm_rf(src), rm_rf(out);
}

static void test_atomic(void) {
    char out[1024], nanm[1024], nout[1024];
    snprintf(out, sizeof out, "%s", tpath("atomic"));
    snprintf(nanm, sizeof nanm, "%s", tpath("nanmodel"));
    snprintf(nout, sizeof nout, "%s", tpath("nanout"));
    PQ_CHECK(quantize(out, "w8a16", PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, 0, 0) == PQ_OK, "first quantize");
    pq_status s = quantize(out, "fp8", PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, 0, 0);
    json_t *root, *qc = load_qc(out, &root);
    PQ_CHECK(s == PQ_ERR_ARG && strstr(pq_last_error(), "already exists") && qc &&
                 !strcmp(json_string_value(json_object_get(qc, "format")), "pack-quantized") && no_leftovers(),
             "existing OUT without force: PQ_ERR_ARG, untouched: %s", pq_last_error());
    json_decref(root);
    s = quantize(out, "fp8", PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, 0, 1);
    qc = load_qc(out, &root);
    PQ_CHECK(s == PQ_OK && qc && !strcmp(json_string_value(json_object_get(qc, "format")), "naive-quantized") &&
                 no_leftovers(),
             "existing OUT with force: replaced, nothing left over");
    json_decref(root);

    PQ_CHECK(make_nan_fixture(nanm, "model.layers.1.mlp.gate_proj.weight", 77, 0x7e00), "fixture copy with a NaN");
    pq_quantize_request p = pq_quantize_default_request();
    p.model = nanm, p.out = nout;
    pq_quantize_result r;
    s = pq_quantize(&p, NULL, NULL, &r);
    PQ_CHECK(s == PQ_ERR_NUMERIC && strstr(pq_last_error(), "model.layers.1.mlp.gate_proj.weight") &&
                 strstr(pq_last_error(), "NaN") && !pq_file_exists(nout) && !pq_dir_exists(nout) && no_leftovers(),
             "NaN weight: error names the tensor, nothing at OUT: %s", pq_last_error());
    // force with a NaN source: the existing OUT survives
    p.out = out, p.force = 1;
    s = pq_quantize(&p, NULL, NULL, &r);
    qc = load_qc(out, &root);
    PQ_CHECK(s == PQ_ERR_NUMERIC && qc && !strcmp(json_string_value(json_object_get(qc, "format")), "naive-quantized")
                 && no_leftovers(),
             "failed run with --force leaves the previous OUT intact");
    json_decref(root);
    // tensors copied as they are (a norm, the embedding) are checked too
    static const struct { const char *tensor; int elem; uint16_t v; const char *what; } copied[] = {
        {"model.layers.3.post_attention_layernorm.weight", 5, 0x7e01, "NaN"},
        {"model.embed_tokens.weight", 1000, 0xfc00, "Inf"},
    };
    for (int i = 0; i < 2; i++) {
        PQ_CHECK(make_nan_fixture(nanm, copied[i].tensor, copied[i].elem, copied[i].v), "fixture copy with a %s",
                 copied[i].what);
        p.out = nout, p.force = 0;
        s = pq_quantize(&p, NULL, NULL, &r);
        char want[128];
        snprintf(want, sizeof want, "element %d is %s", copied[i].elem, copied[i].what);
        PQ_CHECK(s == PQ_ERR_NUMERIC && strstr(pq_last_error(), copied[i].tensor) && strstr(pq_last_error(), want) &&
                     !pq_dir_exists(nout) && no_leftovers(),
                 "%s in copied tensor %s: refused by name, nothing at OUT: %s", copied[i].what, copied[i].tensor,
                 pq_last_error());
    }

    char under_file[1100];
    snprintf(under_file, sizeof under_file, "%s/config.json/out", out);
    s = quantize(under_file, "w4a16", PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, 0, 0);
    PQ_CHECK(s == PQ_ERR_IO && strstr(pq_last_error(), under_file), "OUT under a regular file: %s", pq_last_error());
    pq_quantize_request h = pq_quantize_default_request();
    h.model = fixture, h.out = tpath("head"), h.quantize_head = 1;
    PQ_CHECK(pq_quantize(&h, NULL, NULL, &r) == PQ_ERR_ARG && strstr(pq_last_error(), "tie_word_embeddings") &&
                 !pq_dir_exists(h.out),
             "--quantize-head on a tied model refused: %s", pq_last_error());
    h.quantize_head = 0, h.out = out, h.force = 1, h.method = "awq";
    PQ_CHECK(pq_quantize(&h, NULL, NULL, &r) == PQ_ERR_ARG && strstr(pq_last_error(), "--calib") && no_leftovers(),
             "--method awq without calibration text refused: %s", pq_last_error());
    h.method = "rtn", h.model = out;
    PQ_CHECK(pq_quantize(&h, NULL, NULL, &r) == PQ_ERR_FORMAT && strstr(pq_last_error(), "already quantized"),
             "a packed source refused: %s", pq_last_error());
    rm_rf(out), rm_rf(nanm);
}

static void test_provenance(void) {
    char out[1024];
    snprintf(out, sizeof out, "%s", tpath("prov"));
    pq_quantize_request p = pq_quantize_default_request();
    p.model = fixture, p.out = out, p.zstd_level = 3;
    pq_quantize_result r;
    pq_status s = pq_quantize(&p, NULL, NULL, &r);
    PQ_CHECK(s == PQ_OK, "w4a16 with zstd: %s", s ? pq_last_error() : "ok");
    if (s != PQ_OK) return;
    pq_sha256 h;
    char hex[65], path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", fixture);
    pq_sha256_init(&h);
    pq_sha256_file(&h, path);
    pq_sha256_hex(&h, hex);
    json_t *doc = json_load_file(tpath("prov/pq.json"), 0, NULL);
    json_t *layers = json_object_get(doc, "layers");
    double bpw = json_real_value(json_object_get(doc, "bits_per_weight"));
    PQ_CHECK(doc && !strcmp(json_string_value(json_object_get(json_object_get(doc, "source"), "sha256")), hex) &&
                 !strcmp(r.source_sha256, hex) && json_array_size(layers) == 35 &&
                 json_real_value(json_object_get(json_array_get(layers, 0), PQ_JSON_REL_ERR)) > 0 &&
                 !strcmp(json_string_value(json_object_get(doc, "method")), "rtn"),
             "pq.json: source sha256, 35 per-linear errors, method");
    // measured on the file = the scheme's accounting summed over the linears
    pq_scheme sc;
    pq_scheme_make("w4a16", PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, &sc);
    double bytes = 5 * (2 * pq_scheme_matrix_bytes(&sc, 64, 64, 2) + 2 * pq_scheme_matrix_bytes(&sc, 32, 64, 2) +
                        2 * pq_scheme_matrix_bytes(&sc, 172, 64, 2) + pq_scheme_matrix_bytes(&sc, 64, 172, 2));
    PQ_CHECK(fabs(bpw - r.bits_per_weight) < 1e-12 && fabs(bpw - 8 * bytes / r.n_weights) < 1e-12 &&
                 r.n_weights == 226560,
             "bits per weight measured on the output (%.6f) = scheme accounting (%.6f)", bpw, 8 * bytes / r.n_weights);
    PQ_CHECK(r.zst_bytes > 0 && r.zst_bytes < r.out_bytes && pq_file_exists(tpath("prov/model.safetensors.zst")) &&
                 pq_file_exists(tpath("prov/tokenizer.json")) && pq_file_exists(tpath("prov/tokenizer_config.json")),
             "zstd copy (%llu of %llu bytes) and tokenizer files", r.zst_bytes, r.out_bytes);
    struct stat sb;
    mode_t mask = umask(0);
    umask(mask);
    PQ_CHECK(stat(out, &sb) == 0 && (sb.st_mode & 0777) == (0777 & ~mask),
             "OUT has the mode mkdir gives (%o), not mkdtemp's 0700", (unsigned)(sb.st_mode & 0777));
    json_decref(doc);
    rm_rf(out);
}

static void test_sha256(void) {
    struct { const char *in; const char *hex; } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    for (int i = 0; i < 3; i++) {
        pq_sha256 h;
        char hex[65];
        pq_sha256_init(&h);
        for (const char *p = v[i].in; *p; p++) pq_sha256_update(&h, p, 1); // byte by byte across blocks
        pq_sha256_hex(&h, hex);
        PQ_CHECK(!strcmp(hex, v[i].hex), "sha256 test vector %d", i);
    }
    pq_sha256 h;
    char hex[65], block[1000];
    memset(block, 'a', sizeof block);
    pq_sha256_init(&h);
    for (int i = 0; i < 1000; i++) pq_sha256_update(&h, block, sizeof block);
    pq_sha256_hex(&h, hex);
    PQ_CHECK(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
             "sha256 of a million 'a'");
}

// Odd bit widths: the file holds compressed-tensors' dense bit stream
// (values straddle words), the reader repacks it into the kernel layout;
// codes and zero points come back unchanged.
static void test_odd_bits(void) {
    for (int bits = 2; bits <= 8; bits++) {
        int rows = 13, cols = 75, group = 32;
        pq_qtensor q = {.fmt = PQ_W_QPACK, .rows = rows, .cols = cols, .bits = bits, .group = group,
                        .scale_dtype = PQ_DT_F16};
        if (pq_qtensor_alloc(&q, 1) != PQ_OK) { PQ_CHECK(0, "alloc"); return; }
        int per = 32 / bits, wpr = pq_qpack_words_per_row(cols, bits), ng = pq_qtensor_ngroups(&q);
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++)
                q.packed[(size_t)r * wpr + c / per] |= (uint32_t)(pq_test_u64() % (1u << bits)) << ((c % per) * bits);
        for (int i = 0; i < rows * ng; i++) {
            q.zeros[i] = (uint8_t)(pq_test_u64() % (1u << bits));
            q.scales[i] = pq_round_to_dtype(0.01f + 0.001f * (float)(i % 7), PQ_DT_F16);
        }
        pq_scheme sc = {.id = PQ_SCHEME_W4A16, .bits = bits, .group = group, .sym = 0, .act = PQ_ACT_NONE};
        const char *path = tpath("odd.safetensors");
        pq_st_writer *w = NULL;
        pq_st *st = NULL;
        pq_status s = pq_st_writer_create(path, &w);
        if (s == PQ_OK) s = pq_packed_declare(w, "m", &sc, rows, cols, PQ_DT_F16);
        if (s == PQ_OK) s = pq_st_writer_begin(w);
        if (s == PQ_OK) s = pq_packed_put(w, "m", &q);
        if (s == PQ_OK) s = pq_st_writer_commit(w, 0);
        pq_st_writer_free(w);
        if (s == PQ_OK) s = pq_st_open(path, &st);
        const pq_tensor *t = st ? pq_st_find(st, "m.weight_packed") : NULL;
        int dense_ok = t && t->shape[1] == (cols * bits + 31) / 32;
        // value c of row 0 sits at bit c*bits of the stream, across a word boundary if need be
        for (int c = 0; dense_ok && c < cols; c++) {
            const uint32_t *wd = t->data;
            uint64_t two = wd[c * bits / 32] | (c * bits / 32 + 1 < t->shape[1] ? (uint64_t)wd[c * bits / 32 + 1] << 32 : 0);
            pq_qpack kv = {rows, cols, bits, cols, q.packed, NULL, NULL, NULL};
            dense_ok = (int)((two >> (c * bits % 32)) & ((1u << bits) - 1)) == pq_qpack_code(&kv, 0, c);
        }
        pq_packed_info info = {0};
        info.quantized = 1;
        info.scheme = sc;
        pq_linear L;
        pq_packed_owned own;
        if (s == PQ_OK) s = pq_packed_load(st, &info, "m", rows, cols, &L, &own);
        int same = s == PQ_OK;
        for (int r = 0; same && r < rows; r++) {
            for (int c = 0; same && c < cols; c++) {
                pq_qpack kv = {rows, cols, bits, cols, q.packed, NULL, NULL, NULL};
                same = pq_qpack_code(&L.q, r, c) == pq_qpack_code(&kv, r, c);
            }
            for (int g = 0; same && g < ng; g++) same = L.q.zeros[r * ng + g] == q.zeros[r * ng + g];
        }
        PQ_CHECK(s == PQ_OK && dense_ok && same, "%d-bit codes: dense bit stream in the file, kernel layout after "
                 "reading, codes and zero points unchanged (%s)", bits, s == PQ_OK ? "" : pq_last_error());
        if (s == PQ_OK)
            for (int i = 0; i < PQ_PACKED_MAX_OWNED; i++) pq_free(own.p[i]);
        pq_st_close(st);
        pq_qtensor_free(&q);
        unlink(path);
    }
}

// quantization_config fields pq ignored although they change what the
// tensors mean, fields of the wrong JSON type, and QuantizationArgs'
// defaults for absent fields (issue 10: the rest of items 4 and 14's kind).
static void test_config_fields(void) {
#define QCFG(extra, weights) "{\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"pack-quantized\"," \
    "\"config_groups\":{\"group_0\":{\"targets\":[\"Linear\"],\"weights\":{" weights "}}}" extra "}}"
#define W4 "\"num_bits\":4,\"type\":\"int\",\"symmetric\":true,\"strategy\":\"group\",\"group_size\":32"
    static const struct { const char *json, *needle, *what; } bad[] = {
        {QCFG(",\"transform_config\":{\"config_groups\":{\"R1\":{\"type\":\"hadamard\"}}}", W4), "transform_config",
         "a transform_config (rotated weights)"},
        {"{\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"pack-quantized\","
         "\"config_groups\":{\"group_0\":{\"targets\":[\"Linear\"],\"format\":\"int-quantized\",\"weights\":{" W4 "}}}}}",
         "group_0.format differs", "a scheme format other than the config's"},
        {QCFG("", "\"num_bits\":4,\"type\":\"int\",\"strategy\":5,\"group_size\":32"), "strategy must be a string",
         "strategy as a number (was inferred from group_size)"},
        {QCFG(",\"quantization_status\":1", W4), "quantization_status must be a string", "quantization_status as a number"},
        {QCFG("", "\"num_bits\":\"4\",\"type\":\"int\",\"strategy\":\"group\",\"group_size\":32"), "num_bits must be an integer",
         "num_bits as a string"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pq_packed_info info;
        pq_status st = pq_packed_info_parse(bad[i].json, strlen(bad[i].json), "cfg.json", &info);
        PQ_CHECK(st == PQ_ERR_FORMAT && strstr(pq_last_error(), bad[i].needle) && strstr(pq_last_error(), "cfg.json"),
                 "%s refused (%s)", bad[i].what, st ? pq_last_error() : "accepted");
        pq_packed_info_free(&info);
    }
    const char *dflt = QCFG("", "\"strategy\":\"group\",\"group_size\":128");
    pq_packed_info info;
    pq_status st = pq_packed_info_parse(dflt, strlen(dflt), "cfg.json", &info);
    PQ_CHECK(st == PQ_OK && info.scheme.bits == 8 && !info.scheme.is_float && info.scheme.sym && info.scheme.group == 128,
             "absent num_bits / type / symmetric: 8-bit symmetric int, as QuantizationArgs defaults (%s)",
             st ? pq_last_error() : "ok");
    pq_packed_info_free(&info);
    // ignore patterns: Python re.match (anchored at the start), compiled once
    const char *ign = QCFG(",\"ignore\":[\"lm_head\",\"re:model\\\\.layers\\\\.\\\\d+\\\\.mlp\\\\.(?:gate|up)_proj$\",\"re:mlp\"]", W4);
    st = pq_packed_info_parse(ign, strlen(ign), "cfg.json", &info);
    PQ_CHECK(st == PQ_OK && pq_packed_ignored(&info, "lm_head") && pq_packed_ignored(&info, "model.layers.12.mlp.up_proj") &&
                 pq_packed_ignored(&info, "model.layers.0.mlp.gate_proj") &&
                 !pq_packed_ignored(&info, "model.layers.0.mlp.down_proj") &&
                 !pq_packed_ignored(&info, "model.layers.0.mlp.up_proj.x") && !pq_packed_ignored(&info, "lm_head2"),
             "ignore: names exactly, \"re:\" patterns in Python syntax from the start of the name (%s)",
             st ? pq_last_error() : "ok");
    pq_packed_info_free(&info);
    // each pattern is bounded, and so is the list: matching costs what its programs cost
    char big[60000];
    size_t bn = (size_t)snprintf(big, sizeof big, "{\"quantization_config\":{\"quant_method\":\"compressed-tensors\","
                                 "\"format\":\"pack-quantized\",\"config_groups\":{\"group_0\":{\"targets\":[\"Linear\"],"
                                 "\"weights\":{\"num_bits\":4,\"strategy\":\"channel\"}}},\"ignore\":[");
    for (int i = 0; i < 40; i++) bn += (size_t)snprintf(big + bn, sizeof big - bn, "%s\"re:x{1000}%d\"", i ? "," : "", i);
    snprintf(big + bn, sizeof big - bn, "]}}");
    st = pq_packed_info_parse(big, strlen(big), "cfg.json", &info);
    PQ_CHECK(st == PQ_ERR_FORMAT && strstr(pq_last_error(), "compile to more than 32768 instructions"),
             "40 patterns of 1000 repetitions each: the list's total is bounded (%s)", pq_last_error());
    pq_packed_info_free(&info);
#undef QCFG
#undef W4
}

int main(void) {
    pq_test_seed();
    fixture = pq_test_path("fixtures/stories260K");
    snprintf(tmp, sizeof tmp, "%s/pq-packed.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return printf("FAIL - mkdtemp\n"), 1;
    test_sha256();
    test_odd_bits();
    test_config_fields();
    if (!pq_dir_exists(fixture)) { // the fixture is part of the project's shared data: missing is a failure
        PQ_CHECK(0, "packed round trips: the fixture at %s", fixture);
    } else {
        test_schemes();
        test_reader();
        test_dtype(PQ_DT_BF16);
        test_dtype(PQ_DT_F32);
        test_atomic();
        test_provenance();
    }
    rm_rf(tmp);
    return pq_test_done();
}
