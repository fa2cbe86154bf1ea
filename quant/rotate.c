// quant/rotate.c — the rotated model (see rotate.h).
#include "quant/rotate.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "common/sys.h"
#include "formats/fileio.h"
#include "formats/gguf_hf.h"
#include "quant/hadamard.h"

#define CHUNK 64 // rows per parallel task

// What a source tensor becomes.
typedef enum { T_COPY, T_EMBED, T_HEAD, T_ONES, T_LINEAR, T_VBIAS, T_OUTBIAS } tkind;

typedef struct {
    const pq_model *src;
    const pq_rotate_params *p;
    pq_rot q, h;          // the residual rotation (order hidden), the per-head one (order head_dim)
    double *ws;           // per thread: 2 x max(hidden, head_dim) doubles
    int wsn;
    int untie;
} rot;

// ---- parallel row transforms -------------------------------------------------

typedef struct {
    rot *r;
    const pq_rot *t;
    double *x;
    long long rows;
} apply_job;

static void apply_chunk(void *ctx, int i, int tid) {
    apply_job *j = ctx;
    long long r0 = (long long)i * CHUNK, n = j->rows - r0 < CHUNK ? j->rows - r0 : CHUNK;
    pq_rot_apply(j->t, j->x + r0 * j->t->n, (int)n, j->r->ws + (size_t)tid * j->r->wsn);
}

// x[rows][t->n] <- x Q_t, rows in parallel.
static void apply_rows(rot *r, const pq_rot *t, double *x, long long rows) {
    apply_job j = {r, t, x, rows};
    pq_pool_for(r->p->pool, (int)((rows + CHUNK - 1) / CHUNK), apply_chunk, &j);
}

// out[cols][rows] = x[rows][cols]^T
static void transpose(const double *x, int rows, int cols, double *out) {
    for (int i = 0; i < rows; i++)
        for (int k = 0; k < cols; k++) out[(size_t)k * rows + i] = x[(size_t)i * cols + k];
}

// x[rows][cols] <- Q_t^T x (t of order rows): every column as a row vector times Q_t.
static pq_status apply_columns(rot *r, const pq_rot *t, double *x, int rows, int cols, int segs) {
    double *tmp = pq_alloc((size_t)rows * cols * sizeof(double));
    PQ_FAIL_IF(!tmp, PQ_ERR_NOMEM, "out of memory rotating a %d x %d matrix", rows, cols);
    transpose(x, rows, cols, tmp);
    apply_rows(r, t, tmp, (long long)cols * segs);
    transpose(tmp, cols, rows, x);
    pq_free(tmp);
    return PQ_OK;
}

// ---- values in and out ----------------------------------------------------------

// Rows r0..r0+n of a dense linear as doubles.
static pq_status widen_rows(const pq_linear *L, int r0, int n, double *out) {
    float *f = pq_alloc((size_t)n * L->cols * sizeof(float));
    PQ_FAIL_IF(!f, PQ_ERR_NOMEM, "out of memory");
    pq_linear_rows(L, r0, n, f);
    for (size_t i = 0; i < (size_t)n * L->cols; i++) out[i] = f[i];
    pq_free(f);
    return PQ_OK;
}

// A 1-D float tensor as doubles.
static pq_status widen_vector(const pq_tensor *t, double *out) {
    pq_dense_type dt = t->dtype == PQ_DT_F16 ? PQ_DENSE_F16 : t->dtype == PQ_DT_BF16 ? PQ_DENSE_BF16 : PQ_DENSE_F32;
    float *f = pq_alloc((size_t)t->numel * sizeof(float));
    PQ_FAIL_IF(!f, PQ_ERR_NOMEM, "out of memory");
    pq_dense_rows_ref(dt, t->data, (int)t->numel, 0, 1, f);
    for (int64_t i = 0; i < t->numel; i++) out[i] = f[i];
    pq_free(f);
    return PQ_OK;
}

// x[n] rounded to dt (F16, BF16, F32) into dst; a value that is not finite
// there is PQ_ERR_NUMERIC naming the tensor and the element.
static pq_status store(const double *x, size_t n, pq_dtype dt, void *dst, const char *name, size_t first) {
    for (size_t i = 0; i < n; i++) {
        float f = (float)x[i], back = f;
        if (dt == PQ_DT_F16) {
            uint16_t h = pq_f32_to_fp16(f);
            memcpy((uint16_t *)dst + i, &h, 2);
            back = pq_fp16_to_f32(h);
        } else if (dt == PQ_DT_BF16) {
            uint16_t h = pq_f32_to_bf16(f);
            memcpy((uint16_t *)dst + i, &h, 2);
            back = pq_bf16_to_f32(h);
        } else {
            memcpy((float *)dst + i, &f, 4);
        }
        PQ_FAIL_IF(!isfinite(back), PQ_ERR_NUMERIC, "rotating %s: element %zu (%g) is not finite in %s", name,
                   first + i, x[i], pq_dtype_name(dt));
    }
    return PQ_OK;
}

// ---- the tensors ------------------------------------------------------------------

// The embedding, or (g the final norm) the lm_head from `from`: row chunks of x Q.
static pq_status rotate_vocab(rot *r, const pq_linear *from, const float *g, pq_dtype dt, void *dst, const char *name) {
    int n = r->q.n, rows = 1024;
    double *x = pq_alloc((size_t)rows * n * sizeof(double));
    PQ_FAIL_IF(!x, PQ_ERR_NOMEM, "out of memory rotating %s", name);
    pq_status s = PQ_OK;
    for (int r0 = 0; r0 < from->rows && s == PQ_OK; r0 += rows) {
        int k = from->rows - r0 < rows ? from->rows - r0 : rows;
        s = widen_rows(from, r0, k, x);
        if (s != PQ_OK) break;
        for (size_t i = 0; g && i < (size_t)k * n; i++) x[i] *= g[i % n];
        apply_rows(r, &r->q, x, k);
        s = store(x, (size_t)k * n, dt, (char *)dst + (size_t)r0 * n * pq_dtype_size(dt), name, (size_t)r0 * n);
    }
    pq_free(x);
    return s;
}

// Decoder linear `slot` of layer l, rotated as rotate.h says.
static pq_status rotate_linear(rot *r, int l, pq_linear_slot slot, pq_dtype dt, void *dst, const char *name) {
    const pq_config *c = &r->src->cfg;
    const pq_layer *L = &r->src->layers[l];
    const pq_linear *W = &L->lin[slot];
    double *x = pq_alloc((size_t)W->rows * W->cols * sizeof(double));
    PQ_FAIL_IF(!x, PQ_ERR_NOMEM, "out of memory rotating %s", name);
    pq_status s = widen_rows(W, 0, W->rows, x);
    if (s == PQ_OK && slot != PQ_O && slot != PQ_DOWN) { // reads the stream: W diag(g) Q
        const float *g = slot <= PQ_V ? L->attn_norm : L->mlp_norm;
        for (size_t i = 0; i < (size_t)W->rows * W->cols; i++) x[i] *= g[i % W->cols];
        apply_rows(r, &r->q, x, W->rows);
        if (slot == PQ_V) s = apply_columns(r, &r->h, x, W->rows, W->cols, c->n_kv_heads); // blockdiag(H)^T W
    } else if (s == PQ_OK) { // writes the stream: Q^T W (o_proj: W blockdiag(H) first)
        if (slot == PQ_O) apply_rows(r, &r->h, x, (long long)W->rows * c->n_heads);
        s = apply_columns(r, &r->q, x, W->rows, W->cols, 1);
    }
    if (s == PQ_OK) s = store(x, (size_t)W->rows * W->cols, dt, dst, name, 0);
    pq_free(x);
    return s;
}

// A bias: v_proj's b blockdiag(H), o_proj's / down_proj's b Q.
static pq_status rotate_bias(rot *r, const pq_tensor *t, tkind k, pq_dtype dt, void *dst) {
    const pq_rot *by = k == T_VBIAS ? &r->h : &r->q;
    PQ_FAIL_IF(t->ndim != 1 || t->numel % by->n, PQ_ERR_FORMAT, "%s: tensor '%s' has %lld elements, not a multiple "
               "of %d", r->src->dir, t->name, (long long)t->numel, by->n);
    double *x = pq_alloc((size_t)t->numel * sizeof(double));
    PQ_FAIL_IF(!x, PQ_ERR_NOMEM, "out of memory");
    pq_status s = widen_vector(t, x);
    if (s == PQ_OK) {
        apply_rows(r, by, x, t->numel / by->n);
        s = store(x, (size_t)t->numel, dt, dst, t->name, 0);
    }
    pq_free(x);
    return s;
}

// What tensor `name` becomes; *layer and *slot for T_LINEAR.
static tkind classify(const char *name, int *layer, pq_linear_slot *slot) {
    if (!strcmp(name, "model.embed_tokens.weight")) return T_EMBED;
    if (!strcmp(name, "lm_head.weight")) return T_HEAD;
    if (!strcmp(name, "model.norm.weight")) return T_ONES;
    int l, n = 0;
    if (sscanf(name, "model.layers.%d.%n", &l, &n) != 1 || n == 0) return T_COPY;
    const char *rest = name + n;
    *layer = l;
    if (!strcmp(rest, "input_layernorm.weight") || !strcmp(rest, "post_attention_layernorm.weight")) return T_ONES;
    if (!strcmp(rest, "self_attn.v_proj.bias")) return T_VBIAS;
    if (!strcmp(rest, "self_attn.o_proj.bias") || !strcmp(rest, "mlp.down_proj.bias")) return T_OUTBIAS;
    for (int s = 0; s < PQ_NLINEAR; s++) {
        const char *sn = pq_linear_slot_name((pq_linear_slot)s);
        size_t k = strlen(sn);
        if (!strncmp(rest, sn, k) && !strcmp(rest + k, ".weight")) return *slot = (pq_linear_slot)s, T_LINEAR;
    }
    return T_COPY;
}

static pq_status rotate_tensor(rot *r, const pq_tensor *t, pq_dtype dt, void *dst) {
    int l = 0;
    pq_linear_slot slot = PQ_Q;
    const pq_model *m = r->src;
    tkind k = classify(t->name, &l, &slot);
    PQ_FAIL_IF(k != T_COPY && k != T_EMBED && k != T_HEAD && (l < 0 || l >= m->cfg.n_layers), PQ_ERR_FORMAT,
               "%s: tensor '%s': no such layer", m->dir, t->name);
    switch (k) {
    case T_EMBED: return rotate_vocab(r, &m->embed, NULL, dt, dst, t->name);
    case T_HEAD: return rotate_vocab(r, &m->lm_head, m->final_norm, dt, dst, t->name);
    case T_ONES: {
        double *one = pq_alloc((size_t)t->numel * sizeof(double));
        PQ_FAIL_IF(!one, PQ_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; i < t->numel; i++) one[i] = 1;
        pq_status s = store(one, (size_t)t->numel, dt, dst, t->name, 0);
        pq_free(one);
        return s;
    }
    case T_LINEAR: return rotate_linear(r, l, slot, dt, dst, t->name);
    case T_VBIAS:
    case T_OUTBIAS: return rotate_bias(r, t, k, dt, dst);
    case T_COPY: break;
    }
    return PQ_OK;
}

// ---- config.json ---------------------------------------------------------------------

// The source's config.json text (malloc'd), with tie_word_embeddings false when untying.
static pq_status config_text(const rot *r, char **out) {
    const pq_model *m = r->src;
    char *text = NULL;
    size_t len;
    if (m->config_json) {
        text = strdup(m->config_json);
    } else if (m->gguf) {
        text = strdup(pq_gguf_hf_file(m->gguf, "config.json"));
    } else {
        char path[1100];
        PQ_TRY(pq_path_join(path, sizeof path, m->dir, "config.json"));
        PQ_TRY(pq_file_read(path, (size_t)64 << 20, &text, &len));
    }
    PQ_FAIL_IF(!text, PQ_ERR_NOMEM, "out of memory");
    if (!r->untie) return *out = text, PQ_OK;
    json_error_t err;
    json_t *cfg = json_loads(text, 0, &err);
    free(text);
    PQ_FAIL_IF(!cfg, PQ_ERR_FORMAT, "%s: config.json: %s", m->dir, err.text);
    json_object_set_new(cfg, "tie_word_embeddings", json_false());
    *out = json_dumps(cfg, JSON_INDENT(2));
    json_decref(cfg);
    PQ_FAIL_IF(!*out, PQ_ERR_NOMEM, "out of memory");
    return PQ_OK;
}

// ---- the model ---------------------------------------------------------------------------

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

pq_status pq_rotate_model(const pq_model *src, const pq_rotate_params *p, pq_model **out, pq_rotate_info *info) {
    *out = NULL;
    memset(info, 0, sizeof *info);
    const pq_config *c = &src->cfg;
    PQ_FAIL_IF(src->quant.quantized, PQ_ERR_FORMAT, "%s: already quantized; --rotate needs an FP16/BF16/F32 model",
               src->dir);
    rot r = {.src = src, .p = p};
    for (int i = 0; c->tie_embeddings && i < c->hidden; i++) r.untie |= src->final_norm[i] != 1.0f;
    const pq_st *st = src->st;
    int n = pq_st_count(st), nt = n + r.untie;
    pq_tensor *ts = calloc((size_t)nt, sizeof *ts);
    size_t *off = calloc((size_t)nt, sizeof *off);
    void *buf = NULL;
    char *cfg = NULL;
    pq_st *view = NULL;
    pq_status s;
    PQ_CHECK_GOTO(!ts || !off, s, PQ_ERR_NOMEM, "out of memory");
    PQ_TRY_GOTO(s, pq_rot_make(c->hidden, p->seed, &r.q));
    PQ_TRY_GOTO(s, pq_rot_make(c->head_dim, p->seed ^ 0x68656164ull, &r.h)); // "head"
    r.wsn = 2 * (c->hidden > c->head_dim ? c->hidden : c->head_dim);
    r.ws = pq_alloc((size_t)pq_pool_size(p->pool) * r.wsn * sizeof(double));
    PQ_CHECK_GOTO(!r.ws, s, PQ_ERR_NOMEM, "out of memory");
    // the view's tensors: rotated ones into buf (offsets first), the rest borrowed
    size_t total = 0;
    for (int i = 0; i < nt; i++) {
        int l;
        pq_linear_slot slot;
        // the untied head is shaped as the embedding
        const pq_tensor *t = i < n ? pq_st_at(st, i) : pq_st_find(st, "model.embed_tokens.weight");
        PQ_CHECK_GOTO(!t, s, PQ_ERR_FORMAT, "%s: no model.embed_tokens.weight", src->dir);
        ts[i] = *t;
        if (i == n) ts[i].name = "lm_head.weight";
        if (classify(ts[i].name, &l, &slot) == T_COPY) continue;
        ts[i].dtype = p->f32 ? PQ_DT_F32 : t->dtype;
        ts[i].nbytes = (size_t)t->numel * pq_dtype_size(ts[i].dtype);
        off[i] = total;
        total += align8(ts[i].nbytes);
    }
    buf = pq_alloc(total ? total : 8);
    PQ_CHECK_GOTO(!buf, s, PQ_ERR_NOMEM, "out of memory for the rotated model (%.1f MiB)", total / 1048576.0);
    for (int i = 0; i < nt; i++) {
        int l;
        pq_linear_slot slot;
        if (classify(ts[i].name, &l, &slot) == T_COPY) continue;
        void *dst = (char *)buf + off[i];
        ts[i].data = dst;
        PQ_TRY_GOTO(s, rotate_tensor(&r, &ts[i], ts[i].dtype, dst));
    }
    PQ_TRY_GOTO(s, config_text(&r, &cfg));
    PQ_TRY_GOTO(s, pq_st_open_view(pq_st_file_path(st, 0), pq_st_file_disk_bytes(st, 0), ts, nt, &view));
    info->untied = r.untie;
    info->hadamard = pq_rot_is_hadamard(&r.q) && pq_rot_is_hadamard(&r.h);
    pq_rot_describe(&r.q, info->hidden, sizeof info->hidden);
    pq_rot_describe(&r.h, info->head, sizeof info->head);
    s = pq_model_open_view(src->dir, cfg, view, buf, out); // owns cfg, view and buf from here, also on error
    cfg = NULL, view = NULL, buf = NULL;
done:
    free(ts);
    free(off);
    free(cfg);
    pq_st_close(view);
    pq_free(buf);
    pq_free(r.ws);
    pq_rot_free(&r.q);
    pq_rot_free(&r.h);
    return s;
}
