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

// pq_gemm_pack_x for the 12-token blocks: 4 columns k at a time are 48
// consecutive floats of the block, gathered as 3 vectors (element e is
// token e % 12 of column k + e / 12). A short last block goes element by
// element.
void pq_gemm_pack_x_avx512(const float *x, int T, int K, int b0, int nb, float *xp) {
    __m512i idx[3];
    for (int v = 0; v < 3; v++) {
        int e[16];
        for (int l = 0; l < 16; l++) e[l] = (16 * v + l) % MR * K + (16 * v + l) / MR;
        idx[v] = _mm512_loadu_si512(e);
    }
    for (int b = b0; b < b0 + nb; b++) {
        float *dst = xp + (size_t)b * MR * K;
        int t0 = b * MR, mt = T - t0 < MR ? T - t0 : MR;
        const float *src = x + (size_t)t0 * K;
        int k = 0;
        if (mt == MR)
            for (; k + 4 <= K; k += 4)
                for (int v = 0; v < 3; v++)
                    _mm512_storeu_ps(dst + (size_t)k * MR + 16 * v, _mm512_i32gather_ps(idx[v], src + k, 4));
        for (; k < K; k++) {
            for (int i = 0; i < mt; i++) dst[(size_t)k * MR + i] = src[(size_t)i * K + k];
            for (int i = mt; i < MR; i++) dst[(size_t)k * MR + i] = 0.0f;
        }
    }
}
