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
// row (k, d) divides channel (h, d) of o_proj's input for every head h of kv
// group k. With grouped-query attention a scale of o's input is therefore
// shared by the n_heads / n_kv_heads heads of a kv group: o's group has
// n_kv_heads * head_dim independent scales, each repeated for the heads of its
// group (pq_fold_index). llm-awq and AutoAWQ skip o <- v when v_proj and
// o_proj differ in shape (GQA); pq folds it with the shared scales: exact,
// and AWQ's grid includes s = 1, so the search can only gain by it.
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
// everything it folds. A NaN or Inf weight is PQ_ERR_NUMERIC naming `name`
// (the model directory), the module and the element. On error b holds
// nothing.
pq_status pq_fold_block_load(const pq_config *c, const pq_layer *L, int layer, const char *name, pq_fold_block *b);
void pq_fold_block_free(pq_fold_block *b); // NULL-safe; leaves it zeroed

// The block as dense f32 linears (borrowing b's arrays), for the engine's block.
pq_layer pq_fold_block_layer(const pq_fold_block *b);

// Independent scales of group g: its producer's width (hidden for a norm,
// the producer linear's rows otherwise: n_kv_heads * head_dim for o).
int pq_fold_nscales(const pq_config *c, int g);

// The scale (in [0, pq_fold_nscales)) of input channel j of group g: j
// itself, or for o's channel (h, d) the v row (h / (n_heads / n_kv_heads), d).
int pq_fold_index(const pq_config *c, int g, int j);

// The group whose members include slot.
int pq_fold_group_of(pq_linear_slot slot);

// Folds s [pq_fold_nscales(g)] (finite, > 0) into b as above.
void pq_fold_apply(pq_fold_block *b, int g, const float *s);

#endif
