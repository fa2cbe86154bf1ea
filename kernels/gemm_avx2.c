// AVX2 block kernel of kernels/gemm.h: 6 tokens x 16 rows, 12 ymm
// accumulators; per k two panel loads and 6 broadcasts feed 12 FMAs.
#include "kernels/gemm.h"
#include "kernels/simd.h"

#define MR PQ_GEMM_MR_AVX2
#define NR PQ_GEMM_NR_AVX2

// Lanes < n of v to dst (n <= 8).
PQ_INLINE void store_first(float *dst, __m256 v, int n) {
    if (n >= 8) { _mm256_storeu_ps(dst, v); return; }
    __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_ps(dst, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane), v);
}

void pq_gemm_block_avx2(const float *xb, const float *wp, int K, int mt, int n, float *y, int ldy) {
    __m256 lo[MR], hi[MR];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) lo[i] = hi[i] = _mm256_setzero_ps();
    for (int k = 0; k < K; k++) {
        __m256 b0 = _mm256_loadu_ps(wp + (size_t)k * 8), b1 = _mm256_loadu_ps(wp + ((size_t)K + k) * 8);
        const float *a = xb + (size_t)k * MR;
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            __m256 ai = _mm256_broadcast_ss(a + i);
            lo[i] = _mm256_fmadd_ps(b0, ai, lo[i]);
            hi[i] = _mm256_fmadd_ps(b1, ai, hi[i]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
        if (i < mt) {
            store_first(y + (size_t)i * ldy, lo[i], n);
            if (n > 8) store_first(y + (size_t)i * ldy + 8, hi[i], n - 8);
        }
}

// Bytes ahead of the packing's loads that it prefetches in each row.
#define PACK_PREFETCH 512

// r[0..8) transposed, stored to dst + i * ldd for i < 8.
PQ_INLINE void transpose8_store(__m256 r[8], float *dst, size_t ldd) {
    pq_transpose8_ps(r);
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + i * ldd, r[i]);
}

void pq_gemm_pack_dense_avx2(int nr, pq_dense_type dt, const void *w, int K, int row, int r0, int n, float *wp) {
    int h = nr / 2, n8 = n / 8 * 8, k8 = K / 8 * 8;
    size_t es = dt == PQ_DENSE_F32 ? 4 : 2;
    // 8 columns per step, each 8-row group transposed into its half: a step
    // fills whole cache lines (h/8 groups side by side)
    for (int k = 0; k < k8; k += 8)
        for (int r = 0; r < n8; r += 8) {
            float *dst = wp + (size_t)((r0 + r) / h) * K * h + (r0 + r) % h;
            size_t first = (size_t)(row + r) * K;
            __m256 v[8];
            if (k % 32 == 0) // one line ahead per 32 columns of each row: the weight comes from memory
#pragma GCC unroll 8
                for (int i = 0; i < 8; i++)
                    _mm_prefetch((const char *)w + (first + (size_t)i * K + k) * es + PACK_PREFETCH, _MM_HINT_T0);
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) v[i] = pq_dense_load8(dt, w, first + (size_t)i * K + k);
            transpose8_store(v, dst + (size_t)k * h, (size_t)h);
        }
    for (int r = 0; r < n8; r += 8) {
        float *dst = wp + (size_t)((r0 + r) / h) * K * h + (r0 + r) % h;
        size_t first = (size_t)(row + r) * K;
        for (int k = k8; k < K; k++)
            for (int i = 0; i < 8; i++) dst[(size_t)k * h + i] = pq_dense_at(dt, w, first + (size_t)i * K + k);
    }
    for (int r = n8; r < n; r++) {
        float *dst = wp + (size_t)((r0 + r) / h) * K * h + (r0 + r) % h;
        for (int k = 0; k < K; k++) dst[(size_t)k * h] = pq_dense_at(dt, w, (size_t)(row + r) * K + k);
    }
}
