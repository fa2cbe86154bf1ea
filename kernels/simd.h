// kernels/simd.h — what the ISA kernel files (kernels/*_avx2.c,
// *_avx512.c) share. Include only from a file compiled with at least
// -mavx2 -mfma -mf16c (the AVX-512 files are compiled with those too).
#ifndef PQ_SIMD_H
#define PQ_SIMD_H

#include <immintrin.h>
#include <stdint.h>

#include "kernels/linear.h"

#define PQ_INLINE static inline __attribute__((always_inline))

// Software prefetch distance, in bytes ahead of the current load of a
// streamed weight: the hardware streamer alone leaves a single thread at
// ~60% of the read bandwidth (it restarts at every 4 KB page); 4..16 KB
// ahead measured alike (kernels/qpack_avx512.c, dense_avx512.c).
#define PQ_PREFETCH 8192

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

// The sum of the 8 int32 of v (wrapping, as the integer sums they finish are exact).
PQ_INLINE int32_t pq_hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

#endif
