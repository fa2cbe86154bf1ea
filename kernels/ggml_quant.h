// kernels/ggml_quant.h — f32 to ggml block types (the _ref, the spec): the
// round-to-nearest searches of ggml's quantizers (ggml-quants.c:
// quantize_row_*_ref, and for the K types with importance weights
// quantize_row_q4_K_impl / q6_K_impl), reproduced operation for operation in
// f32 so that a row quantized here is byte-identical with ggml's (and with
// the gguf Python package's quantizers where it has them).
//
// Supported: Q4_0, Q4_1, Q5_0, Q8_0 (blocks of 32), Q4_K, Q6_K (super-blocks
// of 256); layouts in kernels/ggml_blocks.h.
//
//   Q4_0  d = m / -8 (m: the value of largest magnitude), q = min(15, trunc(x/d + 8.5))
//   Q5_0  d = m / -16, q = min(31, trunc(x/d + 16.5))
//   Q4_1  d = (max - min) / 15, m = min, q = min(15, trunc((x - min)/d + 0.5))
//   Q8_0  d = max|x| / 127, q = roundf(x/d)
//         (x/d is x * (1/d) with the f32 d before it is rounded to fp16)
//   Q4_K  per sub-block of 32 a scale and min from make_qkx2_quants' search
//         (weights |x| + rms(x)), both quantized to 6 bits under fp16 d, dmin
//         (63 steps of the largest); with importance weights qw the search is
//         make_qkx3_quants' (weights qw * sqrt(2 mean(x^2) + x^2)) and the
//         6-bit scales make_qp_quants'; codes q = clamp(rne((x + dmin*mn) / (d*sc)), 0, 15)
//   Q6_K  per sub-block of 16 a scale from make_qx_quants (weights x^2, or
//         qw), quantized to int8 under fp16 d = max / -128; codes
//         q = clamp(rne(x / (d*sc)), -32, 31) + 32
//
// The grid API splits a block's quantization into choosing its grid (the
// scales and mins above, written into the block) and choosing each value's
// code on it, so that GPTQ (quant/) can choose codes against the grids
// llama.cpp's search picked. pq_ggml_quant_ref is exactly grid + codes.
#ifndef PQ_GGML_QUANT_H
#define PQ_GGML_QUANT_H

#include <stdint.h>

#include "kernels/ggml_blocks.h"

// 1 if pq_ggml_quant_ref handles type t.
int pq_ggml_can_quant(uint32_t t);

// x[n] (finite; n a multiple of t's block) -> n / block blocks at dst.
// imatrix: NULL (ggml's quantize_row_*_ref), or n importance weights (>= 0;
// ggml's quantize_*(..., quant_weights): used by Q4_K and Q6_K, ignored by
// the 32-value types here, as pq never passes one for them).
void pq_ggml_quant_ref(pq_ggml_type t, const float *x, void *dst, int64_t n, const float *imatrix);

// The grid of one block, as its quantizer chose it.
typedef struct {
    pq_ggml_type type;
    float d, id, m;         // 32-value types: the scale as computed (f32), 1/d (0 when d is 0), Q4_1's min
    float dq, mq;           // 32-value types: d and m as stored (fp16 widened): what values dequantize with
    float sd[16], sm[16];   // K types: each sub-block's d*sc and dmin*mn as the dequantizer forms them
    uint8_t keep[PQ_QK_K];  // K types: the search's codes, used where sd is 0 (every code gives the same value)
} pq_ggml_grid;

// Chooses the grid of the block of values x[block] (weights: NULL or
// importance weights, K types only), writes its scale fields into blk (the
// codes zeroed) and describes it in g.
void pq_ggml_grid_make(pq_ggml_type t, const float *x, const float *weights, void *blk, pq_ggml_grid *g);

// The code of value x at position i of the block, as the quantizer rounds
// it (clamped to the type's range, so values off the grid get its end).
int pq_ggml_grid_code(const pq_ggml_grid *g, int i, float x);

// What code q at position i dequantizes to, bit-exact with
// kernels/ggml_dequant.h.
float pq_ggml_grid_value(const pq_ggml_grid *g, int i, int q);

// Stores code q at position i of blk (whose codes start zeroed).
void pq_ggml_block_set_code(pq_ggml_type t, void *blk, int i, int q);

#endif
