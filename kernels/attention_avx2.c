// AVX2 + FMA attention pieces (kernels/attention.h): the softmax of a row
// with kernels/simd.h's vector exp; decode attention of one head: the
// scores as 8-lane FMA dot products, that softmax, and the weighted sum of
// value rows kept in registers, 32 columns at a time (fp32 throughout, as
// the portable path; only the order of the sums, the fused multiply-adds and
// the exp (within 2 ulp of expf) differ: tests, rel L2 < 1e-5 against the
// double _ref); the scores and the mix of a block of queries: register
// tiles of fused multiply-add chains in _ref's order.
#include <immintrin.h>
#include <math.h>

#include "kernels/attention.h"
#include "kernels/simd.h"

static float dot(const float *a, const float *b, int n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    if (i + 8 <= n) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0), i += 8;
    float s = pq_hsum_ps(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

void pq_softmax_avx2(float *x, int n) {
    int n8 = n / 8 * 8, i;
    float mx = pq_softmax_max(x, n), sum;
    __m256 m = _mm256_set1_ps(mx), even = _mm256_setzero_ps(), odd = even; // sums of the even / odd groups of 8
    for (i = 0; i + 16 <= n8; i += 16) {
        __m256 e0 = pq_exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
        __m256 e1 = pq_exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), m));
        _mm256_storeu_ps(x + i, e0);
        _mm256_storeu_ps(x + i + 8, e1);
        even = _mm256_add_ps(even, e0);
        odd = _mm256_add_ps(odd, e1);
    }
    if (i < n8) {
        __m256 e = pq_exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
        _mm256_storeu_ps(x + i, e);
        even = _mm256_add_ps(even, e);
    }
    sum = pq_hsum_ps(_mm256_add_ps(even, odd));
    for (i = n8; i < n; i++) sum += (x[i] = expf(x[i] - mx));
    __m256 inv = _mm256_set1_ps(1.0f / sum);
    for (i = 0; i < n8; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    for (i = n8; i < n; i++) x[i] *= 1.0f / sum;
}

void pq_attn_head_avx2(int hd, int nk, int kvdim, float scale, const float *qh, const float *kb, const float *vb,
                       float *S, float *o) {
    for (int c = 0; c < nk; c++) S[c] = scale * dot(qh, kb + (size_t)c * kvdim, hd);
    pq_softmax_avx2(S, nk);
    int i = 0;
    for (; i + 32 <= hd; i += 32) { // o[i..i+32) = sum_c S[c] v[c][i..i+32)
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int c = 0; c < nk; c++) {
            const float *vr = vb + (size_t)c * kvdim + i;
            __m256 w = _mm256_broadcast_ss(S + c);
            a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vr), a0);
            a1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vr + 8), a1);
            a2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vr + 16), a2);
            a3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vr + 24), a3);
        }
        _mm256_storeu_ps(o + i, a0);
        _mm256_storeu_ps(o + i + 8, a1);
        _mm256_storeu_ps(o + i + 16, a2);
        _mm256_storeu_ps(o + i + 24, a3);
    }
    for (; i < hd; i++) {
        float a = 0;
        for (int c = 0; c < nk; c++) a += S[c] * vb[(size_t)c * kvdim + i];
        o[i] = a;
    }
}

// ---- a block of queries (kernels/attention.h: the same chains as _ref) ----

// Scores of R rows against one block of 16 keys (two vectors of 8).
PQ_INLINE void scores_tile(int R, int hd, __m256 scale, const float *q, int ldq, const float *kt, float *S, int lds) {
    __m256 acc[6][2];
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d++) {
        __m256 k0 = _mm256_loadu_ps(kt + (size_t)d * PQ_ATTN_KEYS), k1 = _mm256_loadu_ps(kt + (size_t)d * PQ_ATTN_KEYS + 8);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m256 x = _mm256_broadcast_ss(q + (size_t)r * ldq + d);
            acc[r][0] = _mm256_fmadd_ps(x, k0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(x, k1, acc[r][1]);
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(S + (size_t)r * lds, _mm256_mul_ps(scale, acc[r][0]));
        _mm256_storeu_ps(S + (size_t)r * lds + 8, _mm256_mul_ps(scale, acc[r][1]));
    }
}

#define SCORES_TILE(R)                                                                                                 \
    for (int b = 0; b < nb; b++)                                                                                       \
    scores_tile(R, hd, sc, qr, ldq, kt + (size_t)b * hd * PQ_ATTN_KEYS, Sr + b * PQ_ATTN_KEYS, lds)

void pq_attn_scores_avx2(int nq, const int *end, int hd, float scale, const float *q, int ldq, const float *kt,
                         float *S, int lds) {
    __m256 sc = _mm256_set1_ps(scale);
    for (int r0 = 0; r0 < nq; r0 += 6) {
        int R = nq - r0 < 6 ? nq - r0 : 6, kmax = 0;
        for (int r = r0; r < r0 + R; r++) kmax = end[r] > kmax ? end[r] : kmax;
        int nb = (kmax + PQ_ATTN_KEYS - 1) / PQ_ATTN_KEYS;
        const float *qr = q + (size_t)r0 * ldq;
        float *Sr = S + (size_t)r0 * lds;
        switch (R) {
        case 6: SCORES_TILE(6); break;
        case 5: SCORES_TILE(5); break;
        case 4: SCORES_TILE(4); break;
        case 3: SCORES_TILE(3); break;
        case 2: SCORES_TILE(2); break;
        default: SCORES_TILE(1); break;
        }
    }
}

// o rows r < R, columns [0, 8 NV): the chains over c < n.
PQ_INLINE void mix_tile(int R, int NV, int n, const float *P, int ldp, const float *v, int ldv, float *o, int ldo) {
    __m256 acc[2][4];
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int i = 0; i < NV; i++) acc[r][i] = _mm256_setzero_ps();
    for (int c = 0; c < n; c++) {
        __m256 x[4];
        #pragma GCC unroll 8
        for (int i = 0; i < NV; i++) x[i] = _mm256_loadu_ps(v + (size_t)c * ldv + 8 * i);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m256 p = _mm256_broadcast_ss(P + (size_t)r * ldp + c);
            #pragma GCC unroll 8
            for (int i = 0; i < NV; i++) acc[r][i] = _mm256_fmadd_ps(p, x[i], acc[r][i]);
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int i = 0; i < NV; i++) _mm256_storeu_ps(o + (size_t)r * ldo + 8 * i, acc[r][i]);
}

#define MIX_TILE(R)                                                                                                    \
    do {                                                                                                               \
        int i = 0;                                                                                                     \
        for (; i + 32 <= hd; i += 32) mix_tile(R, 4, n, Pr, ldp, v + i, ldv, orow + i, ldo);                           \
        switch ((hd - i) / 8) {                                                                                        \
        case 3: mix_tile(R, 3, n, Pr, ldp, v + i, ldv, orow + i, ldo); break;                                          \
        case 2: mix_tile(R, 2, n, Pr, ldp, v + i, ldv, orow + i, ldo); break;                                          \
        case 1: mix_tile(R, 1, n, Pr, ldp, v + i, ldv, orow + i, ldo); break;                                          \
        default: break;                                                                                                \
        }                                                                                                              \
    } while (0)

void pq_attn_mix_avx2(int nq, const int *end, int hd, const float *P, int ldp, const float *v, int ldv, float *o,
                      int ldo) {
    for (int r0 = 0; r0 < nq; r0 += 2) {
        int R = nq - r0 < 2 ? nq - r0 : 2, n = end[r0 + R - 1] > end[r0] ? end[r0 + R - 1] : end[r0];
        const float *Pr = P + (size_t)r0 * ldp;
        float *orow = o + (size_t)r0 * ldo;
        if (R == 2) MIX_TILE(2);
        else MIX_TILE(1);
    }
}
