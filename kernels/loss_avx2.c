// AVX2 version of kernels/loss.h: the maximum in f32 (exact), exp(x - max)
// in f32 by pq_exp_avx2 (terms below e^-87 count as ~1e-38: nothing next to
// the maximum's 1), summed in double.
#include <math.h>

#include "kernels/loss.h"
#include "kernels/simd.h"

double pq_nll_avx2(const float *logits, int vocab, int target) {
    int v8 = vocab / 8 * 8, i;
    __m256 mv = _mm256_set1_ps(logits[0]);
    for (i = 0; i < v8; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(logits + i));
    float lanes[8];
    _mm256_storeu_ps(lanes, mv);
    float mx = logits[0];
    for (int l = 0; l < 8; l++) mx = lanes[l] > mx ? lanes[l] : mx;
    for (i = v8; i < vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    __m256 m = _mm256_set1_ps(mx);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    for (i = 0; i < v8; i += 8) {
        __m256 e = pq_exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(logits + i), m));
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double d[4], sum = 0;
    _mm256_storeu_pd(d, _mm256_add_pd(s0, s1));
    for (int l = 0; l < 4; l++) sum += d[l];
    for (i = v8; i < vocab; i++) sum += exp((double)logits[i] - mx);
    return log(sum) + mx - logits[target];
}
