#include "gemm.h"

#include <math.h>

#include "kernels/cpu.h"

#define MR_SCALAR 4
#define NR_SCALAR 8

pq_gemm_tile pq_gemm_tile_cpu(void) {
    switch (pq_cpu_isa()) {
    case PQ_ISA_AVX512: return (pq_gemm_tile){PQ_GEMM_MR_AVX512, PQ_GEMM_NR_AVX512};
    case PQ_ISA_AVX2: return (pq_gemm_tile){PQ_GEMM_MR_AVX2, PQ_GEMM_NR_AVX2};
    case PQ_ISA_SCALAR: break;
    }
    return (pq_gemm_tile){MR_SCALAR, NR_SCALAR};
}

size_t pq_gemm_x_floats(pq_gemm_tile tl, int T, int K) {
    return (size_t)(T + tl.mr - 1) / tl.mr * tl.mr * K;
}

void pq_gemm_pack_x(pq_gemm_tile tl, const float *x, int T, int K, int b0, int nb, float *xp) {
    for (int b = b0; b < b0 + nb; b++) {
        float *dst = xp + (size_t)b * tl.mr * K;
        int t0 = b * tl.mr, mt = T - t0 < tl.mr ? T - t0 : tl.mr;
        const float *src = x + (size_t)t0 * K;
        // k outer: the stores are sequential, the loads come from mt lines that stay in L1
        for (int k = 0; k < K; k++) {
            for (int i = 0; i < mt; i++) dst[(size_t)k * tl.mr + i] = src[(size_t)i * K + k];
            for (int i = mt; i < tl.mr; i++) dst[(size_t)k * tl.mr + i] = 0.0f;
        }
    }
}

void pq_gemm_pack_w(pq_gemm_tile tl, const float *rows, int r0, int n, int K, float *wp) {
    if (pq_cpu_isa() >= PQ_ISA_AVX2 && tl.nr % 8 == 0 && r0 % 8 == 0) {
        pq_gemm_pack_w_avx2(tl.nr, rows, r0, n, K, wp);
        return;
    }
    for (int k = 0; k < K; k++)
        for (int r = 0; r < n; r++) wp[(size_t)k * tl.nr + r0 + r] = rows[(size_t)r * K + k];
}

void pq_gemm_pad_w(pq_gemm_tile tl, int n, int K, float *wp) {
    for (int k = 0; k < K; k++)
        for (int r = n; r < tl.nr; r++) wp[(size_t)k * tl.nr + r] = 0.0f;
}

// The scalar block kernel: the same chains as the _ref, on the packed operands.
static void block_scalar(const float *xb, const float *wp, int K, int mt, int n, float *y, int ldy) {
    float acc[MR_SCALAR][NR_SCALAR] = {{0}};
    for (int k = 0; k < K; k++)
        for (int i = 0; i < MR_SCALAR; i++)
            for (int r = 0; r < NR_SCALAR; r++)
                acc[i][r] = fmaf(wp[(size_t)k * NR_SCALAR + r], xb[(size_t)k * MR_SCALAR + i], acc[i][r]);
    for (int i = 0; i < mt; i++)
        for (int r = 0; r < n; r++) y[(size_t)i * ldy + r] = acc[i][r];
}

void pq_gemm_block_cpu(pq_gemm_tile tl, const float *xb, const float *wp, int K, int mt, int n, float *y, int ldy) {
    if (tl.mr == PQ_GEMM_MR_AVX512 && tl.nr == PQ_GEMM_NR_AVX512) pq_gemm_block_avx512(xb, wp, K, mt, n, y, ldy);
    else if (tl.mr == PQ_GEMM_MR_AVX2 && tl.nr == PQ_GEMM_NR_AVX2) pq_gemm_block_avx2(xb, wp, K, mt, n, y, ldy);
    else block_scalar(xb, wp, K, mt, n, y, ldy);
}

void pq_gemm_ref(const float *x, int T, const float *w, int n, int K, float *y, int ldy) {
    for (int t = 0; t < T; t++)
        for (int r = 0; r < n; r++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++) acc = fmaf(w[(size_t)r * K + k], x[(size_t)t * K + k], acc);
            y[(size_t)t * ldy + r] = acc;
        }
}
