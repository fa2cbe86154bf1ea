// AVX2 + FMA attention pieces (kernels/attention.h): the softmax of a row
// with kernels/simd.h's vector exp, and decode attention of one head: the
// scores as 8-lane FMA dot products, that softmax, and the weighted sum of
// value rows kept in registers, 32 columns at a time. fp32 throughout, as
// the portable path; only the order of the sums, the fused multiply-adds and
// the exp (within 2 ulp of expf) differ (tests: rel L2 < 1e-5 against the
// double _ref).
#include <immintrin.h>
#include <math.h>

#include "kernels/attention.h"
#include "kernels/simd.h"

static float dot(const float *a, const float *b, int n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    if (i + 8 <= n) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0), i += 8;
    float s = pq_hsum_ps(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

void pq_softmax_avx2(float *x, int n) {
    int n8 = n / 8 * 8, i;
    float mx = pq_softmax_max(x, n), sum;
    __m256 m = _mm256_set1_ps(mx), acc = _mm256_setzero_ps();
    for (i = 0; i < n8; i += 8) {
        __m256 e = pq_exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    sum = pq_hsum_ps(acc);
    for (i = n8; i < n; i++) sum += (x[i] = expf(x[i] - mx));
    __m256 inv = _mm256_set1_ps(1.0f / sum);
    for (i = 0; i < n8; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    for (i = n8; i < n; i++) x[i] *= 1.0f / sum;
}

void pq_attn_head_avx2(int hd, int nk, int kvdim, float scale, const float *qh, const float *kb, const float *vb,
                       float *S, float *o) {
    for (int c = 0; c < nk; c++) S[c] = scale * dot(qh, kb + (size_t)c * kvdim, hd);
    pq_softmax_avx2(S, nk);
    int i = 0;
    for (; i + 32 <= hd; i += 32) { // o[i..i+32) = sum_c S[c] v[c][i..i+32)
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int c = 0; c < nk; c++) {
            const float *vr = vb + (size_t)c * kvdim + i;
            __m256 w = _mm256_broadcast_ss(S + c);
            a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vr), a0);
            a1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vr + 8), a1);
            a2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vr + 16), a2);
            a3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vr + 24), a3);
        }
        _mm256_storeu_ps(o + i, a0);
        _mm256_storeu_ps(o + i + 8, a1);
        _mm256_storeu_ps(o + i + 16, a2);
        _mm256_storeu_ps(o + i + 24, a3);
    }
    for (; i < hd; i++) {
        float a = 0;
        for (int c = 0; c < nk; c++) a += S[c] * vb[(size_t)c * kvdim + i];
        o[i] = a;
    }
}
