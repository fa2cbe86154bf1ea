// calib/stats.c — activation statistics of one linear input (see stats.h).
#include "calib/stats.h"

#include <string.h>

#include "common/sys.h"
#include "kernels/blas.h"
#include "kernels/ops.h"

#define TILE PQ_STATS_TILE
#define ROWS PQ_STATS_ROWS

static int min_i(int a, int b) { return a < b ? a : b; }

size_t pq_act_stats_bytes(int cols, int want) {
    size_t c = (size_t)cols;
    return (want & PQ_STAT_ABS ? c * (sizeof(double) + sizeof(float)) : 0) +
           (want & PQ_STAT_XTX ? c * c * sizeof(float) : 0);
}

pq_status pq_act_stats_init(pq_act_stats *s, int cols, int want) {
    memset(s, 0, sizeof *s);
    s->cols = cols;
    s->want = want;
    size_t c = (size_t)cols;
    int ok = 1;
    if (want & PQ_STAT_ABS) ok = (s->abs_sum = pq_calloc(c * sizeof(double))) && (s->abs_max = pq_calloc(c * sizeof(float)));
    if (ok && (want & PQ_STAT_XTX)) ok = (s->xtx = pq_calloc(c * c * sizeof(float))) != NULL;
    if (!ok) {
        pq_act_stats_free(s);
        return PQ_FAIL(PQ_ERR_NOMEM, "out of memory for the statistics of %d input channels (%.1f MiB)", cols,
                       pq_act_stats_bytes(cols, want) / 1048576.0);
    }
    return PQ_OK;
}

void pq_act_stats_free(pq_act_stats *s) {
    if (!s) return;
    pq_free(s->abs_sum);
    pq_free(s->abs_max);
    pq_free(s->xtx);
    memset(s, 0, sizeof *s);
}

typedef struct {
    pq_act_stats *s;
    const float *x;
    int T, nb; // nb: tiles per side
} add_job;

// Task t of X^T X's upper triangle, the larger ones first (the pool claims
// tasks in order, so the small ones even out the threads' ends): the tiles
// above the diagonal (row block bi < column block bj, row by row) by sgemm,
// then the upper triangles of the diagonal tiles by ssyrk (the upper
// triangle of the whole is what pq_act_stats_finish mirrors).
static void xtx_tile(void *ctx, int t, int tid) {
    add_job *j = ctx;
    int cols = j->s->cols, off = j->nb * (j->nb - 1) / 2;
    if (t < off) {
        int bi = 0;
        while (t >= j->nb - 1 - bi) t -= j->nb - 1 - bi, bi++;
        int i0 = bi * TILE, j0 = (bi + 1 + t) * TILE, n = min_i(TILE, cols - j0);
        pq_sgemm_tn(TILE, n, j->T, 1.0f, j->x + i0, cols, j->x + j0, cols, 1.0f, j->s->xtx + (size_t)i0 * cols + j0,
                    cols);
    } else {
        int d0 = (t - off) * TILE;
        pq_ssyrk_tn_upper(min_i(TILE, cols - d0), j->T, 1.0f, j->x + d0, cols, 1.0f,
                          j->s->xtx + (size_t)d0 * cols + d0, cols);
    }
}

// Columns [c0, c0 + TILE): |x| sums and maxima, tokens in order.
static void abs_cols(void *ctx, int b, int tid) {
    add_job *j = ctx;
    int cols = j->s->cols, c0 = b * TILE;
    pq_abs_stats_cpu(j->x, j->T, cols, c0, min_i(c0 + TILE, cols), j->s->abs_sum, j->s->abs_max);
}

void pq_act_stats_add(pq_act_stats *s, const float *x, int T, int what, pq_pool *pool) {
    if (T <= 0) return;
    add_job j = {s, x, T, (s->cols + TILE - 1) / TILE};
    what &= s->want;
    if (what & PQ_STAT_XTX) pq_pool_for(pool, j.nb * (j.nb - 1) / 2 + j.nb, xtx_tile, &j);
    if (what & PQ_STAT_ABS) pq_pool_for(pool, j.nb, abs_cols, &j);
    s->n += T;
}

// Rows of xtx per mirroring task, copied tile by tile (MIRROR x MIRROR).
#define MIRROR 64

static void mirror_rows(void *ctx, int b, int tid) {
    pq_act_stats *s = ctx;
    size_t c = (size_t)s->cols, i0 = (size_t)b * MIRROR, i1 = i0 + MIRROR < c ? i0 + MIRROR : c;
    for (size_t k0 = 0; k0 < i1; k0 += MIRROR)
        for (size_t i = i0; i < i1; i++)
            for (size_t k = k0; k < k0 + MIRROR && k < i; k++) s->xtx[i * c + k] = s->xtx[k * c + i];
}

void pq_act_stats_finish(pq_act_stats *s, pq_pool *pool) {
    if (!s->xtx) return;
    pq_pool_for(pool, (s->cols + MIRROR - 1) / MIRROR, mirror_rows, s);
}

// ---- output error --------------------------------------------------------

size_t pq_act_stats_error_bytes(int rows, int cols, int nthreads) {
    size_t chunks = (size_t)(rows + ROWS - 1) / ROWS;
    return (size_t)nthreads * 4 * ROWS * (size_t)cols * sizeof(float) + 2 * chunks * sizeof(double);
}

typedef struct {
    const pq_act_stats *s;
    const float *w;
    const pq_linear *wq; // NULL: the energy alone
    int rows;
    float *buf;          // per thread: P [2 ROWS][cols], Y [2 ROWS][cols]
    double *num, *den;   // [chunks]
} err_job;

// Rows [r0, r0 + n): P = [W; W - Wq] (W alone without wq), Y = P xtx, sums of P .* Y.
static void err_chunk(void *ctx, int ci, int tid) {
    err_job *j = ctx;
    int cols = j->s->cols, r0 = ci * ROWS, n = min_i(ROWS, j->rows - r0), np = j->wq ? 2 * n : n;
    float *P = j->buf + (size_t)tid * 4 * ROWS * cols, *D = P + (size_t)n * cols, *Y = P + (size_t)2 * ROWS * cols;
    memcpy(P, j->w + (size_t)r0 * cols, (size_t)n * cols * sizeof(float));
    if (j->wq) {
        pq_linear_rows(j->wq, r0, n, D);
        for (size_t i = 0; i < (size_t)n * cols; i++) D[i] = P[i] - D[i];
    }
    pq_sgemm_nn(np, cols, cols, 1.0f, P, cols, j->s->xtx, cols, 0.0f, Y, cols);
    double num = 0, den = 0;
    for (size_t i = 0; i < (size_t)n * cols; i++) {
        den += (double)P[i] * Y[i];
        if (j->wq) num += (double)D[i] * Y[(size_t)n * cols + i];
    }
    j->num[ci] = num;
    j->den[ci] = den;
}

static void output_sq(const pq_act_stats *s, const float *w, const pq_linear *wq, int rows, void *ws, pq_pool *pool,
                      double *err, double *energy) {
    int chunks = (rows + ROWS - 1) / ROWS;
    err_job j = {s, w, wq, rows, ws, NULL, NULL};
    j.num = (double *)((char *)ws + (size_t)pq_pool_size(pool) * 4 * ROWS * s->cols * sizeof(float));
    j.den = j.num + chunks;
    pq_pool_for(pool, chunks, err_chunk, &j);
    double num = 0, den = 0;
    for (int i = 0; i < chunks; i++) num += j.num[i], den += j.den[i];
    *err = num, *energy = den;
}

void pq_act_stats_output_sq(const pq_act_stats *s, const float *w, const pq_linear *wq, void *ws, pq_pool *pool,
                            double *err, double *energy) {
    output_sq(s, w, wq, wq->rows, ws, pool, err, energy);
}

double pq_act_stats_energy(const pq_act_stats *s, const float *w, int rows, void *ws, pq_pool *pool) {
    double err, energy;
    output_sq(s, w, NULL, rows, ws, pool, &err, &energy);
    return energy;
}

double pq_act_stats_output_error(const pq_act_stats *s, const float *w, const pq_linear *wq, void *ws,
                                 pq_pool *pool) {
    double num, den;
    pq_act_stats_output_sq(s, w, wq, ws, pool, &num, &den);
    return den > 0 ? num / den : 0;
}
