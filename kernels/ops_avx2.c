// AVX2 versions of kernels/ops.h's element-wise ops.
#include "kernels/ops.h"
#include "kernels/simd.h"

void pq_swiglu_avx2(float *gate, const float *up, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i);
        __m256 e = pq_exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g));
        __m256 s = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
        _mm256_storeu_ps(gate + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + i)));
    }
    pq_swiglu_ref(gate + i, up + i, n - i);
}
