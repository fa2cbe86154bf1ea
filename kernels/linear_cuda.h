// kernels/linear_cuda.h — linear layers on the GPU: a weight uploaded to the
// device once, and one forward call whatever its format.
//
//   y[T, rows] = x[T, cols] . W[rows, cols]^T (+ bias[rows])     x FP16, y f32
//
// Formats: PQ_W_DENSE (F16 / BF16 / F32 on the host) is stored on the device
// as FP16 [rows][cols] and multiplied with cublasGemmEx (FP16 inputs, f32
// accumulation and output). Quantized formats will add their fields to
// pq_linear_cuda and a fused dequantizing kernel behind
// pq_linear_cuda_forward, keyed by `fmt`.
#ifndef PQ_LINEAR_CUDA_H
#define PQ_LINEAR_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "common/status.h"
#include "kernels/linear.h"

typedef struct {
    pq_wformat fmt;
    int rows, cols;
    uint16_t *d_w;   // PQ_W_DENSE: FP16 [rows][cols]
    float *d_bias;   // f32 [rows] or NULL
    int borrowed_w;  // d_w belongs to another pq_linear_cuda (a tied embedding): not freed here
} pq_linear_cuda;

// Copies n elements of a dense host array of type dt to a new device buffer
// as FP16 (*d_out, free with cudaFree). F16 is copied as is; BF16 and F32
// are rounded to nearest even in chunks through a bounded host buffer. A
// finite value beyond the FP16 range is refused (PQ_ERR_NUMERIC, naming
// `what` and the element). On error *d_out is NULL.
pq_status pq_cuda_upload_f16(pq_dense_type dt, const void *w, size_t n, const char *what, uint16_t **d_out);

// Uploads W (and its bias). `what` names it in messages ("layer 3
// self_attn.q_proj"). On error *out is zeroed and nothing stays allocated.
pq_status pq_linear_cuda_upload(const pq_linear *W, const char *what, pq_linear_cuda *out);

// A pq_linear_cuda over the weight of `src` (not copied, not freed) with no
// bias: the output head of a model whose embedding is tied.
pq_linear_cuda pq_linear_cuda_alias(const pq_linear_cuda *src);

// Frees the device buffers it owns and zeroes *L. NULL-safe.
void pq_linear_cuda_free(pq_linear_cuda *L);

// y = x W^T + b, enqueued on `stream` (a cudaStream_t) with `cublas` (a
// cublasHandle_t, bound to that stream here). x FP16 [T][cols] and y f32
// [T][rows] are device buffers, contiguous. PQ_ERR_CUDA names a failing call.
pq_status pq_linear_cuda_forward(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y, void *cublas,
                                 void *stream);

#ifdef __cplusplus
}
#endif

#endif
