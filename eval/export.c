// eval/export.c — pq export --to gguf (see export.h): the decoder-layer
// linears converted from the source, everything else by eval/gguf_out.c.
#include "eval/export.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "common/sys.h"
#include "eval/gguf_out.h"
#include "formats/outdir.h"
#include "kernels/ggml_quant.h"

#define CHUNK_ROWS 16

pq_export_params pq_export_default_params(void) { return (pq_export_params){.type = PQ_GGML_F16}; }

typedef struct {
    const pq_export_params *p;
    pq_model *m;
    pq_pool *pool;
    pq_gguf_out *g;
    pq_export_result *res;
    uint8_t *rows;     // one linear's blocks, Hugging Face row order
    float *scratch;    // per thread [CHUNK_ROWS][widest]
} export_run;

// ---- what a source linear is ----------------------------------------------------------

// "INT4 g32 symmetric", "INT8 per-channel (w8a8)", "FP8 E4M3", ... into buf.
static void describe_linear(const pq_linear *L, char *buf, size_t cap) {
    if (L->fmt == PQ_W_INT8) snprintf(buf, cap, "INT8 per-channel (w8a8)");
    else if (L->fmt == PQ_W_FP8) snprintf(buf, cap, "FP8 E4M3 (no GGUF type holds it)");
    else if (L->fmt == PQ_W_DENSE) snprintf(buf, cap, "dense");
    else {
        char g[32];
        if (L->q.group >= L->cols) snprintf(g, sizeof g, "per-channel");
        else snprintf(g, sizeof g, "g%d%s", L->q.group, L->cols % L->q.group ? " (ragged)" : "");
        snprintf(buf, cap, "INT%d %s %s%s", L->q.bits, g, L->q.zeros ? "asymmetric" : "symmetric",
                 L->q.g_idx ? " with act-order g_idx (GGUF blocks hold consecutive columns)" : "");
    }
}

static const char *grid_of(pq_ggml_type t) {
    return t == PQ_GGML_Q4_0 ? "INT4 g32 symmetric" : t == PQ_GGML_Q8_0 ? "INT8 g32 symmetric"
           : t == PQ_GGML_Q4_1 ? "INT4 g32 asymmetric" : NULL;
}

// Whether L's codes are type t's, block for block.
static int same_grid(const pq_linear *L, pq_ggml_type t) {
    if (L->fmt != PQ_W_QPACK || L->q.g_idx || L->q.group != PQ_QK || L->cols % PQ_QK) return 0;
    return (t == PQ_GGML_Q4_0 && L->q.bits == 4 && !L->q.zeros) || (t == PQ_GGML_Q8_0 && L->q.bits == 8 && !L->q.zeros) ||
           (t == PQ_GGML_Q4_1 && L->q.bits == 4 && L->q.zeros);
}

// ---- the codes as they are -------------------------------------------------------------

// Row r of packed L as blocks of t into out; *change: the largest |w(GGUF) -
// w(packed)|. 0 if a scale (or Q4_1's min) is not finite in FP16.
static int exact_row(const pq_linear *L, pq_ggml_type t, int r, uint8_t *out, double *change) {
    const pq_qpack *q = &L->q;
    int ng = pq_qpack_ngroups(q->cols, q->group);
    const pq_ggml_type_info *ti = pq_ggml_type_get(t);
    for (int b = 0; b < q->cols / PQ_QK; b++) {
        uint8_t *blk = out + (size_t)b * ti->bytes;
        memset(blk, 0, (size_t)ti->bytes);
        float sc = q->scales[(size_t)r * ng + b];
        int zero = q->zeros ? q->zeros[(size_t)r * ng + b] : 1 << (q->bits - 1);
        uint16_t d16 = pq_f32_to_fp16(sc), m16 = pq_f32_to_fp16(-sc * (float)zero);
        float d = pq_fp16_to_f32(d16), m = pq_fp16_to_f32(m16);
        if (!isfinite(d) || (t == PQ_GGML_Q4_1 && !isfinite(m))) return 0;
        memcpy(blk, &d16, 2);
        if (t == PQ_GGML_Q4_1) memcpy(blk + 2, &m16, 2);
        for (int i = 0; i < PQ_QK; i++) {
            int u = pq_qpack_code(q, r, b * PQ_QK + i);
            int code = t == PQ_GGML_Q8_0 ? u - 128 : u;
            float got = t == PQ_GGML_Q4_1 ? (float)u * d + m : t == PQ_GGML_Q8_0 ? (float)code * d : (float)(u - 8) * d;
            double diff = fabs((double)got - (double)(sc * (float)(u - zero)));
            *change = diff > *change ? diff : *change;
            pq_ggml_block_set_code(t, blk, i, code);
        }
    }
    return 1;
}

static int exact_linear(export_run *x, const pq_linear *L, pq_ggml_type t, size_t rb) {
    double change = 0;
    for (int r = 0; r < L->rows; r++)
        if (!exact_row(L, t, r, x->rows + (size_t)r * rb, &change)) return 0;
    x->res->max_weight_change = change > x->res->max_weight_change ? change : x->res->max_weight_change;
    return 1;
}

// ---- round to nearest from the weights -------------------------------------------------

typedef struct {
    const pq_linear *L;
    pq_ggml_type t;
    size_t rb;
    uint8_t *out;
    float *scratch;
    int *bad;       // [chunks] 1 + a row with a value that is not finite (in F16), or 0
} rtn_job;

static void rtn_chunk(void *ctx, int ci, int tid) {
    rtn_job *j = ctx;
    int r0 = ci * CHUNK_ROWS, n = j->L->rows - r0 < CHUNK_ROWS ? j->L->rows - r0 : CHUNK_ROWS, cols = j->L->cols;
    float *x = j->scratch + (size_t)tid * CHUNK_ROWS * (size_t)cols;
    pq_linear_rows(j->L, r0, n, x);
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * cols;
        uint8_t *o = j->out + (size_t)(r0 + r) * j->rb;
        for (int c = 0; c < cols; c++) {
            float v = xr[c];
            if (j->t == PQ_GGML_F16) {
                uint16_t h = pq_f32_to_fp16(v);
                memcpy(o + 2 * (size_t)c, &h, 2);
                v = pq_fp16_to_f32(h);
            }
            if (!isfinite(v) && !j->bad[ci]) j->bad[ci] = r0 + r + 1;
        }
        if (j->t != PQ_GGML_F16) pq_ggml_quant_ref(j->t, xr, o, cols, NULL);
    }
}

static pq_status rtn_linear(export_run *x, const pq_linear *L, pq_ggml_type t, size_t rb, const char *what) {
    int nc = (L->rows + CHUNK_ROWS - 1) / CHUNK_ROWS;
    int *bad = calloc((size_t)nc, sizeof *bad);
    PQ_FAIL_IF(!bad, PQ_ERR_NOMEM, "out of memory");
    rtn_job j = {L, t, rb, x->rows, x->scratch, bad};
    pq_pool_for(x->pool, nc, rtn_chunk, &j);
    pq_status s = PQ_OK;
    for (int c = 0; c < nc && s == PQ_OK; c++)
        if (bad[c])
            s = PQ_FAIL(PQ_ERR_NUMERIC, "%s/%s.weight: row %d holds a value that is not finite%s", x->p->model, what,
                        bad[c] - 1, t == PQ_GGML_F16 ? " in F16" : "");
    free(bad);
    return s;
}

// ---- one linear ---------------------------------------------------------------------------

// A GGUF source's tensor of the planned type, copied with its rows put back
// in Hugging Face order (pq_gguf_out_put_linear permutes them again). 1 if copied.
static int copy_gguf(export_run *x, int l, pq_linear_slot s, pq_ggml_type t, size_t rb) {
    if (!x->m->gguf) return 0;
    char hf[160], name[96];
    int permute;
    snprintf(hf, sizeof hf, "model.layers.%d.%s.weight", l, pq_linear_slot_name(s));
    if (pq_gguf_name_from_hf(hf, x->m->cfg.n_layers, name, sizeof name, &permute) != PQ_OK) return 0;
    const pq_gguf_tensor *src = pq_gguf_tensor_find(pq_gguf_hf_gguf(x->m->gguf), name);
    if (!src || src->type != (uint32_t)t) return 0;
    int64_t hd = x->m->cfg.head_dim, rows = src->ne[1];
    for (int64_t k = 0; k < rows; k++) {
        int64_t hr = permute && pq_gguf_permutes_qk(&x->m->cfg) ? (k / hd) * hd + pq_gguf_hf_row(k % hd, hd) : k;
        memcpy(x->rows + (size_t)hr * rb, (const uint8_t *)src->data + (size_t)k * rb, rb);
    }
    return 1;
}

static pq_status put_linear(export_run *x, int l, pq_linear_slot s) {
    const pq_linear *L = pq_model_linear(x->m, l, s);
    pq_ggml_type t = pq_gguf_out_linear_type(x->g, l, s, NULL);
    size_t rb = pq_gguf_out_row_bytes(x->g, l, s);
    char what[128], desc[200];
    snprintf(what, sizeof what, "model.layers.%d.%s", l, pq_linear_slot_name(s));
    pq_export_result *res = x->res;
    if (copy_gguf(x, l, s, t, rb)) {
        res->copied++;
    } else if (same_grid(L, t) && exact_linear(x, L, t, rb)) {
        res->exact++;
    } else {
        int quantized_source = L->fmt != PQ_W_DENSE || x->m->gguf;
        if (quantized_source) {
            if (L->fmt != PQ_W_DENSE) describe_linear(L, desc, sizeof desc);
            else snprintf(desc, sizeof desc, "a GGUF %s tensor", "dequantized");
            char why[700];
            if (t == PQ_GGML_F16) snprintf(why, sizeof why, "%s: %s stored as F16 (its dequantized weights rounded)", what, desc);
            else if (grid_of(t) && L->fmt == PQ_W_QPACK && same_grid(L, t))
                snprintf(why, sizeof why, "%s: a scale is not finite in FP16; re-quantized to %s", what,
                         pq_ggml_type_get(t)->name);
            else
                snprintf(why, sizeof why, "%.100s: %.200s is not %s's grid%s%s%s; re-quantized to %s with round to nearest "
                         "from its dequantized weights", what, desc, pq_ggml_type_get(t)->name, grid_of(t) ? " (" : "",
                         grid_of(t) ? grid_of(t) : "", grid_of(t) ? ")" : "", pq_ggml_type_get(t)->name);
            PQ_FAIL_IF(x->p->exact, PQ_ERR_ARG, "%s (--exact refuses to re-quantize)", why);
            if (!res->requant_reason[0]) snprintf(res->requant_reason, sizeof res->requant_reason, "%s", why);
            res->requantized++;
        } else {
            res->quantized++;
        }
        PQ_TRY(rtn_linear(x, L, t, rb, what));
    }
    res->linears++;
    return pq_gguf_out_put_linear(x->g, l, s, x->rows);
}

// ---- the run -------------------------------------------------------------------------------

static void describe_source(const pq_model *m, char *buf, size_t cap) {
    char d[64];
    if (m->gguf) snprintf(buf, cap, "GGUF");
    else if (m->quant.quantized) {
        pq_scheme_describe(&m->quant.scheme, d, sizeof d);
        snprintf(buf, cap, "%s (%s)", d, m->quant.format);
    } else {
        snprintf(buf, cap, "dense %s", pq_dtype_name(pq_model_dtype(m)));
    }
}

static pq_status run(export_run *x, pq_outdir *dir, pq_export_progress cb, void *ud) {
    const pq_export_params *p = x->p;
    char path[PQ_OUTDIR_PATH_CAP];
    PQ_TRY(pq_outdir_file(dir, path, sizeof path));
    const char *meta[] = {"pq.source", p->model, "pq.command", "pq export --to gguf"};
    pq_gguf_out_params gp = {.m = x->m, .source = p->model, .path = path, .target = p->type, .fallback = p->fallback,
                             .meta = meta, .n_meta = 2, .pool = x->pool};
    PQ_TRY(pq_gguf_out_begin(&gp, &x->g));
    size_t most = 0;
    int widest = 0;
    for (int s = 0; s < PQ_NLINEAR; s++) {
        const pq_linear *L = pq_model_linear(x->m, 0, (pq_linear_slot)s);
        size_t b = (size_t)L->rows * pq_gguf_out_row_bytes(x->g, 0, (pq_linear_slot)s);
        most = b > most ? b : most;
        widest = L->cols > widest ? L->cols : widest;
    }
    x->rows = pq_alloc(most);
    x->scratch = pq_alloc((size_t)pq_pool_size(x->pool) * CHUNK_ROWS * (size_t)widest * sizeof(float));
    PQ_FAIL_IF(!x->rows || !x->scratch, PQ_ERR_NOMEM, "out of memory");
    for (int l = 0; l < x->m->cfg.n_layers; l++) {
        for (int s = 0; s < PQ_NLINEAR; s++) PQ_TRY(put_linear(x, l, (pq_linear_slot)s));
        if (cb) cb(ud, l + 1, x->m->cfg.n_layers);
    }
    pq_gguf_out_stats st;
    PQ_TRY(pq_gguf_out_commit(x->g, &st));
    PQ_TRY(pq_outdir_commit(dir));
    x->res->tensors = st.n_tensors;
    x->res->fallback = st.n_fallback;
    x->res->copied += st.n_copied;
    x->res->linear_weights = st.linear_weights;
    x->res->bits_per_weight = st.linear_weights ? 8.0 * (double)st.linear_bytes / (double)st.linear_weights : 0;
    x->res->bytes = st.file_bytes;
    return PQ_OK;
}

pq_status pq_export_gguf(const pq_export_params *p, pq_export_progress cb, void *ud, pq_export_result *res) {
    memset(res, 0, sizeof *res);
    double t0 = pq_now();
    PQ_FAIL_IF(!p->model || !p->out, PQ_ERR_ARG, "a model and an output file are required");
    PQ_FAIL_IF(!pq_ggml_can_quant(p->type) && p->type != PQ_GGML_F16, PQ_ERR_ARG, "--type: not a GGUF type pq writes");
    export_run x = {.p = p, .res = res};
    snprintf(res->type, sizeof res->type, "%s", pq_gguf_type_name(p->type));
    pq_outdir dir = {.lock_fd = -1, .cleanup = -1};
    pq_status s = PQ_OK;
    PQ_TRY_GOTO(s, pq_model_open(p->model, &x.m));
    describe_source(x.m, res->source, sizeof res->source);
    PQ_TRY_GOTO(s, pq_pool_create(p->nthreads, &x.pool));
    int nf = pq_st_file_count(x.m->st);
    const char **inputs = calloc((size_t)nf + 1, sizeof *inputs);
    PQ_CHECK_GOTO(!inputs, s, PQ_ERR_NOMEM, "out of memory");
    inputs[0] = p->model;
    for (int f = 0; f < nf; f++) inputs[1 + f] = pq_st_file_path(x.m->st, f);
    pq_outdir_spec spec = {.final = p->out, .file = 1, .force = p->force, .inputs = inputs, .n_inputs = nf + 1};
    s = pq_outdir_begin(&dir, &spec);
    if (s == PQ_OK) s = run(&x, &dir, cb, ud);
    free(inputs);
done:
    pq_gguf_out_free(x.g, 0);
    pq_outdir_abort(&dir);
    pq_free(x.rows), pq_free(x.scratch);
    pq_pool_free(x.pool);
    pq_model_free(x.m);
    if (s != PQ_OK) {
        memset(res, 0, sizeof *res);
        return s;
    }
    res->seconds = pq_now() - t0;
    return PQ_OK;
}
