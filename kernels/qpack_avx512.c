// AVX-512 GEMV of kernels/qpack.h: the AVX2 algorithm (kernels/qpack_avx2.c)
// on blocks of 16 words, with xp prepared for 16 lanes. Columns past the
// last full block are summed in scalar code.
#include <immintrin.h>

#include "kernels/dense.h"
#include "kernels/qpack.h"

#define L 16
// Software prefetch distance in bytes of packed weights. The hardware
// streamer alone leaves a single thread at ~60% of the read bandwidth here
// (it restarts at every 4 KB page); 4..16 KB ahead measured alike.
#define PREFETCH 8192
#define INLINE static inline __attribute__((always_inline))

typedef struct {
    int wpg, nper;       // words per group (0: per channel), groups per block
    __m512i idx;         // lane j -> group j / wpg
    __mmask16 lanes;     // the first nper lanes
} groups;

static groups block_groups(const pq_qpack *w) {
    groups g;
    g.wpg = w->group >= w->cols ? 0 : w->group / pq_qpack_per_word(w->bits);
    g.nper = g.wpg && g.wpg < L ? L / g.wpg : 1;
    int d = g.wpg && g.wpg < L ? g.wpg : L;
    int idx[L];
    for (int j = 0; j < L; j++) idx[j] = j / d;
    g.idx = _mm512_loadu_si512(idx);
    g.lanes = (__mmask16)((1u << g.nper) - 1);
    return g;
}

INLINE int block_g0(const groups *g, int b) { return !g->wpg ? 0 : g->nper > 1 ? b * g->nper : b * L / g->wpg; }

INLINE __m512 block_scale(const groups *g, const float *sr, int g0) {
    if (g->nper == 1) return _mm512_set1_ps(sr[g0]);
    return _mm512_permutexvar_ps(g->idx, _mm512_maskz_loadu_ps(g->lanes, sr + g0));
}

INLINE __m512 block_zero(const groups *g, const uint8_t *zr, int g0) {
    if (g->nper == 1) return _mm512_set1_ps((float)zr[g0]);
    __m512i zi = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(g->lanes, zr + g0));
    return _mm512_cvtepi32_ps(_mm512_permutexvar_epi32(g->idx, zi));
}

// Rows r0..r0+n; T, bits and aligned are constants after inlining.
INLINE void gemv_blocks(const pq_qpack *w, int r0, int n, const float *x, int T, const float *xp, float *y, int ldy,
                        int bits, int aligned) {
    const groups g = block_groups(w);
    const int per = 32 / bits, nb = w->cols / per / L, wpr = pq_qpack_words_per_row(w->cols, bits);
    const int ng = pq_qpack_ngroups(w->cols, w->group), top_shift = per * bits == 32;
    const size_t xstride = (size_t)(per + 1) * L;
    const int32_t *gi = (const int32_t *)(xp + (size_t)nb * T * xstride);
    const double *X = (const double *)(gi + (size_t)nb * per * L);
    const __m512 zsym = _mm512_set1_ps((float)(1 << (bits - 1)));
    for (int r = r0; r < r0 + n; r++) {
        const uint32_t *wr = w->packed + (size_t)r * wpr;
        const float *sr = w->scales + (size_t)r * ng;
        const uint8_t *zr = w->zeros ? w->zeros + (size_t)r * ng : NULL;
        __m512 tot[PQ_GEMV_MAX_T];
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) tot[t] = _mm512_setzero_ps();
        for (int b = 0; b < nb; b++) {
            _mm_prefetch((const char *)(wr + (size_t)b * L) + PREFETCH, _MM_HINT_T0);
            __m512i wv = _mm512_loadu_si512(wr + (size_t)b * L);
            const float *xb = xp + (size_t)b * T * xstride;
            __m512 acc[PQ_GEMV_MAX_T];
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps(); // (dead when aligned: field 0 multiplies)
            #pragma GCC unroll 16
            for (int i = 0; i < per; i++) {
                __m512i q = i == per - 1 && top_shift
                                ? _mm512_srli_epi32(wv, bits * i)
                                : _mm512_and_si512(wv, _mm512_set1_epi32((int)(((1u << bits) - 1) << (bits * i))));
                __m512 f = _mm512_cvtepi32_ps(q);
                if (!aligned) {
                    __m512i gv = _mm512_loadu_si512(gi + ((size_t)b * per + i) * L);
                    f = _mm512_mul_ps(f, _mm512_i32gather_ps(gv, sr, 4));
                }
                #pragma GCC unroll 4
                for (int t = 0; t < T; t++) {
                    __m512 xv = _mm512_loadu_ps(xb + t * xstride + (size_t)i * L);
                    if (!aligned) tot[t] = _mm512_fmadd_ps(f, xv, tot[t]);
                    else acc[t] = i == 0 ? _mm512_mul_ps(f, xv) : _mm512_fmadd_ps(f, xv, acc[t]);
                }
            }
            if (!aligned) continue;
            int g0 = block_g0(&g, b);
            __m512 s = block_scale(&g, sr, g0), z = zr ? block_zero(&g, zr, g0) : zsym;
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                acc[t] = _mm512_fnmadd_ps(z, _mm512_loadu_ps(xb + t * xstride + (size_t)per * L), acc[t]);
                tot[t] = _mm512_fmadd_ps(acc[t], s, tot[t]);
            }
        }
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            double zx = 0; // sum_g scale_g zero_g X_g, in double: it cancels much of tot
            for (int k = 0; !aligned && k < ng; k++)
                zx += (double)sr[k] * (zr ? zr[k] : 1 << (bits - 1)) * X[(size_t)t * ng + k];
            float sum = (float)(_mm512_reduce_add_ps(tot[t]) - zx);
            for (int c = nb * L * per; c < w->cols; c++) sum += pq_qpack_value(w, r, c) * x[(size_t)t * w->cols + c];
            y[(size_t)t * ldy + r] = sum;
        }
    }
}

// One instance per (bits in {4, 8, other}, T, aligned) so the loops unroll.
INLINE void gemv_bits(const pq_qpack *w, int r0, int n, const float *x, int T, const float *xp, float *y, int ldy,
                      int bits) {
    switch (T * 2 + pq_qpack_gemv_aligned(w, L)) {
    case 2: gemv_blocks(w, r0, n, x, 1, xp, y, ldy, bits, 0); return;
    case 3: gemv_blocks(w, r0, n, x, 1, xp, y, ldy, bits, 1); return;
    case 4: gemv_blocks(w, r0, n, x, 2, xp, y, ldy, bits, 0); return;
    case 5: gemv_blocks(w, r0, n, x, 2, xp, y, ldy, bits, 1); return;
    case 6: gemv_blocks(w, r0, n, x, 3, xp, y, ldy, bits, 0); return;
    case 7: gemv_blocks(w, r0, n, x, 3, xp, y, ldy, bits, 1); return;
    case 8: gemv_blocks(w, r0, n, x, 4, xp, y, ldy, bits, 0); return;
    default: gemv_blocks(w, r0, n, x, 4, xp, y, ldy, bits, 1); return;
    }
}
static void gemv_b4(const pq_qpack *w, int r0, int n, const float *x, int T, const float *xp, float *y, int ldy) {
    gemv_bits(w, r0, n, x, T, xp, y, ldy, 4);
}
static void gemv_b8(const pq_qpack *w, int r0, int n, const float *x, int T, const float *xp, float *y, int ldy) {
    gemv_bits(w, r0, n, x, T, xp, y, ldy, 8);
}

void pq_qpack_gemv_avx512(const pq_qpack *w, int r0, int n, const float *x, int T, const float *xp, float *y,
                          int ldy) {
    if (w->bits == 4) gemv_b4(w, r0, n, x, T, xp, y, ldy);
    else if (w->bits == 8) gemv_b8(w, r0, n, x, T, xp, y, ldy);
    else gemv_bits(w, r0, n, x, T, xp, y, ldy, w->bits);
}
