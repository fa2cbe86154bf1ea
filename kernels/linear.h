// kernels/linear.h — one interface for every linear layer, whatever its
// weight format.
//
//   y[T, rows] = x[T, cols] . W[rows, cols]^T (+ bias[rows])
//
// For T <= PQ_GEMV_MAX_T the format's GEMV kernel streams the weight once;
// otherwise x is packed once per linear (512 tokens at a time) and each
// task widens / dequantizes a range of rows, 8 at a time, straight into
// packed panels in its cache-sized scratch, which kernels/gemm.h multiplies
// with every token block. A quantized weight is never expanded to a full
// dense matrix, and the outputs do not depend on the thread count. A W8A8 linear (act.type != PQ_ACTQ_NONE) quantizes x
// first, 512 tokens at a time, and runs the INT8 x INT8 or FP8 x FP8
// product of kernels/w8a8.h (integer GEMV / VNNI GEMM on packed panels; FP8
// through the FP8 GEMV or decoded panels + sgemm).
#ifndef PQ_LINEAR_H
#define PQ_LINEAR_H

#include <stddef.h>

#include "common/status.h"
#include "common/threads.h"
#include "kernels/dense.h"
#include "kernels/fp8.h"
#include "kernels/int8.h"
#include "kernels/qpack.h"

// The most tokens a linear runs through its format's GEMV (one pass over the
// weight for all of them); more go through panels + sgemm. Every format's
// GEMV kernel (kernels/dense.h, qpack.h, fp8.h, int8.h, w8a8.h) is written
// for T up to this.
#define PQ_GEMV_MAX_T 4

typedef enum {
    PQ_W_DENSE,   // F32 / F16 / BF16 (dense_type, w)
    PQ_W_QPACK,   // 2..8-bit packed integers, grouped or per channel (q)
    PQ_W_INT8,    // int8 per output channel (i8)
    PQ_W_FP8,     // FP8 E4M3, per-tensor or per-channel scale (f8)
} pq_wformat;

// Activation quantization of a W8A8 linear: the input is quantized before
// the product (per token with its own scale = amax/qmax, or with one static
// calibrated scale), the product runs on the quantized values, and the
// result is scaled back. Weight-only schemes have PQ_ACTQ_NONE.
typedef enum { PQ_ACTQ_NONE, PQ_ACTQ_INT8, PQ_ACTQ_FP8 } pq_actq_type;

typedef struct {
    pq_actq_type type;
    float static_scale;        // > 0: static per-tensor scale; 0: dynamic per token
} pq_actq;

typedef struct {
    pq_wformat fmt;
    int rows, cols;            // out_features, in_features
    pq_dense_type dense_type;  // PQ_W_DENSE
    const void *w;             // PQ_W_DENSE: [rows][cols]; borrowed
    pq_qpack q;                // PQ_W_QPACK
    pq_int8_weight i8;         // PQ_W_INT8
    pq_fp8_weight f8;          // PQ_W_FP8
    pq_actq act;               // W8A8: with PQ_W_INT8 (INT8 x INT8) or PQ_W_FP8 (FP8 x FP8)
    const float *bias;         // [rows] or NULL; borrowed
    const void *panels;        // or NULL: the weight packed for the GEMM path (pq_linear_pack_panels); borrowed
    int bf16;                  // with panels: packed for BF16 products (kernels/gemm.h), x rounded alike
} pq_linear;

// Scratch bytes pq_linear_forward needs for `nthreads` threads.
size_t pq_linear_workspace_bytes(const pq_linear *W, int nthreads);

// y = x W^T + b, parallel over the pool; ws holds pq_linear_workspace_bytes.
// x is [T][cols], y is [T][rows], both contiguous.
void pq_linear_forward(const pq_linear *W, const float *x, int T, float *y, void *ws, pq_pool *pool);

// Bytes of W's weight packed as the GEMM path's panels: widened to f32 in
// the CPU's tile (kernels/gemm.h), or with bf16 for BF16 products (the AMX
// layout where pq_cpu_amx(), else f32 panels of BF16 values); 0 for a W8A8
// linear (it packs its own).
size_t pq_linear_panels_bytes(const pq_linear *W, int bf16);

// Packs W's weight into buf (pq_linear_panels_bytes) over the pool and points
// W->panels at it: GEMM calls (more than PQ_GEMV_MAX_T tokens) then use those
// panels instead of packing them per chunk of tokens, with the same bits;
// with bf16 they multiply the BF16 rounding of the weight by the BF16
// rounding of x (kernels/gemm.h's BF16 products). For callers that run many
// windows through one weight (the calibration passes); buf must outlive the
// use, and W->panels = NULL ends it. ws holds pq_linear_workspace_bytes(W,
// pool size). Not for a W8A8 linear.
void pq_linear_pack_panels(pq_linear *W, void *buf, int bf16, void *ws, pq_pool *pool);

// Up to PQ_LINEAR_GROUP_MAX linears of the same input (q/k/v, gate/up):
// y[i] = x W[i]^T + b[i], equal bit for bit to pq_linear_forward on each, and
// for T <= PQ_GEMV_MAX_T in one pool call (a batch-1 decode step wakes the
// threads once per group instead of once per linear; W8A8 members that
// quantize their input alike quantize it once). Every W[i] has the same
// cols; ws holds the largest pq_linear_workspace_bytes of the members.
#define PQ_LINEAR_GROUP_MAX 3
void pq_linear_forward_group(const pq_linear *const *W, float *const *y, int n, const float *x, int T, void *ws,
                             pq_pool *pool);

// The specification: dequantize with the format's _ref and accumulate in
// double; for W8A8, the _ref activation quantizer and the _ref product of
// kernels/w8a8.h (INT8: pq_linear_forward equals it bit for bit).
void pq_linear_forward_ref(const pq_linear *W, const float *x, int T, float *y);

// Rows r0..r0+n of W as f32 (out[n][cols]): the format's _ref (the spec)
// and its optimized version, which is equal bit for bit.
void pq_linear_rows_ref(const pq_linear *W, int r0, int n, float *out);
void pq_linear_rows(const pq_linear *W, int r0, int n, float *out);

// Bytes of the weight as stored (data + scales + zero points), for reports.
size_t pq_linear_weight_bytes(const pq_linear *W);

#endif
