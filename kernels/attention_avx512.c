// AVX-512 softmax of a row of attention scores (kernels/attention.h): the
// exps 16 at a time, everything else as pq_softmax_avx2 does it (the same
// 8-lane maximum and 8-lane sums in the same order; pq_exp_avx512 equals
// pq_exp_avx2 lane for lane), so the two give the same bits.
#include <immintrin.h>
#include <math.h>

#include "kernels/attention.h"
#include "kernels/simd.h"

void pq_softmax_avx512(float *x, int n) {
    int n8 = n / 8 * 8, i;
    float mx = pq_softmax_max(x, n), sum;
    __m256 acc = _mm256_setzero_ps();
    for (i = 0; i + 16 <= n8; i += 16) {
        __m512 e = pq_exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(x + i), _mm512_set1_ps(mx)));
        _mm512_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
        acc = _mm256_add_ps(acc, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
    }
    if (i < n8) {
        __m256 e = pq_exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_set1_ps(mx)));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    sum = pq_hsum_ps(acc);
    for (i = n8; i < n; i++) sum += (x[i] = expf(x[i] - mx));
    const float inv = 1.0f / sum;
    for (i = 0; i + 16 <= n8; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), _mm512_set1_ps(inv)));
    if (i < n8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_set1_ps(inv)));
    for (i = n8; i < n; i++) x[i] *= inv;
}
