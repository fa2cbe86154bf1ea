// kernels/simd.h — what the ISA kernel files (kernels/*_avx2.c,
// *_avx512.c) share. Include only from a file compiled with at least
// -mavx2 -mfma -mf16c (the AVX-512 files are compiled with those too).
#ifndef PQ_SIMD_H
#define PQ_SIMD_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/linear.h"

#define PQ_INLINE static inline __attribute__((always_inline))

// Software prefetch of a streamed weight, PQ_PREFETCH bytes ahead of the
// current load: the hardware streamer alone leaves a single thread at ~60%
// of the read bandwidth (it restarts at every 4 KB page); 4..16 KB ahead
// measured alike. Into L2 (the T1 hint), not L1: one thread's F16 GEMV over
// SmolLM2's mmap'd weights ran at 12.9-13.2 GB/s with T1 and 10.4-11.0 GB/s
// with T0, against 13.6 GB/s for a plain read loop (Xeon with AMX, 2026-12-03;
// L1's few fill buffers, held by the prefetches, stall the demand loads).
#define PQ_PREFETCH 8192
PQ_INLINE void pq_prefetch_stream(const void *p) { _mm_prefetch((const char *)p + PQ_PREFETCH, _MM_HINT_T1); }

// The GEMV kernels' token count as a compile-time constant: CALL(t) is
// expanded once for each t in 1..PQ_GEMV_MAX_T and the one for T runs, so
// that the callee's loops over tokens unroll (T outside 1..PQ_GEMV_MAX_T
// runs the largest).
_Static_assert(PQ_GEMV_MAX_T == 4, "PQ_GEMV_T_SWITCH instantiates T = 1..4");
#define PQ_GEMV_T_SWITCH(T, CALL)                                                                                      \
    switch (T) {                                                                                                       \
    case 1: CALL(1); break;                                                                                            \
    case 2: CALL(2); break;                                                                                            \
    case 3: CALL(3); break;                                                                                            \
    default: CALL(4); break;                                                                                           \
    }

// The packed width as a compile-time constant where it is a common one:
// CALL(4) or CALL(8), else CALL(bits), so that the unpacking of 4- and
// 8-bit codes is specialized (CALL expands to an always-inline call).
#define PQ_BITS_SWITCH(bits, CALL)                                                                                     \
    do {                                                                                                               \
        if ((bits) == 4) CALL(4);                                                                                      \
        else if ((bits) == 8) CALL(8);                                                                                 \
        else CALL(bits);                                                                                               \
    } while (0)

// The sum of the 8 floats of v: halves, then pairs (a fixed order).
PQ_INLINE float pq_hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// r[0..8) transposed in place: afterwards r[j][i] is what r[i][j] was.
PQ_INLINE void pq_transpose8_ps(__m256 r[8]) {
    __m256 t[8];
#pragma GCC unroll 4
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 2
    for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
        t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) r[i] = t[i];
}

// The largest of x[0..n) as the softmaxes take it (kernels/attention_avx2.c,
// attention_avx512.c): 8 lanes over the whole groups of 8, in four
// independent chains (so that the loop is not bound by the latency of
// one), then across the lanes, then the tail. Without NaNs the order does not
// matter (the largest value is the same; a +-0 tie picks either zero, and
// x - (+0) equals x - (-0) but for x = -0, whose exp is 1 either way).
PQ_INLINE float pq_softmax_max(const float *x, int n) {
    int n8 = n / 8 * 8, i = 0;
    __m256 m[4] = {_mm256_set1_ps(-INFINITY), _mm256_set1_ps(-INFINITY), _mm256_set1_ps(-INFINITY),
                   _mm256_set1_ps(-INFINITY)};
    for (; i + 32 <= n8; i += 32)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) m[c] = _mm256_max_ps(m[c], _mm256_loadu_ps(x + i + 8 * c));
    for (; i < n8; i += 8) m[0] = _mm256_max_ps(m[0], _mm256_loadu_ps(x + i));
    __m256 mv = _mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3]));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float mx = _mm_cvtss_f32(h);
    for (i = n8; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    return mx;
}

// The largest |x[i]| of x[0..n) as float bits with the sign cleared (for
// floats without a sign, a larger one has larger bits; an infinity or NaN
// has bits of at least 0x7f800000; 0 for n = 0): 8 lanes in four chains,
// then across the lanes, then the tail.
PQ_INLINE uint32_t pq_amax_bits_avx2(const float *x, size_t n) {
    const __m256i abs = _mm256_set1_epi32(0x7fffffff);
    __m256i b[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            b[k] = _mm256_max_epu32(b[k], _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i + 8 * k)), abs));
    for (; i + 8 <= n; i += 8)
        b[0] = _mm256_max_epu32(b[0], _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), abs));
    __m256i bv = _mm256_max_epu32(_mm256_max_epu32(b[0], b[1]), _mm256_max_epu32(b[2], b[3]));
    uint32_t lanes[8], m = 0;
    _mm256_storeu_si256((__m256i *)lanes, bv);
    for (int l = 0; l < 8; l++) m = lanes[l] > m ? lanes[l] : m;
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, 4);
        u &= 0x7fffffffu;
        m = u > m ? u : m;
    }
    return m;
}

// The sum of the 8 int32 of v (wrapping, as the integer sums they finish are exact).
PQ_INLINE int32_t pq_hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

// 8 elements of a dense weight (kernels/dense.h) from element i, widened
// to f32 (exact).
PQ_INLINE __m256 pq_dense_load8(pq_dense_type dt, const void *w, size_t i) {
    switch (dt) {
    case PQ_DENSE_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + i)));
    case PQ_DENSE_BF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + i))), 16));
    case PQ_DENSE_F32: break;
    }
    return _mm256_loadu_ps((const float *)w + i);
}

// exp(x) per lane, within 2 ulp of expf: x = n ln2 + r with |r| <= ln2/2,
// Cephes' degree-6 polynomial for e^r, then 2^n. NaN stays NaN; x is
// clamped to [-87.33, 88.38] first (where 2^n is a normal float), so lanes
// below give ~1e-38 instead of a subnormal or 0, lanes above ~2.4e38 instead
// of Inf: callers use it where those ends do not matter (sums of exp(x -
// max), SiLU) and say so.
#define PQ_EXP_POLY(T, fma, mul, add, set1, r)                                                                     \
    do {                                                                                                           \
        T p_ = set1(1.9875691500e-4f);                                                                             \
        p_ = fma(p_, r, set1(1.3981999507e-3f));                                                                   \
        p_ = fma(p_, r, set1(8.3334519073e-3f));                                                                   \
        p_ = fma(p_, r, set1(4.1665795894e-2f));                                                                   \
        p_ = fma(p_, r, set1(1.6666665459e-1f));                                                                   \
        p_ = fma(p_, r, set1(5.0000001201e-1f));                                                                   \
        r = add(fma(p_, mul(r, r), r), set1(1.0f));                                                                \
    } while (0)

PQ_INLINE __m256 pq_exp_avx2(__m256 x) {
    // max/min return their second operand when either is NaN: x stays NaN
    x = _mm256_min_ps(_mm256_set1_ps(88.3762626647949f), _mm256_max_ps(_mm256_set1_ps(-87.3365447504f), x));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    PQ_EXP_POLY(__m256, _mm256_fmadd_ps, _mm256_mul_ps, _mm256_add_ps, _mm256_set1_ps, r);
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(r, _mm256_castsi256_ps(e));
}

#ifdef __AVX512F__
PQ_INLINE __m512 pq_exp_avx512(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(88.3762626647949f), _mm512_max_ps(_mm512_set1_ps(-87.3365447504f), x));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    PQ_EXP_POLY(__m512, _mm512_fmadd_ps, _mm512_mul_ps, _mm512_add_ps, _mm512_set1_ps, r);
    return _mm512_scalef_ps(r, n);
}
#endif

#endif
