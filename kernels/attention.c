#include "attention.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/blas.h"
#include "kernels/cpu.h"

// first key position query t (at absolute position p) may see
static int first_key(const pq_attn_shape *s, int p) {
    return s->window > 0 && p - s->window + 1 > 0 ? p - s->window + 1 : 0;
}

void pq_attention_ref(const pq_attn_shape *s, const float *q, const float *k, const float *v, int T, int pos0,
                      float *out) {
    int hd = s->head_dim, qdim = s->n_heads * hd, kvdim = s->n_kv * hd, group = s->n_heads / s->n_kv;
    double *w = malloc((size_t)(pos0 + T) * sizeof(double));
    PQ_ASSERT(w);
    double scale = 1.0 / sqrt((double)hd);
    for (int t = 0; t < T; t++) {
        int p = pos0 + t, j0 = first_key(s, p);
        for (int h = 0; h < s->n_heads; h++) {
            const float *qh = q + (size_t)t * qdim + (size_t)h * hd;
            int kh = h / group;
            double mx = -INFINITY, sum = 0;
            for (int j = j0; j <= p; j++) {
                double d = 0;
                for (int i = 0; i < hd; i++) d += (double)qh[i] * k[(size_t)j * kvdim + (size_t)kh * hd + i];
                w[j] = d * scale;
                if (w[j] > mx) mx = w[j];
            }
            for (int j = j0; j <= p; j++) sum += (w[j] = exp(w[j] - mx));
            for (int i = 0; i < hd; i++) {
                double acc = 0;
                for (int j = j0; j <= p; j++) acc += w[j] * v[(size_t)j * kvdim + (size_t)kh * hd + i];
                out[(size_t)t * qdim + (size_t)h * hd + i] = (float)(acc / sum);
            }
        }
    }
    free(w);
}

// Queries per task: a block of Q rows of one head.
#define QBLOCK 64

size_t pq_attention_workspace_bytes(const pq_attn_shape *s, int n_ctx, int nthreads) {
    return (size_t)nthreads * QBLOCK * (size_t)n_ctx * sizeof(float);
}

typedef struct {
    const pq_attn_shape *s;
    const float *q, *k, *v;
    int T, pos0, nblocks;
    float *out, *ws;
} attn_job;

static void attn_block(void *ctx, int task, int tid) {
    attn_job *j = ctx;
    const pq_attn_shape *s = j->s;
    int h = task / j->nblocks, b = task % j->nblocks;
    int t0 = b * QBLOCK, nq = j->T - t0 < QBLOCK ? j->T - t0 : QBLOCK;
    int hd = s->head_dim, qdim = s->n_heads * hd, kvdim = s->n_kv * hd, kh = h / (s->n_heads / s->n_kv);
    int p_last = j->pos0 + t0 + nq - 1;              // last position in this block
    int j0 = first_key(s, j->pos0 + t0);             // first key any query in the block sees
    int nk = p_last - j0 + 1;
    float *S = j->ws + (size_t)tid * QBLOCK * (size_t)(j->pos0 + j->T);
    const float *qb = j->q + (size_t)t0 * qdim + (size_t)h * hd;
    const float *kb = j->k + (size_t)j0 * kvdim + (size_t)kh * hd;
    const float *vb = j->v + (size_t)j0 * kvdim + (size_t)kh * hd;
    // S[nq][nk] = Q K^T / sqrt(hd)
    pq_sgemm_nt(nq, nk, hd, 1.0f / sqrtf((float)hd), qb, qdim, kb, kvdim, 0.0f, S, nk);
    for (int r = 0; r < nq; r++) {
        int p = j->pos0 + t0 + r, lo = first_key(s, p) - j0, hi = p - j0; // visible keys [lo, hi]
        float *row = S + (size_t)r * nk;
        for (int c = 0; c < lo; c++) row[c] = 0;
        if (pq_cpu_isa() >= PQ_ISA_AVX512) {
            pq_softmax_avx512(row + lo, hi - lo + 1);
        } else if (pq_cpu_isa() >= PQ_ISA_AVX2) {
            pq_softmax_avx2(row + lo, hi - lo + 1);
        } else {
            float mx = -INFINITY, sum = 0;
            for (int c = lo; c <= hi; c++) mx = row[c] > mx ? row[c] : mx;
            for (int c = lo; c <= hi; c++) sum += (row[c] = expf(row[c] - mx));
            float inv = 1.0f / sum;
            for (int c = lo; c <= hi; c++) row[c] *= inv;
        }
        for (int c = hi + 1; c < nk; c++) row[c] = 0;
    }
    // O[nq][hd] = P V
    pq_sgemm_nn(nq, hd, nk, 1.0f, S, nk, vb, kvdim, 0.0f, j->out + (size_t)t0 * qdim + (size_t)h * hd, qdim);
}

// a . b over n floats in 8 independent lanes (vectorizable without
// reassociating), then the lanes pairwise
static float dot(const float *a, const float *b, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += a[i + l] * b[i + l];
    for (int l = 0; i < n; i++, l++) acc[l] += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// y += a x over n floats, 8 at a time (vectorizable)
static void axpy(float *restrict y, const float *restrict x, float a, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) y[i + l] += a * x[i + l];
    for (; i < n; i++) y[i] += a * x[i];
}

// One query (a decode step), one task per head: dot products and a weighted
// sum of value rows. sgemm would spend more time packing its operands than
// multiplying vectors this short.
static void attn_one(void *ctx, int h, int tid) {
    attn_job *j = ctx;
    const pq_attn_shape *s = j->s;
    int hd = s->head_dim, kvdim = s->n_kv * hd, kh = h / (s->n_heads / s->n_kv);
    int p = j->pos0, j0 = first_key(s, p), nk = p - j0 + 1;
    float *S = j->ws + (size_t)tid * QBLOCK * (size_t)(j->pos0 + j->T);
    const float *qh = j->q + (size_t)h * hd;
    const float *kb = j->k + (size_t)j0 * kvdim + (size_t)kh * hd;
    const float *vb = j->v + (size_t)j0 * kvdim + (size_t)kh * hd;
    float scale = 1.0f / sqrtf((float)hd), mx = -INFINITY, sum = 0;
    if (pq_cpu_isa() >= PQ_ISA_AVX2) {
        pq_attn_head_avx2(hd, nk, kvdim, scale, qh, kb, vb, S, j->out + (size_t)h * hd);
        return;
    }
    for (int c = 0; c < nk; c++) {
        S[c] = scale * dot(qh, kb + (size_t)c * kvdim, hd);
        mx = S[c] > mx ? S[c] : mx;
    }
    for (int c = 0; c < nk; c++) sum += (S[c] = expf(S[c] - mx));
    float *o = j->out + (size_t)h * hd, inv = 1.0f / sum;
    for (int i = 0; i < hd; i++) o[i] = 0;
    for (int c = 0; c < nk; c++) axpy(o, vb + (size_t)c * kvdim, S[c] * inv, hd);
}

void pq_attention_cpu(const pq_attn_shape *s, const float *q, const float *k, const float *v, int T, int pos0,
                      float *out, void *ws, pq_pool *pool) {
    attn_job j = {s, q, k, v, T, pos0, (T + QBLOCK - 1) / QBLOCK, out, ws};
    if (T == 1) pq_pool_for(pool, s->n_heads, attn_one, &j);
    else pq_pool_for(pool, s->n_heads * j.nblocks, attn_block, &j);
}
