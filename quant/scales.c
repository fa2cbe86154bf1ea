// quant/scales.c — the scales file (see scales.h).
#include "quant/scales.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sys.h"
#include "common/version.h"
#include "formats/safetensors.h"
#include "quant/awq.h"
#include "quant/rtn.h"

#define NAME_CAP 256

void pq_scales_fingerprint(const pq_model *m, char *buf, size_t cap) {
    const pq_config *c = &m->cfg;
    snprintf(buf, cap, "arch=%s hidden=%d intermediate=%d layers=%d heads=%d kv_heads=%d head_dim=%d vocab=%d "
             "qkv_bias=%d dtype=%s", c->arch_name, c->hidden, c->intermediate, c->n_layers, c->n_heads,
             c->n_kv_heads, c->head_dim, c->vocab, c->qkv_bias, pq_dtype_name(pq_model_dtype(m)));
}

// "q/k/v" -> "q_k_v": a group's name in tensor names.
static void group_tag(int g, char *out) {
    snprintf(out, 16, "%s", PQ_INPUT_GROUPS[g].name);
    for (char *p = out; *p; p++) *p = *p == '/' ? '_' : *p;
}

static void scale_name(char *out, int l, int g, const char *what) {
    char tag[16];
    group_tag(g, tag);
    snprintf(out, NAME_CAP, "model.layers.%d.%s.%s", l, what, tag);
}

static void clip_name(char *out, int l, int slot) {
    snprintf(out, NAME_CAP, "model.layers.%d.%s.clip", l, pq_linear_slot_name((pq_linear_slot)slot));
}

static void alpha_name(char *out, int l) { snprintf(out, NAME_CAP, "model.layers.%d.alpha", l); }

// ---- writing ----------------------------------------------------------------

struct pq_scales_writer {
    pq_st_writer *w;
    const pq_model *m;
    pq_smooth_kind kind;
    pq_smooth_params p;
    pq_scheme s;
};

// Calls fn for every tensor a result has: its name, shape and (when sc is
// given) its data.
typedef pq_status (*tensor_fn)(pq_scales_writer *w, const char *name, int ndim, const int64_t *shape, const float *data);

static pq_status each_tensor(pq_scales_writer *w, int l, const pq_block_scales *sc, tensor_fn fn) {
    const pq_config *c = &w->m->cfg;
    char name[NAME_CAP];
    for (int g = 0; g < PQ_NGROUPS && pq_smooth_has_scales(w->kind); g++) {
        int64_t n = pq_input_group_cols(c, g);
        if (!pq_fold_usable(c, g)) continue;
        scale_name(name, l, g, "smooth");
        PQ_TRY(fn(w, name, 1, &n, sc ? sc->scale[g] : NULL));
    }
    if (pq_smooth_has_scales(w->kind)) {
        int64_t four = PQ_NGROUPS;
        alpha_name(name, l);
        PQ_TRY(fn(w, name, 1, &four, sc ? sc->alpha : NULL));
    }
    for (int k = 0; k < PQ_NLINEAR; k++) {
        if (!pq_smooth_has_clip(w->kind, &w->p, (pq_linear_slot)k)) continue;
        const pq_linear *L = pq_model_linear(w->m, l, (pq_linear_slot)k);
        int64_t shape[2] = {L->rows, pq_awq_ngroups(&w->s, L->cols)};
        clip_name(name, l, k);
        PQ_TRY(fn(w, name, 2, shape, sc ? sc->clip[k] : NULL));
    }
    for (int g = 0; g < PQ_NGROUPS && pq_scheme_act_static(&w->s); g++) {
        int64_t one = 1;
        scale_name(name, l, g, "act_scale");
        PQ_TRY(fn(w, name, 1, &one, sc ? &sc->act_scale[g] : NULL));
    }
    return PQ_OK;
}

static pq_status declare(pq_scales_writer *w, const char *name, int ndim, const int64_t *shape, const float *data) {
    return pq_st_writer_declare(w->w, name, PQ_DT_F32, ndim, shape);
}

static pq_status put(pq_scales_writer *w, const char *name, int ndim, const int64_t *shape, const float *data) {
    size_t n = (size_t)shape[0] * (ndim > 1 ? (size_t)shape[1] : 1);
    return pq_st_writer_put(w->w, name, data, n * sizeof(float));
}

static pq_status set_meta(pq_scales_writer *w, const pq_model *m, const pq_scales_meta *meta) {
    char fp[512], num[3][32];
    pq_scales_fingerprint(m, fp, sizeof fp);
    snprintf(num[0], sizeof num[0], "%d", meta->nsamples);
    snprintf(num[1], sizeof num[1], "%d", meta->seqlen);
    snprintf(num[2], sizeof num[2], "%llu", meta->seed);
    const char *kv[][2] = {
        {"pq.kind", "scales"}, {"pq.version", PQ_VERSION}, {"pq.method", meta->method}, {"pq.scheme", meta->scheme},
        {"pq.params", meta->params}, {"pq.model", fp}, {"pq.source", meta->source},
        {"pq.source_sha256", meta->source_sha256}, {"pq.calibration_sha256", meta->calib_sha256},
        {"pq.calibration", meta->calib_desc}, {"pq.nsamples", num[0]}, {"pq.seqlen", num[1]}, {"pq.seed", num[2]},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) PQ_TRY(pq_st_writer_set_metadata(w->w, kv[i][0], kv[i][1]));
    return PQ_OK;
}

pq_status pq_scales_writer_create(const char *path, const pq_model *m, pq_smooth_kind k, const pq_smooth_params *p,
                                  const pq_scheme *s, const pq_scales_meta *meta, pq_scales_writer **out) {
    *out = NULL;
    pq_scales_writer *w = calloc(1, sizeof *w);
    PQ_FAIL_IF(!w, PQ_ERR_NOMEM, "out of memory");
    *w = (pq_scales_writer){.m = m, .kind = k, .p = *p, .s = *s};
    pq_status st = pq_st_writer_create(path, &w->w);
    if (st == PQ_OK) st = set_meta(w, m, meta);
    for (int l = 0; l < m->cfg.n_layers && st == PQ_OK; l++) st = each_tensor(w, l, NULL, declare);
    if (st == PQ_OK) st = pq_st_writer_begin(w->w);
    if (st != PQ_OK) {
        pq_scales_writer_free(w);
        return st;
    }
    *out = w;
    return PQ_OK;
}

pq_status pq_scales_writer_put(pq_scales_writer *w, int layer, const pq_block_scales *sc) {
    return each_tensor(w, layer, sc, put);
}

pq_status pq_scales_writer_commit(pq_scales_writer *w) { return pq_st_writer_commit(w->w, 0); }

void pq_scales_writer_free(pq_scales_writer *w) {
    if (!w) return;
    pq_st_writer_free(w->w);
    free(w);
}

// ---- reading ----------------------------------------------------------------

struct pq_scales_file {
    char path[1024];
    pq_st *st;
    float *buf;      // the current block's arrays
    size_t cap;      // floats in buf
};

// Takes st (an opened safetensors image) as the scales file `path`.
static pq_status adopt(pq_st *st, const char *path, pq_scales_file **out) {
    const char *kind = pq_st_metadata(st, "pq.kind");
    if (!kind || strcmp(kind, "scales") != 0) {
        pq_st_close(st);
        return PQ_FAIL(PQ_ERR_FORMAT, "%s: not a pq scales file (its __metadata__ has no \"pq.kind\": \"scales\"; "
                       "pq calibrate writes them)", path);
    }
    pq_scales_file *f = calloc(1, sizeof *f);
    if (!f) {
        pq_st_close(st);
        return PQ_FAIL(PQ_ERR_NOMEM, "out of memory");
    }
    snprintf(f->path, sizeof f->path, "%s", path);
    f->st = st;
    *out = f;
    return PQ_OK;
}

pq_status pq_scales_open(const char *path, pq_scales_file **out) {
    *out = NULL;
    pq_st *st;
    PQ_TRY(pq_st_open(path, &st));
    return adopt(st, path, out);
}

pq_status pq_scales_open_buffer(const void *data, size_t len, const char *name, pq_scales_file **out) {
    *out = NULL;
    pq_st *st;
    PQ_TRY(pq_st_open_buffer(data, len, name, &st));
    return adopt(st, name, out);
}

void pq_scales_close(pq_scales_file *f) {
    if (!f) return;
    pq_st_close(f->st);
    pq_free(f->buf);
    free(f);
}

const char *pq_scales_meta_get(const pq_scales_file *f, const char *key) { return pq_st_metadata(f->st, key); }

// The first "key=value" field in which two fingerprints differ, into a / b.
static void first_difference(const char *x, const char *y, char *a, char *b, size_t cap) {
    while (*x || *y) {
        size_t nx = strcspn(x, " "), ny = strcspn(y, " ");
        if (nx != ny || strncmp(x, y, nx) != 0) {
            snprintf(a, cap, "%.*s", (int)nx, x);
            snprintf(b, cap, "%.*s", (int)ny, y);
            return;
        }
        x += nx + (x[nx] == ' '), y += ny + (y[ny] == ' ');
    }
    a[0] = b[0] = '\0';
}

pq_status pq_scales_check(const pq_scales_file *f, const pq_model *m, const char *source_sha256, const pq_scheme *s) {
    char fp[512], desc[64], a[128], b[128];
    pq_scales_fingerprint(m, fp, sizeof fp);
    const char *file_fp = pq_scales_meta_get(f, "pq.model"), *sha = pq_scales_meta_get(f, "pq.source_sha256"),
               *scheme = pq_scales_meta_get(f, "pq.scheme");
    PQ_FAIL_IF(!file_fp || !sha || !scheme, PQ_ERR_FORMAT, "%s: __metadata__ lacks pq.model, pq.source_sha256 or "
               "pq.scheme", f->path);
    first_difference(file_fp, fp, a, b, sizeof a);
    PQ_FAIL_IF(strcmp(file_fp, fp) != 0, PQ_ERR_ARG, "%s: calibrated for another model: %s there, %s in %s", f->path,
               a, b, m->dir);
    PQ_FAIL_IF(strcmp(sha, source_sha256) != 0, PQ_ERR_ARG, "%s: calibrated for other weights of the same shapes: "
               "source sha256 %.16s... there, %.16s... in %s", f->path, sha, source_sha256, m->dir);
    pq_scheme_describe(s, desc, sizeof desc);
    PQ_FAIL_IF(strcmp(scheme, desc) != 0, PQ_ERR_ARG, "%s: searched for scheme %s, this run quantizes to %s", f->path,
               scheme, desc);
    return PQ_OK;
}

// Tensor `name` [n0(, n1)] F32 into dst, each element checked by `ok`.
static pq_status read_f32(pq_scales_file *f, const char *name, int ndim, int64_t n0, int64_t n1, float *dst,
                          int (*ok)(float), const char *want) {
    int64_t shape[2] = {n0, n1};
    const pq_tensor *t;
    PQ_TRY(pq_st_expect(f->st, name, PQ_DT_F32, ndim, shape, &t));
    memcpy(dst, t->data, t->nbytes);
    for (int64_t i = 0; i < t->numel; i++)
        PQ_FAIL_IF(!ok(dst[i]), PQ_ERR_FORMAT, "%s: tensor '%s' element %lld is %g; expected %s", f->path, name,
                   (long long)i, (double)dst[i], want);
    return PQ_OK;
}

static int positive(float v) { return isfinite(v) && v > 0; }
static int nonneg(float v) { return isfinite(v) && v >= 0; }
static int any_alpha(float v) { return v == -1 || (v >= 0 && v <= 1); }

pq_status pq_scales_read_block(pq_scales_file *f, const pq_model *m, pq_smooth_kind k, const pq_scheme *s, int layer,
                               pq_block_scales *sc) {
    const pq_config *c = &m->cfg;
    const pq_layer *L = &m->layers[layer];
    size_t need = PQ_NGROUPS;
    for (int g = 0; g < PQ_NGROUPS; g++) need += (size_t)pq_input_group_cols(c, g);
    for (int i = 0; i < PQ_NLINEAR; i++) need += (size_t)L->lin[i].rows * pq_awq_ngroups(s, L->lin[i].cols);
    if (need > f->cap) {
        pq_free(f->buf);
        f->buf = pq_alloc(need * sizeof(float));
        f->cap = f->buf ? need : 0;
        PQ_FAIL_IF(!f->buf, PQ_ERR_NOMEM, "%s: out of memory", f->path);
    }
    memset(sc, 0, sizeof *sc);
    float *p = f->buf;
    char name[NAME_CAP];
    for (int g = 0; g < PQ_NGROUPS; g++) sc->alpha[g] = -1;
    for (int g = 0; g < PQ_NGROUPS && pq_smooth_has_scales(k); g++) {
        int n = pq_input_group_cols(c, g);
        if (!pq_fold_usable(c, g)) continue;
        scale_name(name, layer, g, "smooth");
        PQ_TRY(read_f32(f, name, 1, n, 0, p, positive, "a finite scale > 0"));
        sc->scale[g] = p, p += n;
    }
    if (pq_smooth_has_scales(k)) {
        alpha_name(name, layer);
        PQ_TRY(read_f32(f, name, 1, PQ_NGROUPS, 0, sc->alpha, any_alpha, "an alpha in [0, 1]"));
    }
    for (int i = 0; i < PQ_NLINEAR && k == PQ_SMOOTH_AWQ; i++) {
        int ng = pq_awq_ngroups(s, L->lin[i].cols);
        clip_name(name, layer, i);
        if (!pq_st_find(f->st, name)) continue; // not clipped (--awq-clip-grid 0, or q/k)
        PQ_TRY(read_f32(f, name, 2, L->lin[i].rows, ng, p, nonneg, "a finite clip value >= 0"));
        sc->clip[i] = p, p += (size_t)L->lin[i].rows * ng;
    }
    pq_dtype dt = pq_model_dtype(m);
    for (int g = 0; g < PQ_NGROUPS && pq_scheme_act_static(s); g++) {
        scale_name(name, layer, g, "act_scale");
        PQ_TRY(read_f32(f, name, 1, 1, 0, &sc->act_scale[g], positive, "a finite scale > 0"));
        PQ_FAIL_IF(pq_round_to_dtype(sc->act_scale[g], dt) != sc->act_scale[g], PQ_ERR_FORMAT,
                   "%s: tensor '%s' = %g is not exact in %s, the model's dtype", f->path, name,
                   (double)sc->act_scale[g], pq_dtype_name(dt));
    }
    return PQ_OK;
}
