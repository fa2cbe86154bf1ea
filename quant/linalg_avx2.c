// quant/linalg_avx2.c — the blocked Cholesky's panel step and the triangular inverse's stripe step with AVX2 (see linalg.h).
#include <immintrin.h>

#include "quant/linalg.h"

#define W 4 // rows at a time, one per lane

// W rows at a time: the rows' panel columns transposed into p (p[m][r]: row
// r's column k0 + m), each lane running the _ref's loop for its row.
void pq_chol_panel_avx2(double *a, int lda, int i0, int i1, int k0, int kb) {
    double p[PQ_LINALG_NB][W];
    const double *L = a + (size_t)k0 * lda + k0;
    int i = i0;
    for (; i + W <= i1; i += W) {
        for (int r = 0; r < W; r++)
            for (int m = 0; m < kb; m++) p[m][r] = a[(size_t)(i + r) * lda + k0 + m];
        for (int c = 0; c < kb; c++) {
            const double *lc = L + (size_t)c * lda;
            __m256d s = _mm256_loadu_pd(p[c]);
            for (int m = 0; m < c; m++) s = _mm256_sub_pd(s, _mm256_mul_pd(_mm256_loadu_pd(p[m]), _mm256_set1_pd(lc[m])));
            _mm256_storeu_pd(p[c], _mm256_div_pd(s, _mm256_set1_pd(lc[c])));
        }
        for (int r = 0; r < W; r++)
            for (int m = 0; m < kb; m++) a[(size_t)(i + r) * lda + k0 + m] = p[m][r];
    }
    pq_chol_panel_ref(a, lda, i, i1, k0, kb);
}

// All the stripe's columns at once, one per lane (two vectors): lane j
// joins the sum at k = j (a blend), then every k up to the row's diagonal.
void pq_trinv_stripe_avx2(double *a, int lda, int i0, int i1, int c0, int c1) {
    int w = c1 - c0;
    __m256i lo_in = _mm256_setr_epi64x(0 < w ? -1 : 0, 1 < w ? -1 : 0, 2 < w ? -1 : 0, 3 < w ? -1 : 0);
    __m256i hi_in = _mm256_setr_epi64x(4 < w ? -1 : 0, 5 < w ? -1 : 0, 6 < w ? -1 : 0, 7 < w ? -1 : 0);
    const __m256d sign = _mm256_set1_pd(-0.0), lane = _mm256_setr_pd(0, 1, 2, 3), lane4 = _mm256_setr_pd(4, 5, 6, 7);
    for (int i = i0; i < i1; i++) {
        const double *ai = a + (size_t)i * lda;
        __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
        for (int k = c0; k < i; k++) {
            const double *ak = a + (size_t)k * lda + c0;
            __m256d v = _mm256_set1_pd(ai[k]);
            __m256d p0 = _mm256_mul_pd(v, _mm256_maskload_pd(ak, lo_in));
            __m256d p1 = _mm256_mul_pd(v, _mm256_maskload_pd(ak + 4, hi_in));
            if (k < c1) { // lanes j <= k only
                __m256d kk = _mm256_set1_pd((double)(k - c0));
                s0 = _mm256_blendv_pd(s0, _mm256_add_pd(s0, p0), _mm256_cmp_pd(lane, kk, _CMP_LE_OQ));
                s1 = _mm256_blendv_pd(s1, _mm256_add_pd(s1, p1), _mm256_cmp_pd(lane4, kk, _CMP_LE_OQ));
            } else {
                s0 = _mm256_add_pd(s0, p0);
                s1 = _mm256_add_pd(s1, p1);
            }
        }
        __m256d d = _mm256_set1_pd(ai[i]);
        double *out = a + (size_t)i * lda + c0;
        _mm256_maskstore_pd(out, lo_in, _mm256_div_pd(_mm256_xor_pd(s0, sign), d));
        _mm256_maskstore_pd(out + 4, hi_in, _mm256_div_pd(_mm256_xor_pd(s1, sign), d));
    }
}
