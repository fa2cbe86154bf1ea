// common/half.h — scalar IEEE fp16 and bfloat16 conversions, exact.
//
// These are the specification every vectorized converter is tested against:
// fp16 -> f32 is exact (subnormals, Inf, NaN preserved); f32 -> fp16 and
// f32 -> bf16 round to nearest, ties to even, overflow to Inf, NaN stays NaN.
#ifndef PQ_HALF_H
#define PQ_HALF_H

#include <stdint.h>
#include <string.h>

static inline float pq_f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t pq_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float pq_fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return pq_f32_from_bits(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return pq_f32_from_bits(sign);
        // subnormal: man * 2^-24, exactly representable in f32
        float f = (float)man * 5.9604644775390625e-8f;
        return sign ? -f : f;
    }
    return pq_f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t pq_f32_to_fp16(float f) {
    uint32_t u = pq_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000;
    uint32_t abs = u & 0x7fffffffu;
    if (abs >= 0x7f800000u) // Inf or NaN (keep a quiet NaN payload bit)
        return (uint16_t)(sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 | ((abs >> 13) & 0x3ff) : 0));
    if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); // rounds to >= 65520: Inf
    if (abs < 0x38800000u) { // below the smallest normal 2^-14: subnormal or zero
        if (abs < 0x33000000u) return (uint16_t)sign; // < 2^-25: rounds to 0 (tie at 2^-25 -> even 0)
        uint32_t exp = abs >> 23, man = (abs & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - exp; // bits to drop so the result counts units of 2^-24
        uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t q = ((abs >> 13) - (112u << 10));
    uint32_t rem = abs & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) q++;
    return (uint16_t)(sign | q);
}

static inline float pq_bf16_to_f32(uint16_t b) { return pq_f32_from_bits((uint32_t)b << 16); }

static inline uint16_t pq_f32_to_bf16(float f) {
    uint32_t u = pq_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

#endif
