// quant/linalg_avx512.c — the blocked Cholesky's panel step with AVX-512 (see linalg.h).
#include <immintrin.h>

#include "quant/linalg.h"

#define W 8 // rows at a time, one per lane

// W rows at a time: the rows' panel columns transposed into p (p[m][r]: row
// r's column k0 + m), each lane running the _ref's loop for its row.
void pq_chol_panel_avx512(double *a, int lda, int i0, int i1, int k0, int kb) {
    double p[PQ_LINALG_NB][W];
    const double *L = a + (size_t)k0 * lda + k0;
    int i = i0;
    for (; i + W <= i1; i += W) {
        for (int r = 0; r < W; r++)
            for (int m = 0; m < kb; m++) p[m][r] = a[(size_t)(i + r) * lda + k0 + m];
        for (int c = 0; c < kb; c++) {
            const double *lc = L + (size_t)c * lda;
            __m512d s = _mm512_loadu_pd(p[c]);
            for (int m = 0; m < c; m++) s = _mm512_sub_pd(s, _mm512_mul_pd(_mm512_loadu_pd(p[m]), _mm512_set1_pd(lc[m])));
            _mm512_storeu_pd(p[c], _mm512_div_pd(s, _mm512_set1_pd(lc[c])));
        }
        for (int r = 0; r < W; r++)
            for (int m = 0; m < kb; m++) a[(size_t)(i + r) * lda + k0 + m] = p[m][r];
    }
    pq_chol_panel_ref(a, lda, i, i1, k0, kb);
}
