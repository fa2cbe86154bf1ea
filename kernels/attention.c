#include "attention.h"

#include <math.h>
#include <stdlib.h>

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

static int round_up(int n, int m) { return (n + m - 1) / m * m; }

void pq_attn_pack_keys(int nk, int hd, const float *k, int ldk, float *kt) {
    for (int b = 0; b * PQ_ATTN_KEYS < nk; b++)
        for (int d = 0; d < hd; d++) {
            float *dst = kt + ((size_t)b * hd + d) * PQ_ATTN_KEYS;
            for (int i = 0; i < PQ_ATTN_KEYS; i++) {
                int c = b * PQ_ATTN_KEYS + i;
                dst[i] = c < nk ? k[(size_t)c * ldk + d] : 0.0f;
            }
        }
}

void pq_attn_scores_ref(int nq, const int *end, int hd, float scale, const float *q, int ldq, const float *kt,
                        float *S, int lds) {
    for (int r = 0; r < nq; r++)
        for (int c = 0; c < end[r]; c++) {
            const float *kc = kt + (size_t)(c / PQ_ATTN_KEYS) * hd * PQ_ATTN_KEYS + c % PQ_ATTN_KEYS;
            float acc = 0;
            for (int d = 0; d < hd; d++) acc = fmaf(q[(size_t)r * ldq + d], kc[(size_t)d * PQ_ATTN_KEYS], acc);
            S[(size_t)r * lds + c] = scale * acc;
        }
}

void pq_attn_mix_ref(int nq, const int *end, int hd, const float *P, int ldp, const float *v, int ldv, float *o,
                     int ldo) {
    for (int r = 0; r < nq; r++)
        for (int i = 0; i < hd; i++) {
            float acc = 0;
            for (int c = 0; c < end[r]; c++) acc = fmaf(P[(size_t)r * ldp + c], v[(size_t)c * ldv + i], acc);
            o[(size_t)r * ldo + i] = acc;
        }
}

// The workspace: the keys of every kv head packed, [n_kv][ld * hd], then
// each thread's scores of a block, [QBLOCK][ld], ld = n_ctx rounded up to
// PQ_ATTN_KEYS.
size_t pq_attention_workspace_bytes(const pq_attn_shape *s, int n_ctx, int nthreads) {
    size_t ld = (size_t)round_up(n_ctx, PQ_ATTN_KEYS);
    return ((size_t)s->n_kv * s->head_dim + (size_t)nthreads * QBLOCK) * ld * sizeof(float);
}

typedef struct {
    const pq_attn_shape *s;
    const float *q, *k, *v;
    int T, pos0, nblocks;
    int ld;             // row length of a thread's scores, of a head's packed keys / hd
    int pack_first;     // first key packed (a multiple of PQ_ATTN_KEYS), packed in chunks of QBLOCK keys
    float *out, *kt, *S;
} attn_job;

static float *scores_of(const attn_job *j, int tid) { return j->S + (size_t)tid * QBLOCK * j->ld; }

// Keys [pack_first + QBLOCK i, + QBLOCK) of a kv head into its packed rows.
static void pack_task(void *ctx, int task, int tid) {
    attn_job *j = ctx;
    int hd = j->s->head_dim, kvdim = j->s->n_kv * hd, n_ctx = j->pos0 + j->T;
    int chunks = (n_ctx - j->pack_first + QBLOCK - 1) / QBLOCK, kh = task / chunks;
    int c0 = j->pack_first + task % chunks * QBLOCK, n = n_ctx - c0 < QBLOCK ? n_ctx - c0 : QBLOCK;
    pq_attn_pack_keys(n, hd, j->k + (size_t)c0 * kvdim + (size_t)kh * hd, kvdim,
                      j->kt + (size_t)kh * j->ld * hd + (size_t)c0 * hd);
}

static void softmax_row(float *x, int n) {
    if (pq_cpu_isa() >= PQ_ISA_AVX512) {
        pq_softmax_avx512(x, n);
    } else if (pq_cpu_isa() >= PQ_ISA_AVX2) {
        pq_softmax_avx2(x, n);
    } else {
        float mx = -INFINITY, sum = 0;
        for (int c = 0; c < n; c++) mx = x[c] > mx ? x[c] : mx;
        for (int c = 0; c < n; c++) sum += (x[c] = expf(x[c] - mx));
        float inv = 1.0f / sum;
        for (int c = 0; c < n; c++) x[c] *= inv;
    }
}

// Queries [QBLOCK b, + QBLOCK) of head h (task = h * nblocks + b), against
// the keys from the first one any of them sees, rounded down to a packed
// block.
static void attn_block(void *ctx, int task, int tid) {
    attn_job *j = ctx;
    const pq_attn_shape *s = j->s;
    int h = task / j->nblocks, b = task % j->nblocks;
    int t0 = b * QBLOCK, nq = j->T - t0 < QBLOCK ? j->T - t0 : QBLOCK;
    int hd = s->head_dim, qdim = s->n_heads * hd, kvdim = s->n_kv * hd, kh = h / (s->n_heads / s->n_kv);
    int base = first_key(s, j->pos0 + t0) / PQ_ATTN_KEYS * PQ_ATTN_KEYS, end[QBLOCK];
    for (int r = 0; r < nq; r++) end[r] = j->pos0 + t0 + r - base + 1;
    int nk = end[nq - 1];
    float *S = scores_of(j, tid);
    const float *qb = j->q + (size_t)t0 * qdim + (size_t)h * hd;
    const float *kt = j->kt + (size_t)kh * j->ld * hd + (size_t)base * hd;
    float scale = 1.0f / sqrtf((float)hd);
    pq_isa isa = pq_cpu_isa();
    if (isa >= PQ_ISA_AVX512) pq_attn_scores_avx512(nq, end, hd, scale, qb, qdim, kt, S, j->ld);
    else if (isa >= PQ_ISA_AVX2) pq_attn_scores_avx2(nq, end, hd, scale, qb, qdim, kt, S, j->ld);
    else pq_attn_scores_ref(nq, end, hd, scale, qb, qdim, kt, S, j->ld);
    for (int r = 0; r < nq; r++) { // the softmax over the visible keys [lo, hi], zeros elsewhere up to nk
        int p = j->pos0 + t0 + r, lo = first_key(s, p) - base, hi = p - base;
        float *row = S + (size_t)r * j->ld;
        for (int c = 0; c < lo; c++) row[c] = 0;
        softmax_row(row + lo, hi - lo + 1);
        for (int c = hi + 1; c < nk; c++) row[c] = 0;
    }
    const float *vb = j->v + (size_t)base * kvdim + (size_t)kh * hd;
    float *o = j->out + (size_t)t0 * qdim + (size_t)h * hd;
    if (isa >= PQ_ISA_AVX512 && hd % 16 == 0) pq_attn_mix_avx512(nq, end, hd, S, j->ld, vb, kvdim, o, qdim);
    else if (isa >= PQ_ISA_AVX2 && hd % 8 == 0) pq_attn_mix_avx2(nq, end, hd, S, j->ld, vb, kvdim, o, qdim);
    else pq_attn_mix_ref(nq, end, hd, S, j->ld, vb, kvdim, o, qdim);
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
    float *S = scores_of(j, tid);
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
    int ld = round_up(pos0 + T, PQ_ATTN_KEYS);
    attn_job j = {s, q, k, v, T, pos0, (T + QBLOCK - 1) / QBLOCK, ld, 0, out, ws,
                  (float *)ws + (size_t)s->n_kv * s->head_dim * ld};
    if (T == 1) {
        pq_pool_for(pool, s->n_heads, attn_one, &j);
        return;
    }
    j.pack_first = first_key(s, pos0) / PQ_ATTN_KEYS * PQ_ATTN_KEYS;
    pq_pool_for(pool, s->n_kv * ((pos0 + T - j.pack_first + QBLOCK - 1) / QBLOCK), pack_task, &j);
    pq_pool_for(pool, s->n_heads * j.nblocks, attn_block, &j);
}
