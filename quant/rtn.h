// quant/rtn.h — round-to-nearest (RTN) quantization of one weight matrix.
//
// This is compressed-tensors' arithmetic (0.19: calculate_qparams in
// quantization/utils/helpers.py, _quantize in lifecycle/forward_helpers.py),
// as llm-compressor's QuantizationModifier runs it on a model loaded in its
// own dtype D (F16, BF16 or F32; D = the scale dtype): the weight as stored
// in D, every operation one IEEE operation in D, ties to even. Over each
// group of `group` columns of a row (the last group shorter when cols is not
// a multiple: a ragged group, not per channel), a whole row (per channel) or
// the whole matrix (per tensor, FP8), with lo = min(min w, 0), hi = max(max w, 0):
//   INT, symmetric    s = max(-lo, hi) / ((2^b - 1) / 2)           (/ 7.5 for INT4)
//   INT, asymmetric   s = (hi - lo) / (2^b - 1)
//                     z = rne(clamp(-2^(b-1) - lo / s, -2^(b-1), 2^(b-1) - 1))
//   FP8 E4M3          s = max|w| / 448
//   codes             INT: q = rne(clamp((w / s) + z, -2^(b-1), 2^(b-1) - 1))
//                     FP8: q = e4m3(w / s)                  (RNE, saturating)
// (a parenthesis is one operation rounded to D). A scale that is 0 becomes
// D's epsilon (torch.finfo(D).eps) after z is computed: a zero group has
// z = 0 (compressed-tensors' z is then NaN, which torch casts to int8 0),
// a scale that underflowed z = 2^(b-1) - 1 (lo / 0 = -Inf). Every operation
// in D is computed as the f32 operation rounded to D, which is the same
// value: f32 has more than twice the precision of F16 and BF16 plus two
// bits, so the double rounding is innocuous. Dequantizing the stored codes
// and scales, w' = s * (q - z) in one fp32 multiply (kernels/qpack.h,
// fp8.h), gives exactly the values this quantizer chose. The result does not
// depend on the thread count.
//
// A GGUF scheme (formats/scheme.h) is quantized with ggml's own round to
// nearest instead (quant/ggml_grid.h: the blocks llama-quantize writes).
#ifndef PQ_RTN_H
#define PQ_RTN_H

#include "common/threads.h"
#include "formats/qtensor.h"
#include "formats/scheme.h"

// Quantizes w[q->rows][q->cols] with scheme s (its bits may be anything in
// 2..8 for the integer weight-only format) into q, which the caller made
// fresh for s (pq_qtensor_init; scales stored as q->scale_dtype: F16, BF16
// or F32), as GPTQ takes its output. Each weight is first rounded to
// q->scale_dtype, the dtype D above (the identity for a weight read from a
// model of that dtype; AWQ's and SmoothQuant's rescaled weights are stored
// in D, as llm-compressor stores them, before they are quantized).
// rel_err (optional) receives ||W - W'||^2 / ||W||^2 against the unrounded
// w (0 for a zero matrix). A q made for another scheme is PQ_ERR_ARG;
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
// weights w[0..n) at `bits` bits (formulas above, in scale_dtype, the group's
// minimum and maximum first rounded to it; zero is 0 when sym) with the
// observer: what pq_rtn_quantize stores, and what GPTQ (quant/gptq.h)
// computes at each group start so that it degenerates to RTN when H = I.
// Returns 0 and sets nothing when the minmax scale is not finite in
// scale_dtype.
int pq_rtn_group_params(const float *w, int n, int bits, int sym, pq_observer observer, pq_dtype scale_dtype,
                        float *scale, float *zero);

// sum over the group of |w - w'|^PQ_MSE_NORM for a scale and zero point (the
// mse observer's criterion, with f32 codes (pq_rtn_code); computed in float
// per weight, summed in double).
double pq_rtn_group_lp_error(const float *w, int n, int bits, float scale, float zero);

// A scale as stored: s rounded to scale_dtype, a zero replaced by that
// dtype's epsilon (torch.finfo(dtype).eps, as compressed-tensors does).
// Returns 0 if it is not finite in that dtype.
float pq_rtn_stored_scale(double s, pq_dtype scale_dtype);

// The signed code of w for a scale and zero point from pq_rtn_group_params,
// in f32: rne(clamp((w / scale) + zero, -2^(bits-1), 2^(bits-1) - 1)), each
// parenthesis one f32 operation, as a float (pq_rtn_code_dtype for
// PQ_DT_F32). This is the arithmetic of llm-compressor's GPTQ, whose working
// copy of the weights is f32 (gptq_quantize.py: f32 weights divided by the D
// scale promote to f32); GPTQ uses it. It dequantizes to scale * (code -
// zero) (one fp32 multiply).
float pq_rtn_code(float w, float scale, float zero, int bits);

// The signed code RTN stores (compressed-tensors' quantize in dtype dt):
// rne(clamp((w / scale) + zero, -2^(bits-1), 2^(bits-1) - 1)), each
// parenthesis rounded to dt; w is a value of dt.
float pq_rtn_code_dtype(float w, float scale, float zero, int bits, pq_dtype dt);

// codes[i] = pq_rtn_code_dtype(w[i] rounded to dt, scale, zero, bits, dt)
// for i < n: the _ref, and the _cpu version (quant/rtn_avx2.c, F16C
// conversions, where the CPU has AVX2 and dt is F16 or F32), equal bit for bit.
void pq_rtn_codes_ref(const float *w, int n, float scale, float zero, int bits, pq_dtype dt, float *codes);
void pq_rtn_codes_cpu(const float *w, int n, float scale, float zero, int bits, pq_dtype dt, float *codes);
void pq_rtn_codes_avx2(const float *w, int n, float scale, float zero, int bits, pq_dtype dt, float *codes);

#endif
