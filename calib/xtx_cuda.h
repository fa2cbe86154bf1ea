// calib/xtx_cuda.h — the Hessian statistic X^T X accumulated on the GPU from
// device activations, for calibration when the block passes run there
// (calib/block_gpu.h). Same convention as pq_act_stats.xtx while
// accumulating: read back, the upper triangle (row-major) holds
// sum_t x[t]^T x[t]; the caller mirrors it (pq_act_stats_finish).
//
// Each window is one cublasGemmEx C += X^T X on the stream the accumulator
// was created on: the 16-bit activations the block multiplies go straight
// into the tensor cores, whose products of two 16-bit values are exact in
// f32, summed in f32 (SYRK would halve the products but needs f32 inputs,
// a widened copy of every window, and runs on the FP32 pipes; the full
// product on the tensor cores is many times faster). Deterministic for a
// given GPU and cuBLAS (one GEMM per window, in order; cuBLAS uses no
// atomics by default), but not bit-identical to the CPU's tiled sgemm: a
// run records the device it used.
//
// f32, not f64, accumulation: an element is a sum of N = windows x len
// products (128 x 2048 = 262144 by default). cuBLAS sums a window's 2048 in
// f32 blocks (relative error ~2^-24 sqrt(2048) on a diagonal element), then
// the windows add one after another into C, a relative error of at most
// ~windows x 2^-24 (7.6e-6 at 128 windows, 3e-5 at 512) on the diagonal,
// where every term is positive, and the same in absolute terms relative to
// sqrt(H_ii H_jj) off it. GPTQ adds 1% of the mean diagonal before
// factoring, 300 times more than that, and the CPU reference accumulates
// in f32 too (calib/stats.h). An f64 C would double the memory of the
// largest Hessians (14336^2 x 8 = 1.6 GB) and need f32 inputs on the FP64
// pipes; it would only matter past ~100k windows.
#ifndef PQ_XTX_CUDA_H
#define PQ_XTX_CUDA_H

#include <stdint.h>

#include "common/status.h"
#include "kernels/linear_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pq_xtx_cuda pq_xtx_cuda;

// A zeroed accumulator for cols columns of activations of type dt, working
// on `stream` (a cudaStream_t). PQ_ERR_NO_DEVICE without CUDA or a GPU;
// PQ_ERR_CUDA naming the call.
pq_status pq_xtx_cuda_create(int cols, pq_act_dtype dt, void *stream, pq_xtx_cuda **out);
void pq_xtx_cuda_free(pq_xtx_cuda *h); // NULL-safe; waits for its stream

// Adds the T rows of device x [T][cols] (type dt): enqueued on the stream,
// not waited for.
pq_status pq_xtx_cuda_add(pq_xtx_cuda *h, const uint16_t *d_x, int T);

// Waits for the stream and copies the accumulation into host xtx
// [cols][cols]: the upper triangle (row-major) holds the sums, the lower one
// the same sums up to f32 rounding order.
pq_status pq_xtx_cuda_read(pq_xtx_cuda *h, float *xtx);

#ifdef __cplusplus
}
#endif

#endif
