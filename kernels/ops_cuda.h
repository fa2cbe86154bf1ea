// kernels/ops_cuda.h — CUDA versions of the ops of a Llama block: the ops
// in kernels/ops.h, the attention of kernels/attention.h, the embedding
// gather, the KV-cache store and the loss of kernels/loss.h. Those C
// references are the specification; tests/test_engine_cuda.c checks every
// op here against them.
//
// Data on the device: the residual stream and matrix-product outputs are
// f32; the inputs of matrix products (normed activations, SwiGLU output,
// attention output), the KV cache and dense weights are 16-bit floats of
// the model's activation type (pq_act_dtype, kernels/linear_cuda.h: FP16,
// or BF16 for a model stored in BF16), passed as uint16_t bit patterns. An
// f32 -> 16-bit store rounds to nearest even, like pq_f32_to_fp16 /
// pq_f32_to_bf16 (common/half.h).
//
// Positions: the ops that depend on the position of the tokens take pos0,
// and d_pos, a device int32 holding it instead (when not NULL; then T is 1):
// a CUDA graph of one decode step reads the step's position from d_pos, so
// the same graph replays at every position.
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
#include "kernels/linear_cuda.h"

// x[t][i] = table[tokens[t]][i] widened to f32: table [vocab][n] of type dt,
// tokens [T] already checked to be < vocab, x [T][n].
pq_status pq_embed_cuda(pq_act_dtype dt, const uint16_t *d_table, const int32_t *d_tokens, int T, int n, float *d_x,
                        void *stream);

// y[t] = dt(x[t] * rsqrt(mean(x[t]^2) + eps) * w): pq_rmsnorm_ref with the
// sum of squares in f32 and the output rounded to dt. x f32 [T][n], w f32 [n].
pq_status pq_rmsnorm_cuda(pq_act_dtype dt, const float *d_x, const float *d_w, int T, int n, float eps, uint16_t *d_y,
                          void *stream);

// pq_rope_table on the device: cs/sn f32 [T][head_dim/2] for positions
// pos0..pos0+T-1 (or *d_pos), angles and cos/sin in double, from inv_freq
// double [head_dim/2].
pq_status pq_rope_table_cuda(const double *d_inv_freq, int head_dim, int pos0, const int32_t *d_pos, int T,
                             float *d_cs, float *d_sn, void *stream);

// pq_rope_apply_ref on the device (x f32 [T][stride] rotated in place, same
// f32 operations without FMA contraction, so equal to the reference).
pq_status pq_rope_apply_cuda(float *d_x, int T, int stride, int n_heads, int head_dim, const float *d_cs,
                             const float *d_sn, void *stream);

// out[i] = dt(silu(gate[i]) * up[i]) for n elements (gate, up f32).
pq_status pq_swiglu_cuda(pq_act_dtype dt, const float *d_gate, const float *d_up, size_t n, uint16_t *d_out,
                         void *stream);

// y[i] += x[i] for n f32 elements.
pq_status pq_add_cuda(float *d_y, const float *d_x, size_t n, void *stream);

// y[t][i] += b[i] for T rows of n f32 elements.
pq_status pq_add_bias_cuda(float *d_y, const float *d_b, int T, int n, void *stream);

// y[i] = dt(x[i]) for n elements (round to nearest even).
pq_status pq_f32_to_act_cuda(pq_act_dtype dt, const float *d_x, size_t n, uint16_t *d_y, void *stream);

// The KV cache store: rows pos0..pos0+T-1 (or row *d_pos) of kcache and
// vcache [n_ctx][kvd] (type dt) = dt(k), dt(v) (f32 [T][kvd]).
pq_status pq_kv_store_cuda(pq_act_dtype dt, const float *d_k, const float *d_v, int T, int kvd, int pos0,
                           const int32_t *d_pos, uint16_t *d_kcache, uint16_t *d_vcache, void *stream);

// The loss of kernels/loss.h on the device: nll[i] = logsumexp(logits[i]) -
// logits[i][targets[i]] for n rows of f32 logits [n][vocab], 0 where
// targets[i] < 0 (targets already checked to be < vocab). One block per
// row: each thread an online max and sum over a fixed stride of the row,
// then a fixed tree over the threads (deterministic; no atomics), all f32
// with expf / logf (the reference sums in double: the f32 sum of at most
// vocab terms each <= 1 has a relative error below ~vocab/256 * 2^-24 per
// thread plus 2^-24 per tree level, ~1e-6 in the NLL at vocab 128k).
pq_status pq_nll_cuda(const float *d_logits, int n, int vocab, const int32_t *d_targets, float *d_nll, void *stream);

// Causal grouped-query attention (kernels/attention.h): q f32 [T][n_heads*hd]
// (RoPE applied), k/v [n_ctx][n_kv*hd] of type dt (the cache, rows
// 0..pos0+T-1 filled; n_ctx its capacity), out [T][n_heads*hd] of type dt.
// head_dim must be even and <= PQ_ATTN_CUDA_MAX_HD (PQ_ERR_ARG otherwise).
//   T >= 2 (prefill): FlashAttention-2 on the tensor cores
//     (kernels/attention_cuda.cu); d_pos must be NULL.
//   T == 1 (decode): split-KV (flash-decoding, kernels/attention_decode_cuda.cu)
//     over d_ws (pq_attention_cuda_ws_bytes(s, n_ctx)); the split count
//     depends on n_ctx only, so with d_pos the launch is the same at every
//     position.
#define PQ_ATTN_CUDA_MAX_HD 256
size_t pq_attention_cuda_ws_bytes(const pq_attn_shape *s, int n_ctx);
pq_status pq_attention_cuda(const pq_attn_shape *s, pq_act_dtype dt, const float *d_q, const uint16_t *d_k,
                            const uint16_t *d_v, int T, int pos0, const int32_t *d_pos, int n_ctx, uint16_t *d_out,
                            void *d_ws, void *stream);

// The two attention kernels by name (tests, benchmarks): the prefill one for
// any T >= 1 (d_pos NULL), the decode one for T == 1.
pq_status pq_attention_prefill_cuda(const pq_attn_shape *s, pq_act_dtype dt, const float *d_q, const uint16_t *d_k,
                                    const uint16_t *d_v, int T, int pos0, uint16_t *d_out, void *stream);
pq_status pq_attention_decode_cuda(const pq_attn_shape *s, pq_act_dtype dt, const float *d_q, const uint16_t *d_k,
                                   const uint16_t *d_v, int pos0, const int32_t *d_pos, int n_ctx, uint16_t *d_out,
                                   void *d_ws, void *stream);

#ifdef __cplusplus
}
#endif

#endif
