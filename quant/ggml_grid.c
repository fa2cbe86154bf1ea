// quant/ggml_grid.c — RTN and GPTQ onto ggml's grids (see ggml_grid.h).
#include "quant/ggml_grid.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "kernels/blas.h"
#include "kernels/ggml_dequant.h"
#include "kernels/ggml_quant.h"

#define ALIGN(n) (((n) + 63) / 64 * 64)
#define RTN_ROWS 16

int pq_ggml_grid_block(int t) { return t == PQ_GGML_F16 ? 1 : pq_ggml_type_get((uint32_t)t)->block; }

void pq_ggml_fake_quant(int t, const float *x, int n, float *out) {
    if (t == PQ_GGML_F16) {
        for (int i = 0; i < n; i++) out[i] = pq_fp16_to_f32(pq_f32_to_fp16(x[i]));
        return;
    }
    uint8_t blk[256];
    int B = pq_ggml_grid_block(t);
    for (int b = 0; b < n / B; b++) {
        pq_ggml_quant_ref((pq_ggml_type)t, x + b * B, blk, B, NULL);
        pq_ggml_dequant_ref((pq_ggml_type)t, blk, out + b * B, B);
    }
}

// ---- RTN ---------------------------------------------------------------------------------

typedef struct {
    const float *w;
    pq_qtensor *q;
    double *err2, *norm2; // [chunks]
    int *bad;             // [chunks] 1 + a row with a value F16 cannot hold, or 0
} rtn_job;

static void rtn_chunk(void *ctx, int ci, int tid) {
    rtn_job *j = ctx;
    pq_qtensor *q = j->q;
    int r0 = ci * RTN_ROWS, r1 = r0 + RTN_ROWS < q->rows ? r0 + RTN_ROWS : q->rows;
    size_t rb = pq_qtensor_row_bytes(q);
    double e2 = 0, n2 = 0;
    for (int r = r0; r < r1; r++) {
        const float *x = j->w + (size_t)r * q->cols;
        float *y = q->dense + (size_t)r * q->cols;
        uint8_t *o = q->blocks + (size_t)r * rb;
        if (q->ggml == PQ_GGML_F16) {
            for (int c = 0; c < q->cols; c++) {
                uint16_t h = pq_f32_to_fp16(x[c]);
                memcpy(o + 2 * (size_t)c, &h, 2);
                y[c] = pq_fp16_to_f32(h);
                if (!isfinite(y[c]) && !j->bad[ci]) j->bad[ci] = r + 1;
            }
        } else {
            pq_ggml_quant_ref((pq_ggml_type)q->ggml, x, o, q->cols, NULL);
            pq_ggml_dequant_ref((pq_ggml_type)q->ggml, o, y, q->cols);
        }
        for (int c = 0; c < q->cols; c++) {
            double d = (double)x[c] - y[c];
            e2 += d * d;
            n2 += (double)x[c] * x[c];
        }
    }
    j->err2[ci] = e2, j->norm2[ci] = n2;
}

pq_status pq_ggml_rtn_quantize(const float *w, const char *name, pq_pool *pool, pq_qtensor *q, double *rel_err) {
    PQ_FAIL_IF(!q->is_ggml || !q->blocks, PQ_ERR_ARG, "%s: not a GGUF matrix", name);
    for (size_t i = 0; i < (size_t)q->rows * q->cols; i++)
        PQ_FAIL_IF(!isfinite(w[i]), PQ_ERR_NUMERIC, "%s: weight [%zu, %zu] is %s", name, i / q->cols, i % q->cols,
                   isnan(w[i]) ? "NaN" : "Inf");
    int nc = (q->rows + RTN_ROWS - 1) / RTN_ROWS;
    double *acc = calloc((size_t)nc * 2, sizeof *acc);
    int *bad = calloc((size_t)nc, sizeof *bad);
    pq_status s = PQ_OK;
    PQ_CHECK_GOTO(!acc || !bad, s, PQ_ERR_NOMEM, "%s: out of memory", name);
    rtn_job j = {w, q, acc, acc + nc, bad};
    pq_pool_for(pool, nc, rtn_chunk, &j);
    double e2 = 0, n2 = 0;
    for (int c = 0; c < nc; c++) {
        PQ_CHECK_GOTO(bad[c], s, PQ_ERR_NUMERIC, "%s: row %d holds a value F16 cannot hold", name, bad[c] - 1);
        e2 += acc[c], n2 += acc[nc + c];
    }
    if (rel_err) *rel_err = n2 > 0 ? e2 / n2 : 0;
done:
    free(acc), free(bad);
    return s;
}

// ---- GPTQ ---------------------------------------------------------------------------------

static int nchunks(int rows) { return (rows + PQ_GPTQ_ROWS - 1) / PQ_GPTQ_ROWS; }

// Columns per lazy batch: whole blocks when the grids are chosen on the way.
static int batch_len(const pq_gptq_params *p, int cols, int B) {
    int b = p->block_size;
    if (!p->static_groups) b = b >= B ? b / B * B : B;
    return b < cols ? b : cols;
}

// Per thread: a float row [cols] and the grids of a chunk (static: every
// block of PQ_GPTQ_ROWS rows, at most cols / 32 per row; on the way: one).
// The sizes serve every type a matrix of cols columns can have (F16 keeps
// no grids).
static size_t thread_bytes(int cols, int static_grids) {
    size_t nb = cols / PQ_QK > 0 ? (size_t)(cols / PQ_QK) : 1;
    return ALIGN((size_t)cols * sizeof(float)) + ALIGN((static_grids ? PQ_GPTQ_ROWS * nb : 1) * sizeof(pq_ggml_grid));
}

size_t pq_ggml_gptq_solve_bytes(int rows, int cols, const pq_gptq_params *p, int nthreads) {
    size_t r = (size_t)rows, c = (size_t)cols, nc = (size_t)nchunks(rows);
    return ALIGN(r * c * sizeof(double)) + ALIGN(r * (size_t)batch_len(p, cols, PQ_QK_K) * sizeof(double)) +
           ALIGN(nc * sizeof(double)) + (size_t)(nthreads > 0 ? nthreads : 1) * thread_bytes(cols, p->static_groups);
}

typedef struct {
    const float *w, *imatrix;
    const pq_gptq_hessian *h;
    const pq_gptq_params *p;
    pq_qtensor *q;
    int rows, cols, blen, B, nb;
    size_t rb;
    double *W, *E, *loss;
    char *tws;             // per-thread workspaces
    size_t tbytes;
} gjob;

static uint8_t *blk_at(const gjob *j, int r, int b) {
    return j->q->blocks + (size_t)r * j->rb + (size_t)b * (j->q->ggml == PQ_GGML_F16 ? 2 : pq_ggml_type_get((uint32_t)j->q->ggml)->bytes);
}

// Quantizes weight x at natural column c of row r on grid g; returns its value.
static float quantize_one(const gjob *j, const pq_ggml_grid *g, int r, int c, float x) {
    if (j->q->ggml == PQ_GGML_F16) {
        uint16_t h = pq_f32_to_fp16(x);
        memcpy(j->q->blocks + (size_t)r * j->rb + 2 * (size_t)c, &h, 2);
        return pq_fp16_to_f32(h);
    }
    int pos = c % j->B, code = pq_ggml_grid_code(g, pos, x);
    pq_ggml_block_set_code((pq_ggml_type)j->q->ggml, blk_at(j, r, c / j->B), pos, code);
    return pq_ggml_grid_value(g, pos, code);
}

static void grid_of(const gjob *j, int r, int b, const float *x, pq_ggml_grid *g) {
    if (j->q->ggml == PQ_GGML_F16) return;
    const float *wts = j->imatrix ? j->imatrix + (size_t)b * j->B : NULL;
    pq_ggml_grid_make((pq_ggml_type)j->q->ggml, x, wts, blk_at(j, r, b), g);
}

static void gptq_chunk(void *ctx, int ci, int tid) {
    gjob *j = ctx;
    const int *perm = j->h->perm, cols = j->cols;
    const double *U = j->h->u;
    int r0 = ci * PQ_GPTQ_ROWS, r1 = r0 + PQ_GPTQ_ROWS < j->rows ? r0 + PQ_GPTQ_ROWS : j->rows;
    char *t = j->tws + (size_t)tid * j->tbytes;
    float *f = (float *)t;
    pq_ggml_grid *grids = (pq_ggml_grid *)(t + ALIGN((size_t)cols * sizeof(float)));
    int stat = j->p->static_groups, f16 = j->q->ggml == PQ_GGML_F16;
    double loss = 0;
    for (int r = r0; r < r1; r++) {
        const float *wr = j->w + (size_t)r * cols;
        double *Wr = j->W + (size_t)r * cols;
        for (int i = 0; i < cols; i++) Wr[i] = j->h->dead[perm[i]] ? 0.0 : wr[perm[i]];
        if (!stat || f16) continue;
        for (int c = 0; c < cols; c++) f[c] = j->h->dead[c] ? 0.0f : wr[c];
        for (int b = 0; b < j->nb; b++) grid_of(j, r, b, f + (size_t)b * j->B, &grids[(size_t)(r - r0) * j->nb + b]);
    }
    for (int i1 = 0; i1 < cols; i1 += j->blen) {
        int i2 = i1 + j->blen < cols ? i1 + j->blen : cols;
        for (int r = r0; r < r1; r++) {
            double *Wr = j->W + (size_t)r * cols, *Er = j->E + (size_t)r * j->blen;
            float *y = j->q->dense + (size_t)r * cols;
            const pq_ggml_grid *g = grids;
            for (int i = i1; i < i2; i++) {
                int c = perm[i];
                if (f16) {
                    // no grid: each weight rounded to FP16
                } else if (stat) {
                    g = &grids[(size_t)(r - r0) * j->nb + c / j->B];
                } else if (i % j->B == 0) { // a block starts: its grid from the weights as updated so far
                    for (int k = 0; k < j->B; k++) f[k] = (float)Wr[i + k];
                    grid_of(j, r, i / j->B, f, grids);
                }
                float v = quantize_one(j, g, r, c, (float)Wr[i]);
                y[c] = v;
                const double *Ui = U + (size_t)i * cols;
                double err = (Wr[i] - (double)v) / Ui[i];
                loss += err * err;
                Er[i - i1] = err;
                for (int k = i + 1; k < i2; k++) Wr[k] -= err * Ui[k];
            }
        }
        pq_dgemm_nn(r1 - r0, cols - i2, i2 - i1, -1.0, j->E + (size_t)r0 * j->blen, j->blen, U + (size_t)i1 * cols + i2,
                    cols, 1.0, j->W + (size_t)r0 * cols + i2, cols);
    }
    j->loss[ci] = loss;
}

pq_status pq_ggml_gptq_solve(const float *w, int rows, const pq_gptq_hessian *h, const pq_gptq_params *p,
                             const float *imatrix, const char *name, void *ws, pq_pool *pool, pq_qtensor *q,
                             double *loss) {
    int cols = h->cols, nc = nchunks(rows), B = pq_ggml_grid_block(q->ggml);
    PQ_FAIL_IF(!q->is_ggml || q->rows != rows || q->cols != cols || cols % B, PQ_ERR_ARG,
               "%s: the output tensor is not a GGUF matrix of this shape", name);
    PQ_FAIL_IF(p->act_order && !p->static_groups, PQ_ERR_ARG,
               "%s: act-order onto GGUF blocks needs static grids (a block holds consecutive columns)", name);
    PQ_FAIL_IF(p->block_size < 1, PQ_ERR_ARG, "%s: block size %d", name, p->block_size);
    size_t r = (size_t)rows, c = (size_t)cols;
    char *b = ws;
    gjob j = {.w = w, .imatrix = imatrix, .h = h, .p = p, .q = q, .rows = rows, .cols = cols, .B = B, .nb = cols / B,
              .rb = pq_qtensor_row_bytes(q), .blen = batch_len(p, cols, B)};
    j.W = (double *)b;
    j.E = (double *)(b += ALIGN(r * c * sizeof(double)));
    j.loss = (double *)(b += ALIGN(r * (size_t)batch_len(p, cols, PQ_QK_K) * sizeof(double)));
    j.tws = b + ALIGN((size_t)nc * sizeof(double));
    j.tbytes = thread_bytes(cols, p->static_groups);
    memset(q->blocks, 0, r * j.rb);
    pq_pool_for(pool, nc, gptq_chunk, &j);
    double total = 0;
    for (int i = 0; i < nc; i++) total += j.loss[i];
    if (loss) *loss = total;
    for (size_t i = 0; i < r * c; i++)
        PQ_FAIL_IF(!isfinite(q->dense[i]), PQ_ERR_NUMERIC, "%s: row %zu: a value is not finite in its GGUF type", name,
                   i / c);
    return PQ_OK;
}
