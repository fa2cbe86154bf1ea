// quant/rtn.h — round-to-nearest (RTN) quantization of one weight matrix.
//
// The scales follow compressed-tensors' calculate_qparams
// (src/compressed_tensors/quantization/utils/helpers.py), over each group of
// `group` columns of a row (the last group shorter when cols is not a
// multiple: a ragged group, not per channel), a whole row (per channel) or
// the whole matrix (per tensor, FP8):
//   INT, symmetric    s = max|w| / ((2^b - 1) / 2)        (max|w| / 7.5 for INT4)
//                     q = clamp(rne(w / s), -2^(b-1), 2^(b-1) - 1)
//   INT, asymmetric   lo = min(min w, 0), hi = max(max w, 0), s = (hi - lo) / (2^b - 1)
//                     z = clamp(rne(-2^(b-1) - lo / s), -2^(b-1), 2^(b-1) - 1)
//                     q = clamp(rne(w / s) + z, -2^(b-1), 2^(b-1) - 1)
//   FP8 E4M3          s = max|w| / 448, q = e4m3(w / s)    (RNE, saturating)
// s is computed in double, rounded to the dtype it is stored in (a zero
// becomes that dtype's epsilon, as compressed-tensors does) and only then
// are the codes computed from it, so dequantizing the stored codes and
// scales, w' = s * (q - z) in one fp32 multiply (kernels/qpack.h, fp8.h),
// gives exactly the values this quantizer chose. w / s is one correctly
// rounded fp32 division; rne is rintf in the default rounding mode. The
// result does not depend on the thread count.
#ifndef PQ_RTN_H
#define PQ_RTN_H

#include "common/threads.h"
#include "formats/qtensor.h"
#include "formats/scheme.h"

// Quantizes w[q->rows][q->cols] with scheme s (its bits may be anything in
// 2..8 for the integer weight-only format) into q, which the caller made
// fresh for s (pq_qtensor_init; scales stored as q->scale_dtype: F16, BF16
// or F32),
// as GPTQ takes its output. rel_err (optional) receives ||W - W'||^2 /
// ||W||^2 (0 for a zero matrix). A q made for another scheme is PQ_ERR_ARG;
// a NaN or Inf in w is PQ_ERR_NUMERIC naming `name` and the element; a scale
// that overflows the scale dtype is PQ_ERR_NUMERIC too. On error q's
// contents are unspecified (the caller frees it either way). pool may be
// NULL (serial).
pq_status pq_rtn_quantize(const float *w, const pq_scheme *s, const char *name, pq_pool *pool, pq_qtensor *q,
                          double *rel_err);

// The mse observer (s->observer == PQ_OBSERVER_MSE; llm-compressor's MSE
// observer and the GPTQ reference's `mse` option): for each group the range
// [lo, hi] above is shrunk to [p lo, p hi] for p = 1 - i / PQ_MSE_GRID,
// i = 0 .. PQ_MSE_STEPS - 1 (down to 0.81: llm-compressor's maxshrink 0.2),
// each candidate's scale and zero point computed by the formulas above from
// the shrunk range, and the candidate with the least sum |w - w'|^PQ_MSE_NORM
// over the group kept (the first on ties; i = 0 is minmax, so the error is
// never above minmax's). Every candidate is tried (no early stop), so the
// result is a function of the group's weights alone.
#define PQ_MSE_GRID 100
#define PQ_MSE_STEPS 20
#define PQ_MSE_NORM 2.4

// The scale and signed zero point RTN chooses for one group of n integer
// weights w[0..n) at `bits` bits (formulas above; zero is 0 when sym) with
// the observer: what pq_rtn_quantize stores, and what GPTQ (quant/gptq.h)
// computes at each group start so that it degenerates to RTN when H = I.
// Returns 0 and sets nothing when the minmax scale is not finite in
// scale_dtype.
int pq_rtn_group_params(const float *w, int n, int bits, int sym, pq_observer observer, pq_dtype scale_dtype,
                        float *scale, float *zero);

// sum over the group of |w - w'|^PQ_MSE_NORM for a scale and zero point (the
// mse observer's criterion; computed in float per weight, summed in double).
double pq_rtn_group_lp_error(const float *w, int n, int bits, float scale, float zero);

// A scale as stored: s rounded to scale_dtype, a zero replaced by that
// dtype's epsilon (torch.finfo(dtype).eps, as compressed-tensors does).
// Returns 0 if it is not finite in that dtype.
float pq_rtn_stored_scale(double s, pq_dtype scale_dtype);

// The signed code of w for a scale and zero point from pq_rtn_group_params:
// clamp(rne(w / scale) + zero, -2^(bits-1), 2^(bits-1) - 1), as a float.
// It dequantizes to scale * (code - zero) (one fp32 multiply).
float pq_rtn_code(float w, float scale, float zero, int bits);

#endif
