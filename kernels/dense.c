#include "dense.h"

#include "kernels/cpu.h"

void pq_dense_rows_ref(pq_dense_type dt, const void *w, int cols, int r0, int n, float *out) {
    for (int r = 0; r < n; r++)
        for (int c = 0; c < cols; c++)
            out[(size_t)r * cols + c] = pq_dense_at(dt, w, (size_t)(r0 + r) * cols + c);
}

void pq_dense_gemv_ref(pq_dense_type dt, const void *w, int cols, int r0, int n, const float *x, int T,
                       float *y, int ldy) {
    for (int t = 0; t < T; t++)
        for (int r = r0; r < r0 + n; r++) {
            double acc = 0;
            for (int c = 0; c < cols; c++) acc += (double)pq_dense_at(dt, w, (size_t)r * cols + c) * x[(size_t)t * cols + c];
            y[(size_t)t * ldy + r] = (float)acc;
        }
}

void pq_dense_rows_cpu(pq_dense_type dt, const void *w, int cols, int r0, int n, float *out) {
    if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_dense_rows_avx2(dt, w, cols, r0, n, out);
    else pq_dense_rows_ref(dt, w, cols, r0, n, out);
}

void pq_dense_gemv_cpu(pq_dense_type dt, const void *w, int cols, int r0, int n, const float *x, int T,
                       float *y, int ldy) {
    if (pq_cpu_isa() >= PQ_ISA_AVX512) pq_dense_gemv_avx512(dt, w, cols, r0, n, x, T, y, ldy);
    else if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_dense_gemv_avx2(dt, w, cols, r0, n, x, T, y, ldy);
    else pq_dense_gemv_ref(dt, w, cols, r0, n, x, T, y, ldy);
}
