// eval/block_cpu.h — one Llama decoder block on the CPU, the unit both the
// inference engine and the calibration driver run.
//
//   x += o_proj(attention(rope(q_proj(n1)), rope(k_proj(n1)), v_proj(n1)))   n1 = rmsnorm(x)
//   x += down_proj(silu(gate_proj(n2)) * up_proj(n2))                        n2 = rmsnorm(x)
#ifndef PQ_BLOCK_CPU_H
#define PQ_BLOCK_CPU_H

#include "common/threads.h"
#include "eval/model.h"
#include "kernels/attention.h"

// linear_input is called with the input of each group of linears that
// share it: slot PQ_Q (q/k/v input), PQ_O, PQ_GATE (gate/up input),
// PQ_DOWN. x is [T][cols]. linear_output (may be NULL) is called with each
// linear's output y [T][rows] as its GEMM leaves it (before RoPE, SwiGLU
// or the residual add). inputs_only: the caller wants the inputs alone, so
// the block stops after PQ_DOWN's (no down_proj, no residual add: x is left
// half-updated).
typedef struct {
    void (*linear_input)(void *ud, int layer, pq_linear_slot slot, const float *x, int T, int cols);
    void (*linear_output)(void *ud, int layer, pq_linear_slot slot, const float *y, int T, int rows);
    void *ud;
    int inputs_only;
} pq_block_hooks;

// Scratch for blocks of up to max_T tokens attending over up to max_ctx positions.
typedef struct {
    int max_T, max_ctx, nthreads;
    float *xn, *q, *k, *v, *att, *gate, *up, *out;
    float *rope_cos, *rope_sin;   // [max_T][head_dim/2] for the current call
    void *lin_ws, *attn_ws;
} pq_block_scratch;

pq_status pq_block_scratch_init(pq_block_scratch *s, const pq_config *c, int max_T, int max_ctx, int nthreads,
                                const pq_layer *layers, int n_layers, const pq_linear *extra);
void pq_block_scratch_free(pq_block_scratch *s);

// Bytes of block L's linears packed as the GEMM path's panels (kernels/linear.h:
// pq_linear_panels_bytes; W8A8 linears take none), bf16 for BF16 products.
size_t pq_block_panels_bytes(const pq_layer *L, int bf16);

// Packs each of L's linears that takes panels into buf (pq_block_panels_bytes),
// in slot order, and points it there (pq_linear_pack_panels); ws holds the
// workspace of any of them. Setting their panels to NULL ends it.
void pq_block_pack_panels(pq_layer *L, void *buf, int bf16, void *ws, pq_pool *pool);

// Fills s->rope_cos/sin for positions pos0..pos0+T-1 (once per forward call).
void pq_block_rope_prepare(pq_block_scratch *s, const double *inv_freq, int head_dim, int pos0, int T);

// Runs block `layer` over x[T][hidden] in place at positions pos0..; kcache
// and vcache are this layer's [max_ctx][n_kv*head_dim] buffers (rows
// pos0..pos0+T-1 are written). hooks may be NULL.
void pq_block_forward_cpu(const pq_config *c, const pq_layer *L, int layer, float *x, int T, int pos0,
                          float *kcache, float *vcache, pq_block_scratch *s, pq_pool *pool,
                          const pq_block_hooks *hooks);

#endif
