// AVX2 versions of kernels/ops.h's element-wise ops.
#include <math.h>
#include <string.h>

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

// Lanes < left (at most 8) as a maskload / maskstore mask.
PQ_INLINE __m256i first8(int left) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// 8 rows at a time: 8 columns of each loaded and transposed, so that
// vector j holds column i + j of the 8 rows; lane l of lo / hi is row t + l
// / t + 4 + l's sum of squares, in the _ref's order (the products are exact
// in double).
void pq_rmsnorm_avx2(const float *x, const float *w, int T, int n, float eps, float *y) {
    int t = 0, n8 = n / 8 * 8;
    for (; t + 8 <= T; t += 8) {
        const float *xt = x + (size_t)t * n;
        __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
        for (int i = 0; i < n8; i += 8) {
            __m256 c[8];
#pragma GCC unroll 8
            for (int l = 0; l < 8; l++) c[l] = _mm256_loadu_ps(xt + (size_t)l * n + i);
            pq_transpose8_ps(c);
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) {
                __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(c[j])), b = _mm256_cvtps_pd(_mm256_extractf128_ps(c[j], 1));
                lo = _mm256_add_pd(lo, _mm256_mul_pd(a, a));
                hi = _mm256_add_pd(hi, _mm256_mul_pd(b, b));
            }
        }
        double s[8];
        _mm256_storeu_pd(s, lo);
        _mm256_storeu_pd(s + 4, hi);
        for (int l = 0; l < 8; l++)
            for (int i = n8; i < n; i++) s[l] += (double)xt[(size_t)l * n + i] * xt[(size_t)l * n + i];
        for (int l = 0; l < 8; l++) { // all 8 sums are taken before any row is written (y may be x)
            const __m256 inv = _mm256_set1_ps((float)(1.0 / sqrt(s[l] / n + eps)));
            const float *xr = xt + (size_t)l * n;
            float *yr = y + (size_t)(t + l) * n;
            for (int i = 0; i < n; i += 8) {
                __m256i k = first8(n - i);
                __m256 v = _mm256_mul_ps(_mm256_maskload_ps(xr + i, k), inv);
                _mm256_maskstore_ps(yr + i, k, _mm256_mul_ps(_mm256_maskload_ps(w + i, k), v));
            }
        }
    }
    if (t < T) pq_rmsnorm_ref(x + (size_t)t * n, w, T - t, n, eps, y + (size_t)t * n);
}

void pq_rope_apply_avx2(float *x, int T, int stride, int n_heads, int head_dim, const float *cs,
                        const float *sn) {
    int half = head_dim / 2;
    for (int t = 0; t < T; t++) {
        const float *c = cs + (size_t)t * half, *s = sn + (size_t)t * half;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)t * stride + (size_t)h * head_dim;
            for (int i = 0; i < half; i += 8) {
                __m256i k = first8(half - i);
                __m256 a = _mm256_maskload_ps(v + i, k), b = _mm256_maskload_ps(v + half + i, k);
                __m256 ci = _mm256_maskload_ps(c + i, k), si = _mm256_maskload_ps(s + i, k);
                _mm256_maskstore_ps(v + i, k, _mm256_sub_ps(_mm256_mul_ps(a, ci), _mm256_mul_ps(b, si)));
                _mm256_maskstore_ps(v + half + i, k, _mm256_add_ps(_mm256_mul_ps(b, ci), _mm256_mul_ps(a, si)));
            }
        }
    }
}

void pq_add_avx2(float *y, const float *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    pq_add_ref(y + i, x + i, n - i);
}

// Blocks of 1024 by pq_amax_bits_avx2 (kernels/simd.h); a block with a
// non-finite value goes to the _ref, which finds the first one.
long long pq_scan_finite_avx2(const float *x, size_t n, float *amax) {
    uint32_t m = 0;
    for (size_t i0 = 0; i0 < n; i0 += 1024) {
        size_t len = n - i0 < 1024 ? n - i0 : 1024;
        uint32_t bm = pq_amax_bits_avx2(x + i0, len);
        if (bm >= 0x7f800000u) {
            long long bad = pq_scan_finite_ref(x + i0, len, NULL);
            return bad < 0 ? bad : (long long)i0 + bad;
        }
        m = bm > m ? bm : m;
    }
    if (amax) memcpy(amax, &m, 4);
    return -1;
}

// 8 columns at a time, their sums and maxima in registers over the tokens.
// max(a, m) returns m when a is NaN and m on a tie: the _ref's a > m ? a : m.
void pq_abs_stats_avx2(const float *x, int T, int cols, int c0, int c1, double *sum, float *max) {
    const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    int c = c0;
    for (; c + 8 <= c1; c += 8) {
        __m256d slo = _mm256_loadu_pd(sum + c), shi = _mm256_loadu_pd(sum + c + 4);
        __m256 m = _mm256_loadu_ps(max + c);
        for (int t = 0; t < T; t++) {
            __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + (size_t)t * cols + c), abs);
            slo = _mm256_add_pd(slo, _mm256_cvtps_pd(_mm256_castps256_ps128(a)));
            shi = _mm256_add_pd(shi, _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
            m = _mm256_max_ps(a, m);
        }
        _mm256_storeu_pd(sum + c, slo);
        _mm256_storeu_pd(sum + c + 4, shi);
        _mm256_storeu_ps(max + c, m);
    }
    if (c < c1) pq_abs_stats_ref(x, T, cols, c, c1, sum, max);
}
