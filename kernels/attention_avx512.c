// AVX-512 attention pieces (kernels/attention.h). The softmax of a row of
// scores: the exps 16 at a time, everything else as pq_softmax_avx2 does it
// (the same 8-lane maximum, the same two 8-lane sums of the even and the
// odd groups of 8; pq_exp_avx512 equals pq_exp_avx2 lane for lane), so the
// two give the same bits. The
// scores and the mix of a block of queries: register tiles of fused
// multiply-add chains in _ref's order.
#include <immintrin.h>
#include <math.h>

#include "kernels/attention.h"
#include "kernels/simd.h"

void pq_softmax_avx512(float *x, int n) {
    int n8 = n / 8 * 8, i;
    float mx = pq_softmax_max(x, n), sum;
    __m512 acc = _mm512_setzero_ps(); // lanes 0..7: the even groups of 8, lanes 8..15: the odd ones
    for (i = 0; i + 16 <= n8; i += 16) {
        __m512 e = pq_exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(x + i), _mm512_set1_ps(mx)));
        _mm512_storeu_ps(x + i, e);
        acc = _mm512_add_ps(acc, e);
    }
    __m256 even = _mm512_castps512_ps256(acc), odd = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
    if (i < n8) {
        __m256 e = pq_exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_set1_ps(mx)));
        _mm256_storeu_ps(x + i, e);
        even = _mm256_add_ps(even, e);
    }
    sum = pq_hsum_ps(_mm256_add_ps(even, odd));
    for (i = n8; i < n; i++) sum += (x[i] = expf(x[i] - mx));
    const float inv = 1.0f / sum;
    for (i = 0; i + 16 <= n8; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), _mm512_set1_ps(inv)));
    if (i < n8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_set1_ps(inv)));
    for (i = n8; i < n; i++) x[i] *= inv;
}

// ---- a block of queries (kernels/attention.h: the same chains as _ref) ----

// Scores of R rows (q rows ldq apart) against NB blocks of 16 keys: R x NB
// accumulators, each key block's d-th row loaded once per d for all rows.
PQ_INLINE void scores_tile(int R, int NB, int hd, __m512 scale, const float *q, int ldq, const float *kt,
                           float *S, int lds) {
    __m512 acc[8][2];
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int b = 0; b < NB; b++) acc[r][b] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d++) {
        __m512 k[2];
        #pragma GCC unroll 8
        for (int b = 0; b < NB; b++) k[b] = _mm512_loadu_ps(kt + ((size_t)b * hd + d) * PQ_ATTN_KEYS);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m512 x = _mm512_set1_ps(q[(size_t)r * ldq + d]);
            #pragma GCC unroll 8
            for (int b = 0; b < NB; b++) acc[r][b] = _mm512_fmadd_ps(x, k[b], acc[r][b]);
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int b = 0; b < NB; b++)
            _mm512_storeu_ps(S + (size_t)r * lds + b * PQ_ATTN_KEYS, _mm512_mul_ps(scale, acc[r][b]));
}

#define SCORES_TILE(R)                                                                                                 \
    do {                                                                                                               \
        int b = 0;                                                                                                     \
        for (; b + 2 <= nb; b += 2)                                                                                    \
            scores_tile(R, 2, hd, sc, qr, ldq, kt + (size_t)b * hd * PQ_ATTN_KEYS, Sr + b * PQ_ATTN_KEYS, lds);        \
        if (b < nb) scores_tile(R, 1, hd, sc, qr, ldq, kt + (size_t)b * hd * PQ_ATTN_KEYS, Sr + b * PQ_ATTN_KEYS, lds); \
    } while (0)

void pq_attn_scores_avx512(int nq, const int *end, int hd, float scale, const float *q, int ldq, const float *kt,
                           float *S, int lds) {
    __m512 sc = _mm512_set1_ps(scale);
    for (int r0 = 0; r0 < nq; r0 += 8) {
        int R = nq - r0 < 8 ? nq - r0 : 8, kmax = 0;
        for (int r = r0; r < r0 + R; r++) kmax = end[r] > kmax ? end[r] : kmax;
        int nb = (kmax + PQ_ATTN_KEYS - 1) / PQ_ATTN_KEYS;
        const float *qr = q + (size_t)r0 * ldq;
        float *Sr = S + (size_t)r0 * lds;
        switch (R) {
        case 8: SCORES_TILE(8); break;
        case 7: SCORES_TILE(7); break;
        case 6: SCORES_TILE(6); break;
        case 5: SCORES_TILE(5); break;
        case 4: SCORES_TILE(4); break;
        case 3: SCORES_TILE(3); break;
        case 2: SCORES_TILE(2); break;
        default: SCORES_TILE(1); break;
        }
    }
}

// o rows r < R, columns [0, 16 NV): the chains over c < n, each value
// row's 16 NV columns loaded once per c for all rows.
PQ_INLINE void mix_tile(int R, int NV, int n, const float *P, int ldp, const float *v, int ldv, float *o, int ldo) {
    __m512 acc[6][4];
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int i = 0; i < NV; i++) acc[r][i] = _mm512_setzero_ps();
    for (int c = 0; c < n; c++) {
        __m512 x[4];
        #pragma GCC unroll 8
        for (int i = 0; i < NV; i++) x[i] = _mm512_loadu_ps(v + (size_t)c * ldv + 16 * i);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m512 p = _mm512_set1_ps(P[(size_t)r * ldp + c]);
            #pragma GCC unroll 8
            for (int i = 0; i < NV; i++) acc[r][i] = _mm512_fmadd_ps(p, x[i], acc[r][i]);
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int i = 0; i < NV; i++) _mm512_storeu_ps(o + (size_t)r * ldo + 16 * i, acc[r][i]);
}

#define MIX_TILE(R)                                                                                                    \
    do {                                                                                                               \
        int i = 0;                                                                                                     \
        for (; i + 64 <= hd; i += 64) mix_tile(R, 4, n, Pr, ldp, v + i, ldv, orow + i, ldo);                           \
        switch ((hd - i) / 16) {                                                                                       \
        case 3: mix_tile(R, 3, n, Pr, ldp, v + i, ldv, orow + i, ldo); break;                                          \
        case 2: mix_tile(R, 2, n, Pr, ldp, v + i, ldv, orow + i, ldo); break;                                          \
        case 1: mix_tile(R, 1, n, Pr, ldp, v + i, ldv, orow + i, ldo); break;                                          \
        default: break;                                                                                                \
        }                                                                                                              \
    } while (0)

void pq_attn_mix_avx512(int nq, const int *end, int hd, const float *P, int ldp, const float *v, int ldv, float *o,
                        int ldo) {
    for (int r0 = 0; r0 < nq; r0 += 6) {
        int R = nq - r0 < 6 ? nq - r0 : 6, n = 0;
        for (int r = r0; r < r0 + R; r++) n = end[r] > n ? end[r] : n;
        const float *Pr = P + (size_t)r0 * ldp;
        float *orow = o + (size_t)r0 * ldo;
        switch (R) {
        case 6: MIX_TILE(6); break;
        case 5: MIX_TILE(5); break;
        case 4: MIX_TILE(4); break;
        case 3: MIX_TILE(3); break;
        case 2: MIX_TILE(2); break;
        default: MIX_TILE(1); break;
        }
    }
}
