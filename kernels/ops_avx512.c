// AVX-512 versions of kernels/ops.h's element-wise ops.
#include <math.h>

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

PQ_INLINE __mmask16 first16(int left) { return left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1); }

// 8 rows at a time: 8 columns of each loaded and transposed, so that
// vector j holds column i + j of the 8 rows; lane l is row t + l's sum of
// squares, in the _ref's order (the products are exact in double).
void pq_rmsnorm_avx512(const float *x, const float *w, int T, int n, float eps, float *y) {
    int t = 0, n8 = n / 8 * 8;
    for (; t + 8 <= T; t += 8) {
        const float *xt = x + (size_t)t * n;
        __m512d ss = _mm512_setzero_pd();
        for (int i = 0; i < n8; i += 8) {
            __m256 c[8];
#pragma GCC unroll 8
            for (int l = 0; l < 8; l++) c[l] = _mm256_loadu_ps(xt + (size_t)l * n + i);
            pq_transpose8_ps(c);
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) {
                __m512d v = _mm512_cvtps_pd(c[j]);
                ss = _mm512_add_pd(ss, _mm512_mul_pd(v, v));
            }
        }
        double s[8];
        _mm512_storeu_pd(s, ss);
        for (int l = 0; l < 8; l++)
            for (int i = n8; i < n; i++) s[l] += (double)xt[(size_t)l * n + i] * xt[(size_t)l * n + i];
        for (int l = 0; l < 8; l++) { // all 8 sums are taken before any row is written (y may be x)
            const __m512 inv = _mm512_set1_ps((float)(1.0 / sqrt(s[l] / n + eps)));
            const float *xr = xt + (size_t)l * n;
            float *yr = y + (size_t)(t + l) * n;
            for (int i = 0; i < n; i += 16) {
                __mmask16 k = first16(n - i);
                __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, xr + i), inv);
                _mm512_mask_storeu_ps(yr + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, w + i), v));
            }
        }
    }
    if (t < T) pq_rmsnorm_ref(x + (size_t)t * n, w, T - t, n, eps, y + (size_t)t * n);
}

void pq_rope_apply_avx512(float *x, int T, int stride, int n_heads, int head_dim, const float *cs,
                          const float *sn) {
    int half = head_dim / 2;
    for (int t = 0; t < T; t++) {
        const float *c = cs + (size_t)t * half, *s = sn + (size_t)t * half;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)t * stride + (size_t)h * head_dim;
            for (int i = 0; i < half; i += 16) {
                __mmask16 k = first16(half - i);
                __m512 a = _mm512_maskz_loadu_ps(k, v + i), b = _mm512_maskz_loadu_ps(k, v + half + i);
                __m512 ci = _mm512_maskz_loadu_ps(k, c + i), si = _mm512_maskz_loadu_ps(k, s + i);
                _mm512_mask_storeu_ps(v + i, k, _mm512_sub_ps(_mm512_mul_ps(a, ci), _mm512_mul_ps(b, si)));
                _mm512_mask_storeu_ps(v + half + i, k, _mm512_add_ps(_mm512_mul_ps(b, ci), _mm512_mul_ps(a, si)));
            }
        }
    }
}

void pq_add_avx512(float *y, const float *x, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), _mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 k = first16((int)(n - i));
        _mm512_mask_storeu_ps(y + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, y + i), _mm512_maskz_loadu_ps(k, x + i)));
    }
}

// 16 columns at a time, their sums and maxima in registers over the tokens.
// max(a, m) returns m when a is NaN and m on a tie: the _ref's a > m ? a : m.
void pq_abs_stats_avx512(const float *x, int T, int cols, int c0, int c1, double *sum, float *max) {
    const __m512 abs = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int c = c0; c < c1; c += 16) {
        __mmask16 k = first16(c1 - c);
        __mmask8 klo = (__mmask8)k, khi = (__mmask8)(k >> 8);
        __m512d slo = _mm512_maskz_loadu_pd(klo, sum + c), shi = _mm512_maskz_loadu_pd(khi, sum + c + 8);
        __m512 m = _mm512_maskz_loadu_ps(k, max + c);
        for (int t = 0; t < T; t++) {
            __m512 a = _mm512_and_ps(_mm512_maskz_loadu_ps(k, x + (size_t)t * cols + c), abs);
            slo = _mm512_add_pd(slo, _mm512_cvtps_pd(_mm512_castps512_ps256(a)));
            shi = _mm512_add_pd(shi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))));
            m = _mm512_max_ps(a, m);
        }
        _mm512_mask_storeu_pd(sum + c, klo, slo);
        _mm512_mask_storeu_pd(sum + c + 8, khi, shi);
        _mm512_mask_storeu_ps(max + c, k, m);
    }
}
