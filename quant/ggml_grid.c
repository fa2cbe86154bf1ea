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

// ---- GPTQ: pq_gptq_run on the blocks' grids ---------------------------------------

// Per thread: the grids of a chunk's PQ_GPTQ_ROWS rows, at most cols / 32
// blocks per row whatever the type (F16 keeps none).
static size_t thread_bytes(int cols) {
    return ALIGN((size_t)PQ_GPTQ_ROWS * (cols / PQ_QK > 0 ? cols / PQ_QK : 1) * sizeof(pq_ggml_grid));
}

// The most columns a batch has, whatever the type: block_size rounded to
// whole blocks is at most block_size or one block (<= PQ_QK_K).
static int most_batch(const pq_gptq_params *p, int cols) {
    int b = p->block_size > PQ_QK_K ? p->block_size : PQ_QK_K;
    return b < cols ? b : cols;
}

size_t pq_ggml_gptq_solve_bytes(int rows, int cols, const pq_gptq_params *p, int nthreads) {
    return pq_gptq_run_bytes(rows, cols, most_batch(p, cols)) +
           (size_t)(nthreads > 0 ? nthreads : 1) * thread_bytes(cols);
}

typedef struct {
    const float *imatrix;
    pq_qtensor *q;
    int B, nb;
    size_t rb, bb, tbytes; // bytes of a row, a block, a thread's grids
    char *tws;
} ggml_job;

static uint8_t *blk_at(const ggml_job *j, int r, int b) { return j->q->blocks + (size_t)r * j->rb + (size_t)b * j->bb; }

static pq_ggml_grid *grid_at(const ggml_job *j, int tid, int r, int b) {
    return (pq_ggml_grid *)(j->tws + (size_t)tid * j->tbytes) + (size_t)(r % PQ_GPTQ_ROWS) * j->nb + b;
}

static int ggml_choose(void *ctx, int tid, int r, int b, const float *x, int n) {
    const ggml_job *j = ctx;
    const float *wts = j->imatrix ? j->imatrix + (size_t)b * j->B : NULL;
    pq_ggml_grid_make((pq_ggml_type)j->q->ggml, x, wts, blk_at(j, r, b), grid_at(j, tid, r, b));
    return 1;
}

static void ggml_quantize(void *ctx, int tid, int r0, int n, int b, int c, const float *x, float *v) {
    const ggml_job *j = ctx;
    for (int m = 0, pos = c % j->B; m < n; m++) {
        uint8_t *blk = blk_at(j, r0 + m, b);
        if (j->q->ggml == PQ_GGML_F16) { // no grid: the weight rounded to FP16
            uint16_t h = pq_f32_to_fp16(x[m]);
            memcpy(blk, &h, 2);
            v[m] = pq_fp16_to_f32(h);
        } else {
            const pq_ggml_grid *g = grid_at(j, tid, r0 + m, b);
            int code = pq_ggml_grid_code(g, pos, x[m]);
            pq_ggml_block_set_code((pq_ggml_type)j->q->ggml, blk, pos, code);
            v[m] = pq_ggml_grid_value(g, pos, code);
        }
        j->q->dense[(size_t)(r0 + m) * j->q->cols + c] = v[m];
    }
}

pq_status pq_ggml_gptq_solve(const float *w, int rows, const pq_gptq_hessian *h, const pq_gptq_params *p,
                             const float *imatrix, const char *name, void *ws, pq_pool *pool, pq_qtensor *q,
                             double *loss) {
    int cols = h->cols, B = pq_ggml_grid_block(q->ggml);
    PQ_FAIL_IF(!q->is_ggml || q->rows != rows || q->cols != cols || cols % B, PQ_ERR_ARG,
               "%s: the output tensor is not a GGUF matrix of this shape", name);
    PQ_FAIL_IF(p->act_order && !p->static_groups, PQ_ERR_ARG,
               "%s: act-order onto GGUF blocks needs static grids (a block holds consecutive columns)", name);
    PQ_FAIL_IF(p->block_size < 1, PQ_ERR_ARG, "%s: block size %d", name, p->block_size);
    size_t r = (size_t)rows, c = (size_t)cols;
    ggml_job j = {.imatrix = imatrix, .q = q, .B = B, .nb = cols / B, .rb = pq_qtensor_row_bytes(q),
                  .bb = (size_t)pq_ggml_type_get((uint32_t)q->ggml)->bytes, .tbytes = thread_bytes(cols),
                  .tws = (char *)ws + pq_gptq_run_bytes(rows, cols, most_batch(p, cols))};
    pq_gptq_grid g = {.group = B, .on_the_fly = !p->static_groups,
                      .choose = q->ggml == PQ_GGML_F16 ? NULL : ggml_choose, .quantize = ggml_quantize, .ctx = &j};
    memset(q->blocks, 0, r * j.rb);
    // a row of one block whose grid is chosen on the way is one batch; ggml_choose never fails
    pq_gptq_run(w, rows, h, g.on_the_fly && B == cols ? cols : p->block_size, &g, ws, pool, loss);
    for (size_t i = 0; i < r * c; i++)
        PQ_FAIL_IF(!isfinite(q->dense[i]), PQ_ERR_NUMERIC, "%s: row %zu: a value is not finite in its GGUF type", name,
                   i / c);
    return PQ_OK;
}
