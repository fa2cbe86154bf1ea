// Benchmark: prefill throughput of the whole CPU forward pass on a
// TinyLlama-1.1B-shaped model with random F16 weights, next to the best
// dense sgemm on this machine (OpenBLAS, all cores, F32 weights) for the
// same matrix shapes. Reports the ratio measured in one run: ROUNDS rounds,
// each one pq forward then one sgemm pass, the best of each (so that a
// slow spell of a shared machine hits both alike).
//   build/tests/bench_engine [layers]     (default 22, TinyLlama's)
#include "common/sys.h"
#include "common/threads.h"
#include "eval/engine.h"
#include "kernels/blas.h"
#include "kernels/cpu.h"
#include "tests/lib/model_random.h"
#include "tests/test.h"

#define T 512
#define ROUNDS 5

static pq_config tinyllama(int layers) {
    pq_config c = {0};
    c.arch = PQ_ARCH_LLAMA;
    snprintf(c.arch_name, sizeof c.arch_name, "LlamaForCausalLM");
    c.hidden = 2048; c.intermediate = 5632; c.n_layers = layers; c.n_heads = 32; c.n_kv_heads = 4;
    c.head_dim = 64; c.vocab = 32000; c.max_pos = 2048; c.rms_eps = 1e-5f; c.rope_theta = 10000.0f;
    c.bos_id = 1; c.eos_id = 2;
    return c;
}

// Seconds of OpenBLAS sgemm (own threading, all cores) over every linear
// shape of the model for T tokens: one "forward" worth. A, B, C are buffers
// for the largest shape.
static double sgemm_seconds(const pq_model *m, const float *A, const float *B, float *C) {
    const pq_config *c = &m->cfg;
    pq_blas_set_threads(pq_cpu_count());
    double t0 = pq_now();
    for (int l = 0; l < c->n_layers; l++)
        for (int s = 0; s < PQ_NLINEAR; s++) {
            const pq_linear *L = &m->layers[l].lin[s];
            pq_sgemm_nt(T, L->rows, L->cols, 1.0f, A, L->cols, B, L->cols, 0.0f, C, L->rows);
        }
    pq_sgemm_nt(T, c->vocab, c->hidden, 1.0f, A, c->hidden, B, c->hidden, 0.0f, C, c->vocab);
    double t = pq_now() - t0;
    pq_blas_set_threads(1);
    return t;
}

static double linear_flops(const pq_model *m) {
    double f = 0;
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int s = 0; s < PQ_NLINEAR; s++) f += 2.0 * T * m->layers[l].lin[s].rows * m->layers[l].lin[s].cols;
    return f + 2.0 * T * m->cfg.vocab * m->cfg.hidden;
}

int main(int argc, char **argv) {
    int layers = argc > 1 ? atoi(argv[1]) : 22;
    pq_test_seed();
    pq_config c = tinyllama(layers);
    pq_model *m;
    if (pq_model_random(&c, PQ_DENSE_F16, 1, &m) != PQ_OK || pq_blas_init() != PQ_OK) {
        fprintf(stderr, "bench_engine: %s\n", pq_last_error());
        return 1;
    }
    pq_engine_params p = pq_engine_default_params();
    p.device = PQ_DEVICE_CPU;
    p.max_ctx = T;
    pq_engine *e;
    if (pq_engine_create(m, &p, &e) != PQ_OK) { fprintf(stderr, "bench_engine: %s\n", pq_last_error()); return 1; }
    int32_t tok[T];
    for (int i = 0; i < T; i++) tok[i] = (int32_t)(pq_test_u64() % 32000);
    float *logits = pq_alloc((size_t)64 * c.vocab * 4);
    int maxr = c.vocab, maxc = c.intermediate > c.hidden ? c.intermediate : c.hidden;
    float *A = pq_alloc((size_t)T * maxc * 4), *B = pq_alloc((size_t)maxr * maxc * 4), *C = pq_alloc((size_t)T * maxr * 4);
    for (size_t i = 0; i < (size_t)T * maxc; i++) A[i] = pq_test_uniform();
    for (size_t i = 0; i < (size_t)maxr * maxc; i++) B[i] = pq_test_uniform() * 0.02f;
    double flops = linear_flops(m), best = 1e30, sg = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = pq_now();
        pq_engine_forward(e, tok, T, 0);
        for (int r0 = 0; r0 < T; r0 += 64) pq_engine_logits(e, r0, 64, logits);
        double t = pq_now() - t0;
        if (t < best) best = t;
        t = sgemm_seconds(m, A, B, C);
        if (t < sg) sg = t;
    }
    pq_free(A); pq_free(B); pq_free(C);
    printf("model: TinyLlama-1.1B shapes (hidden 2048, intermediate 5632, 32/4 heads, %d layers), F16 weights, "
           "%d-token prefill incl. logits of all tokens\n", layers, T);
    printf("engine: %s\n", pq_engine_describe(e));
    printf("pq forward:        %.3f s  %.1f GFLOP/s (linear-layer FLOPs)\n", best, flops / best / 1e9);
    printf("OpenBLAS sgemm:    %.3f s  %.1f GFLOP/s (same shapes, F32 weights, %d threads, core %s)\n", sg,
           flops / sg / 1e9, pq_cpu_count(), pq_blas_core());
    printf("ratio pq/sgemm:    %.2f   (target >= 0.70)\n", sg / best);
    pq_free(logits);
    pq_engine_free(e);
    pq_model_free(m);
    return 0;
}
