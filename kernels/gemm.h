// kernels/gemm.h — the FP32 GEMM behind pq_linear_forward for more tokens
// than a GEMV takes (prefill), on the CPU:
//
//   y[t][r] = sum_c x[t][c] * w[r][c]      t < T, r < n, c < K
//
// The specification (pq_gemm_ref) is exact about the arithmetic: each y is
// one chain of fused multiply-adds over c in increasing order, starting from
// 0, every step rounded to f32:
//   acc = 0;  for c = 0..K-1: acc = fmaf(x[t][c], w[r][c], acc);  y = acc
// The optimized kernels compute that same chain for every element (the
// vector lanes hold different (t, r) pairs, never parts of one sum), so they
// equal the _ref bit for bit, whatever the vector width, the cache blocking
// or the number of threads. (OpenBLAS's sgemm, which this replaces on AVX2,
// sums in its own kernel-dependent order.)
//
// Layouts (made by the callers, kernels/linear.c):
//   x packed once per call, in blocks of PQ_GEMM_MR tokens:
//       xp[b][c][i] = x[b*MR + i][c]        (tokens past T are 0)
//   weights packed per panel of PQ_GEMM_NR rows, from the format's f32 rows:
//       wp[c][j] = w[r0 + j][c]             (rows past n are 0)
// The micro-kernel keeps an MR x NR tile of y in registers, reads NR weights
// and broadcasts MR activations per column c: 12 FMAs per 8 loads on AVX2.
#ifndef PQ_GEMM_H
#define PQ_GEMM_H

#include <stddef.h>

#define PQ_GEMM_MR 6
#define PQ_GEMM_NR 16

// The specification: y[t*ldy + r] for t < T, r < n, w row-major [n][K].
void pq_gemm_ref(const float *x, int T, int K, const float *w, int n, float *y, int ldy);

// Floats of the packed x of T tokens (+ NR of slack the packing may write past the end).
size_t pq_gemm_xpack_floats(int T, int K);
// Floats of a packed weight panel of n rows (whole micro-panels of NR).
size_t pq_gemm_wpack_floats(int n, int K);

// AVX2 + FMA versions (kernels/gemm_avx2.c).
//   pack_x: token blocks b0..b0+nb of x[T][K] into xp (the layout above).
//   pack_w: rows[n][K] (f32, row-major, n <= any multiple of NR) into panel wp.
//   panel:  y[t*ldy + r0 + j] for all T tokens and the n rows of panel wp.
void pq_gemm_pack_x_avx2(const float *x, int T, int K, int b0, int nb, float *xp);
void pq_gemm_pack_w_avx2(const float *rows, int n, int K, float *wp);
void pq_gemm_panel_avx2(const float *xp, int T, int K, const float *wp, int n, float *y, int ldy);

#endif
