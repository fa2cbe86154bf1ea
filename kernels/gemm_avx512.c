// AVX-512 block kernel of kernels/gemm.h: 12 tokens x 32 rows, 24 zmm
// accumulators; per k two panel loads and 12 broadcasts feed 24 FMAs.
#include "kernels/gemm.h"
#include "kernels/simd.h"

#define MR PQ_GEMM_MR_AVX512
#define NR PQ_GEMM_NR_AVX512

void pq_gemm_block_avx512(const float *xb, const float *wp, int K, int mt, int n, float *y, int ldy) {
    __m512 lo[MR], hi[MR];
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) lo[i] = hi[i] = _mm512_setzero_ps();
    for (int k = 0; k < K; k++) {
        __m512 b0 = _mm512_loadu_ps(wp + (size_t)k * 16), b1 = _mm512_loadu_ps(wp + ((size_t)K + k) * 16);
        const float *a = xb + (size_t)k * MR;
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            __m512 ai = _mm512_set1_ps(a[i]);
            lo[i] = _mm512_fmadd_ps(b0, ai, lo[i]);
            hi[i] = _mm512_fmadd_ps(b1, ai, hi[i]);
        }
    }
    __mmask16 m0 = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
    __mmask16 m1 = n >= 32 ? 0xffff : n > 16 ? (__mmask16)((1u << (n - 16)) - 1) : 0;
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
        if (i < mt) {
            _mm512_mask_storeu_ps(y + (size_t)i * ldy, m0, lo[i]);
            _mm512_mask_storeu_ps(y + (size_t)i * ldy + 16, m1, hi[i]);
        }
}
