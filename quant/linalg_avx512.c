// quant/linalg_avx512.c — the blocked Cholesky's panel step and the triangular inverse's stripe step with AVX-512 (see linalg.h).
#include <immintrin.h>

#include "quant/linalg.h"

#define W 8 // rows at a time, one per lane

// Rows [i, i + n W) transposed into p (p[g][m][r]: row i + g W + r's column
// k0 + m), and back.
static void load_rows(const double *a, int lda, int i, int k0, int kb, int n, double (*p)[PQ_LINALG_NB][W]) {
    for (int g = 0; g < n; g++)
        for (int r = 0; r < W; r++)
            for (int m = 0; m < kb; m++) p[g][m][r] = a[(size_t)(i + g * W + r) * lda + k0 + m];
}
static void store_rows(double *a, int lda, int i, int k0, int kb, int n, double (*p)[PQ_LINALG_NB][W]) {
    for (int g = 0; g < n; g++)
        for (int r = 0; r < W; r++)
            for (int m = 0; m < kb; m++) a[(size_t)(i + g * W + r) * lda + k0 + m] = p[g][m][r];
}

// 4 W rows at a time (four independent chains hide the subtract's
// latency), then W, then the _ref for the rest; each lane runs the _ref's
// loop for its row.
void pq_chol_panel_avx512(double *a, int lda, int i0, int i1, int k0, int kb) {
    static _Thread_local double p[4][PQ_LINALG_NB][W];
    const double *L = a + (size_t)k0 * lda + k0;
    int i = i0;
    for (; i + 4 * W <= i1; i += 4 * W) {
        load_rows(a, lda, i, k0, kb, 4, p);
        for (int c = 0; c < kb; c++) {
            const double *lc = L + (size_t)c * lda;
            __m512d s0 = _mm512_loadu_pd(p[0][c]), s1 = _mm512_loadu_pd(p[1][c]), s2 = _mm512_loadu_pd(p[2][c]),
                    s3 = _mm512_loadu_pd(p[3][c]);
            for (int m = 0; m < c; m++) {
                __m512d l = _mm512_set1_pd(lc[m]);
                s0 = _mm512_sub_pd(s0, _mm512_mul_pd(_mm512_loadu_pd(p[0][m]), l));
                s1 = _mm512_sub_pd(s1, _mm512_mul_pd(_mm512_loadu_pd(p[1][m]), l));
                s2 = _mm512_sub_pd(s2, _mm512_mul_pd(_mm512_loadu_pd(p[2][m]), l));
                s3 = _mm512_sub_pd(s3, _mm512_mul_pd(_mm512_loadu_pd(p[3][m]), l));
            }
            __m512d d = _mm512_set1_pd(lc[c]);
            _mm512_storeu_pd(p[0][c], _mm512_div_pd(s0, d));
            _mm512_storeu_pd(p[1][c], _mm512_div_pd(s1, d));
            _mm512_storeu_pd(p[2][c], _mm512_div_pd(s2, d));
            _mm512_storeu_pd(p[3][c], _mm512_div_pd(s3, d));
        }
        store_rows(a, lda, i, k0, kb, 4, p);
    }
    for (; i + W <= i1; i += W) {
        load_rows(a, lda, i, k0, kb, 1, p);
        for (int c = 0; c < kb; c++) {
            const double *lc = L + (size_t)c * lda;
            __m512d s = _mm512_loadu_pd(p[0][c]);
            for (int m = 0; m < c; m++) s = _mm512_sub_pd(s, _mm512_mul_pd(_mm512_loadu_pd(p[0][m]), _mm512_set1_pd(lc[m])));
            _mm512_storeu_pd(p[0][c], _mm512_div_pd(s, _mm512_set1_pd(lc[c])));
        }
        store_rows(a, lda, i, k0, kb, 1, p);
    }
    pq_chol_panel_ref(a, lda, i, i1, k0, kb);
}

// All the stripe's columns at once, one per lane: lane j joins the sum at
// k = j (a mask), then every k up to the row's diagonal.
void pq_trinv_stripe_avx512(double *a, int lda, int i0, int i1, int c0, int c1) {
    int w = c1 - c0;
    __mmask8 all = (__mmask8)((1u << w) - 1);
    const __m512d sign = _mm512_set1_pd(-0.0);
    for (int i = i0; i < i1; i++) {
        const double *ai = a + (size_t)i * lda;
        __m512d s = _mm512_setzero_pd();
        for (int k = c0; k < i; k++) {
            __mmask8 m = k < c1 ? (__mmask8)(all & ((2u << (k - c0)) - 1)) : all; // lanes j <= k
            __m512d p = _mm512_mul_pd(_mm512_set1_pd(ai[k]), _mm512_maskz_loadu_pd(all, a + (size_t)k * lda + c0));
            s = _mm512_mask_add_pd(s, m, s, p);
        }
        __m512d x = _mm512_div_pd(_mm512_xor_pd(s, sign), _mm512_set1_pd(ai[i]));
        _mm512_mask_storeu_pd(a + (size_t)i * lda + c0, all, x);
    }
}
