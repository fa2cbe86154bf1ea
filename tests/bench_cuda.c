// Benchmark: the CUDA kernels of the quantized formats on this GPU, in one
// run, timed with CUDA events:
//   - batch-1 GEMV (pq_linear_cuda_forward, T = 1) on 4096 x 4096 and
//     4096 x 11008 (out x in) in every weight-only format vs cuBLAS FP16
//     (cublasGemmEx with N = 1): time, GB/s of bytes read, fraction of the
//     device's peak (2 x memory clock x bus width, from the CUDA runtime)
//     and of a measured device-to-device cudaMemcpy, speed-up vs FP16. Each
//     weight is uploaded in enough copies to exceed the L2 several times,
//     taken in turn, so every call reads from HBM;
//   - the 512-token GEMM on the same shapes: W4A16 (dequantized panels +
//     cuBLAS), W8A8 INT8 and FP8 (cuBLASLt) vs cuBLAS FP16, TFLOP/s and ratio;
//   - the whole engine on a TinyLlama-1.1B-shaped model (pq_model_random):
//     512-token prefill and batch-1 decode, FP16 vs W4A16 g128.
// Prints "skip" and exits 0 without a GPU.
//   build/tests/bench_cuda [layers]     (engine part; default 22, TinyLlama's)
#include <stdio.h>

#if !PQ_HAVE_CUDA
int main(void) {
    printf("skip - bench_cuda: this pq was built without CUDA\n");
    return 0;
}
#else
#include "common/half.h"
#include "common/sys.h"
#include "kernels/cuda_host.h"
#include "eval/engine.h"
#include "kernels/linear_cuda.h"
#include "tests/lib/model_random.h"
#include "tests/test.h"

#define GEMM_T 512
#define MAX_COLS 11008
#define NSHAPES 2
static const int ROWS[NSHAPES] = {4096, 4096};
static const int COLS[NSHAPES] = {4096, 11008};

typedef enum { F16, W4G128, W4G32A, I8W, F8W, I8A8, F8A8, NFMT } fmt;
static const char *NAMES[NFMT] = {"FP16 (cuBLAS)",    "W4A16 g128 sym",       "W4A16 g32 asym",     "INT8 weight-only",
                                  "FP8 weight-only",  "W8A8 INT8 (cuBLASLt)", "W8A8 FP8 (cuBLASLt)"};

#define FAIL_EXIT(what)                                                            \
    do {                                                                           \
        fprintf(stderr, "bench_cuda: %s: %s\n", what, pq_last_error());            \
        exit(1);                                                                   \
    } while (0)

static void fill_bytes(void *p, size_t n) {
    uint64_t s = pq_test_u64() | 1;
    uint8_t *b = p;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        memcpy(b + i, &s, 8);
    }
    for (; i < n; i++) b[i] = (uint8_t)pq_test_u64();
}

// A host weight of format f with random data; the buffers it owns in bufs[0..3].
static pq_linear make_weight(fmt f, int rows, int cols, void *bufs[4]) {
    pq_linear L = {.rows = rows, .cols = cols};
    size_t n = (size_t)rows * cols;
    memset(bufs, 0, 4 * sizeof *bufs);
    int group = f == W4G32A ? 32 : 128, ng = pq_qpack_ngroups(cols, group);
    size_t nsc = (size_t)rows * ng > (size_t)rows ? (size_t)rows * ng : (size_t)rows;
    float *s = bufs[1] = pq_alloc(nsc * 4);
    for (size_t i = 0; i < nsc; i++) s[i] = pq_fp16_to_f32(pq_f32_to_fp16(0.001f + 0.0005f * (float)(i % 7)));
    switch (f) {
    case F16: {
        uint16_t *w = bufs[0] = pq_alloc(n * 2);
        fill_bytes(w, n * 2);
        for (size_t i = 0; i < n; i++) w[i] = (w[i] & 0x83ffu) | 0x2000u; // +-[2^-7, 2^-6)
        L.fmt = PQ_W_DENSE, L.dense_type = PQ_DENSE_F16, L.w = w;
        break;
    }
    case W4G128: case W4G32A: {
        size_t words = (size_t)rows * pq_qpack_words_per_row(cols, 4);
        uint32_t *p = bufs[0] = pq_alloc(words * 4);
        fill_bytes(p, words * 4);
        uint8_t *z = NULL;
        if (f == W4G32A) {
            z = bufs[2] = pq_alloc((size_t)rows * ng);
            fill_bytes(z, (size_t)rows * ng);
            for (size_t i = 0; i < (size_t)rows * ng; i++) z[i] &= 15;
        }
        L.fmt = PQ_W_QPACK;
        L.q = (pq_qpack){rows, cols, 4, group, p, s, z, NULL};
        break;
    }
    case I8W: case F8W: case I8A8: case F8A8: {
        uint8_t *q = bufs[0] = pq_alloc(n);
        fill_bytes(q, n);
        if (f == I8W || f == I8A8) {
            L.fmt = PQ_W_INT8, L.i8 = (pq_int8_weight){rows, cols, (const int8_t *)q, s};
            if (f == I8A8) L.act = (pq_actq){PQ_ACTQ_INT8, 0};
        } else {
            for (size_t i = 0; i < n; i++) q[i] &= 0xf7; // no NaN codes
            L.fmt = PQ_W_FP8, L.f8 = (pq_fp8_weight){rows, cols, q, s, 1};
            if (f == F8A8) L.act = (pq_actq){PQ_ACTQ_FP8, 0};
        }
        break;
    }
    case NFMT: break;
    }
    return L;
}

// Bytes a forward reads of the device weight: codes (rows padded as on the
// device), scales, zero points.
static double weight_bytes(const pq_linear_cuda *L) {
    switch (L->fmt) {
    case PQ_W_DENSE: return (double)L->rows * L->cols * 2;
    case PQ_W_QPACK: {
        double ng = (double)L->rows * L->qp.ngroups;
        return (double)L->rows * L->qp.ldw * 4 + ng * (L->qp.scales_f16 ? 2 : 4) + (L->qp.zeros ? ng : 0);
    }
    case PQ_W_INT8: case PQ_W_FP8: return (double)L->rows * L->qb.ldq + L->rows * 4.0;
    }
    return 0;
}

// `copies` device copies of one host weight, used in turn by the timed calls.
typedef struct {
    pq_linear_cuda *L;
    int n;
    const uint16_t *d_x;
    float *d_y;
    int T;
    pq_cuda_ctx *ctx;
} runner;

static pq_status run_one(void *ud, int i) {
    runner *r = ud;
    return pq_linear_cuda_forward(&r->L[i % r->n], r->d_x, r->T, r->d_y, r->ctx);
}

// Uploads `copies` copies of f at shape s (0 on failure, with the reason in
// pq_last_error) into r.
static int upload(fmt f, int s, int copies, runner *r) {
    void *bufs[4];
    pq_linear W = make_weight(f, ROWS[s], COLS[s], bufs);
    r->L = calloc((size_t)copies, sizeof *r->L);
    r->n = 0;
    pq_status st = PQ_OK;
    for (int i = 0; i < copies && st == PQ_OK; i++) {
        st = pq_linear_cuda_upload(&W, NAMES[f], &r->L[i]);
        if (st == PQ_OK) r->n++;
    }
    for (int k = 0; k < 4; k++) pq_free(bufs[k]);
    return st == PQ_OK;
}

static void release(runner *r) {
    for (int i = 0; i < r->n; i++) pq_linear_cuda_free(&r->L[i]);
    free(r->L);
    r->L = NULL, r->n = 0;
}

// ---- the engine -----------------------------------------------------------------------

static pq_config tinyllama(int layers) {
    pq_config c = {0};
    c.arch = PQ_ARCH_LLAMA;
    snprintf(c.arch_name, sizeof c.arch_name, "LlamaForCausalLM");
    c.hidden = 2048; c.intermediate = 5632; c.n_layers = layers; c.n_heads = 32; c.n_kv_heads = 4;
    c.head_dim = 64; c.vocab = 32000; c.max_pos = 2048; c.rms_eps = 1e-5f; c.rope_theta = 10000.0f;
    c.bos_id = 1; c.eos_id = 2;
    return c;
}

#define DECODE_STEPS 64

// Best of 3: seconds of a GEMM_T-token prefill, and of DECODE_STEPS single
// tokens after it (each with its logits row, as generation needs).
static void time_engine(const pq_model *m, double *prefill, double *decode) {
    pq_engine_params p = pq_engine_default_params();
    p.device = PQ_DEVICE_CUDA;
    p.max_ctx = GEMM_T + DECODE_STEPS;
    pq_engine *e;
    if (pq_engine_create(m, &p, &e) != PQ_OK) FAIL_EXIT("engine");
    int32_t tok[GEMM_T + DECODE_STEPS];
    for (int i = 0; i < GEMM_T + DECODE_STEPS; i++) tok[i] = (int32_t)(pq_test_u64() % (uint64_t)m->cfg.vocab);
    float *logits = malloc((size_t)m->cfg.vocab * 4);
    *prefill = *decode = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = pq_now();
        if (pq_engine_forward(e, tok, GEMM_T, 0) != PQ_OK) FAIL_EXIT("prefill");
        double t1 = pq_now();
        for (int i = 0; i < DECODE_STEPS; i++)
            if (pq_engine_forward(e, tok + GEMM_T + i, 1, GEMM_T + i) != PQ_OK ||
                pq_engine_logits(e, 0, 1, logits) != PQ_OK)
                FAIL_EXIT("decode");
        double t2 = pq_now();
        if (t1 - t0 < *prefill) *prefill = t1 - t0;
        if (t2 - t1 < *decode) *decode = t2 - t1;
    }
    free(logits);
    pq_engine_free(e);
}

static void bench_engine(int layers) {
    pq_config c = tinyllama(layers);
    pq_model *m;
    if (pq_model_random(&c, PQ_DENSE_F16, 1, &m) != PQ_OK) FAIL_EXIT("random model");
    double pf[2], dc[2];
    time_engine(m, &pf[0], &dc[0]);
    // the same model with every decoder linear replaced by random W4A16 g128
    void *(*bufs)[4] = calloc((size_t)layers * PQ_NLINEAR, sizeof *bufs);
    for (int l = 0; l < layers; l++)
        for (int s = 0; s < PQ_NLINEAR; s++) {
            pq_linear *L = &m->layers[l].lin[s];
            *L = make_weight(W4G128, L->rows, L->cols, bufs[l * PQ_NLINEAR + s]);
        }
    time_engine(m, &pf[1], &dc[1]);
    printf("\nengine: TinyLlama-1.1B shapes (hidden 2048, intermediate 5632, 32/4 heads, %d layers, vocab 32000), "
           "random weights, on the GPU\n", layers);
    printf("  %-16s %14s %14s\n", "linears", "prefill tok/s", "decode tok/s");
    for (int k = 0; k < 2; k++)
        printf("  %-16s %14.0f %14.1f\n", k ? "W4A16 g128" : "FP16", GEMM_T / pf[k], DECODE_STEPS / dc[k]);
    printf("  W4A16 vs FP16: prefill %.2fx, decode %.2fx (%d-token prefill; %d decode steps with logits)\n",
           pf[0] / pf[1], dc[0] / dc[1], GEMM_T, DECODE_STEPS);
    for (int i = 0; i < layers * PQ_NLINEAR; i++)
        for (int k = 0; k < 4; k++) pq_free(bufs[i][k]);
    free(bufs);
    pq_model_free(m);
}

int main(int argc, char **argv) {
    int layers = argc > 1 ? atoi(argv[1]) : 22;
    if (layers < 1) { fprintf(stderr, "usage: bench_cuda [layers >= 1]\n"); return 2; }
    if (pq_cuda_device_count() < 1) {
        printf("skip - bench_cuda: no GPU\n");
        return 0;
    }
    pq_test_seed();
    pq_cuda_device_info dev;
    if (pq_cuda_device_info_get(&dev) != PQ_OK) FAIL_EXIT("device");
    double copy_gbs;
    if (pq_cuda_copy_gbs((size_t)1 << 30, 20, &copy_gbs) != PQ_OK) FAIL_EXIT("memcpy");
    printf("device: %s, sm_%d%d, %d SMs, %.0f GiB, L2 %.0f MiB\n", dev.name, dev.cc_major, dev.cc_minor, dev.sms,
           dev.mem_bytes / 1073741824.0, dev.l2_bytes / 1048576.0);
    printf("memory bandwidth: peak %.0f GB/s (2 x memory clock x bus width); device-to-device cudaMemcpy of 1 GiB "
           "%.0f GB/s read+write (%.0f%% of peak)\n\n", dev.peak_gbs, copy_gbs, 100 * copy_gbs / dev.peak_gbs);

    void *st;
    uint16_t *d_x;
    float *d_y;
    size_t nx = (size_t)GEMM_T * MAX_COLS;
    uint16_t *hx = malloc(nx * 2);
    for (size_t i = 0; i < nx; i++) hx[i] = pq_f32_to_fp16(pq_test_normal());
    if (pq_cuda_stream_create(&st) != PQ_OK || pq_cuda_alloc(nx * 2, (void **)&d_x) != PQ_OK ||
        pq_cuda_alloc((size_t)GEMM_T * MAX_COLS * 4, (void **)&d_y) != PQ_OK || pq_cuda_to_device(d_x, hx, nx * 2) != PQ_OK)
        FAIL_EXIT("buffers");
    free(hx);
    // the largest workspace: any W8A8 / panel at GEMM_T tokens on these shapes
    // (bounded by the 32 MiB panel and cuBLASLt's 32 MiB + the chunk's codes)
    pq_cuda_ctx *ctx;
    if (pq_cuda_ctx_create(st, (size_t)160 << 20, &ctx) != PQ_OK) FAIL_EXIT("context");

    // each weight in copies totalling >= 4 x L2 (and >= 256 MiB): HBM reads
    double stream_bytes = 4.0 * dev.l2_bytes > 268435456.0 ? 4.0 * dev.l2_bytes : 268435456.0;
    const fmt gemv_fmts[] = {F16, W4G128, W4G32A, I8W, F8W};
    printf("batch-1 GEMV (T = 1), CUDA events over 400 calls, weights read from HBM:\n");
    printf("  %-13s %-20s %9s %9s %7s %8s %9s\n", "shape", "format", "us/call", "GB/s", "% peak", "% memcpy",
           "vs FP16");
    for (int s = 0; s < NSHAPES; s++) {
        double t16 = 0;
        for (size_t k = 0; k < sizeof gemv_fmts / sizeof gemv_fmts[0]; k++) {
            fmt f = gemv_fmts[k];
            runner r = {NULL, 0, d_x, d_y, 1, ctx};
            char shape[32];
            snprintf(shape, sizeof shape, "%dx%d", ROWS[s], COLS[s]);
            if (!upload(f, s, 1, &r)) FAIL_EXIT(NAMES[f]);
            double bytes = weight_bytes(&r.L[0]) + COLS[s] * 2.0;
            int copies = (int)(stream_bytes / bytes) + 1;
            release(&r);
            if (!upload(f, s, copies, &r)) FAIL_EXIT(NAMES[f]);
            double ms;
            if (pq_cuda_time(st, run_one, &r, 2 * copies, 400, &ms) != PQ_OK) FAIL_EXIT(NAMES[f]);
            double gbs = bytes / (ms * 1e-3) / 1e9;
            if (f == F16) t16 = ms;
            printf("  %-13s %-20s %9.2f %9.0f %6.0f%% %7.0f%% %8.2fx\n", shape, NAMES[f], ms * 1e3, gbs,
                   100 * gbs / dev.peak_gbs, 100 * gbs / copy_gbs, t16 / ms);
            if (f == W4G128)
                printf("  %-13s %-20s targets: >= 3.5x cuBLAS FP16 (%s), >= 80%% of peak (%s)\n", "", "",
                       t16 / ms >= 3.5 ? "met" : "MISSED", gbs >= 0.8 * dev.peak_gbs ? "met" : "MISSED");
            release(&r);
        }
    }

    const fmt gemm_fmts[] = {F16, W4G128, W4G32A, I8A8, F8A8};
    printf("\n%d-token GEMM, CUDA events over 20 calls:\n", GEMM_T);
    printf("  %-13s %-22s %9s %9s %9s\n", "shape", "format", "us/call", "TFLOP/s", "vs FP16");
    for (int s = 0; s < NSHAPES; s++) {
        double t16 = 0, flops = 2.0 * GEMM_T * ROWS[s] * COLS[s];
        for (size_t k = 0; k < sizeof gemm_fmts / sizeof gemm_fmts[0]; k++) {
            fmt f = gemm_fmts[k];
            runner r = {NULL, 0, d_x, d_y, GEMM_T, ctx};
            char shape[32];
            snprintf(shape, sizeof shape, "%dx%d", ROWS[s], COLS[s]);
            double ms;
            if (!upload(f, s, 1, &r) || pq_cuda_time(st, run_one, &r, 3, 20, &ms) != PQ_OK) {
                printf("  %-13s %-22s not run: %s\n", shape, NAMES[f], pq_last_error());
                release(&r);
                continue;
            }
            if (f == F16) t16 = ms;
            printf("  %-13s %-22s %9.1f %9.1f %8.2fx\n", shape, NAMES[f], ms * 1e3, flops / (ms * 1e-3) / 1e12,
                   t16 / ms);
            release(&r);
        }
    }
    pq_cuda_ctx_free(ctx);
    pq_cuda_free(d_x);
    pq_cuda_free(d_y);
    pq_cuda_stream_destroy(st);
    bench_engine(layers);
    return 0;
}
#endif
