// kernels/quant_cuda.h — the CUDA kernels of the quantized weight formats
// (kernels/qpack.h, kernels/fp8.h, kernels/w8a8.h) over weights uploaded by
// kernels/linear_cuda.h. The C _ref versions are the specification;
// tests/test_quant_cuda.c checks every kernel here against them.
//
// pq_<op>_cuda: device pointers (d_), enqueued on `stream` (a cudaStream_t),
// no waiting; PQ_ERR_CUDA if a launch fails. x is FP16 [T][cols], y f32
// [T][rows], both contiguous.
//
// The tests run these kernels through host wrappers (tests/lib/cuda_wrappers.h).
#ifndef PQ_QUANT_CUDA_H
#define PQ_QUANT_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "common/status.h"
#include "kernels/linear_cuda.h"

// Tokens per pass of the fused GEMV: the n = 8 of the m16n8k16 tensor-core
// tile, so 1..8 tokens cost the same weight traffic.
#define PQ_CUDA_GEMV_T 8
// Up to this many tokens pq_linear_cuda_forward runs GEMV passes (8 tokens
// each) rather than dequantizing panels: a pass reads 0.5 (INT4) to 1
// (8-bit) bytes per weight, a panel costs ~4.5 bytes per weight of traffic
// plus a GEMM, so passes win below ~40 tokens.
#define PQ_CUDA_GEMV_MAX_T 32

// The fused GEMV, y[t][r] = sum_c W[r][c] x[t][c] (+ bias[r]) for 1 <= T <=
// PQ_CUDA_GEMV_T, weight only. The weight is read once, 16-byte vectors of
// packed words dequantized to FP16 in registers and multiplied on the
// tensor cores (mma.sync m16n8k16, f32 accumulation), for QPACK 4 and 8 bits
// without g_idx whose groups are whole vectors (group a multiple of 32
// codes at 4 bits, 16 at 8 bits, or one group per row), INT8 and FP8. Per
// row scales (INT8, FP8, one QPACK group per row) multiply the f32 sum, so
// the products are exact; per group scales are folded into the FP16 weight
// ((q - zero) * scale rounded to FP16, 2^-11 relative). Any other QPACK
// weight runs pq_qpack_gemv_generic_cuda.
pq_status pq_qlinear_gemv_cuda(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y, void *stream);

// The GEMV of any QPACK weight (2..8 bits, any group, g_idx) with the
// specification's arithmetic: each weight scale * (q - zero) in f32, f32
// sums. One warp per row. 1 <= T <= PQ_CUDA_GEMV_T.
pq_status pq_qpack_gemv_generic_cuda(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y,
                                     void *stream);

// Rows r0..r0+n of a quantized W as the format's _ref computes them in f32
// (one f32 multiply per weight), rounded to FP16 (nearest even):
// out [n][cols]. The GEMM path's panels.
pq_status pq_qlinear_rows_cuda(const pq_linear_cuda *L, int r0, int n, uint16_t *d_out, void *stream);

// W8A8 activation quantization of x FP16 [T][cols] exactly as
// kernels/w8a8.h specifies it (per token dynamic or static scale; INT8 or
// E4M3 codes; a non-finite token gets scale NaN and codes 0): codes
// q [T_pad][ld] (bytes; columns past cols and tokens past T are 0) and
// scale [T_pad] (0 past T). ld >= cols, T_pad >= T.
pq_status pq_actq_cuda(const pq_actq *act, const uint16_t *d_x, int T, int cols, int ld, int T_pad, uint8_t *d_q,
                       float *d_scale, void *stream);

// W8A8 epilogue, kernels/w8a8.h's order: y[t][r] = sx[t] * (sw[r] * (float)acc[t][r]),
// then + bias[r] in a separate rounding. acc [T][ldacc] is int32 (is_int) or
// f32; sw has rows entries (per_channel) or one.
pq_status pq_w8a8_epilogue_cuda(int is_int, const void *d_acc, int ldacc, const float *d_sx, const float *d_sw,
                                int per_channel, const float *d_bias, int T, int rows, float *d_y, void *stream);

// pq_linear_cuda_forward with its kernel chosen by the caller (tests).
typedef enum {
    PQ_CUDA_PATH_AUTO,     // what pq_linear_cuda_forward chooses
    PQ_CUDA_PATH_GEMV,     // pq_qlinear_gemv_cuda passes (any T, 8 tokens at a time)
    PQ_CUDA_PATH_GENERIC,  // pq_qpack_gemv_generic_cuda passes (QPACK only)
    PQ_CUDA_PATH_PANEL,    // dequantized panels + cuBLAS (any T)
} pq_cuda_path;
pq_status pq_linear_cuda_forward_path(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y,
                                      pq_cuda_ctx *ctx, pq_cuda_path path);

#ifdef __cplusplus
}
#endif

#endif
