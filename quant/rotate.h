// quant/rotate.h — `--rotate hadamard`: an orthogonal rotation of the
// residual stream folded into the weights offline (QuaRot's offline part),
// so the result is an ordinary Llama checkpoint that any engine runs
// unchanged and that quantizes better: the rotation spreads outlier
// channels over all of them.
//
// With h the residual stream (a row vector) and Q = pq_rot (randomized
// Hadamard, quant/hadamard.h) of order hidden, the rotated model carries
// h' = h Q. RMSNorm(h Q) = RMSNorm(h) Q only when its weight is 1 (an
// orthogonal Q keeps ||h|| but does not commute with a diagonal), so every
// norm's weight is first folded into the linears that read it:
//   embed_tokens       E' = E Q
//   q/k/v, gate/up     W' = W diag(g) Q                    (g: the norm before them)
//   o_proj, down_proj  W' = Q^T W                          (their output joins the stream)
//   lm_head            W' = W diag(g_final) Q
//   every norm weight  1
// plus a per-head rotation H (order head_dim, its own random signs) between
// v_proj and o_proj, which attention commutes with (softmax(.) V is linear
// in V per head, and every query head of a GQA group reads the same H):
//   v_proj             W' = blockdiag(H)^T W'  (a v bias: b' = b blockdiag(H))
//   o_proj             W' = Q^T W blockdiag(H)
// o_proj / down_proj biases, if present, become b Q. The down_proj input
// (the MLP's intermediate activations) is not rotated: that needs an
// online transform in the engine, which an ordinary checkpoint cannot ask for.
//
// A model with tied embeddings gets its own lm_head (E' = E Q and
// W diag(g_final) Q differ unless g_final is all ones): config.json says
// tie_word_embeddings false and the checkpoint grows by one vocab x hidden
// matrix; info->untied says so.
//
// The rotated tensors are computed in double and stored in the dtype of the
// source tensor (or F32 with f32), so an F16 model stays F16; the rounding
// is the only difference from the source function (tests/test_rotate.c:
// logits within rounding, PPL within 1e-4 relative on the fixture).
#ifndef PQ_ROTATE_H
#define PQ_ROTATE_H

#include <stdint.h>

#include "common/threads.h"
#include "eval/model.h"

typedef struct {
    uint64_t seed;   // the random signs of both rotations
    int f32;         // store every rotated tensor as F32 (else the source tensor's dtype)
    pq_pool *pool;   // may be NULL
} pq_rotate_params;

typedef struct {
    char hidden[192];   // the residual rotation (pq_rot_describe)
    char head[192];     // the per-head rotation
    int hadamard;       // both are Hadamard matrices (no random orthogonal factor)
    int untied;         // the source tied lm_head to the embeddings; the result does not
} pq_rotate_info;

// The rotated model of src (an unquantized model; borrowed, it must outlive
// the result, whose tensors that are not rotated point into it), built in
// memory: every rotated tensor is a new array (about the model's size), the
// others are src's. The result's config_json is src's config.json with
// tie_word_embeddings false when untied. Errors: a quantized source
// (PQ_ERR_FORMAT), a rotated value that is not finite in its dtype
// (PQ_ERR_NUMERIC naming the tensor), PQ_ERR_NOMEM. Free with pq_model_free.
pq_status pq_rotate_model(const pq_model *src, const pq_rotate_params *p, pq_model **out, pq_rotate_info *info);

#endif
