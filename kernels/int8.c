// kernels/int8.c — 8-bit integer weights: the _ref versions and the choice
// of ISA (see int8.h).
#include "kernels/int8.h"

#include "kernels/cpu.h"

void pq_int8_rows_ref(const pq_int8_weight *w, int r0, int n, float *out) {
    for (int r = 0; r < n; r++) {
        float s = w->scales[r0 + r];
        const int8_t *q = w->q + (size_t)(r0 + r) * w->cols;
        for (int c = 0; c < w->cols; c++) out[(size_t)r * w->cols + c] = s * (float)q[c];
    }
}

void pq_int8_gemv_ref(const pq_int8_weight *w, int r0, int n, const float *x, int T, float *y, int ldy) {
    for (int t = 0; t < T; t++)
        for (int r = r0; r < r0 + n; r++) {
            float s = w->scales[r];
            const int8_t *q = w->q + (size_t)r * w->cols;
            double acc = 0;
            for (int c = 0; c < w->cols; c++) acc += (double)(s * (float)q[c]) * x[(size_t)t * w->cols + c];
            y[(size_t)t * ldy + r] = (float)acc;
        }
}

void pq_int8_rows_cpu(const pq_int8_weight *w, int r0, int n, float *out) {
    if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_int8_rows_avx2(w, r0, n, out);
    else pq_int8_rows_ref(w, r0, n, out);
}

void pq_int8_gemv_cpu(const pq_int8_weight *w, int r0, int n, const float *x, int T, float *y, int ldy) {
    if (pq_cpu_isa() >= PQ_ISA_AVX512) pq_int8_gemv_avx512(w, r0, n, x, T, y, ldy);
    else if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_int8_gemv_avx2(w, r0, n, x, T, y, ldy);
    else pq_int8_gemv_ref(w, r0, n, x, T, y, ldy);
}

size_t pq_int8_stored_bytes(const pq_int8_weight *w) { return (size_t)w->rows * w->cols + (size_t)w->rows * 2; }
