// kernels/ops_cuda.h — CUDA versions of the ops of a Llama block: the ops
// in kernels/ops.h, the attention of kernels/attention.h and the embedding
// gather. Those C references are the specification; tests/test_engine_cuda.c
// checks every op here against them.
//
// Data on the device: the residual stream and matrix-product outputs are
// f32; the inputs of matrix products (normed activations, SwiGLU output,
// attention output), the KV cache and the weights are IEEE FP16, passed as
// uint16_t bit patterns (__half on the device). An f32 -> FP16 store rounds
// to nearest even, like pq_f32_to_fp16 (common/half.h).
//
// pq_<op>_cuda: every pointer is a device pointer (d_), the work is enqueued
// on `stream` (a cudaStream_t; NULL is the legacy default stream) and the
// call returns without waiting. It returns PQ_ERR_CUDA if the launch fails;
// a fault while the kernel runs shows up at the next synchronizing call.
// Sizes of 0 launch nothing.
//
// The tests run these ops through host wrappers (tests/lib/cuda_wrappers.h).
#ifndef PQ_OPS_CUDA_H
#define PQ_OPS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "common/status.h"
#include "kernels/attention.h"
#include "kernels/linear.h"

// x[t][i] = table[tokens[t]][i] widened to f32: table FP16 [vocab][n], tokens
// [T] already checked to be < vocab, x [T][n].
pq_status pq_embed_cuda(const uint16_t *d_table, const int32_t *d_tokens, int T, int n, float *d_x, void *stream);

// y[t] = FP16(x[t] * rsqrt(mean(x[t]^2) + eps) * w): pq_rmsnorm_ref with the
// sum of squares in f32 and the output rounded to FP16. x f32 [T][n], w f32 [n].
pq_status pq_rmsnorm_cuda(const float *d_x, const float *d_w, int T, int n, float eps, uint16_t *d_y,
                          void *stream);

// pq_rope_table on the device: cs/sn f32 [T][head_dim/2] for positions
// pos0..pos0+T-1, angles and cos/sin in double, from inv_freq double [head_dim/2].
pq_status pq_rope_table_cuda(const double *d_inv_freq, int head_dim, int pos0, int T, float *d_cs, float *d_sn,
                             void *stream);

// pq_rope_apply_ref on the device (x f32 [T][stride] rotated in place, same
// f32 operations without FMA contraction, so equal to the reference).
pq_status pq_rope_apply_cuda(float *d_x, int T, int stride, int n_heads, int head_dim, const float *d_cs,
                             const float *d_sn, void *stream);

// out[i] = FP16(silu(gate[i]) * up[i]) for n elements (gate, up f32).
pq_status pq_swiglu_cuda(const float *d_gate, const float *d_up, size_t n, uint16_t *d_out, void *stream);

// y[i] += x[i] for n f32 elements.
pq_status pq_add_cuda(float *d_y, const float *d_x, size_t n, void *stream);

// y[t][i] += b[i] for T rows of n f32 elements.
pq_status pq_add_bias_cuda(float *d_y, const float *d_b, int T, int n, void *stream);

// y[i] = FP16(x[i]) for n elements (round to nearest even).
pq_status pq_f32_to_f16_cuda(const float *d_x, size_t n, uint16_t *d_y, void *stream);

// Causal grouped-query attention (kernels/attention.h) with an online softmax
// in f32: q f32 [T][n_heads*hd] (RoPE applied), k/v FP16 [pos0+T][n_kv*hd]
// (the cache, rows 0..pos0+T-1 filled), out FP16 [T][n_heads*hd].
// head_dim must be even and <= PQ_ATTN_CUDA_MAX_HD (PQ_ERR_ARG otherwise).
#define PQ_ATTN_CUDA_MAX_HD 256
pq_status pq_attention_cuda(const pq_attn_shape *s, const float *d_q, const uint16_t *d_k, const uint16_t *d_v,
                            int T, int pos0, uint16_t *d_out, void *stream);

#ifdef __cplusplus
}
#endif

#endif
