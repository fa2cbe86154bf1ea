// quant/gptq_avx512.c — GPTQ's column-loop update with AVX-512 (see gptq.h).
#include <immintrin.h>

#include "quant/gptq.h"

void pq_gptq_rank1_avx512(double *W, size_t ldw, const double *e, int rows, const double *u, int n) {
    for (int k = 0; k < rows; k++) {
        double *w = W + (size_t)k * ldw;
        __m512d ek = _mm512_set1_pd(e[k]);
        int c = 0;
        for (; c + 8 <= n; c += 8)
            _mm512_storeu_pd(w + c, _mm512_sub_pd(_mm512_loadu_pd(w + c), _mm512_mul_pd(ek, _mm512_loadu_pd(u + c))));
        if (c < n) { // the tail under a mask: the same two operations
            __mmask8 m = (__mmask8)((1u << (n - c)) - 1);
            __m512d x = _mm512_maskz_loadu_pd(m, w + c), y = _mm512_maskz_loadu_pd(m, u + c);
            _mm512_mask_storeu_pd(w + c, m, _mm512_sub_pd(x, _mm512_mul_pd(ek, y)));
        }
    }
}
