// quant/checkpoint.c — the packed checkpoint of a pq quantize run (see
// checkpoint.h).
#include "quant/checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/half.h"
#include "common/sys.h"
#include "common/version.h"
#include "formats/fileio.h"
#include "formats/gguf_hf.h"
#include "formats/packed.h"
#include "quant/fold.h"

#define PATH_CAP 4096

const char *const PQ_CKPT_SIDE_FILES[PQ_CKPT_NSIDE_FILES] = {
    "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json",
    "added_tokens.json", "vocab.json", "merges.txt", "generation_config.json", "chat_template.jinja",
    "chat_template.json",
};

struct pq_ckpt {
    pq_ckpt_params p;
    char dir[PATH_CAP];
    pq_st_writer *w;
    json_t *layers;            // pq.json "layers": one entry per quantized linear, in order
    double err_sum, err_max, out_sum, out_max;
    int n_quantized, n_ragged, n_out;
    pq_st *tmp_st;             // resume: model.safetensors.tmp read back
    pq_packed_info tmp_info;
};

// ---- which tensors are what -------------------------------------------------

// The source linear of a module, or NULL if it is not quantized:
// "model.layers.L.<slot>" always, "lm_head" with quantize_head.
static const pq_linear *quantized_linear(const pq_ckpt *c, const char *module) {
    const pq_model *m = c->p.m;
    if (strcmp(module, "lm_head") == 0) return c->p.q->quantize_head ? &m->lm_head : NULL;
    int l, n = 0;
    if (sscanf(module, "model.layers.%d.%n", &l, &n) != 1 || n == 0 || l < 0 || l >= m->cfg.n_layers) return NULL;
    for (int s = 0; s < PQ_NLINEAR; s++)
        if (strcmp(module + n, pq_linear_slot_name((pq_linear_slot)s)) == 0)
            return pq_model_linear(m, l, (pq_linear_slot)s);
    return NULL;
}

// The module a tensor name belongs to ("a.b.weight_scale" -> "a.b") in out.
static void module_of(const char *name, char *out, size_t cap) {
    const char *dot = strrchr(name, '.');
    snprintf(out, cap, "%.*s", dot ? (int)(dot - name) : 0, name);
}

// Whether tensor `name` is the weight of a quantized linear.
static int is_quantized_weight(const pq_ckpt *c, const char *name) {
    char module[512];
    module_of(name, module, sizeof module);
    return quantized_linear(c, module) && strcmp(name + strlen(module), ".weight") == 0;
}

// Whether tensor `name` is rewritten by the method (a norm or bias a scale
// folds into), not copied.
static int is_rewritten(const pq_ckpt *c, const char *name) {
    int l, n = 0;
    if (!c->p.folds || sscanf(name, "model.layers.%d.%n", &l, &n) != 1 || n == 0) return 0;
    char target[320];
    for (int g = 0; g < PQ_NGROUPS; g++) {
        if (!pq_fold_usable(&c->p.m->cfg, g)) continue;
        pq_fold_target(l, g, target, sizeof target);
        if (strcmp(name, target) == 0) return 1;
    }
    return 0;
}

// ---- the header --------------------------------------------------------------

// Every source tensor: the quantized linears' weights become their packed
// tensors, everything else is declared as it is.
static pq_status declare_all(pq_ckpt *c) {
    const pq_st *st = c->p.m->st;
    char module[512];
    for (int i = 0; i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        module_of(t->name, module, sizeof module);
        const pq_linear *L = quantized_linear(c, module);
        if (L && strcmp(t->name + strlen(module), ".weight") == 0)
            PQ_TRY(pq_packed_declare(c->w, module, c->p.scheme, L->rows, L->cols, pq_linear_dtype(L)));
        else
            PQ_TRY(pq_st_writer_declare(c->w, t->name, t->dtype, t->ndim, t->shape));
    }
    return PQ_OK;
}

static pq_status set_metadata(pq_ckpt *c) {
    const pq_ckpt_params *p = &c->p;
    char desc[64];
    pq_scheme_describe(p->scheme, desc, sizeof desc);
    PQ_TRY(pq_st_writer_set_metadata(c->w, "format", "pt")); // transformers refuses a file without it
    PQ_TRY(pq_st_writer_set_metadata(c->w, "pq.version", PQ_VERSION));
    PQ_TRY(pq_st_writer_set_metadata(c->w, "pq.method", p->method));
    PQ_TRY(pq_st_writer_set_metadata(c->w, "pq.scheme", desc));
    PQ_TRY(pq_st_writer_set_metadata(c->w, "pq.source", p->q->model));
    if (p->calib) {
        char n[64];
        PQ_TRY(pq_st_writer_set_metadata(c->w, "pq.calibration_sha256", p->calib->sha256));
        pq_calib_describe(p->calib->n, p->calib->len, p->q->calib.seed, p->q->calib.mode, n, sizeof n);
        PQ_TRY(pq_st_writer_set_metadata(c->w, "pq.calibration", n));
    }
    if (p->scales) { // what the inline run writes: the same file
        const char *keys[] = {"pq.calibration_sha256", "pq.calibration"};
        for (int i = 0; i < 2; i++) {
            const char *v = pq_scales_meta_get(p->scales, keys[i]);
            PQ_FAIL_IF(!v, PQ_ERR_FORMAT, "%s: __metadata__ lacks %s", p->q->scales, keys[i]);
            PQ_TRY(pq_st_writer_set_metadata(c->w, keys[i], v));
        }
    }
    return pq_st_writer_set_metadata(c->w, "pq.source_sha256", p->source_sha256);
}

// The first NaN or Inf element of a float tensor (by its exponent bits:
// all ones), or -1; *nan says which. Integer tensors have none.
static long long first_nonfinite(const pq_tensor *t, int *nan) {
    size_t n = t->nbytes / pq_dtype_size(t->dtype);
    const uint8_t *d = t->data;
    for (size_t i = 0; i < n; i++) {
        uint32_t u, exp, man;
        switch (t->dtype) {
        case PQ_DT_F32: memcpy(&u, d + 4 * i, 4), exp = 0x7f800000u, man = 0x007fffffu; break;
        case PQ_DT_F16: u = (uint32_t)d[2 * i] | (uint32_t)d[2 * i + 1] << 8, exp = 0x7c00, man = 0x03ff; break;
        case PQ_DT_BF16: u = (uint32_t)d[2 * i] | (uint32_t)d[2 * i + 1] << 8, exp = 0x7f80, man = 0x007f; break;
        default: return -1;
        }
        if ((u & exp) == exp) {
            *nan = (u & man) != 0;
            return (long long)i;
        }
    }
    return -1;
}

// Copies every tensor that is neither quantized nor rewritten (embeddings,
// norms, biases, an unquantized lm_head) as it is; a NaN or Inf in one is
// refused by name, as in a quantized weight, so a checkpoint never carries one.
static pq_status put_passthrough(pq_ckpt *c) {
    const pq_st *st = c->p.m->st;
    for (int i = 0; i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        if (is_quantized_weight(c, t->name) || is_rewritten(c, t->name)) continue;
        int nan = 0;
        long long bad = first_nonfinite(t, &nan);
        PQ_FAIL_IF(bad >= 0, PQ_ERR_NUMERIC, "%s/%s: element %lld is %s (copied tensors must be finite too)",
                   c->p.q->model, t->name, bad, nan ? "NaN" : "Inf");
        PQ_TRY(pq_st_writer_put(c->w, t->name, t->data, t->nbytes));
    }
    return PQ_OK;
}

pq_status pq_ckpt_begin(const pq_ckpt_params *p, const char *dir, int resume, pq_ckpt **out) {
    *out = NULL;
    pq_ckpt *c = calloc(1, sizeof *c);
    PQ_FAIL_IF(!c, PQ_ERR_NOMEM, "out of memory");
    c->p = *p;
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    char path[PATH_CAP];
    pq_status s = PQ_OK;
    c->layers = json_array();
    PQ_CHECK_GOTO(!c->layers, s, PQ_ERR_NOMEM, "out of memory");
    PQ_TRY_GOTO(s, pq_path_join(path, sizeof path, dir, "model.safetensors"));
    PQ_TRY_GOTO(s, pq_st_writer_create(path, &c->w));
    PQ_TRY_GOTO(s, set_metadata(c));
    PQ_TRY_GOTO(s, declare_all(c));
    PQ_TRY_GOTO(s, resume ? pq_st_writer_resume(c->w) : pq_st_writer_begin(c->w));
    PQ_TRY_GOTO(s, put_passthrough(c));
    *out = c;
    return PQ_OK;
done:
    pq_ckpt_free(c, resume);
    return s;
}

pq_status pq_ckpt_sync(pq_ckpt *c) { return pq_st_writer_sync(c->w); }

// ---- blocks -------------------------------------------------------------------

static pq_status record(pq_ckpt *c, const pq_linear *L, json_t *entry) {
    PQ_FAIL_IF(!entry || json_array_append(c->layers, entry) != 0, PQ_ERR_NOMEM, "out of memory");
    double e = json_real_value(json_object_get(entry, PQ_JSON_REL_ERR));
    c->err_sum += e;
    c->err_max = e > c->err_max ? e : c->err_max;
    json_t *o = json_object_get(entry, PQ_JSON_OUT_ERR);
    if (o) {
        double v = json_real_value(o);
        c->out_sum += v;
        c->out_max = v > c->out_max ? v : c->out_max;
        c->n_out++;
    }
    c->n_quantized++;
    c->n_ragged += c->p.scheme->group > 0 && L->cols % c->p.scheme->group != 0;
    return PQ_OK;
}

// A folded vector v [n] (exact in the tensor's dtype) written in the dtype
// of the source tensor `name`.
static pq_status put_vector(pq_ckpt *c, const char *name, const float *v, int n) {
    const pq_tensor *t = pq_st_find(c->p.m->st, name);
    PQ_FAIL_IF(!t, PQ_ERR_FORMAT, "%s: tensor '%s' is missing", c->p.q->model, name);
    size_t es = pq_dtype_size(t->dtype);
    char *bytes = pq_alloc((size_t)n * es);
    PQ_FAIL_IF(!bytes, PQ_ERR_NOMEM, "%s: out of memory", name);
    for (int i = 0; i < n; i++) {
        uint16_t h = t->dtype == PQ_DT_F16 ? pq_f32_to_fp16(v[i]) : pq_f32_to_bf16(v[i]);
        if (t->dtype == PQ_DT_F32) memcpy(bytes + 4 * (size_t)i, &v[i], 4);
        else memcpy(bytes + 2 * (size_t)i, &h, 2);
    }
    pq_status s = pq_st_writer_put(c->w, name, bytes, (size_t)n * es);
    pq_free(bytes);
    return s;
}

pq_status pq_ckpt_put_block(pq_ckpt *c, int layer, const pq_block_out *b) {
    char module[256], name[320];
    for (int k = 0; k < PQ_NLINEAR; k++) {
        pq_method_module(module, sizeof module, layer, (pq_linear_slot)k);
        PQ_TRY(pq_packed_put(c->w, module, b->q[k]));
    }
    for (int g = 0; g < PQ_NGROUPS; g++) {
        if (!b->folded[g]) continue;
        pq_fold_target(layer, g, name, sizeof name);
        PQ_TRY(put_vector(c, name, b->folded[g], pq_fold_target_len(&c->p.m->cfg, &c->p.m->layers[layer], g)));
    }
    return pq_ckpt_record_block(c, layer, b->entry);
}

pq_status pq_ckpt_record_block(pq_ckpt *c, int layer, json_t *const *entries) {
    for (int k = 0; k < PQ_NLINEAR; k++)
        PQ_TRY(record(c, pq_model_linear(c->p.m, layer, (pq_linear_slot)k), entries[k]));
    return PQ_OK;
}

pq_status pq_ckpt_put_linear(pq_ckpt *c, const char *module, const pq_linear *src, const pq_qtensor *q,
                             json_t *entry) {
    PQ_TRY(pq_packed_put(c->w, module, q));
    return record(c, src, entry);
}

void pq_ckpt_block_errors(const pq_ckpt *c, int layer, double *rel, double *out) {
    double e = 0, o = 0;
    int measured = 1;
    for (int k = 0; k < PQ_NLINEAR; k++) {
        json_t *entry = json_array_get(c->layers, (size_t)layer * PQ_NLINEAR + k);
        json_t *v = json_object_get(entry, PQ_JSON_OUT_ERR);
        e += json_real_value(json_object_get(entry, PQ_JSON_REL_ERR));
        if (v) o += json_real_value(v);
        else measured = 0;
    }
    *rel = e / PQ_NLINEAR;
    *out = measured ? o / PQ_NLINEAR : -1;
}

json_t *pq_ckpt_entries(const pq_ckpt *c) { return c->layers; }

// ---- resume: finished blocks read back ------------------------------------------

void pq_ckpt_loaded_free(pq_ckpt_loaded *own) {
    for (int k = 0; k < PQ_NLINEAR; k++)
        for (int i = 0; i < PQ_PACKED_MAX_OWNED; i++) pq_free(own->lin[k].p[i]);
    for (int g = 0; g < PQ_NGROUPS; g++) pq_free(own->vec[g]);
    memset(own, 0, sizeof *own);
}

// The size of .tmp is its final size (unwritten tensors read as zeros), so
// that the reader validates it; then the finished blocks' tensors are read.
static pq_status open_tmp(pq_ckpt *c) {
    const char *path = pq_st_writer_tmp_path(c->w);
    PQ_FAIL_IF(truncate(path, (off_t)pq_st_writer_total_bytes(c->w)) != 0, PQ_ERR_IO, "%s: cannot extend: %s",
               path, strerror(errno));
    c->tmp_info = (pq_packed_info){.quantized = 1, .scheme = *c->p.scheme};
    snprintf(c->tmp_info.format, sizeof c->tmp_info.format, "%s", pq_scheme_format(c->p.scheme));
    return pq_st_open(path, &c->tmp_st);
}

// A folded vector of a finished block, read back from the temporary file.
static pq_status read_vector(pq_ckpt *c, const char *name, int n, float **out) {
    const pq_tensor *t = pq_st_find(c->tmp_st, name);
    PQ_FAIL_IF(!t || t->numel != n, PQ_ERR_FORMAT, "%s: tensor '%s' is missing or has another size",
               pq_st_writer_tmp_path(c->w), name);
    pq_dense_type dt = t->dtype == PQ_DT_F16 ? PQ_DENSE_F16 : t->dtype == PQ_DT_BF16 ? PQ_DENSE_BF16 : PQ_DENSE_F32;
    *out = pq_alloc((size_t)n * sizeof(float));
    PQ_FAIL_IF(!*out, PQ_ERR_NOMEM, "%s: out of memory", name);
    pq_dense_rows_ref(dt, t->data, n, 0, 1, *out);
    return PQ_OK;
}

pq_status pq_ckpt_load_block(pq_ckpt *c, int layer, int folded, pq_layer *L, pq_ckpt_loaded *own) {
    if (!c->tmp_st) PQ_TRY(open_tmp(c));
    char module[256], name[320];
    for (int s = 0; s < PQ_NLINEAR; s++) {
        const float *bias = L->lin[s].bias;
        pq_method_module(module, sizeof module, layer, (pq_linear_slot)s);
        PQ_TRY(pq_packed_load(c->tmp_st, &c->tmp_info, module, L->lin[s].rows, L->lin[s].cols, &L->lin[s],
                              &own->lin[s]));
        L->lin[s].bias = bias;
    }
    for (int g = 0; g < PQ_NGROUPS && folded; g++) {
        pq_fold_target(layer, g, name, sizeof name);
        if (!pq_fold_usable(&c->p.m->cfg, g) || !pq_st_find(c->p.m->st, name)) continue; // no producer bias
        PQ_TRY(read_vector(c, name, pq_fold_target_len(&c->p.m->cfg, L, g), &own->vec[g]));
        pq_fold_install(L, g, own->vec[g]);
    }
    return PQ_OK;
}

// ---- the end ------------------------------------------------------------------

// A .gguf source: its Hugging Face view's side files (formats/gguf_hf.h).
static pq_status write_gguf_side_files(pq_ckpt *c) {
    char dst[PATH_CAP];
    for (int i = 1; i < PQ_GGUF_HF_NFILES; i++) { // config.json (0) is written by write_side_files
        const char *name = pq_gguf_hf_file_names[i], *text = pq_gguf_hf_file(c->p.m->gguf, name);
        if (!text) continue;
        PQ_TRY(pq_path_join(dst, sizeof dst, c->dir, name));
        PQ_TRY(pq_file_write_atomic(dst, text, strlen(text)));
    }
    return PQ_OK;
}

// config.json, the tokenizer and other side files into the directory.
static pq_status write_side_files(pq_ckpt *c) {
    char src[PATH_CAP], dst[PATH_CAP], *text = NULL, *cfg = NULL;
    size_t len;
    const pq_quantize_request *q = c->p.q;
    PQ_TRY(pq_path_join(dst, sizeof dst, c->dir, "config.json"));
    if (c->p.m->gguf) {
        const char *view = pq_gguf_hf_file(c->p.m->gguf, "config.json");
        snprintf(src, sizeof src, "%s", q->model);
        text = strdup(view);
        len = strlen(view);
        PQ_FAIL_IF(!text, PQ_ERR_NOMEM, "out of memory");
    } else {
        PQ_TRY(pq_path_join(src, sizeof src, q->model, "config.json"));
        PQ_TRY(pq_file_read(src, (size_t)64 << 20, &text, &len));
    }
    pq_status s = pq_packed_config_json(text, len, src, c->p.scheme, q->quantize_head, &cfg);
    free(text);
    PQ_TRY(s);
    s = pq_file_write_atomic(dst, cfg, strlen(cfg));
    free(cfg);
    PQ_TRY(s);
    if (c->p.m->gguf) return write_gguf_side_files(c);
    for (int i = 0; i < PQ_CKPT_NSIDE_FILES; i++) {
        PQ_TRY(pq_path_join(src, sizeof src, q->model, PQ_CKPT_SIDE_FILES[i]));
        if (!pq_path_exists(src)) continue; // present but not a regular file: the copy refuses it by name
        PQ_TRY(pq_path_join(dst, sizeof dst, c->dir, PQ_CKPT_SIDE_FILES[i]));
        PQ_TRY(pq_file_copy_atomic(src, dst));
    }
    return PQ_OK;
}

static unsigned long long file_bytes(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (unsigned long long)sb.st_size : 0;
}

// Measures the output: bytes of the quantized linears' tensors, file sizes.
static pq_status measure(pq_ckpt *c, pq_quantize_result *res) {
    char path[PATH_CAP], module[512];
    const pq_model *m = c->p.m;
    PQ_TRY(pq_path_join(path, sizeof path, c->dir, "model.safetensors"));
    res->out_bytes = file_bytes(path);
    pq_st *st;
    PQ_TRY(pq_st_open(path, &st));
    res->quant_bytes = 0;
    for (int i = 0; i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        module_of(t->name, module, sizeof module);
        // weight, weight_packed, weight_scale, ... (not a q/k/v bias)
        if (quantized_linear(c, module) && strncmp(t->name + strlen(module), ".weight", 7) == 0)
            res->quant_bytes += (long long)t->nbytes;
    }
    pq_st_close(st);
    res->n_weights = 0;
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int s = 0; s < PQ_NLINEAR; s++) {
            const pq_linear *L = pq_model_linear(m, l, (pq_linear_slot)s);
            res->n_weights += (long long)L->rows * L->cols;
        }
    if (c->p.q->quantize_head) res->n_weights += (long long)m->lm_head.rows * m->lm_head.cols;
    res->bits_per_weight = res->n_weights ? 8.0 * (double)res->quant_bytes / (double)res->n_weights : 0;
    if (c->p.q->zstd_level > 0) {
        PQ_TRY(pq_path_join(path, sizeof path, c->dir, "model.safetensors.zst"));
        res->zst_bytes = file_bytes(path);
    }
    return PQ_OK;
}

pq_status pq_ckpt_commit(pq_ckpt *c, pq_quantize_result *res) {
    PQ_TRY(pq_st_writer_commit(c->w, c->p.q->zstd_level));
    PQ_TRY(write_side_files(c));
    pq_scheme_describe(c->p.scheme, res->scheme, sizeof res->scheme);
    snprintf(res->method, sizeof res->method, "%s", c->p.method);
    snprintf(res->format, sizeof res->format, "%s", pq_scheme_format(c->p.scheme));
    snprintf(res->source_sha256, sizeof res->source_sha256, "%s", c->p.source_sha256);
    res->n_quantized = c->n_quantized;
    res->n_ragged = c->n_ragged;
    res->mean_rel_err = c->n_quantized ? c->err_sum / c->n_quantized : 0;
    res->max_rel_err = c->err_max;
    res->mean_out_err = c->n_out ? c->out_sum / c->n_out : 0;
    res->max_out_err = c->out_max;
    return measure(c, res);
}

// pq.json's "scales" object of a --scales run (a new reference).
static json_t *scales_provenance(const pq_ckpt *c) {
    pq_scales_file *f = c->p.scales;
    return json_pack("{s:s, s:s?, s:s?, s:s?, s:o}", "file", c->p.q->scales, "calibration_sha256",
                     pq_scales_meta_get(f, "pq.calibration_sha256"), "calibration",
                     pq_scales_meta_get(f, "pq.calibration"), "params", pq_scales_meta_get(f, "pq.params"),
                     "pq_version", json_string(pq_scales_meta_get(f, "pq.version")));
}

// Writes doc (not stolen) as indented JSON to `name` in the directory.
static pq_status write_json(const pq_ckpt *c, const char *name, const json_t *doc) {
    char *text = json_dumps(doc, JSON_INDENT(2));
    PQ_FAIL_IF(!text, PQ_ERR_NOMEM, "out of memory");
    char path[PATH_CAP];
    pq_status st = pq_path_join(path, sizeof path, c->dir, name);
    if (st == PQ_OK) st = pq_file_write_atomic(path, text, strlen(text));
    free(text);
    return st;
}

pq_status pq_ckpt_provenance(pq_ckpt *c, const pq_quantize_result *res, json_t *record, json_t *extra) {
    const pq_scheme *s = c->p.scheme;
    static const char *const ACT[] = {"none (weight only)", "int8 dynamic per token", "fp8 e4m3 dynamic per token",
                                      "int8 static per tensor", "fp8 e4m3 static per tensor"};
    json_t *group = s->group > 0 ? json_integer(s->group) : json_string(s->group ? "tensor" : "channel");
    json_t *doc = json_pack(
        "{s:s, s:s, s:s, s:o, s:b, s:s, s:s, s:s, s:b, s:{s:s, s:s, s:i}, s:f, s:I, s:I, s:i, s:i, s:{s:f, s:f}, "
        "s:{s:I, s:I}, s:O}",
        "pq_version", PQ_VERSION, "method", c->p.method, "scheme", pq_scheme_name(s->id), "group", group,
        "symmetric", s->sym, "activations", ACT[s->act], "format", res->format, "scale_dtype",
        pq_dtype_name(pq_model_dtype(c->p.m)), "quantize_head", c->p.q->quantize_head, "source", "path",
        c->p.q->model, "sha256", c->p.source_sha256, "files", pq_st_file_count(c->p.m->st), "bits_per_weight",
        res->bits_per_weight, "quantized_weights", (json_int_t)res->n_weights, "quantized_bytes",
        (json_int_t)res->quant_bytes, "quantized_linears", res->n_quantized, "ragged_linears", res->n_ragged,
        PQ_JSON_REL_ERR, "mean", res->mean_rel_err, "max", res->max_rel_err, "output_bytes", "model.safetensors",
        (json_int_t)res->out_bytes, "model.safetensors.zst", (json_int_t)res->zst_bytes, "layers", c->layers);
    int bad = !doc || !record || (c->p.scales && json_object_set_new(doc, "scales", scales_provenance(c)) != 0) ||
              (extra && json_object_update(doc, extra) != 0);
    json_decref(extra);
    pq_status st = bad ? PQ_FAIL(PQ_ERR_NOMEM, "out of memory") : write_json(c, "pq.json", doc);
    if (st == PQ_OK) st = write_json(c, "pq-run.json", record);
    json_decref(doc);
    json_decref(record);
    return st;
}

const char *pq_ckpt_tmp_path(const pq_ckpt *c) { return pq_st_writer_tmp_path(c->w); }

void pq_ckpt_free(pq_ckpt *c, int keep) {
    if (!c) return;
    if (keep) pq_st_writer_keep_tmp(c->w);
    pq_st_writer_free(c->w);
    pq_st_close(c->tmp_st);
    json_decref(c->layers);
    free(c);
}
