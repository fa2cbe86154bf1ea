// eval/block_cuda.h — one Llama decoder block on the GPU, the unit both the
// CUDA inference engine (eval/engine_cuda.cu) and the calibration driver
// (calib/driver.c, through calib/block_gpu.h) run: the twin of
// eval/block_cpu.h. All work is enqueued on the stream of `ctx`.
//
// Shapes per token (T tokens at positions pos0..; "16" is the model's
// activation type, FP16 or BF16: kernels/ops_cuda.h):
//   xn = rmsnorm(x)                                    16 [H]       (hook PQ_Q)
//   q, k, v = xn Wq^T (+b), xn Wk^T (+b), xn Wv^T (+b)  f32 [qd], [kvd], [kvd]
//   rope(q), rope(k); k, v -> cache rows pos0..        16
//   att = attention(q, cache)                          16 [qd]      (hook PQ_O)
//   x += att Wo^T                                      f32 [H]
//   xn = rmsnorm(x)                                    16 [H]       (hook PQ_GATE)
//   act = silu(xn Wg^T) * (xn Wu^T)                    16 [I]       (hook PQ_DOWN)
//   x += act Wd^T
#ifndef PQ_BLOCK_CUDA_H
#define PQ_BLOCK_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

#include "eval/model.h"
#include "kernels/attention.h"
#include "kernels/linear_cuda.h"

// A block's weights on the device.
typedef struct {
    pq_linear_cuda lin[PQ_NLINEAR];
    float *d_attn_norm, *d_mlp_norm; // f32 [H]
} pq_block_cuda_layer;

// Uploads block `layer` of L for activations of type dt (its linears as
// kernels/linear_cuda.h stores them, and its norms). Errors name the tensor;
// a weight the CUDA backend cannot run is PQ_ERR_FORMAT / PQ_ERR_NUMERIC.
// On error *out holds nothing.
pq_status pq_block_cuda_layer_upload(const pq_config *c, const pq_layer *L, int layer, pq_act_dtype dt,
                                     pq_block_cuda_layer *out);

// Replaces linear `slot` of an uploaded block by W (the calibration driver
// re-uploads only the linears a stage changed). On error the slot is empty
// (zeroed) and the block must not run.
pq_status pq_block_cuda_linear_replace(const pq_config *c, pq_block_cuda_layer *L, int layer, pq_linear_slot slot,
                                       const pq_linear *W, pq_act_dtype dt);
void pq_block_cuda_layer_free(pq_block_cuda_layer *L); // NULL-safe; zeroes *L

// The largest pq_linear_cuda_workspace_bytes of L's linears at max_T tokens.
size_t pq_block_cuda_layer_workspace_bytes(const pq_block_cuda_layer *L, int max_T);

// Device scratch for blocks of up to max_T tokens over a KV cache of n_ctx
// positions, and the RoPE tables of the current call. d_xn holds, after a
// forward, the last rmsnorm's output (the engine puts the final norm there).
typedef struct {
    int max_T, n_ctx;
    pq_act_dtype dt;              // the activation type ("16" below)
    uint16_t *d_xn;               // 16 [max_T][H]
    float *d_q, *d_k, *d_v;       // f32 [max_T][qd], [max_T][kvd] x2
    uint16_t *d_att;              // 16 [max_T][qd]
    float *d_gate, *d_up;         // f32 [max_T][I]
    uint16_t *d_act;              // 16 [max_T][I]
    float *d_out;                 // f32 [max_T][H]
    float *d_cs, *d_sn;           // f32 [max_T][head_dim/2]
    double *d_inv_freq;           // [head_dim/2]
    void *d_attn_ws;              // the decode attention's slices (pq_attention_cuda_ws_bytes)
} pq_block_cuda_scratch;

// Allocates s for config c (RoPE frequencies from c, as the CPU computes
// them). On error nothing stays allocated and *s is zeroed.
pq_status pq_block_cuda_scratch_init(pq_block_cuda_scratch *s, const pq_config *c, int max_T, int n_ctx,
                                     pq_act_dtype dt);
void pq_block_cuda_scratch_free(pq_block_cuda_scratch *s); // NULL-safe; zeroes *s

// Fills the RoPE tables for positions pos0..pos0+T-1, or for the one
// position *d_pos (T = 1; a CUDA graph of a decode step), once per forward.
pq_status pq_block_cuda_rope_prepare(pq_block_cuda_scratch *s, const pq_config *c, int pos0, const int32_t *d_pos,
                                     int T, void *stream);

// Called with the device 16-bit input of each group of linears that share it
// (slots PQ_Q, PQ_O, PQ_GATE, PQ_DOWN; d_x [T][cols]), in stream order: the
// callback may enqueue a copy on `stream` and wait for it. A non-OK status
// stops the block.
typedef struct {
    pq_status (*linear_input)(void *ud, int layer, pq_linear_slot slot, const uint16_t *d_x, int T, int cols,
                              void *stream);
    void *ud;
} pq_block_cuda_hooks;

// Runs block `layer` over d_x [T][H] (f32, in place) at positions pos0..
// (or, with d_pos, T = 1 at position *d_pos); d_kcache and d_vcache are
// this layer's [s->n_ctx][kvd] buffers of the activation type (rows pos0..
// are written). ctx's workspace must cover L at T tokens. hooks may be
// NULL. Enqueued only: the caller synchronizes.
pq_status pq_block_forward_cuda(const pq_config *c, const pq_block_cuda_layer *L, int layer, float *d_x, int T,
                                int pos0, const int32_t *d_pos, uint16_t *d_kcache, uint16_t *d_vcache,
                                pq_block_cuda_scratch *s, pq_cuda_ctx *ctx, void *stream,
                                const pq_block_cuda_hooks *hooks);

#ifdef __cplusplus
}
#endif

#endif
