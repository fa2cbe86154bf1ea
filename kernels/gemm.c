// kernels/gemm.c — the specification of kernels/gemm.h and the packed sizes.
#include "kernels/gemm.h"

#include <math.h>

void pq_gemm_ref(const float *x, int T, int K, const float *w, int n, float *y, int ldy) {
    for (int t = 0; t < T; t++)
        for (int r = 0; r < n; r++) {
            float acc = 0.0f;
            for (int c = 0; c < K; c++) acc = fmaf(x[(size_t)t * K + c], w[(size_t)r * K + c], acc);
            y[(size_t)t * ldy + r] = acc;
        }
}

size_t pq_gemm_xpack_floats(int T, int K) {
    return (size_t)((T + PQ_GEMM_MR - 1) / PQ_GEMM_MR) * PQ_GEMM_MR * (size_t)K + PQ_GEMM_NR;
}

size_t pq_gemm_wpack_floats(int n, int K) {
    return (size_t)((n + PQ_GEMM_NR - 1) / PQ_GEMM_NR) * PQ_GEMM_NR * (size_t)K;
}
