// quant/awq.h — AWQ (Lin et al., 2023, "AWQ: Activation-aware Weight
// Quantization for LLM Compression and Acceleration"; reference
// implementations mit-han-lab/llm-awq awq/quantize/auto_scale.py and
// auto_clip.py, AutoAWQ awq/quantize/quantizer.py): the two searches, for
// one group of linears that read the same input x.
//
// Scale search. From the mean |x| of each input channel over the
// calibration set, for alpha = i / grid (i = 0 .. grid-1, grid 20):
//   s[j] = max(mean|x_j|, 1e-4)^alpha,   s /= sqrt(max(s) * min(s))
// the caller measures the output error with every linear W of the group
// replaced by Q(W diag(s)) diag(s)^-1 (Q: the target scheme's RTN,
// quant/rtn.h), and the alpha with the smallest error wins (the first one
// on ties; alpha = 0 is s = 1, plain RTN). The winner's s is folded into
// the op producing x (quant/fold.h). This is llm-awq's search (AutoAWQ's
// default "duo scaling" also divides by a weight statistic; pq does not).
// What "output error" means is the caller's: pq uses the block output
// (quant/smooth.h).
//
// Clip search, on a weight w that already has s folded in and the inputs
// x / s: for each output row and each group of the target scheme (the last
// one shorter when cols is not a multiple), the clamp range is shrunk to
//   c_i = max|w_g| (1 - i / clip_grid)   for i < clip_grid * max_shrink
// (20 and 0.5: 1.0, 0.95, .., 0.55 of the range), w_g clamped to [-c, c]
// and quantized with the target scheme, and the c with the smallest
// mean over tokens t of (x_tg . (Q(clamp(w_g)) - w_g))^2 is kept (i = 0, no
// clipping, is a candidate, so clipping never increases that error). The
// reference subsamples the tokens to at most 512 (every k-th); so does the
// caller here. Like the reference, q_proj and k_proj are not clipped (their
// outputs meet in q k^T, which the per-row error does not see). For a GGUF
// scheme the groups are the blocks of the matrix's ggml type (32 values; a
// whole Q4_K super-block of 256), each candidate quantized with ggml's own
// RTN (quant/ggml_grid.h).
#ifndef PQ_AWQ_H
#define PQ_AWQ_H

#include "common/threads.h"
#include "formats/safetensors.h"
#include "formats/scheme.h"

#define PQ_AWQ_MIN_XMEAN 1e-4

// s[j] = max(xmean[j], 1e-4)^alpha normalised by sqrt(max s * min s), as
// above. A channel whose activations are all zero gets the floor 1e-4 before
// normalisation, as the reference does: finite and positive.
void pq_awq_scales(const float *xmean, int n, double alpha, float *s);

// The caller's output error for a candidate s [n]; PQ_OK or an error that
// stops the search.
typedef pq_status (*pq_awq_loss_fn)(void *ud, const float *s, double *loss);

// The grid search above. s_best and tmp are [n]; history (optional)
// receives the grid's losses [grid]. PQ_ERR_NUMERIC if no candidate has a
// finite loss.
pq_status pq_awq_search_scale(const float *xmean, int n, int grid, pq_awq_loss_fn loss, void *ud, float *s_best,
                              float *tmp, double *alpha, double *best_loss, double *history);

// Groups of one row of a [rows x cols] weight under scheme s (1 per channel).
int pq_awq_ngroups(const pq_scheme *s, int cols);

// The clip search above for w [rows][cols] (finite) under scheme s (an
// integer weight-only scheme, scales stored as scale_dtype) with inputs x
// [T][cols]: clip [rows][pq_awq_ngroups] receives the clamp of each row
// group. err (optional) receives the summed per-group error with the chosen
// clips and err0 without clipping (err <= err0). Deterministic for any
// thread count (rows in fixed chunks). PQ_ERR_NOMEM if the workspace cannot
// be allocated.
pq_status pq_awq_search_clip(const float *w, int rows, int cols, const pq_scheme *s, pq_dtype scale_dtype,
                             const float *x, int T, int clip_grid, double max_shrink, pq_pool *pool, float *clip,
                             double *err, double *err0);

// Clamps w [rows][cols] to [-clip, clip] of each row group.
void pq_awq_clip_apply(float *w, int rows, int cols, const pq_scheme *s, const float *clip);

#endif
