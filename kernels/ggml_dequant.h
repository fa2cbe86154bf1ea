// kernels/ggml_dequant.h — ggml block types to f32 (the _ref, the spec).
//
// Supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K (layouts in kernels/ggml_blocks.h). Every value is
// computed in f32 in the order ggml's dequantize_row_* uses (scales widened
// from fp16 exactly, then the products and differences the layout comment
// gives, left to right), so the result is bit-exact with ggml and with the
// gguf Python package's dequantizers (tests/test_ggml_dequant.c checks it).
// Blocks are read byte-wise: src needs no alignment.
#ifndef PQ_GGML_DEQUANT_H
#define PQ_GGML_DEQUANT_H

#include <stdint.h>

#include "kernels/ggml_blocks.h"

// 1 if pq_ggml_dequant_ref handles type t.
int pq_ggml_can_dequant(uint32_t t);

// src: n values of type t (n a multiple of its block size, so n / block
// blocks) -> dst[n]. t must satisfy pq_ggml_can_dequant.
void pq_ggml_dequant_ref(pq_ggml_type t, const void *src, float *dst, int64_t n);

#endif
