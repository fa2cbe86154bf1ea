// quant/quantize.c — the `pq quantize` stage: source checkpoint in, packed
// compressed-tensors checkpoint out (see quantize.h).
#include "quant/quantize.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/sys.h"
#include "common/threads.h"
#include "common/version.h"
#include "eval/model.h"
#include "formats/fileio.h"
#include "formats/outdir.h"
#include "formats/packed.h"
#include "quant/quantize_run.h"
#include "quant/rtn.h"
#include "quant/scales.h"
#include "formats/scheme.h"

#define PATH_CAP 4096

// Methods by name: whether they calibrate, whether they fold scales /
// calibrate static activation scales (quant/smooth.h), their default scheme.
static const struct {
    const char *name;
    int calibrated, smooth;
    pq_smooth_kind kind;
    const char *scheme;
} METHODS[] = {
    {"rtn", 0, 0, PQ_SMOOTH_NONE, "w4a16"},
    {"gptq", 1, 0, PQ_SMOOTH_NONE, "w4a16"},
    {"awq", 1, 1, PQ_SMOOTH_AWQ, "w4a16"},
    {"smoothquant", 1, 1, PQ_SMOOTH_SQ, "w8a8"},
    {"fp8", 1, 1, PQ_SMOOTH_NONE, "fp8-static"},
};
#define NMETHODS (int)(sizeof METHODS / sizeof METHODS[0])

// Files copied from the source directory when present.
static const char *const SIDE_FILES[] = {
    "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json",
    "added_tokens.json", "vocab.json", "merges.txt", "generation_config.json", "chat_template.jinja",
    "chat_template.json",
};

pq_quantize_params pq_quantize_default_params(void) {
    pq_gptq_params g = pq_gptq_default_params();
    return (pq_quantize_params){.group = PQ_GROUP_DEFAULT, .sym = PQ_SYM_DEFAULT,
                                .calib = pq_calib_default_params(), .damp = g.damp, .block_size = g.block_size,
                                .device = PQ_DEVICE_AUTO, .smooth = pq_smooth_default_params()};
}

pq_status pq_quantize_parse_alpha(const char *s, double *alpha) {
    if (strcmp(s, "auto") == 0) return *alpha = PQ_ALPHA_AUTO, PQ_OK;
    char *end;
    double a = strtod(s, &end);
    PQ_FAIL_IF(*s == '\0' || *end || !(a >= 0 && a <= 1), PQ_ERR_ARG,
               "--alpha %s: expected a number in [0, 1] or auto", s);
    *alpha = a;
    return PQ_OK;
}

pq_status pq_quantize_parse_group(const char *s, int *group) {
    if (strcmp(s, "auto") == 0) return *group = PQ_GROUP_DEFAULT, PQ_OK;
    if (strcmp(s, "channel") == 0) return *group = PQ_GROUP_CHANNEL, PQ_OK;
    char *end;
    long g = strtol(s, &end, 10);
    PQ_FAIL_IF(*s == '\0' || *end || g <= 0 || g > (1 << 20), PQ_ERR_ARG,
               "--group %s: expected a group size (32, 64, 128), channel or auto", s);
    *group = (int)g;
    return PQ_OK;
}

// Flags only a calibrated method reads, given to one that does not.
static pq_status check_uncalibrated(const pq_quantize_params *p, const char *method) {
    const char *flag = p->calib.path ? "--calib" : p->act_order ? "--act-order" : p->static_groups ? "--static-groups"
                       : p->true_sequential ? "--true-sequential" : p->resume ? "--resume" : NULL;
    PQ_FAIL_IF(flag && p->scales, PQ_ERR_ARG, "%s: --scales applies a finished calibration; it takes no calibration "
               "flags", flag);
    PQ_FAIL_IF(flag, PQ_ERR_ARG, "%s: only for %s, not --method %s", flag,
               p->calib.path || p->resume ? "a calibrated method (gptq, awq, smoothquant, fp8)" : "--method gptq",
               method);
    return PQ_OK;
}

// Flags of one method given to another.
static pq_status check_method_flags(const pq_quantize_params *p, const char *method, int gptq, pq_smooth_kind kind,
                                    int smooth) {
    pq_gptq_params g = pq_gptq_default_params();
    pq_smooth_params d = pq_smooth_default_params();
    const pq_smooth_params *sp = &p->smooth;
    const char *flag = gptq ? NULL
                       : p->act_order ? "--act-order" : p->static_groups ? "--static-groups"
                       : p->true_sequential ? "--true-sequential" : p->damp != g.damp ? "--damp"
                       : p->block_size != g.block_size ? "--block-size" : NULL;
    PQ_FAIL_IF(flag && (smooth || p->scales), PQ_ERR_ARG, "%s: only for --method gptq, not --method %s", flag, method);
    flag = kind != PQ_SMOOTH_SQ && sp->alpha != d.alpha ? "--alpha"
           : kind != PQ_SMOOTH_AWQ && (sp->grid != d.grid || sp->clip_grid != d.clip_grid) ? "--awq-grid/--awq-clip-grid"
           : kind == PQ_SMOOTH_NONE && sp->search_tokens != d.search_tokens ? "--search-tokens" : NULL;
    PQ_FAIL_IF(flag, PQ_ERR_ARG, "%s: not a flag of --method %s", flag, method);
    PQ_FAIL_IF(p->scales && (sp->alpha != d.alpha || sp->grid != d.grid || sp->clip_grid != d.clip_grid ||
                             sp->search_tokens != d.search_tokens),
               PQ_ERR_ARG, "--scales applies a finished calibration; its search flags were given to pq calibrate");
    return PQ_OK;
}

static pq_status check_calibrated(const pq_quantize_params *p, const pq_scheme *s, const char *method, int gptq) {
    PQ_FAIL_IF(gptq && pq_scheme_wformat(s) != PQ_W_QPACK, PQ_ERR_ARG,
               "--method %s --scheme %s: GPTQ writes the weight-only integer schemes (w4a16, w8a16)", method,
               pq_scheme_name(s->id));
    PQ_FAIL_IF(!p->calib.path, PQ_ERR_ARG, "--method %s%s needs calibration text: --calib FILE", method,
               pq_scheme_act_static(s) ? " with static activation scales" : "");
    PQ_FAIL_IF(p->calib.nsamples < 1, PQ_ERR_ARG, "--nsamples %d: need at least one calibration window",
               p->calib.nsamples);
    PQ_FAIL_IF(p->calib.seqlen < 2, PQ_ERR_ARG, "--seqlen %d: a calibration window needs at least 2 tokens",
               p->calib.seqlen);
    PQ_FAIL_IF(!(p->damp > 0 && p->damp <= PQ_GPTQ_DAMP_MAX), PQ_ERR_ARG, "--damp %g: not in (0, %g]", p->damp,
               PQ_GPTQ_DAMP_MAX);
    PQ_FAIL_IF(p->block_size < 1 || p->block_size > 65536, PQ_ERR_ARG, "--block-size %d: not in 1..65536",
               p->block_size);
    return PQ_OK;
}

static int method_index(const char *name) {
    for (int i = 0; i < NMETHODS; i++)
        if (strcmp(name, METHODS[i].name) == 0) return i;
    return -1;
}

// The method the parameters ask for: p->method, or with --scales the file's
// (which p->method, if given, must name).
static pq_status method_of(const pq_quantize_params *p, int *m) {
    const char *name = p->method ? p->method : "rtn";
    *m = method_index(name);
    PQ_FAIL_IF(*m < 0, PQ_ERR_ARG, "--method %s: not a method (rtn, gptq, awq, smoothquant, fp8)", name);
    if (!p->scales) return PQ_OK;
    pq_scales_file *f;
    PQ_TRY(pq_scales_open(p->scales, &f));
    const char *fm = pq_scales_meta_get(f, "pq.method");
    int k = fm ? method_index(fm) : -1;
    pq_status s = PQ_OK;
    if (k < 0 || !METHODS[k].smooth)
        s = PQ_FAIL(PQ_ERR_FORMAT, "%s: pq.method \"%s\" is not a method pq calibrate writes", p->scales,
                    fm ? fm : "(missing)");
    else if (p->method && k != *m)
        s = PQ_FAIL(PQ_ERR_ARG, "--method %s: %s was calibrated with --method %s", p->method, p->scales, fm);
    pq_scales_close(f);
    *m = k;
    return s;
}

pq_status pq_qrun_resolve(const pq_quantize_params *p, pq_qrun_resolved *o) {
    int m;
    PQ_TRY(method_of(p, &m));
    pq_scheme *s = &o->scheme;
    o->method = METHODS[m].name;
    PQ_FAIL_IF(p->fp8_tensor && p->group != PQ_GROUP_DEFAULT, PQ_ERR_ARG,
               "--fp8-scale tensor and --group exclude each other");
    PQ_TRY(pq_scheme_make(p->scheme ? p->scheme : METHODS[m].scheme, p->fp8_tensor ? PQ_GROUP_TENSOR : p->group,
                          p->sym, s));
    if (p->act_static) PQ_TRY(pq_scheme_static_act(s));
    if (p->bits) {
        PQ_FAIL_IF(p->bits < 2 || p->bits > 8, PQ_ERR_ARG, "--bits %d: not in 2..8", p->bits);
        PQ_FAIL_IF(pq_scheme_wformat(s) != PQ_W_QPACK, PQ_ERR_ARG,
                   "--bits %d: only the weight-only integer schemes (w4a16, w8a16) take another width", p->bits);
        s->bits = p->bits;
    }
    PQ_FAIL_IF(p->zstd_level < 0 || p->zstd_level > 22, PQ_ERR_ARG, "zstd level %d not in 1..22", p->zstd_level);
    PQ_FAIL_IF(!p->model || !p->out, PQ_ERR_ARG, "a model and an output directory are required");
    int gptq = !METHODS[m].smooth && METHODS[m].calibrated;
    o->kind = METHODS[m].kind;
    o->smooth = METHODS[m].smooth || pq_scheme_act_static(s); // rtn + static activations: calibrated scales
    o->calibrated = (METHODS[m].calibrated || o->smooth) && !p->scales;
    PQ_TRY(check_method_flags(p, o->method, gptq, o->kind, o->smooth));
    if (o->smooth) PQ_TRY(pq_smooth_check(o->kind, &p->smooth, s));
    if (o->calibrated) {
        PQ_TRY(check_calibrated(p, s, o->method, gptq));
        if (p->act_order && s->group > 0) s->actorder = p->static_groups ? PQ_ACTORDER_WEIGHT : PQ_ACTORDER_GROUP;
    } else {
        PQ_TRY(check_uncalibrated(p, o->method));
    }
    return PQ_OK;
}

pq_status pq_quantize_describe(const pq_quantize_params *p, char *buf, size_t cap) {
    pq_qrun_resolved o;
    PQ_TRY(pq_qrun_resolve(p, &o));
    char desc[64], cal[1400] = "", meth[200] = "";
    pq_scheme_describe(&o.scheme, desc, sizeof desc);
    if (o.calibrated && !o.smooth)
        snprintf(meth, sizeof meth, ", damp %g, block %d%s%s%s", p->damp, p->block_size,
                 p->act_order ? ", act-order" : "", p->static_groups ? ", static groups" : "",
                 p->true_sequential ? ", true-sequential" : "");
    if (o.calibrated && o.smooth) pq_smooth_describe(o.kind, &p->smooth, meth, sizeof meth);
    if (o.calibrated)
        snprintf(cal, sizeof cal, ", calibration %.1000s %d x %d tokens (%s, seed %llu)%s%s", p->calib.path,
                 p->calib.nsamples, p->calib.seqlen, pq_calib_mode_name(p->calib.mode),
                 (unsigned long long)p->calib.seed, meth, p->resume ? ", --resume" : "");
    if (p->scales) snprintf(cal, sizeof cal, ", scales %.1000s", p->scales);
    snprintf(buf, cap, "%s -> %s: %s %s (%s)%s%s%s%s", p->model, p->out, o.method, desc, pq_scheme_format(&o.scheme),
             cal, p->quantize_head ? ", lm_head too" : "", p->zstd_level > 0 ? ", + zstd" : "",
             p->force ? ", --force" : "");
    return PQ_OK;
}

// ---- the run -------------------------------------------------------------

typedef pq_quantize_run run;

void pq_qrun_note(pq_quantize_run *r, const char *fmt, ...) {
    if (!r->progress) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    pq_quantize_event e = {.kind = PQ_QUANTIZE_NOTE, .note = line};
    r->progress(r->ud, &e);
}

pq_dtype pq_qrun_scale_dtype(const pq_linear *L) {
    return L->dense_type == PQ_DENSE_F16 ? PQ_DT_F16 : L->dense_type == PQ_DENSE_BF16 ? PQ_DT_BF16 : PQ_DT_F32;
}

pq_status pq_qrun_record(pq_quantize_run *r, const pq_linear *L, json_t *entry) {
    PQ_FAIL_IF(!entry || json_array_append_new(r->layers, entry) != 0, PQ_ERR_NOMEM, "out of memory");
    double e = json_real_value(json_object_get(entry, "rel_error"));
    r->err_sum += e;
    r->err_max = e > r->err_max ? e : r->err_max;
    json_t *o = json_object_get(entry, "output_rel_error");
    if (o) {
        double v = json_real_value(o);
        r->out_sum += v;
        r->out_max = v > r->out_max ? v : r->out_max;
        r->n_out++;
    }
    r->n_quantized++;
    r->n_ragged += r->scheme.group > 0 && L->cols % r->scheme.group != 0;
    return PQ_OK;
}

// The source linear of a module, or NULL if it is not quantized:
// "model.layers.L.<slot>" always, "lm_head" with quantize_head.
static const pq_linear *quantized_linear(const run *r, const char *module) {
    if (strcmp(module, "lm_head") == 0) return r->p->quantize_head ? &r->m->lm_head : NULL;
    int l, n = 0;
    if (sscanf(module, "model.layers.%d.%n", &l, &n) != 1 || n == 0 || l < 0 || l >= r->m->cfg.n_layers) return NULL;
    for (int s = 0; s < PQ_NLINEAR; s++)
        if (strcmp(module + n, pq_linear_slot_name((pq_linear_slot)s)) == 0) return &r->m->layers[l].lin[s];
    return NULL;
}

// The module a tensor name belongs to ("a.b.weight_scale" -> "a.b") in out.
static void module_of(const char *name, char *out, size_t cap) {
    const char *dot = strrchr(name, '.');
    snprintf(out, cap, "%.*s", dot ? (int)(dot - name) : 0, name);
}

// Every source tensor: the quantized linears' weights become their packed
// tensors, everything else is declared as it is.
static pq_status declare_all(run *r) {
    const pq_st *st = r->m->st;
    char module[512];
    for (int i = 0; i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        module_of(t->name, module, sizeof module);
        const pq_linear *L = quantized_linear(r, module);
        if (L && strcmp(t->name + strlen(module), ".weight") == 0)
            PQ_TRY(pq_packed_declare(r->w, module, &r->scheme, L->rows, L->cols, pq_qrun_scale_dtype(L)));
        else
            PQ_TRY(pq_st_writer_declare(r->w, t->name, t->dtype, t->ndim, t->shape));
    }
    return PQ_OK;
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

// Copies every tensor that is not quantized (embeddings, norms, biases, an
// unquantized lm_head) as it is; a NaN or Inf in one is refused by name, as
// in a quantized weight, so a checkpoint never carries one.
static pq_status put_passthrough(run *r) {
    const pq_st *st = r->m->st;
    char module[512];
    for (int i = 0; i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        module_of(t->name, module, sizeof module);
        if (quantized_linear(r, module) && strcmp(t->name + strlen(module), ".weight") == 0) continue;
        if (pq_qrun_smooth_rewrites(r, t->name)) continue;
        int nan = 0;
        long long bad = first_nonfinite(t, &nan);
        PQ_FAIL_IF(bad >= 0, PQ_ERR_NUMERIC, "%s/%s: element %lld is %s (copied tensors must be finite too)",
                   r->p->model, t->name, bad, nan ? "NaN" : "Inf");
        PQ_TRY(pq_st_writer_put(r->w, t->name, t->data, t->nbytes));
    }
    return PQ_OK;
}

// Widens, quantizes and writes one linear; returns its relative error.
static pq_status quantize_one(run *r, const char *module, const pq_linear *L, double *rel_err) {
    PQ_FAIL_IF(L->fmt != PQ_W_DENSE, PQ_ERR_FORMAT, "%s: %s is not a dense weight", r->p->model, module);
    double t0 = pq_now();
    pq_linear_rows(L, 0, L->rows, r->buf);
    char name[600];
    snprintf(name, sizeof name, "%s/%s.weight", r->p->model, module);
    pq_qtensor q;
    PQ_TRY(pq_rtn_quantize(r->buf, L->rows, L->cols, &r->scheme, pq_qrun_scale_dtype(L), name, r->pool, &q, rel_err));
    r->t_quant += pq_now() - t0;
    pq_status s = pq_packed_put(r->w, module, &q);
    pq_qtensor_free(&q);
    PQ_TRY(s);
    return pq_qrun_record(r, L, json_pack("{s:s, s:f}", "name", module, "rel_error", *rel_err));
}

static pq_status quantize_all(run *r) {
    const pq_config *c = &r->m->cfg;
    char module[256];
    double e;
    for (int l = 0; l < c->n_layers && !r->calibrated && !r->smooth; l++) {
        double sum = 0;
        for (int s = 0; s < PQ_NLINEAR; s++) {
            snprintf(module, sizeof module, "model.layers.%d.%s", l, pq_linear_slot_name((pq_linear_slot)s));
            PQ_TRY(quantize_one(r, module, &r->m->layers[l].lin[s], &e));
            sum += e;
        }
        pq_quantize_event ev = {.kind = PQ_QUANTIZE_LAYER, .done = l + 1, .total = c->n_layers,
                                .layer_rel_err = sum / PQ_NLINEAR, .layer_out_err = -1};
        if (r->progress) r->progress(r->ud, &ev);
    }
    if (r->calibrated) PQ_TRY(pq_qrun_calib_blocks(r));
    else if (r->smooth) PQ_TRY(pq_qrun_scales_blocks(r));
    // lm_head: RTN for every method (its input statistics are not gathered)
    if (r->p->quantize_head) PQ_TRY(quantize_one(r, "lm_head", &r->m->lm_head, &e));
    return PQ_OK;
}

static pq_status hash_source(run *r) {
    double t0 = pq_now();
    PQ_TRY(pq_st_sha256(r->m->st, r->sha));
    r->t_hash = pq_now() - t0;
    return PQ_OK;
}

static pq_status set_metadata(run *r) {
    char desc[64];
    pq_scheme_describe(&r->scheme, desc, sizeof desc);
    PQ_TRY(pq_st_writer_set_metadata(r->w, "format", "pt")); // transformers refuses a file without it
    PQ_TRY(pq_st_writer_set_metadata(r->w, "pq.version", PQ_VERSION));
    PQ_TRY(pq_st_writer_set_metadata(r->w, "pq.method", r->method));
    PQ_TRY(pq_st_writer_set_metadata(r->w, "pq.scheme", desc));
    PQ_TRY(pq_st_writer_set_metadata(r->w, "pq.source", r->p->model));
    if (r->calibrated) {
        char n[64];
        PQ_TRY(pq_st_writer_set_metadata(r->w, "pq.calibration_sha256", r->calib.sha256));
        pq_calib_describe(r->calib.n, r->calib.len, r->p->calib.seed, r->p->calib.mode, n, sizeof n);
        PQ_TRY(pq_st_writer_set_metadata(r->w, "pq.calibration", n));
    }
    if (r->scales) { // what the inline run writes: the same file
        const char *keys[] = {"pq.calibration_sha256", "pq.calibration"};
        for (int i = 0; i < 2; i++) {
            const char *v = pq_scales_meta_get(r->scales, keys[i]);
            PQ_FAIL_IF(!v, PQ_ERR_FORMAT, "%s: __metadata__ lacks %s", r->p->scales, keys[i]);
            PQ_TRY(pq_st_writer_set_metadata(r->w, keys[i], v));
        }
    }
    return pq_st_writer_set_metadata(r->w, "pq.source_sha256", r->sha);
}

// config.json, the tokenizer and other side files into the new directory.
static pq_status write_side_files(run *r) {
    char src[PATH_CAP], dst[PATH_CAP], *text = NULL, *cfg = NULL;
    size_t len;
    PQ_TRY(pq_path_join(src, sizeof src, r->p->model, "config.json"));
    PQ_TRY(pq_outdir_path(&r->dir, "config.json", dst, sizeof dst));
    PQ_TRY(pq_file_read(src, (size_t)64 << 20, &text, &len));
    pq_status s = pq_packed_config_json(text, len, src, &r->scheme, r->p->quantize_head, &cfg);
    free(text);
    PQ_TRY(s);
    s = pq_file_write_atomic(dst, cfg, strlen(cfg));
    free(cfg);
    PQ_TRY(s);
    for (size_t i = 0; i < sizeof SIDE_FILES / sizeof SIDE_FILES[0]; i++) {
        PQ_TRY(pq_path_join(src, sizeof src, r->p->model, SIDE_FILES[i]));
        if (!pq_path_exists(src)) continue; // present but not a regular file: the copy refuses it by name
        PQ_TRY(pq_outdir_path(&r->dir, SIDE_FILES[i], dst, sizeof dst));
        PQ_TRY(pq_file_copy_atomic(src, dst));
    }
    return PQ_OK;
}

static unsigned long long file_bytes(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (unsigned long long)sb.st_size : 0;
}

// Measures the output: bytes of the quantized linears' tensors, file sizes.
static pq_status measure(run *r, pq_quantize_result *res) {
    char path[PATH_CAP], module[512];
    PQ_TRY(pq_outdir_path(&r->dir, "model.safetensors", path, sizeof path));
    res->out_bytes = file_bytes(path);
    pq_st *st;
    PQ_TRY(pq_st_open(path, &st));
    for (int i = 0; i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        module_of(t->name, module, sizeof module);
        // weight, weight_packed, weight_scale, ... (not a q/k/v bias)
        if (quantized_linear(r, module) && strncmp(t->name + strlen(module), ".weight", 7) == 0)
            res->quant_bytes += (long long)t->nbytes;
    }
    pq_st_close(st);
    res->n_weights = 0;
    for (int l = 0; l < r->m->cfg.n_layers; l++)
        for (int s = 0; s < PQ_NLINEAR; s++)
            res->n_weights += (long long)r->m->layers[l].lin[s].rows * r->m->layers[l].lin[s].cols;
    if (r->p->quantize_head) res->n_weights += (long long)r->m->lm_head.rows * r->m->lm_head.cols;
    res->bits_per_weight = res->n_weights ? 8.0 * (double)res->quant_bytes / (double)res->n_weights : 0;
    if (r->p->zstd_level > 0) {
        PQ_TRY(pq_outdir_path(&r->dir, "model.safetensors.zst", path, sizeof path));
        res->zst_bytes = file_bytes(path);
    }
    return PQ_OK;
}

static pq_status write_provenance(run *r, const pq_quantize_result *res) {
    const pq_scheme *s = &r->scheme;
    static const char *const ACT[] = {"none (weight only)", "int8 dynamic per token", "fp8 e4m3 dynamic per token",
                                      "int8 static per tensor", "fp8 e4m3 static per tensor"};
    json_t *group = s->group > 0 ? json_integer(s->group) : json_string(s->group ? "tensor" : "channel");
    json_t *doc = json_pack(
        "{s:s, s:s, s:s, s:o, s:b, s:s, s:s, s:s, s:b, s:{s:s, s:s, s:i}, s:f, s:I, s:I, s:i, s:i, s:{s:f, s:f}, "
        "s:{s:I, s:I}, s:O, s:{s:f, s:f, s:f}, s:i}",
        "pq_version", PQ_VERSION, "method", r->method, "scheme", pq_scheme_name(s->id), "group", group,
        "symmetric", s->sym, "activations", ACT[s->act], "format", res->format, "scale_dtype",
        pq_dtype_name(pq_qrun_scale_dtype(&r->m->layers[0].lin[0])), "quantize_head", r->p->quantize_head,
        "source", "path", r->p->model, "sha256", r->sha, "files", pq_st_file_count(r->m->st),
        "bits_per_weight", res->bits_per_weight, "quantized_weights", (json_int_t)res->n_weights,
        "quantized_bytes", (json_int_t)res->quant_bytes, "quantized_linears", res->n_quantized,
        "ragged_linears", res->n_ragged,
        "rel_error", "mean", res->mean_rel_err, "max", res->max_rel_err,
        "output_bytes", "model.safetensors", (json_int_t)res->out_bytes, "model.safetensors.zst",
        (json_int_t)res->zst_bytes, "layers", r->layers,
        "seconds", "hash", r->t_hash, "quantize", r->t_quant, "total", res->seconds,
        "threads", pq_pool_size(r->pool));
    PQ_FAIL_IF(!doc, PQ_ERR_NOMEM, "out of memory");
    if (r->scales) {
        json_t *sc = json_pack("{s:s, s:s?, s:s?, s:s?, s:o}", "file", r->p->scales, "calibration_sha256",
                               pq_scales_meta_get(r->scales, "pq.calibration_sha256"), "calibration",
                               pq_scales_meta_get(r->scales, "pq.calibration"), "params",
                               pq_scales_meta_get(r->scales, "pq.params"), "pq_version",
                               json_string(pq_scales_meta_get(r->scales, "pq.version")));
        if (!sc || json_object_set_new(doc, "scales", sc) != 0) {
            json_decref(doc);
            return PQ_FAIL(PQ_ERR_NOMEM, "out of memory");
        }
    }
    if (r->calibrated) {
        json_t *cal = pq_qrun_calib_provenance(r);
        int bad = !cal || json_object_update(doc, cal) != 0 ||
                  json_object_set_new(doc, "output_rel_error", json_pack("{s:f, s:f}", "mean", res->mean_out_err,
                                                                         "max", res->max_out_err)) != 0;
        json_decref(cal);
        if (bad) {
            json_decref(doc);
            return PQ_FAIL(PQ_ERR_NOMEM, "out of memory");
        }
    }
    char *text = json_dumps(doc, JSON_INDENT(2));
    json_decref(doc);
    PQ_FAIL_IF(!text, PQ_ERR_NOMEM, "out of memory");
    char path[PATH_CAP];
    pq_status st = pq_outdir_path(&r->dir, "pq.json", path, sizeof path);
    if (st == PQ_OK) st = pq_file_write_atomic(path, text, strlen(text));
    free(text);
    return st;
}

// The source: an unquantized checkpoint whose head can be quantized if asked.
static pq_status open_source(run *r) {
    PQ_TRY(pq_model_open(r->p->model, &r->m));
    PQ_FAIL_IF(r->m->quant.quantized, PQ_ERR_FORMAT, "%s: already quantized (compressed-tensors %s); quantize an "
               "FP16/BF16/F32 checkpoint", r->p->model, r->m->quant.format);
    PQ_FAIL_IF(r->p->quantize_head && r->m->cfg.tie_embeddings, PQ_ERR_ARG,
               "--quantize-head: %s ties lm_head to the embeddings (tie_word_embeddings), which stay FP16",
               r->p->model);
    size_t most = 0;
    for (int l = 0; l < r->m->cfg.n_layers; l++)
        for (int s = 0; s < PQ_NLINEAR; s++) {
            const pq_linear *L = &r->m->layers[l].lin[s];
            most = (size_t)L->rows * L->cols > most ? (size_t)L->rows * L->cols : most;
        }
    if (r->p->quantize_head) {
        size_t n = (size_t)r->m->lm_head.rows * r->m->lm_head.cols;
        most = n > most ? n : most;
    }
    r->buf = pq_alloc(most * sizeof(float));
    PQ_FAIL_IF(!r->buf, PQ_ERR_NOMEM, "out of memory for a %zu-weight matrix", most);
    return PQ_OK;
}

// --scales: the file, checked against the source and scheme.
static pq_status open_scales(run *r) {
    if (!r->p->scales) return PQ_OK;
    PQ_TRY(pq_scales_open(r->p->scales, &r->scales));
    return pq_scales_check(r->scales, r->m, r->sha, &r->scheme);
}

// OUT's temporary directory: a new one, or (calibrated) possibly an interrupted run's.
static pq_status open_outdir(run *r) {
    if (r->calibrated) return pq_qrun_calib_outdir(r);
    return pq_outdir_begin(&r->dir, r->p->out, r->p->force);
}

pq_status pq_quantize(const pq_quantize_params *p, pq_quantize_progress progress, void *ud,
                      pq_quantize_result *out) {
    memset(out, 0, sizeof *out);
    double t0 = pq_now();
    run r = {.p = p, .progress = progress, .ud = ud, .lock_fd = -1};
    char path[PATH_CAP];
    pq_status s;
    pq_qrun_resolved o;
    PQ_TRY(pq_qrun_resolve(p, &o));
    r.scheme = o.scheme, r.method = o.method, r.calibrated = o.calibrated, r.smooth = o.smooth;
    r.sp = p->smooth;
    r.sp.kind = o.kind;
    r.layers = json_array();
    PQ_CHECK_GOTO(!r.layers, s, PQ_ERR_NOMEM, "out of memory");
    PQ_TRY_GOTO(s, open_source(&r));
    PQ_TRY_GOTO(s, pq_pool_create(p->nthreads, &r.pool));
    PQ_TRY_GOTO(s, hash_source(&r));
    PQ_TRY_GOTO(s, open_scales(&r));
    if (r.calibrated) PQ_TRY_GOTO(s, pq_qrun_calib_prepare(&r));
    PQ_TRY_GOTO(s, open_outdir(&r));
    PQ_TRY_GOTO(s, pq_outdir_path(&r.dir, "model.safetensors", path, sizeof path));
    PQ_TRY_GOTO(s, pq_st_writer_create(path, &r.w));
    PQ_TRY_GOTO(s, set_metadata(&r));
    PQ_TRY_GOTO(s, declare_all(&r));
    PQ_TRY_GOTO(s, r.adopted ? pq_st_writer_resume(r.w) : pq_st_writer_begin(r.w));
    PQ_TRY_GOTO(s, put_passthrough(&r));
    if (r.calibrated) PQ_TRY_GOTO(s, pq_qrun_calib_started(&r));
    PQ_TRY_GOTO(s, quantize_all(&r));
    PQ_TRY_GOTO(s, pq_st_writer_commit(r.w, p->zstd_level));
    PQ_TRY_GOTO(s, write_side_files(&r));
    pq_scheme_describe(&r.scheme, out->scheme, sizeof out->scheme);
    snprintf(out->method, sizeof out->method, "%s", r.method);
    snprintf(out->format, sizeof out->format, "%s", pq_scheme_format(&r.scheme));
    snprintf(out->source_sha256, sizeof out->source_sha256, "%s", r.sha);
    out->n_quantized = r.n_quantized;
    out->n_ragged = r.n_ragged;
    out->mean_rel_err = r.n_quantized ? r.err_sum / r.n_quantized : 0;
    out->max_rel_err = r.err_max;
    if (r.calibrated) {
        out->calibrated = 1;
        out->mean_out_err = r.n_out ? r.out_sum / r.n_out : 0;
        out->max_out_err = r.out_max;
        out->calib_windows = r.calib.n;
        out->calib_len = r.calib.len;
        out->resumed_blocks = r.adopted ? r.blocks_done : 0;
        out->n_damp_raised = r.n_damp_raised;
        out->mem_estimate = r.mem.total;
        out->peak_rss = r.mem.peak_rss;
    }
    PQ_TRY_GOTO(s, measure(&r, out));
    out->seconds = pq_now() - t0;
    PQ_TRY_GOTO(s, write_provenance(&r, out));
    if (r.calibrated) PQ_TRY_GOTO(s, pq_qrun_calib_finish(&r));
    PQ_TRY_GOTO(s, pq_outdir_commit(&r.dir));
done:
    if (s != PQ_OK && r.calibrated) s = pq_qrun_calib_failed(&r, s);
    pq_st_writer_free(r.w);
    pq_outdir_abort(&r.dir);
    pq_qrun_calib_free(&r);
    pq_scales_close(r.scales);
    pq_pool_free(r.pool);
    pq_free(r.buf);
    json_decref(r.layers);
    pq_model_free(r.m);
    if (s != PQ_OK) {
        pq_quantize_result zero = {0};
        *out = zero;
    }
    return s;
}
