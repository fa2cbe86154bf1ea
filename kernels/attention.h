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

// Blocks of queries per head through sgemm (one query, a decode step: dot
// products per head instead), parallel over the pool; ws holds
// pq_attention_workspace_bytes(s, pos0 + T, nthreads).
size_t pq_attention_workspace_bytes(const pq_attn_shape *s, int n_ctx, int nthreads);
void pq_attention_cpu(const pq_attn_shape *s, const float *q, const float *k, const float *v, int T, int pos0,
                      float *out, void *ws, pq_pool *pool);

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
