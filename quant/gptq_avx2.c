// quant/gptq_avx2.c — GPTQ's column-loop update with AVX2 (see gptq.h).
#include <immintrin.h>

#include "quant/gptq.h"

void pq_gptq_rank1_avx2(double *W, size_t ldw, const double *e, int rows, const double *u, int n) {
    for (int k = 0; k < rows; k++) {
        double *w = W + (size_t)k * ldw;
        __m256d ek = _mm256_set1_pd(e[k]);
        int c = 0;
        for (; c + 4 <= n; c += 4)
            _mm256_storeu_pd(w + c, _mm256_sub_pd(_mm256_loadu_pd(w + c), _mm256_mul_pd(ek, _mm256_loadu_pd(u + c))));
        pq_gptq_rank1_ref(w + c, ldw, e + k, 1, u + c, n - c);
    }
}
