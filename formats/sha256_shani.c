// SHA-256 blocks with the x86 SHA extensions (formats/sha256.c uses it
// where kernels/cpu.h says the CPU has them). The state lives in two
// registers as the instructions want it, (A, B, E, F) and (C, D, G, H);
// each sha256rnds2 does two rounds, sha256msg1 / msg2 extend the message
// schedule four words at a time.
#include <immintrin.h>

#include "formats/sha256.h"

void pq_sha256_blocks_shani(uint32_t h[8], const uint8_t *p, size_t nblocks, const uint32_t K[64]) {
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL); // big-endian words
    __m128i dcba = _mm_loadu_si128((const __m128i *)h), hgfe = _mm_loadu_si128((const __m128i *)(h + 4));
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xb1), efgh = _mm_shuffle_epi32(hgfe, 0x1b);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8), cdgh = _mm_blend_epi16(efgh, cdab, 0xf0);
    for (size_t b = 0; b < nblocks; b++, p += 64) {
        __m128i abef0 = abef, cdgh0 = cdgh, m[4];
        for (int i = 0; i < 4; i++) m[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), bswap);
        for (int g = 0; g < 16; g++) { // rounds 4g .. 4g + 3
            __m128i w = m[g & 3];
            if (g >= 4) { // W[t] = W[t-16] + s0(W[t-15]) + W[t-7] + s1(W[t-2]), t = 4g .. 4g + 3
                w = _mm_sha256msg1_epu32(m[g & 3], m[(g + 1) & 3]);
                w = _mm_add_epi32(w, _mm_alignr_epi8(m[(g + 3) & 3], m[(g + 2) & 3], 4));
                w = _mm_sha256msg2_epu32(w, m[(g + 3) & 3]);
                m[g & 3] = w;
            }
            __m128i wk = _mm_add_epi32(w, _mm_loadu_si128((const __m128i *)(K + 4 * g)));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk); // now (A, B, E, F) after two rounds
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0e));
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
    __m128i feba = _mm_shuffle_epi32(abef, 0x1b), dchg = _mm_shuffle_epi32(cdgh, 0xb1);
    _mm_storeu_si128((__m128i *)h, _mm_blend_epi16(feba, dchg, 0xf0));
    _mm_storeu_si128((__m128i *)(h + 4), _mm_alignr_epi8(dchg, feba, 8));
}
