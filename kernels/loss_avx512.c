// AVX-512 version of kernels/loss.h, as kernels/loss_avx2.c with 16 lanes.
#include <math.h>

#include "kernels/loss.h"
#include "kernels/simd.h"

double pq_nll_avx512(const float *logits, int vocab, int target) {
    int v16 = vocab / 16 * 16, i;
    __m512 mv = _mm512_set1_ps(logits[0]);
    for (i = 0; i < v16; i += 16) mv = _mm512_max_ps(mv, _mm512_loadu_ps(logits + i));
    float lanes[16];
    _mm512_storeu_ps(lanes, mv);
    float mx = logits[0];
    for (int l = 0; l < 16; l++) mx = lanes[l] > mx ? lanes[l] : mx;
    for (i = v16; i < vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    __m512 m = _mm512_set1_ps(mx);
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (i = 0; i < v16; i += 16) {
        __m512 e = pq_exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(logits + i), m));
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    double sum = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    for (i = v16; i < vocab; i++) sum += exp((double)logits[i] - mx);
    return log(sum) + mx - logits[target];
}
