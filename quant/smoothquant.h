// quant/smoothquant.h — SmoothQuant (Xiao et al., 2023, "SmoothQuant:
// Accurate and Efficient Post-Training Quantization for Large Language
// Models"; reference mit-han-lab/smoothquant smoothquant/smooth.py,
// llm-compressor's SmoothQuantModifier) and static activation scales.
//
// Smoothing scales of a group of linears that read the same input x, from
// the per-channel activation maximum over the calibration set and the
// per-channel weight maximum over the group's linears:
//   s[j] = max|x_j|^alpha / max|W[:, j]|^(1 - alpha)
// folded into the op producing x (quant/fold.h): x / s is easier to
// quantize, W diag(s) a little harder. A channel whose activations are all
// zero (or whose weight column is all zero) gets s = 1: there is nothing to
// balance, and the reference's clamp to 1e-5 would multiply the producer by
// 1e5 and the channel's activation at inference by as much, ruining a
// static per-tensor activation scale. (llm-compressor also doubles the
// weight maximum and uses the activation range max - min; pq follows the
// paper and smooth.py.)
//
// Static activation scales follow compressed-tensors' calculate_qparams
// (quantization/utils/helpers.py) for a symmetric "tensor" strategy, as
// llm-compressor's min-max observer computes them over the calibration set:
//   INT8  amax / 127.5  (bit range 255 / 2; the maximum then saturates to 127)
//   FP8   amax / 448
// where amax = max over tokens and channels of |x / s| (the input after
// smoothing); rounded to the dtype the scale is stored in, a zero replaced
// by that dtype's epsilon (what compressed-tensors stores for an all-zero
// input).
#ifndef PQ_SMOOTHQUANT_H
#define PQ_SMOOTHQUANT_H

#include "formats/safetensors.h"

// s [n] from act_max [n] and w_max [n] (both >= 0) at alpha in [0, 1].
void pq_sq_scales(const float *act_max, const float *w_max, int n, double alpha, float *s);

// The static activation scale of an input with per-channel maxima abs_max
// [cols], divided by s_cols [cols] (NULL: no smoothing): fp8 selects /448
// instead of /127.5; the result is exactly representable in dt (F16, BF16 or
// F32) and > 0. Returns 0 if it overflows dt.
float pq_static_act_scale(const float *abs_max, const float *s_cols, int cols, int fp8, pq_dtype dt);

#endif
