// AVX-512 GEMV of kernels/qpack.h. Columns past the last full block of 16
// words are summed in scalar code (the fixed-point path below: only those
// past the last whole word).
//
// 4-bit codes with aligned groups (pq_qpack_gemv_fixed): integer dot
// products with VNNI against x in 24-bit fixed point (qpack.h), which takes
// ~15 vector instructions per 128 weights instead of ~26. The 16 words of a
// block are split into their low and high nibbles (bytes lo, hi: columns
// 8j + 2k and 8j + 2k + 1 in byte k of word j, the columns 2n, 2n + 1 of
// the digit vectors), and vpdpbusd (u8 code x s8 digit, 4 products per
// int32 lane) sums, by Horner's rule over the digits,
//   a_j = ((A0 * 2^8) + A1) * 2^8 + A2 = sum_i q_ji v_ji,   Al = sum_i q_ji dl_ji
// exactly: |A0| <= 8 * 15 * 128 = 15360, so |a_j| <= 15360 * (2^16 + 2^8 + 1)
// < 2^30 at every step. Then, in f32 as the float kernels do,
//   total_j += scale * 2^k_j * a_j,   y = sum_j total_j - sum_g scale_g zero_g X_g
// (cvt(a_j) and X_g are rounded to f32: relative 2^-24 each; the zero point
// split off costs about one bit, as in the float kernels). So this is
// sum_c scale (q - zero) 2^k v_c, where 2^k v_c differs from x_c by at most
// 2^-23 * 1.004 of the largest |x| in its word of 8 columns: an outlier
// coarsens only its 7 neighbours. Random x: relative L2 ~2e-7 against the
// double _ref; a few x 1000x the rest: about the same (tests allow 1e-5).
//
// Other layouts: the AVX2 float algorithm (kernels/qpack_avx2.c) on blocks
// of 16 words, with xp prepared for 16 lanes.
#include <immintrin.h>
#include <math.h>

#include "kernels/linear.h"
#include "kernels/qpack.h"
#include "kernels/simd.h"

#define L 16
#define FIXED_R 4 // rows per pass of the fixed-point GEMV for one token (2: ~6% slower, measured from L2)

typedef struct {
    int wpg, nper;       // words per group (0: per channel), groups per block
    int step, bpg;       // the first group of block b: b * step / bpg (blocks per group)
    __m512i idx;         // lane j -> group j / wpg
    __mmask16 lanes;     // the first nper lanes
} groups;

static groups block_groups(const pq_qpack *w) {
    groups g;
    g.wpg = w->group >= w->cols ? 0 : w->group / pq_qpack_per_word(w->bits);
    g.nper = g.wpg && g.wpg < L ? L / g.wpg : 1;
    g.step = g.wpg ? g.nper : 0;
    g.bpg = g.wpg > L ? g.wpg / L : 1;
    int d = g.wpg && g.wpg < L ? g.wpg : L;
    int idx[L];
    for (int j = 0; j < L; j++) idx[j] = j / d;
    g.idx = _mm512_loadu_si512(idx);
    g.lanes = (__mmask16)((1u << g.nper) - 1);
    return g;
}

PQ_INLINE int block_g0(const groups *g, int b) { return g->bpg == 1 ? b * g->step : b / g->bpg; }

PQ_INLINE __m512 block_scale(const groups *g, const float *sr, int g0) {
    if (g->nper == 1) return _mm512_set1_ps(sr[g0]);
    return _mm512_permutexvar_ps(g->idx, _mm512_maskz_loadu_ps(g->lanes, sr + g0));
}

PQ_INLINE __m512 block_zero(const groups *g, const uint8_t *zr, int g0) {
    if (g->nper == 1) return _mm512_set1_ps((float)zr[g0]);
    __m512i zi = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(g->lanes, zr + g0));
    return _mm512_cvtepi32_ps(_mm512_permutexvar_epi32(g->idx, zi));
}

// Rows r0..r0+n, R at a time (n a multiple of R; R > 1 for one token with
// aligned groups: each x vector is loaded once for R rows and the rows'
// chains overlap, while every row's operations are those of R = 1, in the
// same order: the same bits). T, bits, aligned and R are constants after
// inlining.
PQ_INLINE void gemv_blocks(const pq_qpack *w, int r0, int n, const float *x, int T, const float *xp, float *y, int ldy,
                        int bits, int aligned, int R) {
    const groups g = block_groups(w);
    const int per = 32 / bits, nb = w->cols / per / L, wpr = pq_qpack_words_per_row(w->cols, bits);
    const int ng = pq_qpack_ngroups(w->cols, w->group), top_shift = per * bits == 32;
    const size_t xstride = (size_t)(per + 1) * L;
    const int32_t *gi = (const int32_t *)(xp + (size_t)nb * T * xstride);
    const double *X = (const double *)(gi + (size_t)nb * per * L);
    const __m512 zsym = _mm512_set1_ps((float)(1 << (bits - 1)));
    for (int r = r0; r < r0 + n; r += R) {
        const float *sr[4];
        const uint8_t *zr[4];
        __m512 tot[4][PQ_GEMV_MAX_T];
        #pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            sr[k] = w->scales + (size_t)(r + k) * ng;
            zr[k] = w->zeros ? w->zeros + (size_t)(r + k) * ng : NULL;
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) tot[k][t] = _mm512_setzero_ps();
        }
        for (int b = 0; b < nb; b++) {
            const float *xb = xp + (size_t)b * T * xstride;
            __m512i wv[4];
            __m512 acc[4][PQ_GEMV_MAX_T];
            #pragma GCC unroll 4
            for (int k = 0; k < R; k++) {
                const uint32_t *wb = w->packed + (size_t)(r + k) * wpr + (size_t)b * L;
                pq_prefetch_stream(wb);
                wv[k] = _mm512_loadu_si512(wb);
                #pragma GCC unroll 4
                for (int t = 0; t < T; t++) acc[k][t] = _mm512_setzero_ps(); // (dead when aligned: field 0 multiplies)
            }
            #pragma GCC unroll 16
            for (int i = 0; i < per; i++) {
                __m512 xv[PQ_GEMV_MAX_T];
                #pragma GCC unroll 4
                for (int t = 0; t < T; t++) xv[t] = _mm512_loadu_ps(xb + t * xstride + (size_t)i * L);
                #pragma GCC unroll 4
                for (int k = 0; k < R; k++) {
                    const __m512i field = _mm512_set1_epi32((int)(((1u << bits) - 1) << (bits * i)));
                __m512i q = i == per - 1 && top_shift ? _mm512_srli_epi32(wv[k], bits * i)
                                                      : _mm512_and_si512(wv[k], field);
                    __m512 f = _mm512_cvtepi32_ps(q);
                    if (!aligned) {
                        __m512i gv = _mm512_loadu_si512(gi + ((size_t)b * per + i) * L);
                        f = _mm512_mul_ps(f, _mm512_i32gather_ps(gv, sr[k], 4));
                    }
                    #pragma GCC unroll 4
                    for (int t = 0; t < T; t++) {
                        if (!aligned) tot[k][t] = _mm512_fmadd_ps(f, xv[t], tot[k][t]);
                        else acc[k][t] = i == 0 ? _mm512_mul_ps(f, xv[t]) : _mm512_fmadd_ps(f, xv[t], acc[k][t]);
                    }
                }
            }
            if (!aligned) continue;
            int g0 = block_g0(&g, b);
            #pragma GCC unroll 4
            for (int k = 0; k < R; k++) {
                __m512 s = block_scale(&g, sr[k], g0), z = zr[k] ? block_zero(&g, zr[k], g0) : zsym;
                #pragma GCC unroll 4
                for (int t = 0; t < T; t++) {
                    acc[k][t] = _mm512_fnmadd_ps(z, _mm512_loadu_ps(xb + t * xstride + (size_t)per * L), acc[k][t]);
                    tot[k][t] = _mm512_fmadd_ps(acc[k][t], s, tot[k][t]);
                }
            }
        }
        #pragma GCC unroll 4
        for (int k = 0; k < R; k++)
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                double zx = 0; // sum_g scale_g zero_g X_g, in double: it cancels much of tot
                for (int j = 0; !aligned && j < ng; j++)
                    zx += (double)sr[k][j] * (zr[k] ? zr[k][j] : 1 << (bits - 1)) * X[(size_t)t * ng + j];
                float sum = (float)(_mm512_reduce_add_ps(tot[k][t]) - zx);
                for (int c = nb * L * per; c < w->cols; c++)
                    sum += pq_qpack_value(w, r + k, c) * x[(size_t)t * w->cols + c];
                y[(size_t)t * ldy + r + k] = sum;
            }
    }
}

// The per-row constants of the fixed-point GEMV. A short last block (a row
// of 64 + 128k columns: SmolLM2's 576) loads only its words and its groups'
// scales; its missing words have x = 0.
typedef struct {
    groups g;
    int nw, nb, ng, wpr;
    __mmask16 last_words, last_lanes;
} fixed_shape;

static fixed_shape fixed_shape_of(const pq_qpack *w) {
    fixed_shape f;
    f.g = block_groups(w);
    f.nw = w->cols / 8, f.nb = pq_qpack_fixed_blocks(w), f.ng = pq_qpack_ngroups(w->cols, w->group);
    f.wpr = pq_qpack_words_per_row(w->cols, 4);
    int last_g0 = f.nb ? block_g0(&f.g, f.nb - 1) : 0;
    f.last_words = (__mmask16)((1u << (f.nw - 16 * (f.nb - 1))) - 1); // (1 << 16: all 16)
    f.last_lanes = f.ng - last_g0 >= L ? f.g.lanes : f.g.lanes & (__mmask16)((1u << (f.ng - last_g0)) - 1);
    return f;
}

// tot[k][t] += block b of row r + k against token t; T, R, spans (the block
// holds several groups: per-lane scales) and last (the short last block:
// masked loads) are constants after inlining.
PQ_INLINE void fixed_block(const fixed_shape *f, const uint32_t *wr, const float *sr, const float *xp, int b, int T,
                           __m512 tot[][PQ_GEMV_MAX_T], int R, int spans, int last) {
    const __m512i nibble = _mm512_set1_epi8(15);
    const int g0 = block_g0(&f->g, b);
    __m512i lo[4], hi[4];
    __m512 s[4];
    #pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        const uint32_t *wb = wr + (size_t)k * f->wpr + (size_t)b * L;
        pq_prefetch_stream(wb);
        __m512i wv = last ? _mm512_maskz_loadu_epi32(f->last_words, wb) : _mm512_loadu_si512(wb);
        lo[k] = _mm512_and_si512(wv, nibble), hi[k] = _mm512_and_si512(_mm512_srli_epi32(wv, 4), nibble);
        const float *sk = sr + (size_t)k * f->ng + g0;
        s[k] = spans ? _mm512_permutexvar_ps(f->g.idx, _mm512_maskz_loadu_ps(last ? f->last_lanes : f->g.lanes, sk))
                     : _mm512_set1_ps(*sk);
    }
    #pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        const float *xb = xp + ((size_t)b * T + t) * 128;
        __m512i a[4];
        #pragma GCC unroll 4
        for (int k = 0; k < R; k++) a[k] = _mm512_setzero_si512();
        #pragma GCC unroll 3
        for (int l = 0; l < 3; l++) { // digit l of x: Horner's rule
            __m512i dlo = _mm512_loadu_si512(xb + 32 * l), dhi = _mm512_loadu_si512(xb + 32 * l + 16);
            #pragma GCC unroll 4
            for (int k = 0; k < R; k++) {
                if (l) a[k] = _mm512_slli_epi32(a[k], 8);
                a[k] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(a[k], lo[k], dlo), hi[k], dhi);
            }
        }
        // (a 2^k) first: exact, and never subnormal where a != 0 (scale * 2^-126 would be, and
        // subnormal operands cost a microcode assist per instruction); then scale, rounded once
        // either way
        __m512 S = _mm512_loadu_ps(xb + 96);
        #pragma GCC unroll 4
        for (int k = 0; k < R; k++)
            tot[k][t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(a[k]), S), s[k], tot[k][t]);
    }
}

// Rows r..r+R against the fixed-point x; T, R and spans are constants after
// inlining. R = 4 (one token) loads each digit vector once for four rows
// and gives the core four independent chains per block.
PQ_INLINE void fixed_rows(const pq_qpack *w, const fixed_shape *f, int r, const float *x, int T, const float *xp,
                          float *y, int ldy, int R, int spans) {
    const int nb = f->nb, ng = f->ng;
    const __m512 zsym = _mm512_set1_ps(8.0f);
    const float *X = xp + (size_t)nb * T * 128;
    const uint32_t *wr = w->packed + (size_t)r * f->wpr;
    const float *sr = w->scales + (size_t)r * ng;
    const uint8_t *zr = w->zeros ? w->zeros + (size_t)r * ng : NULL;
    __m512 tot[4][PQ_GEMV_MAX_T];
    #pragma GCC unroll 4
    for (int k = 0; k < R; k++)
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) tot[k][t] = _mm512_setzero_ps();
    for (int b = 0; b < nb - 1; b++) fixed_block(f, wr, sr, xp, b, T, tot, R, spans, 0);
    if (nb) fixed_block(f, wr, sr, xp, nb - 1, T, tot, R, spans, 1);
    #pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        const float *srk = sr + (size_t)k * ng;
        const uint8_t *zrk = zr ? zr + (size_t)k * ng : NULL;
        __m512 zx[PQ_GEMV_MAX_T]; // sum_g scale_g zero_g X_g
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) zx[t] = _mm512_setzero_ps();
        for (int j = 0; j < ng; j += L) {
            __mmask16 m = ng - j >= L ? 0xffff : (__mmask16)((1u << (ng - j)) - 1);
            __m512 sz = _mm512_maskz_loadu_ps(m, srk + j);
            __m512 z = zrk ? _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, zrk + j))) : zsym;
            sz = _mm512_mul_ps(sz, z);
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++)
                zx[t] = _mm512_fmadd_ps(sz, _mm512_maskz_loadu_ps(m, X + (size_t)t * ng + j), zx[t]);
        }
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            float sum = _mm512_reduce_add_ps(_mm512_sub_ps(tot[k][t], zx[t]));
            for (int c = f->nw * 8; c < w->cols; c++) sum += pq_qpack_value(w, r + k, c) * x[(size_t)t * w->cols + c];
            y[(size_t)t * ldy + r + k] = sum;
        }
    }
}

// Rows r0..r0+n against the fixed-point x: R rows at a time for one token
// (the decode case), one at a time for more.
PQ_INLINE void fixed_spans(const pq_qpack *w, const fixed_shape *f, int r0, int n, const float *x, int T,
                           const float *xp, float *y, int ldy, int spans) {
    int r = r0;
    if (T == 1)
        for (; r + FIXED_R <= r0 + n; r += FIXED_R) fixed_rows(w, f, r, x, T, xp, y, ldy, FIXED_R, spans);
    for (; r < r0 + n; r++) fixed_rows(w, f, r, x, T, xp, y, ldy, 1, spans);
}

PQ_INLINE void gemv_fixed(const pq_qpack *w, int r0, int n, const float *x, int T, const float *xp, float *y, int ldy) {
    const fixed_shape f = fixed_shape_of(w);
    if (f.g.nper > 1) fixed_spans(w, &f, r0, n, x, T, xp, y, ldy, 1);
    else fixed_spans(w, &f, r0, n, x, T, xp, y, ldy, 0);
}

// The fixed-point layout of qpack.h, 32 columns (16 n for each h) at a
// time (x = 0 past the row's whole words): even and odd columns split into lanes n, the word maximum of
// |x| taken on the bit patterns (NaN and Inf above every finite value) over
// lane groups of 4, k from getexp, then v = rint(x * 2^-k) (vcvtps2dq
// rounds to nearest even, like lrintf) and its digits: the bytes of
// v + 0x808080 (in [0, 2^24)) less 128 each, i.e. with the top bit flipped.
static void prepare_fixed(const pq_qpack *w, const float *x, int T, float *xp) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512i every4 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
    const __m512i bias = _mm512_set1_epi32(0x808080), absmask = _mm512_set1_epi32(0x7fffffff);
    const int ncols = w->cols / 8 * 8; // in whole words
    for (int b = 0; b < pq_qpack_fixed_blocks(w); b++)
        for (int t = 0; t < T; t++) {
            float *o = xp + ((size_t)b * T + t) * 128;
            int8_t *d = (int8_t *)o;
            const float *xb = x + (size_t)t * w->cols + b * 128;
            __m512 S[4];
            __m512i V[4]; // lanes 4j' of quarter r: word 4r + j'
            for (int r = 0; r < 4; r++) {
                int left = ncols - b * 128 - 32 * r; // columns of whole words from xb + 32r on
                __mmask16 m0 = left >= 16 ? 0xffff : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
                __mmask16 m1 = left >= 32 ? 0xffff : left > 16 ? (__mmask16)((1u << (left - 16)) - 1) : 0;
                __m512 x0 = _mm512_maskz_loadu_ps(m0, xb + 32 * r), x1 = _mm512_maskz_loadu_ps(m1, xb + 32 * r + 16);
                __m512 xh[2] = {_mm512_permutex2var_ps(x0, even, x1), _mm512_permutex2var_ps(x0, odd, x1)};
                __m512i mb = _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(xh[0]), absmask),
                                              _mm512_and_si512(_mm512_castps_si512(xh[1]), absmask));
                mb = _mm512_max_epu32(mb, _mm512_shuffle_epi32(mb, _MM_PERM_CDAB));
                mb = _mm512_max_epu32(mb, _mm512_shuffle_epi32(mb, _MM_PERM_BADC));
                __mmask16 finite = _mm512_cmplt_epu32_mask(mb, _mm512_set1_epi32(0x7f800000));
                __m512 m = _mm512_castsi512_ps(mb);
                __m512 k = _mm512_max_ps(_mm512_sub_ps(_mm512_getexp_ps(m), _mm512_set1_ps(22)), _mm512_set1_ps(-126));
                __mmask16 up = _mm512_cmp_ps_mask(_mm512_scalef_ps(m, -k), _mm512_set1_ps(8355711.0f), _CMP_GT_OQ);
                k = _mm512_mask_add_ps(k, up, k, _mm512_set1_ps(1));
                S[r] = _mm512_mask_blend_ps(finite, _mm512_set1_ps(NAN), _mm512_scalef_ps(_mm512_set1_ps(1), k));
                __m512i sum = _mm512_setzero_si512();
                for (int h = 0; h < 2; h++) {
                    __m512i v = _mm512_maskz_cvtps_epi32(finite, _mm512_scalef_ps(xh[h], -k));
                    sum = _mm512_add_epi32(sum, v);
                    __m512i u = _mm512_xor_si512(_mm512_add_epi32(v, bias), bias);
                    for (int l = 0; l < 3; l++)
                        _mm_storeu_si128((__m128i *)(d + (2 * l + h) * 64 + 16 * r),
                                         _mm512_cvtepi32_epi8(_mm512_srli_epi32(u, 16 - 8 * l)));
                }
                sum = _mm512_add_epi32(sum, _mm512_shuffle_epi32(sum, _MM_PERM_CDAB));
                sum = _mm512_add_epi32(sum, _mm512_shuffle_epi32(sum, _MM_PERM_BADC));
                V[r] = sum;
            }
            // lanes 0, 4, 8, 12 of the four quarters, in order
            __m512 s01 = _mm512_permutex2var_ps(S[0], every4, S[1]), s23 = _mm512_permutex2var_ps(S[2], every4, S[3]);
            __m512i v01 = _mm512_permutex2var_epi32(V[0], every4, V[1]);
            __m512i v23 = _mm512_permutex2var_epi32(V[2], every4, V[3]);
            _mm512_storeu_ps(o + 96, _mm512_shuffle_f32x4(s01, s23, 0x44));
            _mm512_storeu_si512(o + 112, _mm512_shuffle_i32x4(v01, v23, 0x44));
        }
}

void pq_qpack_gemv_prepare_avx512(const pq_qpack *w, const float *x, int T, float *xp) { prepare_fixed(w, x, T, xp); }

// One instance per (bits in {4, 8, other}, T, aligned) so the loops unroll.
PQ_INLINE void gemv_bits(const pq_qpack *w, int r0, int n, const float *x, int T, const float *xp, float *y, int ldy,
                         int bits) {
    int aligned = pq_qpack_gemv_aligned(w, L);
    if (T == 1 && aligned) { // the decode case: four rows at a time, then one by one
        int four = n / 4 * 4;
        gemv_blocks(w, r0, four, x, 1, xp, y, ldy, bits, 1, 4);
        r0 += four, n -= four;
    }
#define BLOCKS(t) \
    (aligned ? gemv_blocks(w, r0, n, x, t, xp, y, ldy, bits, 1, 1)                                                 \
             : gemv_blocks(w, r0, n, x, t, xp, y, ldy, bits, 0, 1))
    PQ_GEMV_T_SWITCH(T, BLOCKS);
#undef BLOCKS
}

void pq_qpack_gemv_avx512(const pq_qpack *w, int r0, int n, const float *x, int T, const float *xp, float *y,
                          int ldy) {
    if (pq_qpack_gemv_fixed(w, L)) {
#define FIXED(t) gemv_fixed(w, r0, n, x, t, xp, y, ldy)
        PQ_GEMV_T_SWITCH(T, FIXED);
#undef FIXED
        return;
    }
#define BITS(b) gemv_bits(w, r0, n, x, T, xp, y, ldy, b)
    PQ_BITS_SWITCH(w->bits, BITS);
#undef BITS
}

// ---- rows ---------------------------------------------------------------

// pq_qpack_rows for 4- and 8-bit codes whose groups are whole runs of 16
// columns (or one per row) and no g_idx: 16 columns at a time, (q - zero)
// converted exactly and multiplied once by the scale, as the AVX2 version
// does 8 at a time (the same bits); the columns past the last 16 by
// pq_qpack_value. Other layouts: the AVX2 version.
void pq_qpack_rows_avx512(const pq_qpack *w, int r0, int n, float *out) {
    int per_row = w->group >= w->cols;
    if ((w->bits != 4 && w->bits != 8) || w->g_idx || (!per_row && w->group % L != 0)) {
        pq_qpack_rows_avx2(w, r0, n, out);
        return;
    }
    const int cols = w->cols, ng = pq_qpack_ngroups(cols, w->group), c16 = cols / L * L;
    const __m512i sh4 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
    const __m512i m = _mm512_set1_epi32((1 << w->bits) - 1);
    for (int r = r0; r < r0 + n; r++) {
        const uint32_t *wr = w->packed + (size_t)r * pq_qpack_words_per_row(cols, w->bits);
        const float *sr = w->scales + (size_t)r * ng;
        const uint8_t *zr = w->zeros ? w->zeros + (size_t)r * ng : NULL;
        float *o = out + (size_t)(r - r0) * cols;
        for (int c = 0; c < c16; c += L) {
            int g = per_row ? 0 : c / w->group;
            __m512i q = w->bits == 4 ? _mm512_and_si512(_mm512_srlv_epi32(_mm512_inserti64x4(
                                           _mm512_set1_epi32((int)wr[c / 8]), _mm256_set1_epi32((int)wr[c / 8 + 1]), 1),
                                                                          sh4), m)
                                     : _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)((const uint8_t *)wr + c)));
            __m512i z = _mm512_set1_epi32(zr ? zr[g] : 1 << (w->bits - 1));
            _mm512_storeu_ps(o + c, _mm512_mul_ps(_mm512_set1_ps(sr[g]), _mm512_cvtepi32_ps(_mm512_sub_epi32(q, z))));
        }
        for (int c = c16; c < cols; c++) o[c] = pq_qpack_value(w, r, c);
    }
}
