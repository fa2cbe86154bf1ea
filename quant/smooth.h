// quant/smooth.h — the calibrated methods that fold per-channel input
// scales into a decoder block, AWQ (quant/awq.h) and SmoothQuant
// (quant/smoothquant.h), and the static activation scales of the W8A8
// schemes: one block's calibration, its result (pq_block_scales, what
// `pq calibrate` stores, quant/scales.h), and applying a result to a block.
// Applying (pq_smooth_fold + pq_smooth_quantize) is the one path shared by
// `pq quantize --method M` (calibrating inline) and `pq quantize --scales
// FILE`, so both write the same bytes.
//
// One block, in the calibration driver (calib/driver.h; quantize_block,
// every input group measured in one pass: mean |x| and max |x| per channel
// over all windows):
//  1. a sample: the first K = ceil(search_tokens / L) windows of the block's
//     input (whole windows, so the attention inside the block sees real
//     contexts) are run through the unquantized block, keeping its output
//     and every 1-in-k token of each group's input (at most 512, as the
//     reference's clip search subsamples) and of each linear's output
//     (SmoothQuant at a fixed alpha takes both from the driver's
//     measuring pass instead, pq_smooth_sample / _output);
//  2. scales per group (the fold table, quant/fold.h; o's input only
//     without grouped-query attention, pq_fold_usable):
//       awq          grid search of alpha (quant/awq.h); the error of a
//                    candidate is the mean squared difference of the BLOCK
//                    OUTPUT on the K sample windows from the unquantized
//                    block's, with only this group's linears replaced by
//                    Q(W s)/s. For gate/up and down that is exactly the
//                    reference's loss (the MLP output / down_proj output:
//                    the rest of the block is unchanged and the residual
//                    cancels); for q/k/v and o the reference stops at the
//                    attention output (o_proj included) / o_proj output,
//                    pq follows the error through the MLP to the block
//                    output as well. Mean |x| comes from all windows.
//       smoothquant  s = max|x|^a / max|W|^(1-a) (alpha fixed, or "auto": a
//                    = i/20, i = 0..20, chosen per group by the squared
//                    error of the group's linears' outputs, W8A8 with the
//                    scheme's activation quantization, on the sampled tokens)
//       fp8 / none   no smoothing
//  3. the scales are folded (pq_smooth_fold); AWQ then searches clip values
//     per row group of v/o/gate/up/down on the sampled inputs (x / s);
//  4. static activation schemes: scale = max |x / s| over all windows /
//     127.5 (INT8) or / 448 (FP8) (quant/smoothquant.h);
//  5. the linears are quantized with the target scheme's RTN after the
//     clip (pq_smooth_quantize), and their output errors measured on the
//     sampled tokens (activation quantization included; the source side is
//     the sampled output, computed again only for down_proj where the
//     measuring pass stops before it, and for linears with a bias);
//  6. what the driver's final pass runs, i.e. what the next block's input
//     is computed with: for AWQ the unquantized block, as llm-awq and
//     AutoAWQ do (every AWQ search sees the FP16 model's activations); for
//     SmoothQuant and static scales the quantized block (folded norms,
//     W8A8 linears with their static scales), as llm-compressor's
//     sequential pipeline propagates, so that the next block's static
//     activation scales are calibrated on the inputs it will see.
// Everything here runs on the CPU, the driver's block passes and
// statistics included: the driver moves to the GPU only for a method that
// needs X^T X (calib/driver.h), and these need none.
#ifndef PQ_SMOOTH_H
#define PQ_SMOOTH_H

#include "calib/data.h"
#include "calib/driver.h"
#include "quant/fold.h"
#include "formats/qtensor.h"
#include "formats/scheme.h"

typedef enum { PQ_SMOOTH_NONE, PQ_SMOOTH_AWQ, PQ_SMOOTH_SQ } pq_smooth_kind;

#define PQ_ALPHA_AUTO (-1.0)
#define PQ_SMOOTH_SAMPLE_TOKENS 512

typedef struct {
    double alpha;         // SmoothQuant migration strength in [0, 1] (0.5), or PQ_ALPHA_AUTO
    int grid;             // AWQ alpha grid (20)
    int clip_grid;        // AWQ clip grid (20; 0: no clipping); candidates down to 1 - 0.5
    int search_tokens;    // tokens of whole windows the searches measure their loss on (4096)
} pq_smooth_params;

pq_smooth_params pq_smooth_default_params(void);

// Whether kind k with params p can write scheme s: AWQ the weight-only
// integer schemes, SmoothQuant the schemes that quantize activations, no
// smoothing only static activation schemes; alpha in [0, 1] or auto, grids
// in range. PQ_ERR_ARG naming what is wrong.
pq_status pq_smooth_check(pq_smooth_kind k, const pq_smooth_params *p, const pq_scheme *s);

// ", alpha 0.5" / ", grid 20, clip grid 20, search 4096 tokens" / "" into buf.
void pq_smooth_describe(pq_smooth_kind k, const pq_smooth_params *p, char *buf, size_t cap);

// One block's calibration result. Arrays are borrowed (owned by whoever
// filled it: the search, or the scales file reader).
typedef struct {
    float *scale[PQ_NGROUPS];    // [pq_input_group_cols] or NULL (group not smoothed)
    float *clip[PQ_NLINEAR];     // [rows][pq_awq_ngroups] or NULL (not clipped)
    float act_scale[PQ_NGROUPS]; // static activation scale of the group's input (> 0, exact in
                                 // the model dtype), 0: none (dynamic or weight only)
    float alpha[PQ_NGROUPS];     // the alpha chosen (AWQ, SmoothQuant), -1: none
} pq_block_scales;

// What the result of kind k holds for scheme s: smoothing scales, clip
// values of `slot` (AWQ with clipping: every linear but q_proj and k_proj),
// static activation scales.
int pq_smooth_has_scales(pq_smooth_kind k);
int pq_smooth_has_clip(pq_smooth_kind k, const pq_smooth_params *p, pq_linear_slot slot);

// A quantized block. The norms and biases are b's (borrowed: valid while b
// is), set only where a scale was folded into them, and exact in the model
// dtype.
typedef struct {
    pq_qtensor q[PQ_NLINEAR];
    double rel_err[PQ_NLINEAR];   // ||W' - Q||^2 / ||W'||^2 of the weight as quantized (scales folded in)
    double out_err[PQ_NLINEAR];   // ||XW^T - Y||^2 / ||XW^T||^2 on the sampled tokens, -1: not measured
    const float *attn_norm, *mlp_norm;
    const float *bias[PQ_NLINEAR];
} pq_smooth_block;

void pq_smooth_block_free(pq_smooth_block *qb); // NULL-safe; leaves it zeroed

// Folds every scale of sc into b (quant/fold.h), then rounds the folded
// norms and biases to dt (the dtype they are stored in, so the file holds
// what was calibrated).
void pq_smooth_fold(pq_fold_block *b, const pq_block_scales *sc, pq_dtype dt, pq_pool *pool);

// Quantizes the folded block b: each linear clamped to its clip values,
// then RTN with scheme s, scales in dt; static activation scales attached.
// name (the model directory) prefixes messages. On error out holds nothing.
pq_status pq_smooth_quantize(pq_fold_block *b, const pq_block_scales *sc, const pq_scheme *s, pq_dtype dt, int layer,
                             const char *name, pq_pool *pool, pq_smooth_block *out);

// ---- the driver method ------------------------------------------------------

typedef struct pq_smooth pq_smooth;

// Called with each block's result (both valid until the next block).
typedef pq_status (*pq_smooth_emit)(void *ud, int layer, const pq_block_scales *sc, const pq_smooth_block *qb);

typedef struct {
    const pq_model *m;      // the source (dense linears)
    pq_smooth_kind kind;
    pq_scheme scheme;
    pq_dtype dt;            // the model dtype (scales and norms are stored in it)
    pq_smooth_params p;
    pq_pool *pool;
    pq_smooth_emit emit;
    void *ud;
    int bf16;               // the search's block passes multiply in BF16, as the driver's (--calib-precision)
} pq_smooth_config;

// Prepares the method for windows of d (the calibration data). *work_bytes:
// the most memory it holds at once (for the driver's estimate). Bad
// parameters (alpha outside [0, 1], grids < 1, a scheme the kind cannot
// write) are PQ_ERR_ARG.
pq_status pq_smooth_create(const pq_smooth_config *cfg, const pq_calib_data *d, pq_smooth **out, size_t *work_bytes);
void pq_smooth_free(pq_smooth *S); // NULL-safe

// The driver's quantize_block (calib/driver.h) with S as ud: calibrates,
// quantizes and emits block `layer`, installs what the final pass runs.
pq_status pq_smooth_quantize_block(void *S, int layer, pq_layer *L, const pq_act_stats *st, const float *X);

// The driver's sample hook with S as ud: where the search does not score
// whole blocks (SmoothQuant at a fixed alpha, static activation scales
// alone) the sampled inputs come from the driver's measuring pass instead
// of a pass of S's own.
void pq_smooth_sample(void *S, int layer, int window, pq_linear_slot slot, const float *x, int T, int cols);
// The driver's sample_output hook with S as ud: the same pass's linear
// outputs on the sampled tokens, the source side of the output errors
// (pq_smooth_block.out_err) without a pass of their own.
void pq_smooth_sample_output(void *S, int layer, int window, pq_linear_slot slot, const float *y, int T, int rows);

#endif
