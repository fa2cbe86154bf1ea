#include "gemm.h"

#include <math.h>

#include "common/half.h"
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
    if (tl.mr == PQ_GEMM_MR_AVX512 && pq_cpu_isa() >= PQ_ISA_AVX512) {
        pq_gemm_pack_x_avx512(x, T, K, b0, nb, xp);
        return;
    }
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

// Element (row r, column k) of a panel of nr rows.
static inline size_t panel_at(int nr, int K, int r, int k) {
    int h = nr / 2;
    return (size_t)(r / h) * K * h + (size_t)k * h + r % h;
}

void pq_gemm_pack_dense(pq_gemm_tile tl, pq_dense_type dt, const void *w, int K, int row, int r0, int n, float *wp) {
    if (pq_cpu_isa() >= PQ_ISA_AVX2 && (tl.nr == 16 || tl.nr == 32) && r0 % 8 == 0) {
        pq_gemm_pack_dense_avx2(tl.nr, dt, w, K, row, r0, n, wp);
        return;
    }
    for (int r = 0; r < n; r++)
        for (int k = 0; k < K; k++) wp[panel_at(tl.nr, K, r0 + r, k)] = pq_dense_at(dt, w, (size_t)(row + r) * K + k);
}

void pq_gemm_pack_w(pq_gemm_tile tl, const float *rows, int r0, int n, int K, float *wp) {
    pq_gemm_pack_dense(tl, PQ_DENSE_F32, rows, K, 0, r0, n, wp);
}

void pq_gemm_pad_w(pq_gemm_tile tl, int n, int K, float *wp) {
    for (int r = n; r < tl.nr; r++)
        for (int k = 0; k < K; k++) wp[panel_at(tl.nr, K, r, k)] = 0.0f;
}

// The scalar block kernel: the same chains as the _ref, on the packed operands.
static void block_scalar(const float *xb, const float *wp, int K, int mt, int n, float *y, int ldy) {
    float acc[MR_SCALAR][NR_SCALAR] = {{0}};
    for (int k = 0; k < K; k++)
        for (int i = 0; i < MR_SCALAR; i++)
            for (int r = 0; r < NR_SCALAR; r++)
                acc[i][r] = fmaf(wp[panel_at(NR_SCALAR, K, r, k)], xb[(size_t)k * MR_SCALAR + i], acc[i][r]);
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

void pq_bf16_round_n(float *v, size_t n) {
    for (size_t i = 0; i < n; i++) v[i] = pq_bf16_to_f32(pq_f32_to_bf16(v[i]));
}

void pq_gemm_bf16_ref(const float *x, int T, const float *w, int n, int K, float *y, int ldy) {
    for (int t = 0; t < T; t++)
        for (int r = 0; r < n; r++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++) {
                float wk = pq_bf16_to_f32(pq_f32_to_bf16(w[(size_t)r * K + k]));
                acc = fmaf(wk, pq_bf16_to_f32(pq_f32_to_bf16(x[(size_t)t * K + k])), acc);
            }
            y[(size_t)t * ldy + r] = acc;
        }
}
