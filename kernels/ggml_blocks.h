// kernels/ggml_blocks.h — the block layouts of ggml's tensor types, as GGUF
// files store them, shared by the C dequantizers (kernels/ggml_dequant.h)
// and any later C or CUDA code that reads them in place.
//
// A tensor of a block type is a sequence of blocks along its rows (ggml's
// ne[0], the fastest dimension); each block holds `block` consecutive values
// in `bytes` bytes, little-endian, unaligned. fp16 fields are IEEE binary16
// bit patterns. The layouts follow ggml's ggml-common.h; every struct is
// locked by _Static_assert on its size and field offsets, so a compiler that
// pads differently fails to build instead of misreading files.
//
//   Q4_0  x = d * (q - 8),        q in [0,15]; byte j holds values j (low nibble) and j+16 (high)
//   Q4_1  x = d * q + m,          q in [0,15]; nibbles as Q4_0
//   Q5_0  x = d * (q - 16),       q in [0,31]; low 4 bits as Q4_0, bit 4 of value j is bit j of qh (LE u32)
//   Q5_1  x = d * q + m,          q in [0,31]; as Q5_0
//   Q8_0  x = d * q,              q int8
//   Q2_K  256 values in 16 groups of 16: x = (d * sc) * q - (dmin * mn), q in [0,3],
//         scales[i] = sc | mn << 4
//   Q3_K  16 groups of 16: x = (d * (sc - 32)) * (q - 4*!h), q in [0,3] with high bit h from hmask,
//         6-bit sc packed in 12 bytes
//   Q4_K  8 groups of 32: x = (d * sc) * q - (dmin * mn), q in [0,15], 6-bit sc / mn packed in 12 bytes
//   Q5_K  as Q4_K with q in [0,31], bit 4 from qh
//   Q6_K  16 groups of 16: x = (d * sc) * (q - 32), q in [0,63] (4 low bits in ql, 2 high in qh), sc int8
// The exact element order of each type is spelled out in kernels/ggml_dequant.c.
#ifndef PQ_GGML_BLOCKS_H
#define PQ_GGML_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

// ggml's type ids, as GGUF tensor infos store them (ggml.h enum ggml_type;
// 4, 5 and 31..33, 36..38 were removed from ggml and never appear in files).
typedef enum {
    PQ_GGML_F32 = 0, PQ_GGML_F16 = 1, PQ_GGML_Q4_0 = 2, PQ_GGML_Q4_1 = 3,
    PQ_GGML_Q5_0 = 6, PQ_GGML_Q5_1 = 7, PQ_GGML_Q8_0 = 8, PQ_GGML_Q8_1 = 9,
    PQ_GGML_Q2_K = 10, PQ_GGML_Q3_K = 11, PQ_GGML_Q4_K = 12, PQ_GGML_Q5_K = 13,
    PQ_GGML_Q6_K = 14, PQ_GGML_Q8_K = 15, PQ_GGML_IQ2_XXS = 16, PQ_GGML_IQ2_XS = 17,
    PQ_GGML_IQ3_XXS = 18, PQ_GGML_IQ1_S = 19, PQ_GGML_IQ4_NL = 20, PQ_GGML_IQ3_S = 21,
    PQ_GGML_IQ2_S = 22, PQ_GGML_IQ4_XS = 23, PQ_GGML_I8 = 24, PQ_GGML_I16 = 25,
    PQ_GGML_I32 = 26, PQ_GGML_I64 = 27, PQ_GGML_F64 = 28, PQ_GGML_IQ1_M = 29,
    PQ_GGML_BF16 = 30, PQ_GGML_TQ1_0 = 34, PQ_GGML_TQ2_0 = 35, PQ_GGML_MXFP4 = 39,
    PQ_GGML_TYPE_END = 40 // one past the largest id
} pq_ggml_type;

#define PQ_QK 32   // values per block of the 32-value types
#define PQ_QK_K 256 // values per super-block of the K types

typedef struct {
    uint16_t d;
    uint8_t qs[PQ_QK / 2];
} pq_block_q4_0;

typedef struct {
    uint16_t d, m;
    uint8_t qs[PQ_QK / 2];
} pq_block_q4_1;

typedef struct {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[PQ_QK / 2];
} pq_block_q5_0;

typedef struct {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[PQ_QK / 2];
} pq_block_q5_1;

typedef struct {
    uint16_t d;
    int8_t qs[PQ_QK];
} pq_block_q8_0;

typedef struct {
    uint8_t scales[PQ_QK_K / 16]; // low nibble: scale, high nibble: min
    uint8_t qs[PQ_QK_K / 4];      // 2-bit codes
    uint16_t d, dmin;
} pq_block_q2_k;

typedef struct {
    uint8_t hmask[PQ_QK_K / 8]; // bit 2 of each code (set: no -4 offset)
    uint8_t qs[PQ_QK_K / 4];    // bits 0..1
    uint8_t scales[12];         // 16 6-bit scales
    uint16_t d;
} pq_block_q3_k;

typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];        // 8 6-bit scales and 8 6-bit mins
    uint8_t qs[PQ_QK_K / 2];   // 4-bit codes
} pq_block_q4_k;

typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[PQ_QK_K / 8];   // bit 4 of each code
    uint8_t qs[PQ_QK_K / 2];   // bits 0..3
} pq_block_q5_k;

typedef struct {
    uint8_t ql[PQ_QK_K / 2];     // bits 0..3
    uint8_t qh[PQ_QK_K / 4];     // bits 4..5
    int8_t scales[PQ_QK_K / 16];
    uint16_t d;
} pq_block_q6_k;

_Static_assert(sizeof(pq_block_q4_0) == 18 && offsetof(pq_block_q4_0, qs) == 2, "Q4_0 layout");
_Static_assert(sizeof(pq_block_q4_1) == 20 && offsetof(pq_block_q4_1, m) == 2 && offsetof(pq_block_q4_1, qs) == 4,
               "Q4_1 layout");
_Static_assert(sizeof(pq_block_q5_0) == 22 && offsetof(pq_block_q5_0, qh) == 2 && offsetof(pq_block_q5_0, qs) == 6,
               "Q5_0 layout");
_Static_assert(sizeof(pq_block_q5_1) == 24 && offsetof(pq_block_q5_1, qh) == 4 && offsetof(pq_block_q5_1, qs) == 8,
               "Q5_1 layout");
_Static_assert(sizeof(pq_block_q8_0) == 34 && offsetof(pq_block_q8_0, qs) == 2, "Q8_0 layout");
_Static_assert(sizeof(pq_block_q2_k) == 84 && offsetof(pq_block_q2_k, qs) == 16 && offsetof(pq_block_q2_k, d) == 80 &&
                   offsetof(pq_block_q2_k, dmin) == 82,
               "Q2_K layout");
_Static_assert(sizeof(pq_block_q3_k) == 110 && offsetof(pq_block_q3_k, qs) == 32 &&
                   offsetof(pq_block_q3_k, scales) == 96 && offsetof(pq_block_q3_k, d) == 108,
               "Q3_K layout");
_Static_assert(sizeof(pq_block_q4_k) == 144 && offsetof(pq_block_q4_k, dmin) == 2 &&
                   offsetof(pq_block_q4_k, scales) == 4 && offsetof(pq_block_q4_k, qs) == 16,
               "Q4_K layout");
_Static_assert(sizeof(pq_block_q5_k) == 176 && offsetof(pq_block_q5_k, scales) == 4 &&
                   offsetof(pq_block_q5_k, qh) == 16 && offsetof(pq_block_q5_k, qs) == 48,
               "Q5_K layout");
_Static_assert(sizeof(pq_block_q6_k) == 210 && offsetof(pq_block_q6_k, qh) == 128 &&
                   offsetof(pq_block_q6_k, scales) == 192 && offsetof(pq_block_q6_k, d) == 208,
               "Q6_K layout");

// What a type id means: its name ("Q4_K"), values per block and bytes per
// block (1 and the element size for the plain types). Defined in
// kernels/ggml_dequant.c.
typedef struct {
    const char *name;
    int block;
    int bytes;
} pq_ggml_type_info;

// The description of type id t, or NULL if ggml has no such type (an id it
// removed, or one past the end).
const pq_ggml_type_info *pq_ggml_type_get(uint32_t t);

#endif
