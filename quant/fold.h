// quant/fold.h — folding per-channel input scales into a decoder block
// (AWQ, SmoothQuant): for a group of linears that read the same input x, a
// scale s > 0 per input channel multiplies the consumers' weight columns and
// divides the op that produced x, so that the block computes the same
// function:
//   consumers   W[:, j] *= s[j]               (q/k/v, o, gate/up, down)
//   producer    norm weight[j] /= s[j]        (input_layernorm, post_attention_layernorm)
//               or linear row r /= s[r] (and its bias[r])   (v_proj, up_proj)
// Which op produces which group's input is PQ_INPUT_GROUPS (calib/driver.h):
//   q/k/v   <- input_layernorm             gate/up <- post_attention_layernorm
//   o       <- v_proj (per kv head)        down    <- up_proj
// RMSNorm is x / rms(x) * weight, so dividing its weight divides its output;
// silu(gate) * up is linear in up's output; the attention output of head h
// is a convex combination of the rows of its kv head's v, so dividing v_proj
// row r divides channel r of o_proj's input when every head has its own kv
// head. With grouped-query attention (n_kv_heads < n_heads) the heads of a
// kv group share v's rows, so o's scale would have to be shared by them; like
// llm-awq and AutoAWQ (which fold o <- v only when v_proj and o_proj have the
// same shape), pq then leaves o's input unscaled (pq_fold_usable). Measured
// on the fixture (8 heads, 4 kv heads) with the shared-scale fold instead,
// AWQ's perplexity was no better: docs/AWQ_SMOOTHQUANT.md.
//
// Everything happens on a widened f32 copy of one block (pq_fold_block),
// never on the mapped source. In exact arithmetic folding changes nothing;
// in f32 every folded weight and norm is rounded once more (relative 2^-24),
// so the block output moves by a few ulps of the terms it sums
// (tests/test_calib_methods.c checks the bound).
#ifndef PQ_FOLD_H
#define PQ_FOLD_H

#include "calib/driver.h"
#include "eval/model.h"

typedef struct {
    const pq_config *c;
    int rows[PQ_NLINEAR], cols[PQ_NLINEAR];
    float *w[PQ_NLINEAR];          // [rows][cols]
    float *bias[PQ_NLINEAR];       // [rows] or NULL (q/k/v bias of Qwen2)
    float *attn_norm, *mlp_norm;   // [hidden]
} pq_fold_block;

// Widens block L (its linears must be dense) into b, f32 copies of
// everything it folds, over the pool (may be NULL). A NaN or Inf weight is
// PQ_ERR_NUMERIC naming `name` (the model directory), the module and the
// element. On error b holds nothing.
pq_status pq_fold_block_load(const pq_config *c, const pq_layer *L, int layer, const char *name, pq_pool *pool,
                             pq_fold_block *b);
void pq_fold_block_free(pq_fold_block *b); // NULL-safe; leaves it zeroed

// The block as dense f32 linears (borrowing b's arrays), for the engine's block.
pq_layer pq_fold_block_layer(const pq_fold_block *b);

// Whether group g's input scale folds into its producer: a norm always; a
// producer linear when its rows are the group's input channels one to one
// (o <- v_proj: n_kv_heads == n_heads; down <- up_proj always). A scale of
// group g has pq_input_group_cols(c, g) entries.
int pq_fold_usable(const pq_config *c, int g);

// The tensor a scale of group g folds into in block `layer`, into buf: its
// norm's weight ("model.layers.L.input_layernorm.weight",
// "model.layers.L.post_attention_layernorm.weight") or the producer
// linear's bias ("model.layers.L.self_attn.v_proj.bias": only a model whose
// producer has a bias has it).
void pq_fold_target(int layer, int g, char *buf, size_t cap);

// Its length in block L: hidden for a norm, the producer's rows for a bias.
int pq_fold_target_len(const pq_config *c, const pq_layer *L, int g);

// Makes v (borrowed) that tensor of block L: its norm or producer bias.
void pq_fold_install(pq_layer *L, int g, float *v);

// The group whose members include slot.
int pq_fold_group_of(pq_linear_slot slot);

// y[t][c] = x[t][c] * s[c] (divide 0) or x[t][c] / s[c] (divide 1) for rows
// t < T of cols columns (y may be x), rows in tasks over the pool (may be
// NULL): a group's weights folded, the smoothing's sampled inputs and
// outputs scaled.
void pq_fold_scale_cols(const float *x, float *y, int T, int cols, const float *s, int divide, pq_pool *pool);

// Folds s [pq_input_group_cols(g)] (finite, > 0) into b as above, the
// weights' rows over the pool (may be NULL); g must be pq_fold_usable.
void pq_fold_apply(pq_fold_block *b, int g, const float *s, pq_pool *pool);

#endif
