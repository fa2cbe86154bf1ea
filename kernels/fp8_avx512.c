// AVX-512 GEMVs of kernels/fp8.h: the AVX2 algorithms (kernels/fp8_avx2.c)
// 16 lanes wide, 64 columns per step, the last partial step masked.
#include <immintrin.h>

#include "kernels/linear.h"
#include "kernels/fp8.h"
#include "kernels/int8.h"
#include "kernels/simd.h"


// The 16 columns at q of mask m as f32: decode * 2^-8 for fp8 (NaN codes
// excepted; *nan collects them), the integer for int8.
PQ_INLINE __m512 load16(const int8_t *q, __mmask16 m, int fp8, __mmask16 *nan) {
    __m128i b = _mm_maskz_loadu_epi8(m, q);
    if (!fp8) return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b));
    *nan |= _mm_mask_cmpeq_epi8_mask(m, _mm_or_si128(b, _mm_set1_epi8((char)0x80)), _mm_set1_epi8((char)0xff));
    __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(b), 7), _mm256_set1_epi16((short)0xbf80));
    return _mm512_cvtph_ps(h);
}

PQ_INLINE void gemv(const void *qbase, const float *scales, int per_channel, int cols, int r0, int n, const float *x,
                 int T, float *y, int ldy, int fp8) {
    const __m512i b80 = _mm512_set1_epi8((char)0x80), bff = _mm512_set1_epi8((char)0xff);
    for (int r = r0; r < r0 + n; r++) {
        const int8_t *q = (const int8_t *)qbase + (size_t)r * cols;
        __m512 acc[PQ_GEMV_MAX_T][2];
        #pragma GCC unroll 4
        for (int t = 0; t < PQ_GEMV_MAX_T; t++) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
        __mmask64 nan64 = 0;
        __mmask16 nan16 = 0;
        int c = 0;
        for (; c + 64 <= cols; c += 64) {
            pq_prefetch_stream(q + c);
            __m512 wv[4];
            if (fp8) {
                nan64 |= _mm512_cmpeq_epi8_mask(_mm512_or_si512(_mm512_loadu_si512(q + c), b80), bff);
                #pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    __m512i v = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(q + c + 32 * h)));
                    v = _mm512_and_si512(_mm512_slli_epi16(v, 7), _mm512_set1_epi16((short)0xbf80));
                    wv[2 * h] = _mm512_cvtph_ps(_mm512_castsi512_si256(v));
                    wv[2 * h + 1] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v, 1));
                }
            } else {
                #pragma GCC unroll 4
                for (int k = 0; k < 4; k++)
                    wv[k] = _mm512_cvtepi32_ps(
                        _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + c + 16 * k))));
            }
            #pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                #pragma GCC unroll 4
                for (int t = 0; t < T; t++)
                    acc[t][k & 1] =
                        _mm512_fmadd_ps(wv[k], _mm512_loadu_ps(x + (size_t)t * cols + c + 16 * k), acc[t][k & 1]);
        }
        for (; c < cols; c += 16) {
            __mmask16 m = cols - c >= 16 ? 0xffff : (__mmask16)((1u << (cols - c)) - 1);
            __m512 wv = load16(q + c, m, fp8, &nan16);
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++)
                acc[t][0] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + (size_t)t * cols + c), acc[t][0]);
        }
        float s = scales[per_channel ? r : 0] * (fp8 ? 256.0f : 1.0f);
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++)
            y[(size_t)t * ldy + r] = nan64 | nan16 ? __builtin_nanf("")
                                                   : s * _mm512_reduce_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]));
    }
}

// One instance per T (and format) so the token loops unroll.
void pq_fp8_gemv_avx512(const pq_fp8_weight *w, int r0, int n, const float *x, int T, float *y, int ldy) {
#define FP8(t) gemv(w->q, w->scales, w->per_channel, w->cols, r0, n, x, t, y, ldy, 1)
    PQ_GEMV_T_SWITCH(T, FP8);
#undef FP8
}

void pq_int8_gemv_avx512(const pq_int8_weight *w, int r0, int n, const float *x, int T, float *y, int ldy) {
#define INT8(t) gemv(w->q, w->scales, 1, w->cols, r0, n, x, t, y, ldy, 0)
    PQ_GEMV_T_SWITCH(T, INT8);
#undef INT8
}
