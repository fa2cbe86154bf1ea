// AVX-512 versions of kernels/ops.h's element-wise ops.
#include "kernels/ops.h"
#include "kernels/simd.h"

void pq_swiglu_avx512(float *gate, const float *up, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 g = _mm512_loadu_ps(gate + i);
        __m512 e = pq_exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), g));
        __m512 s = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_storeu_ps(gate + i, _mm512_mul_ps(s, _mm512_loadu_ps(up + i)));
    }
    pq_swiglu_ref(gate + i, up + i, n - i);
}
