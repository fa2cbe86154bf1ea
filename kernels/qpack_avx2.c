// AVX2 + FMA versions of kernels/qpack.h.
//
// rows: 8 consecutive columns at a time for bits 4 and 8 (one word / two
// words spread over the lanes, shifted and masked), (q - zero) converted
// exactly and multiplied once by the scale: bit-exact with the _ref. Other
// layouts (bits 2, 3, 5, 6, 7; g_idx; groups not a multiple of 8) use the
// scalar specification.
//
// gemv: a block of 8 words is loaded once; field i of every word is isolated
// in place with one AND (q << bits*i, an exact integer), converted to float
// and multiplied by x prescaled by 2^-bits*i (pq_qpack_gemv_prepare), so
// lane j accumulates sum_i q_ji x_ji for its word. When the groups align
// with the blocks, per block:
//   acc = sum_i q_i x_i - zero * xsum,   total += scale * acc
// (per-lane scale and zero vectors when a block spans several groups).
// Otherwise (g_idx, or words straddling groups) each field's scales are
// gathered by the prepared group indices, total += scale * q * x, and
// sum_g scale_g zero_g X_g is subtracted at the end. Either way this is
// sum_c scale (q - zero) x_c with fp32 rounding; the q*x terms are ~2x
// larger than (q-zero)*x, so the cancellation costs about one bit: relative
// L2 ~1e-6 against the double _ref on random data (tests allow 1e-5).
// Columns past the last full block: decoded exactly into a buffer, then FMA.
#include <immintrin.h>
#include <string.h>

#include "kernels/linear.h"
#include "kernels/qpack.h"
#include "kernels/simd.h"

#define L 8
#define TAIL (9 * 16) // columns in at most 9 words

static int ngroups(const pq_qpack *w) { return pq_qpack_ngroups(w->cols, w->group); }

// Columns c0..c0+n of row r as f32, bit-exact with pq_qpack_value.
static void decode_span(const pq_qpack *w, int r, int c0, int n, float *out) {
    int ng = ngroups(w), c = 0;
    const uint32_t *wr = w->packed + (size_t)r * pq_qpack_words_per_row(w->cols, w->bits);
    const float *sr = w->scales + (size_t)r * ng;
    const uint8_t *zr = w->zeros ? w->zeros + (size_t)r * ng : NULL;
    int vec = (w->bits == 4 || w->bits == 8) && !w->g_idx && (w->group >= w->cols || w->group % 8 == 0) &&
              c0 % 8 == 0;
    if (vec) {
        const __m256i sh4 = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
        const __m256i m = _mm256_set1_epi32((1 << w->bits) - 1);
        while (c + 8 <= n) { // one group at a time
            int g = w->group >= w->cols ? 0 : (c0 + c) / w->group;
            int end = w->group >= w->cols || (g + 1) * w->group - c0 > n ? n : (g + 1) * w->group - c0;
            __m256 sv = _mm256_set1_ps(sr[g]);
            __m256i z = _mm256_set1_epi32(zr ? zr[g] : 1 << (w->bits - 1));
            for (; c + 8 <= end; c += 8) {
                int col = c0 + c;
                __m256i q = w->bits == 4
                                ? _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)wr[col / 8]), sh4), m)
                                : _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)((const uint8_t *)wr + col)));
                _mm256_storeu_ps(out + c, _mm256_mul_ps(sv, _mm256_cvtepi32_ps(_mm256_sub_epi32(q, z))));
            }
        }
    }
    for (; c < n; c++) out[c] = pq_qpack_value(w, r, c0 + c);
}

void pq_qpack_rows_avx2(const pq_qpack *w, int r0, int n, float *out) {
    for (int r = 0; r < n; r++) decode_span(w, r0 + r, 0, w->cols, out + (size_t)r * w->cols);
}

// acc[t] += row r, columns c0..cols (the tail past the full blocks: fewer
// than 9 words, so < TAIL columns), decoded exactly, dotted with x[t].
PQ_INLINE void dot_tail(const pq_qpack *w, int r, int c0, const float *x, int T, __m256 *acc) {
    float tile[TAIL];
    int n = w->cols - c0, c = 0;
    decode_span(w, r, c0, n, tile);
    for (; c + 8 <= n; c += 8) {
        __m256 v = _mm256_loadu_ps(tile + c);
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++)
            acc[t] = _mm256_fmadd_ps(v, _mm256_loadu_ps(x + (size_t)t * w->cols + c0 + c), acc[t]);
    }
    if (c < n) {
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 v = _mm256_maskload_ps(tile + c, m);
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++)
            acc[t] = _mm256_fmadd_ps(v, _mm256_maskload_ps(x + (size_t)t * w->cols + c0 + c, m), acc[t]);
    }
}

// Per-lane scale and zero point of block b: one group for the whole block,
// or nper = L / (words per group) groups spread over the lanes by idx.
typedef struct {
    int wpg, nper;       // words per group (0: per channel), groups per block
    int bpg;             // blocks per group (wpg >= L), else 0
    __m256i idx, lanes;  // lane j -> group j / wpg; lane mask of the first nper lanes
} groups;

static groups block_groups(const pq_qpack *w) {
    groups g;
    g.wpg = w->group >= w->cols ? 0 : w->group / pq_qpack_per_word(w->bits);
    g.nper = g.wpg && g.wpg < L ? L / g.wpg : 1;
    g.bpg = g.wpg >= L ? g.wpg / L : 0;
    int d = g.wpg && g.wpg < L ? g.wpg : L;
    int idx[L];
    for (int j = 0; j < L; j++) idx[j] = j / d;
    g.idx = _mm256_loadu_si256((const __m256i *)idx);
    g.lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(g.nper), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return g;
}

// aligned: ONE_GROUP when a block lies in one group (nper == 1), else SPANS.
enum { GATHERED, SPANS, ONE_GROUP };

PQ_INLINE __m256 block_scale(const groups *g, const float *sr, int g0, int aligned) {
    if (aligned == ONE_GROUP) return _mm256_broadcast_ss(sr + g0);
    return _mm256_permutevar8x32_ps(_mm256_maskload_ps(sr + g0, g->lanes), g->idx);
}

PQ_INLINE __m256 block_zero(const groups *g, const uint8_t *zr, int g0, int aligned) {
    if (aligned == ONE_GROUP) return _mm256_set1_ps((float)zr[g0]);
    uint64_t z = 0; // nper is 2, 4 or 8: fixed-size copies, inlined
    if (g->nper == 2) memcpy(&z, zr + g0, 2);
    else if (g->nper == 4) memcpy(&z, zr + g0, 4);
    else memcpy(&z, zr + g0, 8);
    __m256i zi = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)z));
    return _mm256_cvtepi32_ps(_mm256_permutevar8x32_epi32(zi, g->idx));
}

// Rows r..r+R; T, bits, aligned, R and C are constants after inlining. Each
// prepared x vector is loaded once for the R rows, and the block sum of each
// row runs in C chains (fields i % C): R * C independent chains per block.
// One token, 4-bit g64, 576 x 576 from L2, one thread on Zen 2: one row at a
// time ~14 G weights/s, two rows x two chains ~18-19 (four rows: no faster,
// out of registers). Per 8 weights it still takes a mask, a conversion and
// an FMA, which bound it from there.
//   aligned: per block, acc = sum_i q_i x_i - zero * xsum, total += scale * acc
//   else:    total += scale[gi] * q_i * x_i (gathered), minus sum_g scale_g zero_g X_g at the end
PQ_INLINE void gemv_rows(const pq_qpack *w, const groups *g, int r, const float *x, int T, const float *xp, float *y,
                         int ldy, int bits, int aligned, int R, int C) {
    const int per = 32 / bits, nb = w->cols / per / L, wpr = pq_qpack_words_per_row(w->cols, bits), ng = ngroups(w);
    const int top_shift = per * bits == 32; // the top field is shifted down, not masked
    const size_t xstride = (size_t)(per + 1) * L; // floats per token per block
    const int32_t *gi = (const int32_t *)(xp + (size_t)nb * T * xstride);
    const double *X = (const double *)(gi + (size_t)nb * per * L);
    const __m256 zsym = _mm256_set1_ps((float)(1 << (bits - 1)));
    const uint32_t *wr = w->packed + (size_t)r * wpr;
    const float *sr = w->scales + (size_t)r * ng;
    const uint8_t *zr = w->zeros ? w->zeros + (size_t)r * ng : NULL;
    __m256 tot[2][PQ_GEMV_MAX_T];
    #pragma GCC unroll 2
    for (int k = 0; k < R; k++)
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) tot[k][t] = _mm256_setzero_ps();
    int g0 = 0, inb = 0; // the first group of block b; (ONE_GROUP) blocks of g0 before b
    for (int b = 0; b < nb; b++) {
        __m256i wv[2];
        #pragma GCC unroll 2
        for (int k = 0; k < R; k++) {
            const uint32_t *wb = wr + (size_t)k * wpr + (size_t)b * L;
            pq_prefetch_stream(wb);
            wv[k] = _mm256_loadu_si256((const __m256i *)wb);
        }
        const float *xb = xp + (size_t)b * T * xstride;
        __m256 acc[2][PQ_GEMV_MAX_T][2]; // [row][token][chain] (the zeros are dead: fields 0..C-1 multiply)
        #pragma GCC unroll 2
        for (int k = 0; k < R; k++)
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) acc[k][t][0] = acc[k][t][1] = _mm256_setzero_ps();
        #pragma GCC unroll 16
        for (int i = 0; i < per; i++) {
            __m256i gv = _mm256_setzero_si256();
            if (!aligned) gv = _mm256_loadu_si256((const __m256i *)(gi + ((size_t)b * per + i) * L));
            #pragma GCC unroll 2
            for (int k = 0; k < R; k++) {
                __m256i q = i == per - 1 && top_shift
                                ? _mm256_srli_epi32(wv[k], bits * i)
                                : _mm256_and_si256(wv[k], _mm256_set1_epi32((int)(((1u << bits) - 1) << (bits * i))));
                __m256 f = _mm256_cvtepi32_ps(q);
                if (!aligned) f = _mm256_mul_ps(f, _mm256_i32gather_ps(sr + (size_t)k * ng, gv, 4));
                #pragma GCC unroll 4
                for (int t = 0; t < T; t++) {
                    __m256 xv = _mm256_loadu_ps(xb + t * xstride + (size_t)i * L);
                    if (!aligned) tot[k][t] = _mm256_fmadd_ps(f, xv, tot[k][t]);
                    else if (i < C) acc[k][t][i] = _mm256_mul_ps(f, xv);
                    else acc[k][t][i % C] = _mm256_fmadd_ps(f, xv, acc[k][t][i % C]);
                }
            }
        }
        if (!aligned) continue;
        #pragma GCC unroll 2
        for (int k = 0; k < R; k++) {
            __m256 s = block_scale(g, sr + (size_t)k * ng, g0, aligned);
            __m256 z = zr ? block_zero(g, zr + (size_t)k * ng, g0, aligned) : zsym;
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                __m256 a = C == 2 ? _mm256_add_ps(acc[k][t][0], acc[k][t][1]) : acc[k][t][0];
                a = _mm256_fnmadd_ps(z, _mm256_loadu_ps(xb + t * xstride + (size_t)per * L), a);
                tot[k][t] = _mm256_fmadd_ps(a, s, tot[k][t]);
            }
        }
        if (aligned == SPANS) g0 += g->nper;
        else if (g->bpg && ++inb == g->bpg) g0++, inb = 0;
    }
    #pragma GCC unroll 2
    for (int k = 0; k < R; k++) {
        if (nb * L * per < w->cols) dot_tail(w, r + k, nb * L * per, x, T, tot[k]);
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            double zx = 0; // sum_g scale_g zero_g X_g, in double: it cancels much of tot
            for (int j = 0; !aligned && j < ng; j++)
                zx += (double)sr[(size_t)k * ng + j] * (zr ? zr[(size_t)k * ng + j] : 1 << (bits - 1)) *
                      X[(size_t)t * ng + j];
            y[(size_t)t * ldy + r + k] = (float)(pq_hsum_ps(tot[k][t]) - zx);
        }
    }
}

// Rows r0..r0+n: two at a time for one token (two rows x two chains, the
// decode case), one at a time for more (T rows' worth of chains already).
PQ_INLINE void gemv_blocks(const pq_qpack *w, int r0, int n, const float *x, int T, const float *xp, float *y, int ldy,
                           int bits, int aligned) {
    const groups g = block_groups(w);
    int r = r0;
    if (T == 1)
        for (; r + 2 <= r0 + n; r += 2) gemv_rows(w, &g, r, x, T, xp, y, ldy, bits, aligned, 2, 2);
    for (; r < r0 + n; r++) gemv_rows(w, &g, r, x, T, xp, y, ldy, bits, aligned, 1, T == 1 ? 2 : 1);
}

// One instance per (bits in {4, 8, other}, T, aligned) so the loops unroll.
PQ_INLINE void gemv_bits(const pq_qpack *w, int r0, int n, const float *x, int T, const float *xp, float *y, int ldy,
                         int bits) {
    int aligned = !pq_qpack_gemv_aligned(w, L) ? GATHERED : block_groups(w).nper == 1 ? ONE_GROUP : SPANS;
#define BLOCKS(t)                                                                                                      \
    (aligned == ONE_GROUP ? gemv_blocks(w, r0, n, x, t, xp, y, ldy, bits, ONE_GROUP)                                   \
     : aligned == SPANS   ? gemv_blocks(w, r0, n, x, t, xp, y, ldy, bits, SPANS)                                       \
                          : gemv_blocks(w, r0, n, x, t, xp, y, ldy, bits, GATHERED))
    PQ_GEMV_T_SWITCH(T, BLOCKS);
#undef BLOCKS
}

void pq_qpack_gemv_avx2(const pq_qpack *w, int r0, int n, const float *x, int T, const float *xp, float *y,
                        int ldy) {
#define BITS(b) gemv_bits(w, r0, n, x, T, xp, y, ldy, b)
    PQ_BITS_SWITCH(w->bits, BITS);
#undef BITS
}
