// kernels/attention.h — causal grouped-query attention over a KV cache.
//
// Queries for T new tokens at positions pos0..pos0+T-1 attend to cached keys
// and values at positions 0..pos0+t (and, with a sliding window W > 0, only
// the last W of them, as Mistral does).
//   q   [T][n_heads*hd]            (RoPE already applied)
//   k,v [pos0+T][n_kv*hd]          (the cache, rows 0..pos0+T-1 filled)
//   out [T][n_heads*hd]
// Head h reads kv head h / (n_heads / n_kv). Scores are scaled by 1/sqrt(hd).
#ifndef PQ_ATTENTION_H
#define PQ_ATTENTION_H

#include <stddef.h>

#include "common/threads.h"

typedef struct {
    int n_heads, n_kv, head_dim;
    int window; // sliding window (0 = none)
} pq_attn_shape;

// The specification: per query a plain softmax in double.
void pq_attention_ref(const pq_attn_shape *s, const float *q, const float *k, const float *v, int T, int pos0,
                      float *out);

// Blocks of queries per head (one query, a decode step: dot products per
// head instead), parallel over the pool; ws holds
// pq_attention_workspace_bytes(s, pos0 + T, nthreads). Several queries: the
// keys transposed once per call (pq_attn_pack_keys), then per block of
// queries the scores (pq_attn_scores_*), each row's softmax over its
// visible keys, and the mix of values (pq_attn_mix_*): the same bits on
// AVX-512 and AVX2 machines and for any thread count.
size_t pq_attention_workspace_bytes(const pq_attn_shape *s, int n_ctx, int nthreads);
void pq_attention_cpu(const pq_attn_shape *s, const float *q, const float *k, const float *v, int T, int pos0,
                      float *out, void *ws, pq_pool *pool);

// ---- the pieces of a block of queries of one head ----

// Keys as the scores read them: transposed, PQ_ATTN_KEYS to a block,
//   kt[(c / PQ_ATTN_KEYS) * hd * PQ_ATTN_KEYS + d * PQ_ATTN_KEYS + c % PQ_ATTN_KEYS] = k[c * ldk + d]
// for c < nk; the last block's missing keys are zeros.
#define PQ_ATTN_KEYS 16
void pq_attn_pack_keys(int nk, int hd, const float *k, int ldk, float *kt);

// S[r][c] = scale * (q_r . key c) for rows r < nq (q_r = q + r * ldq, keys
// from kt as pq_attn_pack_keys lays them out), for every c below end[r]; a
// row may get more columns, up to the largest end[] rounded up to
// PQ_ATTN_KEYS (S must have room for them; their values are of no use).
// Each dot product is one fused multiply-add chain over d = 0..hd-1
// starting from 0, then the product with scale: _ref, _avx2 and _avx512 give
// the same bits.
void pq_attn_scores_ref(int nq, const int *end, int hd, float scale, const float *q, int ldq, const float *kt,
                        float *S, int lds);
void pq_attn_scores_avx2(int nq, const int *end, int hd, float scale, const float *q, int ldq, const float *kt,
                         float *S, int lds);
void pq_attn_scores_avx512(int nq, const int *end, int hd, float scale, const float *q, int ldq, const float *kt,
                           float *S, int lds);

// o_r[0..hd) = sum over c < end[r] of P[r][c] v_c (o_r = o + r * ldo, v_c =
// v + c * ldv) for rows r < nq, each element one fused multiply-add chain
// over c in order starting from 0. A row's chain may go on over P[r][c] up
// to the largest end[]: those entries must be 0 (terms that add nothing,
// except that a -0 sum would come out +0), so that
// _ref, _avx2 (hd % 8 == 0) and _avx512 (hd % 16 == 0) give the same bits.
void pq_attn_mix_ref(int nq, const int *end, int hd, const float *P, int ldp, const float *v, int ldv, float *o,
                     int ldo);
void pq_attn_mix_avx2(int nq, const int *end, int hd, const float *P, int ldp, const float *v, int ldv, float *o,
                      int ldo);
void pq_attn_mix_avx512(int nq, const int *end, int hd, const float *P, int ldp, const float *v, int ldv, float *o,
                        int ldo);

// x[0..n) = softmax(x) in place (kernels/attention_avx2.c; pq_attention_cpu
// uses it on AVX2 machines): exp by kernels/simd.h's vector exp. The
// AVX-512 version (kernels/attention_avx512.c; on AVX-512 machines) gives
// the same bits.
void pq_softmax_avx2(float *x, int n);
void pq_softmax_avx512(float *x, int n);

// One head of one query (kernels/attention_avx2.c; pq_attention_cpu calls it
// on AVX2 machines): scores of the nk keys kb[c * kvdim] into S[nk], their
// softmax, and o[hd] = sum_c S[c] vb[c * kvdim].
void pq_attn_head_avx2(int hd, int nk, int kvdim, float scale, const float *qh, const float *kb, const float *vb,
                       float *S, float *o);

#endif
