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
        __m256 b0 = _mm256_loadu_ps(wp + (size_t)k * NR), b1 = _mm256_loadu_ps(wp + (size_t)k * NR + 8);
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

// The 8 x 8 block of rows src (row stride ld) transposed into dst (row stride ldd).
PQ_INLINE void transpose8(const float *src, size_t ld, float *dst, size_t ldd) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * ld);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
        _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
    }
}

void pq_gemm_pack_w_avx2(int nr, const float *rows, int r0, int n, int K, float *wp) {
    int n8 = n / 8 * 8, k8 = K / 8 * 8;
    for (int r = 0; r < n8; r += 8)
        for (int k = 0; k < k8; k += 8)
            transpose8(rows + (size_t)r * K + k, (size_t)K, wp + (size_t)k * nr + r0 + r, (size_t)nr);
    for (int k = 0; k < K; k++) {
        int r = k < k8 ? n8 : 0; // columns past k8: every row; else the rows past n8
        for (; r < n; r++) wp[(size_t)k * nr + r0 + r] = rows[(size_t)r * K + k];
    }
}
