// kernels/quant_cuda.h — the CUDA kernels of the quantized weight formats
// (kernels/qpack.h, kernels/fp8.h, kernels/w8a8.h) over weights uploaded by
// kernels/linear_cuda.h. The C _ref versions are the specification;
// tests/test_quant_cuda.c checks every kernel here against them.
//
// pq_<op>_cuda: device pointers (d_), enqueued on a stream (a cudaStream_t),
// no waiting; PQ_ERR_CUDA if a launch fails. x is [T][cols] in the weight's
// activation type (L->act_dtype), y f32 [T][rows], both contiguous.
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

// Up to this many tokens pq_linear_cuda_forward runs the fused GEMV (one
// read of the weight for all of them: 0.5 to 1 byte per weight) rather than
// dequantized panels + cuBLAS (~4.5 bytes of traffic per weight and a GEMM
// launch): the GEMV wins below ~40 tokens.
#define PQ_CUDA_GEMV_MAX_T 32
// The most split-K slices of one GEMV (each a range of a row's stages).
#define PQ_CUDA_GEMV_MAX_SPLITS 16

// What a GEMV launch needs besides the weight: the stream, device workspace
// (pq_qlinear_gemv_ws_bytes) and the split-K arrival counters (zeroed
// once by whoever allocates them, n_counters >= pq_qlinear_gemv_counters;
// every launch leaves them zero), and the number of multiprocessors the
// split count is chosen for.
typedef struct {
    void *stream;
    void *d_ws;
    size_t ws_bytes;
    int *d_counters;
    int n_counters;
    int sms;
} pq_cuda_launch;

// The tiled GEMV, y[t][r] = sum_c W[r][c] x[t][c] (+ bias[r]) for 1 <= T <=
// PQ_CUDA_GEMV_MAX_T, weight only, for a tiled QPACK (4 / 8 bits), INT8 or
// FP8 weight. x is [T][ldx] with ldx = cols rounded up to 8 (16-byte rows;
// with T = 1 only x's start must be 16-byte aligned), in the stored column
// order of the weight (perm applied: pq_gather_cols_cuda). A block of 4 warps owns 64 rows (a warp one tile of 16); the
// weight's stages (and their scales and zero points, and the stage's
// columns of x for every token) are brought into shared memory by cp.async
// three or four stages ahead of use; the codes of each 16-byte vector are
// turned into exact 16-bit values (q - zero) in registers and multiplied on
// the tensor cores (mma.sync m16n8k16, f32 accumulation), one n = 8 tile
// per 8 tokens, so the weight is read once for all T tokens. The products
// are exact; each group block's sum is multiplied by its f32 scale (a
// group's scale, or the row's after the last stage), so the result is the
// specification's up to f32 summation. The rows' stages are split over
// gridDim.y slices when the row blocks alone would not fill the GPU (deter-
// ministic split-K: each slice writes its partial sums to the workspace;
// the last slice to arrive adds them in slice order).
size_t pq_qlinear_gemv_ws_bytes(const pq_linear_cuda *L, int T, int sms);
int pq_qlinear_gemv_counters(const pq_linear_cuda *L);
pq_status pq_qlinear_gemv_cuda(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y,
                               const pq_cuda_launch *lc);

// The GEMV of a QPACK weight in the rows layout (2..8 bits, any group,
// g_idx) with the specification's arithmetic: each weight scale * (q - zero)
// in f32, f32 sums. One warp per row. 1 <= T <= PQ_CUDA_GEMV_MAX_T.
pq_status pq_qpack_gemv_generic_cuda(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y,
                                     void *stream);

// Rows r0..r0+n of a quantized W as the format's _ref computes them in f32
// (one f32 multiply of the scale by the exact code), rounded to the
// activation type (nearest even): out [n][cols]. The GEMM path's panels.
// A tiled weight's rows come out in its stored column order (perm); r0 is a
// multiple of 16 for a tiled weight.
pq_status pq_qlinear_rows_cuda(const pq_linear_cuda *L, int r0, int n, uint16_t *d_out, void *stream);

// x_out [T][ld_out] = x [T][ld_in] with columns taken through perm (NULL:
// in order) for j < cols and zeros for cols <= j < ld_out: the input of a
// tiled weight with a perm, or of one whose rows of x are not 16-byte
// aligned.
pq_status pq_gather_cols_cuda(const uint16_t *d_x, int T, int cols, int ld_in, const int32_t *d_perm, int ld_out,
                              uint16_t *d_out, void *stream);

// Rearranges codes into the tiled layout: source rows r0..r0+n (n a multiple
// of 16 or the last rows) of a [rows][cols] code matrix of `bits` (4 or 8)
// bits stored at src_stride bytes per row (packed words: code c of a row in
// bits (c % per) * bits of its word c / per; bytes: one per code), columns
// taken through perm (NULL: in order). Writes the tiles r0 / 16.. of d_out
// (the whole tiled array, nst stages per row). src holds only rows r0..r0+n.
pq_status pq_qtile_cuda(const uint8_t *d_src, size_t src_stride, int r0, int n, int cols, int bits,
                        const int32_t *d_perm, int nst, uint32_t *d_out, void *stream);

// W8A8 activation quantization of x [T][cols] (type dt) exactly as
// kernels/w8a8.h specifies it (per token dynamic or static scale; INT8 or
// E4M3 codes; a non-finite token gets scale NaN and codes 0): codes
// q [T_pad][ld] (bytes; columns past cols and tokens past T are 0) and
// scale [T_pad] (0 past T). ld >= cols, T_pad >= T.
pq_status pq_actq_cuda(const pq_actq *act, pq_act_dtype dt, const uint16_t *d_x, int T, int cols, int ld, int T_pad,
                       uint8_t *d_q, float *d_scale, void *stream);

// W8A8 epilogue, kernels/w8a8.h's order: y[t][r] = sx[t] * (sw[r] * (float)acc[t][r]),
// then + bias[r] in a separate rounding. acc [T][ldacc] is int32 (is_int) or
// f32; sw has rows entries (per_channel) or one.
pq_status pq_w8a8_epilogue_cuda(int is_int, const void *d_acc, int ldacc, const float *d_sx, const float *d_sw,
                                int per_channel, const float *d_bias, int T, int rows, float *d_y, void *stream);

// pq_linear_cuda_forward with its kernel chosen by the caller (tests).
typedef enum {
    PQ_CUDA_PATH_AUTO,     // what pq_linear_cuda_forward chooses
    PQ_CUDA_PATH_GEMV,     // the fused GEMV (T <= PQ_CUDA_GEMV_MAX_T): tiled, or generic for the rows layout
    PQ_CUDA_PATH_PANEL,    // dequantized panels + cuBLAS (any T)
} pq_cuda_path;
pq_status pq_linear_cuda_forward_path(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y,
                                      pq_cuda_ctx *ctx, pq_cuda_path path);

#ifdef __cplusplus
}
#endif

#endif
