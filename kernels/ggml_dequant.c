// kernels/ggml_dequant.c — ggml's block types to f32, one _ref per layout
// (kernels/ggml_blocks.h), written from the layouts ggml publishes.
#include "kernels/ggml_dequant.h"

#include <stddef.h>
#include <string.h>

#include "common/half.h"
#include "common/status.h"

static const pq_ggml_type_info TYPES[PQ_GGML_TYPE_END] = {
    [PQ_GGML_F32] = {"F32", 1, 4},          [PQ_GGML_F16] = {"F16", 1, 2},
    [PQ_GGML_Q4_0] = {"Q4_0", 32, 18},      [PQ_GGML_Q4_1] = {"Q4_1", 32, 20},
    [PQ_GGML_Q5_0] = {"Q5_0", 32, 22},      [PQ_GGML_Q5_1] = {"Q5_1", 32, 24},
    [PQ_GGML_Q8_0] = {"Q8_0", 32, 34},      [PQ_GGML_Q8_1] = {"Q8_1", 32, 36},
    [PQ_GGML_Q2_K] = {"Q2_K", 256, 84},     [PQ_GGML_Q3_K] = {"Q3_K", 256, 110},
    [PQ_GGML_Q4_K] = {"Q4_K", 256, 144},    [PQ_GGML_Q5_K] = {"Q5_K", 256, 176},
    [PQ_GGML_Q6_K] = {"Q6_K", 256, 210},    [PQ_GGML_Q8_K] = {"Q8_K", 256, 292},
    [PQ_GGML_IQ2_XXS] = {"IQ2_XXS", 256, 66}, [PQ_GGML_IQ2_XS] = {"IQ2_XS", 256, 74},
    [PQ_GGML_IQ3_XXS] = {"IQ3_XXS", 256, 98}, [PQ_GGML_IQ1_S] = {"IQ1_S", 256, 50},
    [PQ_GGML_IQ4_NL] = {"IQ4_NL", 32, 18},  [PQ_GGML_IQ3_S] = {"IQ3_S", 256, 110},
    [PQ_GGML_IQ2_S] = {"IQ2_S", 256, 82},   [PQ_GGML_IQ4_XS] = {"IQ4_XS", 256, 136},
    [PQ_GGML_I8] = {"I8", 1, 1},            [PQ_GGML_I16] = {"I16", 1, 2},
    [PQ_GGML_I32] = {"I32", 1, 4},          [PQ_GGML_I64] = {"I64", 1, 8},
    [PQ_GGML_F64] = {"F64", 1, 8},          [PQ_GGML_IQ1_M] = {"IQ1_M", 256, 56},
    [PQ_GGML_BF16] = {"BF16", 1, 2},        [PQ_GGML_TQ1_0] = {"TQ1_0", 256, 54},
    [PQ_GGML_TQ2_0] = {"TQ2_0", 256, 66},   [PQ_GGML_MXFP4] = {"MXFP4", 32, 17},
};

const pq_ggml_type_info *pq_ggml_type_get(uint32_t t) {
    return t < PQ_GGML_TYPE_END && TYPES[t].name ? &TYPES[t] : NULL;
}

// an fp16 field at p (any alignment), widened exactly
static inline float half_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return pq_fp16_to_f32(h);
}

#define FIELD(b, type, f) ((b) + offsetof(type, f))

// x = d * (q - 8); byte j: value j in the low nibble, j + 16 in the high one
static void q4_0_ref(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += PQ_QK) {
        const uint8_t *b = src + i * (int64_t)sizeof(pq_block_q4_0), *qs = FIELD(b, pq_block_q4_0, qs);
        float d = half_at(FIELD(b, pq_block_q4_0, d));
        for (int j = 0; j < PQ_QK / 2; j++) {
            y[j] = (float)((qs[j] & 0xF) - 8) * d;
            y[j + PQ_QK / 2] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}

// x = d * q + m, nibbles as Q4_0
static void q4_1_ref(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += PQ_QK) {
        const uint8_t *b = src + i * (int64_t)sizeof(pq_block_q4_1), *qs = FIELD(b, pq_block_q4_1, qs);
        float d = half_at(FIELD(b, pq_block_q4_1, d)), m = half_at(FIELD(b, pq_block_q4_1, m));
        for (int j = 0; j < PQ_QK / 2; j++) {
            y[j] = (float)(qs[j] & 0xF) * d + m;
            y[j + PQ_QK / 2] = (float)(qs[j] >> 4) * d + m;
        }
    }
}

// the 5-bit codes of a Q5_0 / Q5_1 block: bit 4 of value j is bit j of qh
static void q5_codes(const uint8_t *qh_bytes, const uint8_t *qs, int q[PQ_QK]) {
    uint32_t qh = (uint32_t)qh_bytes[0] | (uint32_t)qh_bytes[1] << 8 | (uint32_t)qh_bytes[2] << 16 |
                  (uint32_t)qh_bytes[3] << 24;
    for (int j = 0; j < PQ_QK / 2; j++) {
        q[j] = (qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
        q[j + PQ_QK / 2] = (qs[j] >> 4) | (int)((qh >> (j + PQ_QK / 2)) & 1) << 4;
    }
}

// x = d * (q - 16)
static void q5_0_ref(const uint8_t *src, float *y, int64_t nb) {
    int q[PQ_QK];
    for (int64_t i = 0; i < nb; i++, y += PQ_QK) {
        const uint8_t *b = src + i * (int64_t)sizeof(pq_block_q5_0);
        float d = half_at(FIELD(b, pq_block_q5_0, d));
        q5_codes(FIELD(b, pq_block_q5_0, qh), FIELD(b, pq_block_q5_0, qs), q);
        for (int j = 0; j < PQ_QK; j++) y[j] = (float)(q[j] - 16) * d;
    }
}

// x = d * q + m
static void q5_1_ref(const uint8_t *src, float *y, int64_t nb) {
    int q[PQ_QK];
    for (int64_t i = 0; i < nb; i++, y += PQ_QK) {
        const uint8_t *b = src + i * (int64_t)sizeof(pq_block_q5_1);
        float d = half_at(FIELD(b, pq_block_q5_1, d)), m = half_at(FIELD(b, pq_block_q5_1, m));
        q5_codes(FIELD(b, pq_block_q5_1, qh), FIELD(b, pq_block_q5_1, qs), q);
        for (int j = 0; j < PQ_QK; j++) y[j] = (float)q[j] * d + m;
    }
}

// x = d * q
static void q8_0_ref(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += PQ_QK) {
        const uint8_t *b = src + i * (int64_t)sizeof(pq_block_q8_0), *qs = FIELD(b, pq_block_q8_0, qs);
        float d = half_at(FIELD(b, pq_block_q8_0, d));
        for (int j = 0; j < PQ_QK; j++) y[j] = (float)(int8_t)qs[j] * d;
    }
}

// Each half of the block (128 values) reads 32 bytes of qs four times, at
// shifts 0, 2, 4, 6; each pass covers two groups of 16 (bytes 0..15, 16..31),
// the groups numbered in output order. x = (d * sc) * q - (dmin * mn).
static void q2_k_ref(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = src + i * (int64_t)sizeof(pq_block_q2_k);
        const uint8_t *sc = FIELD(b, pq_block_q2_k, scales), *q = FIELD(b, pq_block_q2_k, qs);
        float d = half_at(FIELD(b, pq_block_q2_k, d)), dmin = half_at(FIELD(b, pq_block_q2_k, dmin));
        int g = 0;
        for (int half = 0; half < 2; half++, q += 32)
            for (int shift = 0; shift < 8; shift += 2)
                for (int part = 0; part < 2; part++, g++) {
                    float dl = d * (float)(sc[g] & 0xF), ml = dmin * (float)(sc[g] >> 4);
                    for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[16 * part + l] >> shift) & 3) - ml;
                }
    }
}

// The 16 6-bit scales of Q3_K: bytes 0..7 give the low 4 bits (scale j in
// byte j % 8, low nibble for j < 8, high for j >= 8), bytes 8..11 the top 2
// bits (scale j in byte 8 + j % 4 at bit 2 * (j / 4)).
static void q3_k_scales(const uint8_t *s, int out[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
        int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = lo | hi << 4;
    }
}

// As Q2_K for the layout of qs; the third bit comes from hmask: value l of
// each 32-value pass (l in 0..31) reads hmask byte l at bit (pass number
// 0..7 over the whole block). x = (d * (sc - 32)) * (q - (h ? 0 : 4)).
static void q3_k_ref(const uint8_t *src, float *y, int64_t nb) {
    int sc[16];
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = src + i * (int64_t)sizeof(pq_block_q3_k);
        const uint8_t *q = FIELD(b, pq_block_q3_k, qs), *hm = FIELD(b, pq_block_q3_k, hmask);
        float d = half_at(FIELD(b, pq_block_q3_k, d));
        q3_k_scales(FIELD(b, pq_block_q3_k, scales), sc);
        int g = 0, bit = 0;
        for (int half = 0; half < 2; half++, q += 32)
            for (int shift = 0; shift < 8; shift += 2, bit++)
                for (int part = 0; part < 2; part++, g++) {
                    float dl = d * (float)(sc[g] - 32);
                    for (int l = 16 * part; l < 16 * part + 16; l++) {
                        int code = (q[l] >> shift) & 3, high = (hm[l] >> bit) & 1;
                        *y++ = dl * (float)(code - (high ? 0 : 4));
                    }
                }
    }
}

// Scale and min j (0..7) of the 12-byte Q4_K / Q5_K scales: j < 4 in the
// low 6 bits of bytes j and j + 4; j >= 4: low 4 bits in the nibbles of
// byte j + 4, top 2 bits in the top bits of bytes j - 4 and j.
static void k4_scale_min(const uint8_t *s, int j, int *sc, int *mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4;
        *mn = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

// 4 chunks of 64 values, each reading 32 bytes of qs: low nibbles are group
// 2c, high nibbles group 2c + 1. x = (d * sc) * q - (dmin * mn).
static void q4_k_ref(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = src + i * (int64_t)sizeof(pq_block_q4_k);
        const uint8_t *s = FIELD(b, pq_block_q4_k, scales), *q = FIELD(b, pq_block_q4_k, qs);
        float d = half_at(FIELD(b, pq_block_q4_k, d)), dmin = half_at(FIELD(b, pq_block_q4_k, dmin));
        for (int c = 0; c < 4; c++, q += 32)
            for (int nib = 0; nib < 2; nib++) {
                int sc, mn;
                k4_scale_min(s, 2 * c + nib, &sc, &mn);
                float dl = d * (float)sc, ml = dmin * (float)mn;
                for (int l = 0; l < 32; l++) *y++ = dl * (float)((q[l] >> (4 * nib)) & 0xF) - ml;
            }
    }
}

// As Q4_K; bit 4 of value l of group g comes from qh byte l at bit g.
static void q5_k_ref(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = src + i * (int64_t)sizeof(pq_block_q5_k);
        const uint8_t *s = FIELD(b, pq_block_q5_k, scales), *q = FIELD(b, pq_block_q5_k, qs),
                      *qh = FIELD(b, pq_block_q5_k, qh);
        float d = half_at(FIELD(b, pq_block_q5_k, d)), dmin = half_at(FIELD(b, pq_block_q5_k, dmin));
        for (int c = 0; c < 4; c++, q += 32)
            for (int nib = 0; nib < 2; nib++) {
                int g = 2 * c + nib, sc, mn;
                k4_scale_min(s, g, &sc, &mn);
                float dl = d * (float)sc, ml = dmin * (float)mn;
                for (int l = 0; l < 32; l++) {
                    int code = ((q[l] >> (4 * nib)) & 0xF) | ((qh[l] >> g) & 1) << 4;
                    *y++ = dl * (float)code - ml;
                }
            }
    }
}

// 2 halves of 128 values; in each, value 32 * k + l (k 0..3, l 0..31) has
// its low 4 bits in ql[l + 32 * (k & 1)] (low nibble for k < 2, high for
// k >= 2) and its top 2 bits in qh[l] at bit 2k; its scale is
// scales[8 * half + 2k + l / 16]. x = (d * sc) * (q - 32).
static void q6_k_ref(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = src + i * (int64_t)sizeof(pq_block_q6_k);
        const uint8_t *ql = FIELD(b, pq_block_q6_k, ql), *qh = FIELD(b, pq_block_q6_k, qh);
        const int8_t *sc = (const int8_t *)FIELD(b, pq_block_q6_k, scales);
        float d = half_at(FIELD(b, pq_block_q6_k, d));
        for (int half = 0; half < 2; half++, y += 128, ql += 64, qh += 32, sc += 8)
            for (int k = 0; k < 4; k++)
                for (int l = 0; l < 32; l++) {
                    int lo = (ql[l + 32 * (k & 1)] >> (k < 2 ? 0 : 4)) & 0xF;
                    int code = lo | ((qh[l] >> (2 * k)) & 3) << 4;
                    y[32 * k + l] = d * (float)sc[2 * k + l / 16] * (float)(code - 32);
                }
    }
}

int pq_ggml_can_dequant(uint32_t t) {
    switch (t) {
    case PQ_GGML_F32: case PQ_GGML_F16: case PQ_GGML_BF16: case PQ_GGML_Q8_0: case PQ_GGML_Q4_0:
    case PQ_GGML_Q4_1: case PQ_GGML_Q5_0: case PQ_GGML_Q5_1: case PQ_GGML_Q2_K: case PQ_GGML_Q3_K:
    case PQ_GGML_Q4_K: case PQ_GGML_Q5_K: case PQ_GGML_Q6_K:
        return 1;
    default:
        return 0;
    }
}

void pq_ggml_dequant_ref(pq_ggml_type t, const void *src, float *dst, int64_t n) {
    const uint8_t *s = src;
    const pq_ggml_type_info *info = pq_ggml_type_get(t);
    int64_t nb = n / info->block;
    switch (t) {
    case PQ_GGML_F32: memcpy(dst, s, (size_t)n * 4); return;
    case PQ_GGML_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = half_at(s + 2 * i);
        return;
    case PQ_GGML_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = pq_bf16_to_f32((uint16_t)(s[2 * i] | s[2 * i + 1] << 8));
        return;
    case PQ_GGML_Q4_0: q4_0_ref(s, dst, nb); return;
    case PQ_GGML_Q4_1: q4_1_ref(s, dst, nb); return;
    case PQ_GGML_Q5_0: q5_0_ref(s, dst, nb); return;
    case PQ_GGML_Q5_1: q5_1_ref(s, dst, nb); return;
    case PQ_GGML_Q8_0: q8_0_ref(s, dst, nb); return;
    case PQ_GGML_Q2_K: q2_k_ref(s, dst, nb); return;
    case PQ_GGML_Q3_K: q3_k_ref(s, dst, nb); return;
    case PQ_GGML_Q4_K: q4_k_ref(s, dst, nb); return;
    case PQ_GGML_Q5_K: q5_k_ref(s, dst, nb); return;
    case PQ_GGML_Q6_K: q6_k_ref(s, dst, nb); return;
    default: PQ_ASSERT(!"pq_ggml_dequant_ref: type without a dequantizer");
    }
}
