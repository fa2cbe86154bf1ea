// AVX2 + FMA + F16C versions of kernels/fp8.h.
//
// E4M3 decode without a table: the sign-extended byte shifted left by 7 and
// masked with 0xbf80 is the fp16 with the same sign, exponent field e and
// mantissa m<<7, i.e. decode(b) * 2^-8 (subnormal codes land on fp16
// subnormals, exactly); F16C widens it to f32 (at full speed for subnormals,
// unlike an f32 multiply by a subnormal) and a multiply by 2^8 restores it
// exactly (rows) or is folded into the row's scale (GEMV). NaN codes (0x7f,
// 0xff) would read as +-480, so rows replace them with the _ref's NaN and the
// GEMV checks for them (32 bytes per test).
#include <immintrin.h>

#include "kernels/linear.h"
#include "kernels/fp8.h"
#include "kernels/int8.h"
#include "kernels/simd.h"


// 8 codes, sign-extended to 32 bits
PQ_INLINE __m256i load8(const void *p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)); }

// 16 codes as the fp16 bits of decode * 2^-8 (NaN codes excepted)
PQ_INLINE __m256i fp8_half16(const void *p) {
    __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p));
    return _mm256_and_si256(_mm256_slli_epi16(v, 7), _mm256_set1_epi16((short)0xbf80));
}

// decode(b[0..8)) * 2^-8 as f32 (NaN codes excepted)
PQ_INLINE __m256 fp8_scaled8(const void *p) {
    __m128i v = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)p));
    return _mm256_cvtph_ps(_mm_and_si128(_mm_slli_epi16(v, 7), _mm_set1_epi16((short)0xbf80)));
}

// decode(b[0..8)) exactly, NaN codes included
PQ_INLINE __m256 fp8_decode8(const void *p) {
    __m256i v = load8(p);
    __m256i nan = _mm256_cmpeq_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0x7f)), _mm256_set1_epi32(0x7f));
    __m256i qnan = _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32((int)0x80000000u)),
                                   _mm256_set1_epi32(0x7fc00000));
    __m256 d = _mm256_mul_ps(fp8_scaled8(p), _mm256_set1_ps(256.0f));
    return _mm256_blendv_ps(d, _mm256_castsi256_ps(qnan), _mm256_castsi256_ps(nan));
}

void pq_fp8_rows_avx2(const pq_fp8_weight *w, int r0, int n, float *out) {
    for (int r = 0; r < n; r++) {
        const uint8_t *q = w->q + (size_t)(r0 + r) * w->cols;
        float *o = out + (size_t)r * w->cols, s = w->scales[w->per_channel ? r0 + r : 0];
        __m256 sv = _mm256_set1_ps(s);
        int c = 0;
        for (; c + 8 <= w->cols; c += 8) _mm256_storeu_ps(o + c, _mm256_mul_ps(sv, fp8_decode8(q + c)));
        for (; c < w->cols; c++) o[c] = s * pq_fp8_e4m3_decode(q[c]);
    }
}

void pq_int8_rows_avx2(const pq_int8_weight *w, int r0, int n, float *out) {
    for (int r = 0; r < n; r++) {
        const int8_t *q = w->q + (size_t)(r0 + r) * w->cols;
        float *o = out + (size_t)r * w->cols, s = w->scales[r0 + r];
        __m256 sv = _mm256_set1_ps(s);
        int c = 0;
        for (; c + 8 <= w->cols; c += 8) _mm256_storeu_ps(o + c, _mm256_mul_ps(sv, _mm256_cvtepi32_ps(load8(q + c))));
        for (; c < w->cols; c++) o[c] = s * (float)q[c];
    }
}

// y[t][r] = scale_r * sum_c v(q[r][c]) x[t][c], with v = decode * 2^-8 for
// fp8 (2^8 goes into the scale): 32 columns per step, two accumulators per
// token; T and fp8 are constants after inlining.
PQ_INLINE void gemv(const void *qbase, const float *scales, int per_channel, int cols, int r0, int n, const float *x,
                 int T, float *y, int ldy, int fp8) {
    const __m256i b80 = _mm256_set1_epi8((char)0x80), bff = _mm256_set1_epi8((char)0xff);
    for (int r = r0; r < r0 + n; r++) {
        const int8_t *q = (const int8_t *)qbase + (size_t)r * cols;
        __m256 acc[PQ_GEMV_MAX_T][2];
        #pragma GCC unroll 4
        for (int t = 0; t < PQ_GEMV_MAX_T; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
        __m256i nan = _mm256_setzero_si256(); // NaN codes seen: b | 0x80 == 0xff
        int c = 0;
        for (; c + 32 <= cols; c += 32) {
            pq_prefetch_stream(q + c);
            __m256 wv[4];
            if (fp8) {
                __m256i b = _mm256_loadu_si256((const __m256i *)(q + c));
                nan = _mm256_or_si256(nan, _mm256_cmpeq_epi8(_mm256_or_si256(b, b80), bff));
                __m256i h0 = fp8_half16(q + c), h1 = fp8_half16(q + c + 16);
                wv[0] = _mm256_cvtph_ps(_mm256_castsi256_si128(h0));
                wv[1] = _mm256_cvtph_ps(_mm256_extracti128_si256(h0, 1));
                wv[2] = _mm256_cvtph_ps(_mm256_castsi256_si128(h1));
                wv[3] = _mm256_cvtph_ps(_mm256_extracti128_si256(h1, 1));
            } else {
                #pragma GCC unroll 4
                for (int k = 0; k < 4; k++) wv[k] = _mm256_cvtepi32_ps(load8(q + c + 8 * k));
            }
            #pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                #pragma GCC unroll 4
                for (int t = 0; t < T; t++)
                    acc[t][k & 1] =
                        _mm256_fmadd_ps(wv[k], _mm256_loadu_ps(x + (size_t)t * cols + c + 8 * k), acc[t][k & 1]);
        }
        int tail = c; // the rest, in scalar code (a NaN code there propagates by itself)
        float s = scales[per_channel ? r : 0];
        int has_nan = !_mm256_testz_si256(nan, nan);
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            float sum = pq_hsum_ps(_mm256_add_ps(acc[t][0], acc[t][1]));
            if (fp8) sum *= 256.0f;
            for (int k = tail; k < cols; k++)
                sum += (fp8 ? pq_fp8_e4m3_decode((uint8_t)q[k]) : (float)q[k]) * x[(size_t)t * cols + k];
            y[(size_t)t * ldy + r] = has_nan ? __builtin_nanf("") : s * sum;
        }
    }
}

// One instance per T (and format) so the token loops unroll.
void pq_fp8_gemv_avx2(const pq_fp8_weight *w, int r0, int n, const float *x, int T, float *y, int ldy) {
#define FP8(t) gemv(w->q, w->scales, w->per_channel, w->cols, r0, n, x, t, y, ldy, 1)
    PQ_GEMV_T_SWITCH(T, FP8);
#undef FP8
}

void pq_int8_gemv_avx2(const pq_int8_weight *w, int r0, int n, const float *x, int T, float *y, int ldy) {
#define INT8(t) gemv(w->q, w->scales, 1, w->cols, r0, n, x, t, y, ldy, 0)
    PQ_GEMV_T_SWITCH(T, INT8);
#undef INT8
}
