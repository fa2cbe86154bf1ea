// kernels/gemm.h — the prefill's f32 matrix product on packed operands.
//
//   y[t][r] = sum_k W[r][k] * x[t][k]      (t < T tokens, r < n rows, k < K)
//
// The activations are packed once per linear (blocks of `mr` tokens, k-major:
// xp[block][k][mr]) and each panel of `nr` weight rows once per task (two
// halves of nr/2 rows, each k-major: wp[2][K][nr/2], rows past n zero; a
// half is one vector register wide); a block kernel multiplies one token
// block with one panel holding all mr x nr sums in registers. Every output is
// one FMA chain over k = 0..K-1 starting from 0 (acc = fmaf(w, x, acc)), in
// the _ref and in every ISA version, so the versions are equal bit for bit
// and a result never depends on the tiling, the ISA or the thread count.
// The tile shapes: AVX-512 12 x 32, AVX2 6 x 16, scalar 4 x 8.
#ifndef PQ_GEMM_H
#define PQ_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/dense.h"

typedef struct {
    int mr; // tokens per packed block
    int nr; // weight rows per packed panel
} pq_gemm_tile;

// The tile of the ISA pq_cpu_isa() chose.
pq_gemm_tile pq_gemm_tile_cpu(void);

// Floats of the packed activations of T tokens (whole blocks).
size_t pq_gemm_x_floats(pq_gemm_tile tl, int T, int K);

// Packs token blocks b0..b0+nb of x [T][K] into xp (laid out for all of x:
// block b at xp + b*mr*K); tokens past T are zeros.
void pq_gemm_pack_x(pq_gemm_tile tl, const float *x, int T, int K, int b0, int nb, float *xp);

// Packs rows [n][K] into rows r0..r0+n-1 of the panel wp (r0 + n <= nr).
void pq_gemm_pack_w(pq_gemm_tile tl, const float *rows, int r0, int n, int K, float *wp);
// The same for rows row..row+n-1 of a dense weight w [..][K] of type dt,
// widened on the way (exact).
void pq_gemm_pack_dense(pq_gemm_tile tl, pq_dense_type dt, const void *w, int K, int row, int r0, int n, float *wp);
// Zeros rows n..nr-1 of the panel wp: a panel of fewer than nr weight rows.
void pq_gemm_pad_w(pq_gemm_tile tl, int n, int K, float *wp);

// One token block xb (pq_gemm_pack_x) times one panel wp (pq_gemm_pack_w):
// y[t*ldy + r] for t < mt <= mr, r < n <= nr; nothing else is written.
void pq_gemm_block_cpu(pq_gemm_tile tl, const float *xb, const float *wp, int K, int mt, int n, float *y, int ldy);

// The specification, on row-major x [T][K] and w [n][K]: y[t*ldy + r] is
// the FMA chain above.
void pq_gemm_ref(const float *x, int T, const float *w, int n, int K, float *y, int ldy);

// ISA versions (kernels/gemm_avx2.c, gemm_avx512.c) for their own tiles;
// use pq_gemm_block_cpu instead.
#define PQ_GEMM_MR_AVX512 12
#define PQ_GEMM_NR_AVX512 32
#define PQ_GEMM_MR_AVX2 6
#define PQ_GEMM_NR_AVX2 16
void pq_gemm_block_avx512(const float *xb, const float *wp, int K, int mt, int n, float *y, int ldy);
void pq_gemm_block_avx2(const float *xb, const float *wp, int K, int mt, int n, float *y, int ldy);
void pq_gemm_pack_x_avx512(const float *x, int T, int K, int b0, int nb, float *xp);
// nr: 16 or 32; r0: a multiple of 8
void pq_gemm_pack_dense_avx2(int nr, pq_dense_type dt, const void *w, int K, int row, int r0, int n, float *wp);

// ---- BF16 products ---------------------------------------------------------
//
//   y[t][r] = sum_k bf16(W[r][k]) * bf16(x[t][k])
//
// bf16(): round to nearest even (pq_f32_to_bf16, common/half.h). A product
// of two BF16 values is exact in f32 and the sums are f32, so a result is
// within the f32 summation bound of the same sum taken exactly. For callers
// that accept inputs rounded to BF16 (the calibration passes of
// --calib-precision bf16): where pq_cpu_amx(), AMX tiles (TDPBF16PS) sum
// the products in their own order, so those bits are the AMX machine's;
// elsewhere the FMA chains above run on the rounded operands.

// v[i] = bf16(v[i]) for i < n, as an f32 (exact).
void pq_bf16_round_n(float *v, size_t n);

// The specification: the FMA chain of pq_gemm_ref on the rounded operands.
void pq_gemm_bf16_ref(const float *x, int T, const float *w, int n, int K, float *y, int ldy);

// The AMX layout (kernels/gemm_amx.c). Weight rows in TDPBF16PS's pair
// layout (kernels/amx.h's pq_amx_put_pairs: groups of 16 rows, the columns
// in pairs), ld = K rounded up to 32, zeros past K, rows zero past the
// weight's up to a multiple of 32. Activations: BF16 rows ld apart, zeros
// past K.
int pq_gemm_amx_ld(int K);
// Values (uint16_t) of a packed weight of n rows.
size_t pq_gemm_amx_w_values(int n, int K);
// Rows [n][K] (f32) into rows r0..r0+n-1 of the packed weight wp.
void pq_gemm_amx_pack_w(const float *rows, int r0, int n, int K, uint16_t *wp);
// Zero rows n..(n rounded up to 32)-1 of the packed weight wp.
void pq_gemm_amx_pad_w(int n, int K, uint16_t *wp);
// Tokens t0..t0+nt-1 of x [..][K] into their rows of xb.
void pq_gemm_amx_pack_x(const float *x, int K, int t0, int nt, uint16_t *xb);
// y[t*ldy + r] for t < T and rows r0..r0+n-1 of wp (r0 a multiple of 32):
// the BF16 products of xb's T tokens; nothing else is written.
void pq_gemm_amx(const uint16_t *xb, int T, int K, const uint16_t *wp, int r0, int n, float *y, int ldy);

#endif
