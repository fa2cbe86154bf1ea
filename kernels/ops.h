// kernels/ops.h — the elementwise and normalization ops of a Llama block.
// The _ref versions are plain C and the specification (of the CUDA versions
// too); the _cpu versions run the AVX2 / AVX-512 ones (kernels/ops_avx2.c,
// ops_avx512.c) where the CPU has them. Those equal the _ref bit for bit,
// except SwiGLU's exp (below): each output is computed by the same
// operations in the same order, only several at once.
#ifndef PQ_OPS_H
#define PQ_OPS_H

#include <stddef.h>

// y[t] = x[t] * rsqrt(mean(x[t]^2) + eps) * w  for T rows of n (HF LlamaRMSNorm
// in fp32; the sum of squares in double, in order). y may alias x. The
// vector versions run the sums of 8 rows side by side.
void pq_rmsnorm_ref(const float *x, const float *w, int T, int n, float eps, float *y);
void pq_rmsnorm_cpu(const float *x, const float *w, int T, int n, float eps, float *y);
void pq_rmsnorm_avx2(const float *x, const float *w, int T, int n, float eps, float *y);
void pq_rmsnorm_avx512(const float *x, const float *w, int T, int n, float eps, float *y);

// RoPE inverse frequencies for head_dim (out[head_dim/2]): theta^(-2i/d),
// with Llama 3 "rope_scaling" applied when llama3 != 0.
typedef struct {
    float theta;
    int llama3;
    float factor, low_freq_factor, high_freq_factor;
    int orig_max_pos;
} pq_rope_params;
void pq_rope_inv_freq(const pq_rope_params *p, int head_dim, double *inv_freq);

// cos/sin tables for positions pos0..pos0+T-1: cs[t][i] = cos, sn[t][i] = sin
// of (pos0+t) * inv_freq[i], i < head_dim/2.
void pq_rope_table(const double *inv_freq, int head_dim, int pos0, int T, float *cs, float *sn);

// Rotates n_heads heads of every row in place (HF rotate_half convention:
// pairs (i, i + head_dim/2)). x is [T][stride], head h at x + h*head_dim.
void pq_rope_apply_ref(float *x, int T, int stride, int n_heads, int head_dim, const float *cs,
                       const float *sn);
void pq_rope_apply_cpu(float *x, int T, int stride, int n_heads, int head_dim, const float *cs,
                       const float *sn);
void pq_rope_apply_avx2(float *x, int T, int stride, int n_heads, int head_dim, const float *cs,
                        const float *sn);
void pq_rope_apply_avx512(float *x, int T, int stride, int n_heads, int head_dim, const float *cs,
                          const float *sn);

// gate[i] = silu(gate[i]) * up[i]  (SwiGLU), n elements. The _cpu version
// computes exp with kernels/simd.h's vector exp (within 2 ulp of expf; its
// clamp changes nothing here: silu(g) for g < -87 is ~0 either way).
void pq_swiglu_ref(float *gate, const float *up, size_t n);
void pq_swiglu_cpu(float *gate, const float *up, size_t n);
void pq_swiglu_avx2(float *gate, const float *up, size_t n);   // kernels/ops_avx2.c
void pq_swiglu_avx512(float *gate, const float *up, size_t n); // kernels/ops_avx512.c

// y[i] += x[i]
void pq_add_ref(float *y, const float *x, size_t n);
void pq_add_cpu(float *y, const float *x, size_t n);
void pq_add_avx2(float *y, const float *x, size_t n);
void pq_add_avx512(float *y, const float *x, size_t n);

// The index of the first NaN or infinity of x[0..n), or -1 when there is
// none; then *amax (unless amax is NULL) = the largest |x[i]| (0 for n = 0).
// The _avx2 version (the _cpu one on AVX2 machines) looks for a non-finite
// value 8 lanes at a time and finds the first one as the _ref does.
long long pq_scan_finite_ref(const float *x, size_t n, float *amax);
long long pq_scan_finite_cpu(const float *x, size_t n, float *amax);
long long pq_scan_finite_avx2(const float *x, size_t n, float *amax);

// Columns c0..c1 of x [T][cols]: sum[c] += |x[t][c]| (in double) and
// max[c] = the larger of max[c] and |x[t][c]| (a NaN changes neither), the
// tokens in order (calib/stats.h's |x| statistics).
void pq_abs_stats_ref(const float *x, int T, int cols, int c0, int c1, double *sum, float *max);
void pq_abs_stats_cpu(const float *x, int T, int cols, int c0, int c1, double *sum, float *max);
void pq_abs_stats_avx2(const float *x, int T, int cols, int c0, int c1, double *sum, float *max);
void pq_abs_stats_avx512(const float *x, int T, int cols, int c0, int c1, double *sum, float *max);

#endif
