// kernels/qpack.h — integer weights of 2..8 bits packed into 32-bit words:
// the compressed-tensors "pack-quantized" layout, shared by the quantizers,
// the packed-checkpoint reader/writer, and the CPU and CUDA kernels.
//
//   w[r][c] = scale[r][g] * (q[r][c] - zero[r][g])      g = g_idx ? g_idx[c] : c / group
//
// q is stored unsigned: the signed code plus 2^(bits-1), so a symmetric
// weight has zero = 2^(bits-1). Each row holds ceil(cols / (32/bits)) words;
// word j carries columns j*(32/bits) .. in order, the first in the lowest
// bits; padding bits are 0. A ragged last group (cols not a multiple of
// group) is simply shorter. The value is computed as one fp32 multiply of
// scale by the exact integer (q - zero); that is the specification every
// kernel reproduces bit for bit when it dequantizes.
//
// Kernels (each a plain C _ref, the spec, and an optimized _cpu chosen by
// kernels/cpu.h; the ISA versions are exported for tests):
//   rows   dequantize to f32, bit-exact with the _ref
//   gemv   y = W x for T <= PQ_GEMV_MAX_T tokens, dequantizing in registers
//          (the weight is streamed once, never expanded; 4-bit codes on
//          AVX-512: integer dot products with x in 24-bit fixed point). It
//          reads the activations through a copy rearranged to match the
//          packed words, made once per call by pq_qpack_gemv_prepare and
//          shared by all threads.
#ifndef PQ_QPACK_H
#define PQ_QPACK_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int rows, cols;
    int bits;                 // 2..8
    int group;                // columns per group; group >= cols means one group per row (per channel)
    const uint32_t *packed;   // [rows][pq_qpack_words_per_row(cols, bits)]; borrowed
    const float *scales;      // [rows][pq_qpack_ngroups(cols, group)]; borrowed
    const uint8_t *zeros;     // [rows][ngroups] unsigned zero points, or NULL (symmetric); borrowed
    const int32_t *g_idx;     // [cols] group (< ngroups) of each column (GPTQ act-order), or NULL; borrowed
} pq_qpack;

static inline int pq_qpack_per_word(int bits) { return 32 / bits; }
static inline int pq_qpack_words_per_row(int cols, int bits) {
    return (cols + pq_qpack_per_word(bits) - 1) / pq_qpack_per_word(bits);
}
static inline int pq_qpack_ngroups(int cols, int group) { return group >= cols ? 1 : (cols + group - 1) / group; }

// The unsigned code of w[r][c].
static inline int pq_qpack_code(const pq_qpack *w, int r, int c) {
    int per = pq_qpack_per_word(w->bits);
    uint32_t word = w->packed[(size_t)r * pq_qpack_words_per_row(w->cols, w->bits) + c / per];
    return (int)((word >> ((c % per) * w->bits)) & ((1u << w->bits) - 1));
}

// The group of column c.
static inline int pq_qpack_group_of(const pq_qpack *w, int c) {
    return w->g_idx ? w->g_idx[c] : w->group >= w->cols ? 0 : c / w->group;
}

// w[r][c] as f32: the specification of one element.
static inline float pq_qpack_value(const pq_qpack *w, int r, int c) {
    int g = pq_qpack_group_of(w, c), ng = pq_qpack_ngroups(w->cols, w->group);
    int zero = w->zeros ? w->zeros[(size_t)r * ng + g] : 1 << (w->bits - 1);
    return w->scales[(size_t)r * ng + g] * (float)(pq_qpack_code(w, r, c) - zero);
}

// Rows r0..r0+n as f32, out[n][cols]. _cpu equals _ref bit for bit.
void pq_qpack_rows_ref(const pq_qpack *w, int r0, int n, float *out);
void pq_qpack_rows_cpu(const pq_qpack *w, int r0, int n, float *out);

// y[t*ldy + r] = sum_c w[r][c] x[t][c] for rows r0..r0+n, t < T <= PQ_GEMV_MAX_T.
// _ref accumulates the f32 values of pq_qpack_value in double.
void pq_qpack_gemv_ref(const pq_qpack *w, int r0, int n, const float *x, int T, float *y, int ldy);

// The fused GEMV. xp is what pq_qpack_gemv_prepare_cpu wrote for the same w,
// x and T (read only, so one copy serves every thread). Sums in fp32 in
// another order than the _ref (and the AVX-512 4-bit path rounds x to 24-bit
// fixed point): relative L2 error ~1e-6 (tests allow 1e-5).
void pq_qpack_gemv_cpu(const pq_qpack *w, int r0, int n, const float *x, int T, const float *xp, float *y,
                       int ldy);

// The prepared activations. For lanes L (8: AVX2, 16: AVX-512) and
// P = 32/bits codes per word, the full blocks of L words b < nb =
// (cols / P) / L are laid out, for every token t, as
//   xp[b][t][i][j] = x[t][(b*L + j)*P + i] * 2^-shift(i)   i < P, j < L
//   xp[b][t][P][j] = sum_i x[t][(b*L + j)*P + i]
// where shift(i) = bits*i, except 0 for the top code of a full word (bits
// 2, 4, 8), which the kernel shifts down instead of masking in place: the
// in-place code (q << shift(i)) times the prescaled x is q * x exactly
// (unless |x| < ~2^-98, whose products are negligible anyway). Unless
// pq_qpack_gemv_aligned, there follow the group of every such column,
// int32 gi[b][i][j], and per token the sum of x over each group's columns
// in full blocks, double X[t][ngroups]. Columns past the full blocks are read from
// x directly. prepare_bytes is enough for any lane count; xp must be 8-byte
// aligned.
//
// Except for the AVX-512 integer GEMV (pq_qpack_gemv_fixed: 4-bit codes,
// 16 lanes, aligned groups), which reads x in fixed point, in blocks of 16
// words b < pq_qpack_fixed_blocks (the last one may be short: its missing
// words are written as x = 0, and only the codes of the last, partial word
// of a row are read from x directly): word j of block b
// holds columns c = 128b + 8j + i, i < 8, and each x[t][c] is rounded to
//   x ~ 2^k * v,   v = rint(x * 2^-k) = d0 * 2^16 + d1 * 2^8 + d2,   d in [-128, 127]
// where k is the smallest integer >= -126 with max_i |x| <= 8355711 * 2^k
// over the word's 8 columns (8355711 = 127 * (2^16 + 2^8 + 1), the largest
// such v), so |x - 2^k v| <= 2^-23 * 1.004 * max_i |x| (or <= 2^-127). A word
// holding a NaN or Inf gets 2^k = NaN and v = 0, making every output of
// its token NaN.
// Per block and token, 512 bytes, starting at byte 512 * (b*T + t):
//   int8  d[l][h][n]   digit l of v at column 128b + 2n + h   (l < 3, h < 2, n < 64)
//   float S[j]         2^k of word j                          (j < 16)
//   int32 V[j]         sum_i v of word j
// then per token the sum of 2^k v over each group's columns in whole words,
// accumulated in double word by word, float X[t][ngroups].
size_t pq_qpack_gemv_prepare_bytes(const pq_qpack *w, int T);
void pq_qpack_gemv_prepare(const pq_qpack *w, const float *x, int T, int lanes, float *xp);
void pq_qpack_gemv_prepare_cpu(const pq_qpack *w, const float *x, int T, float *xp);

// Whether each block of `lanes` words lies in one group or spans whole
// groups (no g_idx): the GEMV then applies scale and zero point once per
// block; otherwise it gathers the scale of every column.
int pq_qpack_gemv_aligned(const pq_qpack *w, int lanes);

// Whether pq_qpack_gemv_prepare with these lanes writes the fixed-point layout.
int pq_qpack_gemv_fixed(const pq_qpack *w, int lanes);

// The blocks of 16 words of the fixed-point layout: every whole word of a
// row (cols / 8 of them) in one.
static inline int pq_qpack_fixed_blocks(const pq_qpack *w) { return (w->cols / 8 + 15) / 16; }

// ISA versions (kernels/qpack_avx2.c, qpack_avx512.c); use the _cpu entry
// points instead. Their GEMVs read xp prepared with 8 and 16 lanes.
void pq_qpack_rows_avx2(const pq_qpack *w, int r0, int n, float *out);
void pq_qpack_rows_avx512(const pq_qpack *w, int r0, int n, float *out);
void pq_qpack_gemv_avx2(const pq_qpack *w, int r0, int n, const float *x, int T, const float *xp, float *y,
                        int ldy);
void pq_qpack_gemv_avx512(const pq_qpack *w, int r0, int n, const float *x, int T, const float *xp, float *y,
                          int ldy);
// The blocks of the fixed-point layout (pq_qpack_gemv_fixed(w, 16)), as pq_qpack_gemv_prepare writes them;
// pq_qpack_gemv_prepare_cpu adds the group sums.
void pq_qpack_gemv_prepare_avx512(const pq_qpack *w, const float *x, int T, float *xp);

// Bytes of the packed data, scales (at 2 bytes each, as stored) and zero points.
size_t pq_qpack_stored_bytes(const pq_qpack *w);

#endif
