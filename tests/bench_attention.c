// Benchmark: pq's prefill attention (kernels/attention.c: packed keys,
// register-tiled scores and value mix, per-row softmax) against the same
// attention through OpenBLAS on the same machine: per head and block of 64
// queries, sgemm for Q K^T, the same softmax, sgemm for P V (what pq ran
// before its own kernels). T = 512 queries over 512 keys, causal, at
// SmolLM2-135M's heads (9 / 3, head_dim 64) and TinyLlama's (32 / 4, 64);
// 1 thread and all cores. ROUNDS rounds, each one pq call then one OpenBLAS
// call, the best of each; the ratio is measured in one run. FLOPs counted
// are the causal ones (2 * 2 * hd per visible query-key pair).
//   build/tests/bench_attention
#include <math.h>

#include "common/sys.h"
#include "common/threads.h"
#include "kernels/attention.h"
#include "kernels/blas.h"
#include "kernels/cpu.h"
#include "tests/test.h"

#define T 512
#define QB 64
#define ROUNDS 7
#define CALLS 10

typedef struct {
    const pq_attn_shape *s;
    const float *q, *k, *v;
    float *out, *S;
} blas_job;

// One head's block of QB queries through sgemm (the baseline).
static void blas_block(void *ctx, int task, int tid) {
    blas_job *j = ctx;
    const pq_attn_shape *s = j->s;
    int nblocks = T / QB, h = task / nblocks, b = task % nblocks, t0 = b * QB, nk = t0 + QB;
    int hd = s->head_dim, qdim = s->n_heads * hd, kvdim = s->n_kv * hd, kh = h / (s->n_heads / s->n_kv);
    float *S = j->S + (size_t)tid * QB * T;
    pq_sgemm_nt(QB, nk, hd, 1.0f / sqrtf((float)hd), j->q + (size_t)t0 * qdim + (size_t)h * hd, qdim,
                j->k + (size_t)kh * hd, kvdim, 0.0f, S, nk);
    for (int r = 0; r < QB; r++) {
        float *row = S + (size_t)r * nk;
        int hi = t0 + r;
        if (pq_cpu_isa() >= PQ_ISA_AVX512) pq_softmax_avx512(row, hi + 1);
        else pq_softmax_avx2(row, hi + 1);
        for (int c = hi + 1; c < nk; c++) row[c] = 0;
    }
    pq_sgemm_nn(QB, hd, nk, 1.0f, S, nk, j->v + (size_t)kh * hd, kvdim, 0.0f, j->out + (size_t)t0 * qdim + (size_t)h * hd,
                qdim);
}

static void run(const char *name, pq_attn_shape s, int threads) {
    pq_pool *pool = NULL;
    if (threads > 1) pq_pool_create(threads, &pool);
    size_t qn = (size_t)T * s.n_heads * s.head_dim, kn = (size_t)T * s.n_kv * s.head_dim;
    float *q = pq_alloc(qn * 4), *k = pq_alloc(kn * 4), *v = pq_alloc(kn * 4), *o = pq_alloc(qn * 4);
    float *S = pq_alloc((size_t)threads * QB * T * 4);
    void *ws = pq_alloc(pq_attention_workspace_bytes(&s, T, threads));
    pq_test_fill(q, qn, 1.0f), pq_test_fill(k, kn, 1.0f), pq_test_fill(v, kn, 1.0f);
    blas_job bj = {&s, q, k, v, o, S};
    double best = 1e30, blas = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = pq_now();
        for (int i = 0; i < CALLS; i++) pq_attention_cpu(&s, q, k, v, T, 0, o, ws, pool);
        double t = (pq_now() - t0) / CALLS;
        best = t < best ? t : best;
        t0 = pq_now();
        for (int i = 0; i < CALLS; i++) pq_pool_for(pool, s.n_heads * (T / QB), blas_block, &bj);
        t = (pq_now() - t0) / CALLS;
        blas = t < blas ? t : blas;
    }
    double flops = 4.0 * s.head_dim * s.n_heads * (double)T * (T + 1) / 2;
    printf("%-9s %2d/%d heads, hd %d, %d thread%s: pq %.3f ms (%.1f GFLOP/s), OpenBLAS path %.3f ms (%.1f GFLOP/s), "
           "ratio %.2f\n", name, s.n_heads, s.n_kv, s.head_dim, threads, threads > 1 ? "s" : "", best * 1e3,
           flops / best / 1e9, blas * 1e3, flops / blas / 1e9, blas / best);
    pq_free(q), pq_free(k), pq_free(v), pq_free(o), pq_free(S), pq_free(ws);
    pq_pool_free(pool);
}

int main(void) {
    pq_test_seed();
    if (pq_blas_init() != PQ_OK) {
        fprintf(stderr, "bench_attention: %s\n", pq_last_error());
        return 1;
    }
    if (pq_cpu_isa() < PQ_ISA_AVX2) {
        printf("bench_attention: skip (no AVX2)\n");
        return 0;
    }
    printf("causal prefill attention, %d queries over %d keys, %s, OpenBLAS core %s\n", T, T,
           pq_isa_name(pq_cpu_isa()), pq_blas_core());
    for (int threads = 1; threads <= pq_cpu_count(); threads += pq_cpu_count() > 1 ? pq_cpu_count() - 1 : 1) {
        run("SmolLM2", (pq_attn_shape){9, 3, 64, 0}, threads);
        run("TinyLlama", (pq_attn_shape){32, 4, 64, 0}, threads);
    }
    return 0;
}
