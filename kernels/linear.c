#include "linear.h"

#include "kernels/blas.h"

// Rows per panel of the GEMM path: 128 rows x cols floats stays in L2 for
// cols up to ~4K and gives OpenBLAS a wide enough N.
#define PANEL_ROWS 128
// Rows per task of the GEMV path.
#define GEMV_ROWS 32

void pq_linear_rows(const pq_linear *W, int r0, int n, float *out) {
    switch (W->fmt) {
    case PQ_W_DENSE: pq_dense_rows_cpu(W->dense_type, W->w, W->cols, r0, n, out); return;
    }
}

void pq_linear_rows_ref(const pq_linear *W, int r0, int n, float *out) {
    switch (W->fmt) {
    case PQ_W_DENSE: pq_dense_rows_ref(W->dense_type, W->w, W->cols, r0, n, out); return;
    }
}

static void gemv_cpu(const pq_linear *W, int r0, int n, const float *x, int T, float *y, int ldy) {
    switch (W->fmt) {
    case PQ_W_DENSE: pq_dense_gemv_cpu(W->dense_type, W->w, W->cols, r0, n, x, T, y, ldy); return;
    }
}

size_t pq_linear_weight_bytes(const pq_linear *W) {
    switch (W->fmt) {
    case PQ_W_DENSE: return (size_t)W->rows * W->cols * (W->dense_type == PQ_DENSE_F32 ? 4 : 2);
    }
    return 0;
}

static int needs_panel_buffer(const pq_linear *W) {
    return !(W->fmt == PQ_W_DENSE && W->dense_type == PQ_DENSE_F32);
}

size_t pq_linear_workspace_bytes(const pq_linear *W, int nthreads) {
    if (!needs_panel_buffer(W)) return 0;
    return (size_t)nthreads * PANEL_ROWS * W->cols * sizeof(float);
}

typedef struct {
    const pq_linear *W;
    const float *x;
    int T;
    float *y;
    float *ws;
    int chunk;
} job;

static void add_bias(const pq_linear *W, int T, float *y, int r0, int n) {
    if (!W->bias) return;
    for (int t = 0; t < T; t++)
        for (int r = r0; r < r0 + n; r++) y[(size_t)t * W->rows + r] += W->bias[r];
}

static void gemm_panel(void *ctx, int p, int tid) {
    job *j = ctx;
    const pq_linear *W = j->W;
    int r0 = p * j->chunk, n = W->rows - r0 < j->chunk ? W->rows - r0 : j->chunk;
    const float *B;
    if (needs_panel_buffer(W)) {
        float *buf = j->ws + (size_t)tid * PANEL_ROWS * W->cols;
        pq_linear_rows(W, r0, n, buf);
        B = buf;
    } else {
        B = (const float *)W->w + (size_t)r0 * W->cols;
    }
    pq_sgemm_nt(j->T, n, W->cols, 1.0f, j->x, W->cols, B, W->cols, 0.0f, j->y + r0, W->rows);
    add_bias(W, j->T, j->y, r0, n);
}

static void gemv_chunk(void *ctx, int p, int tid) {
    job *j = ctx;
    const pq_linear *W = j->W;
    int r0 = p * j->chunk, n = W->rows - r0 < j->chunk ? W->rows - r0 : j->chunk;
    gemv_cpu(W, r0, n, j->x, j->T, j->y, W->rows);
    add_bias(W, j->T, j->y, r0, n);
}

// Panel height: PANEL_ROWS, smaller (multiple of 16) when there would be
// fewer than ~2 panels per thread.
static int panel_rows(int rows, int nthreads) {
    int p = (rows + 2 * nthreads - 1) / (2 * nthreads);
    p = (p + 15) / 16 * 16;
    return p < 16 ? 16 : p > PANEL_ROWS ? PANEL_ROWS : p;
}

void pq_linear_forward(const pq_linear *W, const float *x, int T, float *y, void *ws, pq_pool *pool) {
    if (T <= 0) return;
    job j = {W, x, T, y, ws, 0};
    if (T <= PQ_GEMV_MAX_T) {
        j.chunk = GEMV_ROWS;
        pq_pool_for(pool, (W->rows + GEMV_ROWS - 1) / GEMV_ROWS, gemv_chunk, &j);
    } else {
        j.chunk = panel_rows(W->rows, pq_pool_size(pool));
        pq_pool_for(pool, (W->rows + j.chunk - 1) / j.chunk, gemm_panel, &j);
    }
}

void pq_linear_forward_ref(const pq_linear *W, const float *x, int T, float *y) {
    float *row = malloc((size_t)W->cols * sizeof(float));
    PQ_ASSERT(row);
    for (int r = 0; r < W->rows; r++) {
        pq_linear_rows_ref(W, r, 1, row);
        for (int t = 0; t < T; t++) {
            double acc = 0;
            for (int c = 0; c < W->cols; c++) acc += (double)row[c] * x[(size_t)t * W->cols + c];
            y[(size_t)t * W->rows + r] = (float)acc + (W->bias ? W->bias[r] : 0.0f);
        }
    }
    free(row);
}
