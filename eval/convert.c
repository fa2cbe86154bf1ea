// eval/convert.c — a GGUF file's Hugging Face view written to a directory
// (eval/convert.h).
#include "eval/convert.h"

#include <jansson.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "common/half.h"
#include "common/sys.h"
#include "eval/model.h"
#include "formats/fileio.h"
#include "formats/outdir.h"

pq_convert_params pq_convert_default_params(void) { return (pq_convert_params){0}; }

static pq_status parse_dtype(const char *s, int *has, pq_dtype *dt, const char **torch) {
    *has = s != NULL;
    if (!s) return PQ_OK;
    static const struct { const char *name, *torch; pq_dtype dt; } T[] = {
        {"f16", "float16", PQ_DT_F16}, {"bf16", "bfloat16", PQ_DT_BF16}, {"f32", "float32", PQ_DT_F32}};
    for (size_t i = 0; i < 3; i++)
        if (strcmp(s, T[i].name) == 0) {
            *dt = T[i].dt;
            *torch = T[i].torch;
            return PQ_OK;
        }
    return PQ_FAIL(PQ_ERR_ARG, "--dtype '%.40s' is not one of f16, bf16, f32", s);
}

// src (n values of dtype from) -> dst in dtype to; the first non-finite
// value of the result (-1: none) in *bad.
static void cast(const void *src, pq_dtype from, void *dst, pq_dtype to, size_t n, long long *bad) {
    *bad = -1;
    for (size_t i = 0; i < n; i++) {
        float x;
        if (from == PQ_DT_F32) memcpy(&x, (const uint8_t *)src + 4 * i, 4);
        else {
            uint16_t h;
            memcpy(&h, (const uint8_t *)src + 2 * i, 2);
            x = from == PQ_DT_F16 ? pq_fp16_to_f32(h) : pq_bf16_to_f32(h);
        }
        float y = x;
        if (to == PQ_DT_F32) memcpy((uint8_t *)dst + 4 * i, &x, 4);
        else {
            uint16_t h = to == PQ_DT_F16 ? pq_f32_to_fp16(x) : pq_f32_to_bf16(x);
            memcpy((uint8_t *)dst + 2 * i, &h, 2);
            y = to == PQ_DT_F16 ? pq_fp16_to_f32(h) : pq_bf16_to_f32(h);
        }
        if (!isfinite(y) && *bad < 0) *bad = (long long)i;
    }
}

// config.json with torch_dtype set to the written dtype.
static pq_status write_config(const char *text, const char *torch, const char *path) {
    json_error_t err;
    json_t *cfg = json_loads(text, 0, &err);
    PQ_FAIL_IF(!cfg, PQ_ERR_FORMAT, "config.json: %s", err.text);
    if (torch) json_object_set_new(cfg, "torch_dtype", json_string(torch));
    char *out = json_dumps(cfg, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
    json_decref(cfg);
    PQ_FAIL_IF(!out, PQ_ERR_NOMEM, "out of memory writing config.json");
    pq_status s = pq_file_write_atomic(path, out, strlen(out));
    free(out);
    return s;
}

static pq_status write_files(const pq_gguf_hf *hf, pq_outdir *dir, const char *torch) {
    char path[PQ_OUTDIR_PATH_CAP];
    for (int i = 0; i < PQ_GGUF_HF_NFILES; i++) {
        const char *name = pq_gguf_hf_file_names[i], *text = pq_gguf_hf_file(hf, name);
        if (!text) continue;
        PQ_TRY(pq_outdir_path(dir, name, path, sizeof path));
        if (strcmp(name, "config.json") == 0) PQ_TRY(write_config(text, torch, path));
        else PQ_TRY(pq_file_write_atomic(path, text, strlen(text)));
    }
    return PQ_OK;
}

static pq_status write_weights(const pq_model *m, pq_outdir *dir, int has_dt, pq_dtype dt, pq_convert_progress cb,
                               void *ud, unsigned long long *bytes) {
    char path[PQ_OUTDIR_PATH_CAP];
    PQ_TRY(pq_outdir_path(dir, "model.safetensors", path, sizeof path));
    pq_st_writer *w = NULL;
    void *buf = NULL;
    const pq_st *st = m->st;
    pq_status s = PQ_OK;
    PQ_TRY_GOTO(s, pq_st_writer_create(path, &w));
    PQ_TRY_GOTO(s, pq_st_writer_set_metadata(w, "format", "pt"));
    PQ_TRY_GOTO(s, pq_st_writer_set_metadata(w, "pq.source", m->dir));
    size_t max_bytes = 0;
    for (int i = 0; i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        PQ_TRY_GOTO(s, pq_st_writer_declare(w, t->name, has_dt ? dt : t->dtype, t->ndim, t->shape));
        if ((size_t)t->numel * 4 > max_bytes) max_bytes = (size_t)t->numel * 4;
    }
    PQ_TRY_GOTO(s, pq_st_writer_begin(w));
    buf = pq_alloc(max_bytes);
    PQ_CHECK_GOTO(!buf, s, PQ_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        pq_dtype to = has_dt ? dt : t->dtype;
        long long bad;
        cast(t->data, t->dtype, buf, to, (size_t)t->numel, &bad);
        PQ_CHECK_GOTO(bad >= 0, s, PQ_ERR_NUMERIC, "%s: tensor '%s' element %lld is %s%s", m->dir, t->name, bad,
                      to == PQ_DT_F32 ? "not finite" : "not finite in ", to == PQ_DT_F32 ? "" : pq_dtype_name(to));
        PQ_TRY_GOTO(s, pq_st_writer_put(w, t->name, buf, (size_t)t->numel * pq_dtype_size(to)));
        if (cb) cb(ud, i + 1, pq_st_count(st), t->name);
    }
    PQ_TRY_GOTO(s, pq_st_writer_commit(w, 0));
    *bytes = pq_st_writer_total_bytes(w);
done:
    pq_free(buf);
    pq_st_writer_free(w);
    return s;
}

pq_status pq_convert_gguf(const pq_convert_params *p, pq_convert_progress cb, void *ud, pq_convert_result *res) {
    memset(res, 0, sizeof *res);
    PQ_FAIL_IF(!p->gguf || !p->out, PQ_ERR_ARG, "a GGUF file and an output directory are required");
    int has_dt;
    pq_dtype dt = PQ_DT_F32;
    const char *torch = NULL;
    PQ_TRY(parse_dtype(p->dtype, &has_dt, &dt, &torch));
    PQ_FAIL_IF(!pq_gguf_is_file(p->gguf), PQ_ERR_IO, "%s: not a GGUF file", p->gguf);
    pq_model *m;
    PQ_TRY(pq_model_open(p->gguf, &m));
    pq_outdir dir = {0};
    const char *inputs[] = {p->gguf};
    pq_outdir_spec spec = {.final = p->out, .force = p->force, .inputs = inputs, .n_inputs = 1};
    pq_status s = pq_outdir_begin(&dir, &spec);
    if (s == PQ_OK) s = write_files(m->gguf, &dir, torch);
    if (s == PQ_OK) s = write_weights(m, &dir, has_dt, dt, cb, ud, &res->bytes);
    if (s == PQ_OK) s = pq_outdir_commit(&dir);
    pq_outdir_abort(&dir);
    if (s == PQ_OK) {
        res->tensors = pq_st_count(m->st);
        res->params = pq_config_param_count(&m->cfg);
        snprintf(res->arch, sizeof res->arch, "%s", m->cfg.arch_name);
    }
    pq_model_free(m);
    return s;
}
