// Benchmark: the CUDA kernels of the quantized formats on this GPU, in one
// run, each timed as a CUDA graph replays it (pq_cuda_time_graph: device
// time without the host's launch cost), at the shapes of real models (out x
// in: Llama-3-8B k/v 1024 x 4096, q/o 4096 x 4096, gate/up 14336 x 4096,
// down 4096 x 14336; Llama-3-70B gate/up 28672 x 8192):
//   gemv    batch-1 GEMV (pq_linear_cuda_forward, T = 1) in every
//           weight-only format vs cuBLAS FP16 (cublasGemmEx with N = 1):
//           time, GB/s of bytes read, fraction of the device's peak (2 x
//           memory clock x bus width, from the CUDA runtime) and of a
//           measured device-to-device cudaMemcpy, speed-up vs FP16. Each
//           weight is uploaded in enough copies to exceed the L2 several
//           times, taken in turn, so every call reads from HBM;
//   gemm    the 512-token GEMM: W4A16 (dequantized panels + cuBLAS), W8A8
//           INT8 and FP8 (cuBLASLt) vs cuBLAS FP16, TFLOP/s and ratio;
//   w8a8    W8A8 INT8 / FP8 at T = 1, 16, 17, 32 (padded to 32 tokens for
//           cuBLASLt) vs cuBLAS FP16 at the same T;
//   attn    attention at Llama-3-8B's shape (32 / 8 heads, head_dim 128):
//           the FlashAttention-2 prefill of 2048 tokens (TFLOP/s of its
//           causal FLOPs, against the TFLOP/s of a cuBLAS FP16 GEMM, 4096 x
//           4096 at 2048 tokens, measured in the same run) and split-KV
//           decode at cache lengths 2048 and 8192;
//   ncu     plain launches for one Nsight Compute pass (no timing): the
//           W4A16 g128 GEMV at 4096 x 14336, T = 1, three calls, then one
//           prefill and one decode attention call as in attn;
//   engine  the whole engine on a TinyLlama-1.1B-shaped model
//           (pq_model_random): 512-token prefill and batch-1 decode (CUDA
//           graphs), FP16 vs W4A16 g128, timed on the host.
// Prints "skip" and exits 0 without a GPU.
//   build/tests/bench_cuda [gemv|gemm|w8a8|attn|engine|all|ncu] [layers]
//   (default all: every part but ncu; 22 layers: TinyLlama's)
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
#include "kernels/ops_cuda.h"
#include "tests/lib/model_random.h"
#include "tests/test.h"

#define GEMM_T 512
#define MAX_COLS 14336
#define MAX_ROWS 28672
#define NSHAPES 5
static const int ROWS[NSHAPES] = {1024, 4096, 14336, 4096, 28672};
static const int COLS[NSHAPES] = {4096, 4096, 4096, 14336, 8192};

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
// device: tiles of 16 rows of whole stages in the tiled layout), scales,
// zero points.
static double weight_bytes(const pq_linear_cuda *L) {
    const double tiled_rows = (double)((L->rows + PQ_TILE_ROWS - 1) / PQ_TILE_ROWS * PQ_TILE_ROWS);
    switch (L->fmt) {
    case PQ_W_DENSE: return (double)L->rows * L->cols * 2;
    case PQ_W_QPACK: {
        double ng = (L->qp.tiled ? tiled_rows : L->rows) * L->qp.ngroups;
        double codes = L->qp.tiled ? tiled_rows * L->qp.nst * PQ_TILE_STAGE_WORDS * 4 : (double)L->rows * L->qp.ldw * 4;
        return codes + ng * (L->qp.scales_f16 ? 2 : 4) + (L->qp.zeros ? ng : 0);
    }
    case PQ_W_INT8: case PQ_W_FP8:
        return (L->qb.tiled ? tiled_rows * L->qb.nst * PQ_TILE_STAGE_WORDS * 4 : (double)L->rows * L->qb.ldq) +
               L->rows * 4.0;
    }
    return 0;
}

// `copies` device copies of one host weight, used in turn by the timed
// calls, and a linear context whose workspace fits them at T tokens.
typedef struct {
    pq_linear_cuda *L;
    int n;
    const uint16_t *d_x;
    float *d_y;
    int T;
    void *stream;
    pq_cuda_ctx *ctx;
} runner;

static pq_status run_one(void *ud, int i) {
    runner *r = ud;
    return pq_linear_cuda_forward(&r->L[i % r->n], r->d_x, r->T, r->d_y, r->ctx);
}

static void release(runner *r) {
    for (int i = 0; i < r->n; i++) pq_linear_cuda_free(&r->L[i]);
    free(r->L);
    pq_cuda_ctx_free(r->ctx);
    r->L = NULL, r->n = 0, r->ctx = NULL;
}

// Uploads `copies` copies of f at shape s (FP16 activations) into r and
// makes its context (0 on failure, with the reason in pq_last_error).
static int upload(fmt f, int s, int copies, runner *r) {
    void *bufs[4];
    pq_linear W = make_weight(f, ROWS[s], COLS[s], bufs);
    r->L = calloc((size_t)copies, sizeof *r->L);
    r->n = 0;
    r->ctx = NULL;
    pq_status st = PQ_OK;
    for (int i = 0; i < copies && st == PQ_OK; i++) {
        st = pq_linear_cuda_upload(&W, NAMES[f], PQ_ACT_F16, &r->L[i]);
        if (st == PQ_OK) r->n++;
    }
    for (int k = 0; k < 4; k++) pq_free(bufs[k]);
    if (st == PQ_OK) st = pq_cuda_ctx_create(r->stream, pq_linear_cuda_workspace_bytes(&r->L[0], r->T), &r->ctx);
    if (st != PQ_OK) release(r);
    return st == PQ_OK;
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

// A copy of the batch-1 GEMV table's shared state.
typedef struct {
    pq_cuda_device_info dev;
    double copy_gbs, stream_bytes;
    void *st;
    const uint16_t *d_x;
    float *d_y;
} bench;

// Bytes of f's weight at shape s, as the host holds them (to size the
// copies that exceed the L2).
static double host_bytes(fmt f, int s) {
    double n = (double)ROWS[s] * COLS[s];
    return f == F16 ? 2 * n : f == W4G128 || f == W4G32A ? n / 2 + n / 16 : n;
}

// Uploads f at shape s, in enough copies to read from HBM when `from_hbm`,
// for up to max_T tokens; 0 when it could not (printed by the caller).
static int prepare(const bench *b, fmt f, int s, int max_T, int from_hbm, runner *r) {
    int copies = from_hbm ? (int)(b->stream_bytes / host_bytes(f, s)) + 1 : 1;
    *r = (runner){NULL, 0, b->d_x, b->d_y, max_T, b->st, NULL};
    return upload(f, s, copies, r);
}

// ms per call of r at T tokens (<= its max_T), timed by graph replay; < 0 on
// failure. One graph holds every copy once (at least 8 calls).
static double time_graph(const bench *b, runner *r, int T, int replays) {
    r->T = T;
    double ms;
    int per_graph = r->n < 8 ? 8 : r->n;
    return pq_cuda_time_graph(b->st, run_one, r, 2 * r->n, per_graph, replays, &ms) == PQ_OK ? ms : -1;
}

static void bench_gemv(const bench *b) {
    const fmt fmts[] = {F16, W4G128, W4G32A, I8W, F8W};
    printf("batch-1 GEMV (T = 1), CUDA-graph replay, weights read from HBM:\n");
    printf("  %-13s %-20s %9s %9s %7s %8s %9s\n", "shape", "format", "us/call", "GB/s", "% peak", "% memcpy",
           "vs FP16");
    for (int s = 0; s < NSHAPES; s++) {
        double t16 = 0;
        char shape[32];
        snprintf(shape, sizeof shape, "%dx%d", ROWS[s], COLS[s]);
        for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
            fmt f = fmts[k];
            runner r;
            double ms = prepare(b, f, s, 1, 1, &r) ? time_graph(b, &r, 1, 50) : -1;
            if (ms < 0) {
                release(&r);
                printf("  %-13s %-20s not run: %s\n", shape, NAMES[f], pq_last_error());
                continue;
            }
            double gbs = (weight_bytes(&r.L[0]) + COLS[s] * 2.0) / (ms * 1e-3) / 1e9;
            release(&r);
            if (f == F16) t16 = ms;
            printf("  %-13s %-20s %9.2f %9.0f %6.0f%% %7.0f%% %8.2fx\n", shape, NAMES[f], ms * 1e3, gbs,
                   100 * gbs / b->dev.peak_gbs, 100 * gbs / b->copy_gbs, t16 > 0 ? t16 / ms : 0);
            if (f == W4G128 && ROWS[s] == 4096 && COLS[s] == 14336)
                printf("  %-13s %-20s issue 13's targets: >= 75%% of the memcpy bandwidth (%s), >= 3x cuBLAS FP16 "
                       "(%s)\n", "", "", gbs >= 0.75 * b->copy_gbs ? "met" : "MISSED",
                       t16 > 0 && t16 / ms >= 3 ? "met" : "MISSED");
        }
    }
}

static void bench_gemm(const bench *b) {
    const fmt fmts[] = {F16, W4G128, W4G32A, I8A8, F8A8};
    printf("%d-token GEMM, CUDA-graph replay:\n", GEMM_T);
    printf("  %-13s %-22s %9s %9s %9s\n", "shape", "format", "us/call", "TFLOP/s", "vs FP16");
    for (int s = 0; s < NSHAPES; s++) {
        double t16 = 0, flops = 2.0 * GEMM_T * ROWS[s] * COLS[s];
        char shape[32];
        snprintf(shape, sizeof shape, "%dx%d", ROWS[s], COLS[s]);
        for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
            fmt f = fmts[k];
            runner r;
            double ms = prepare(b, f, s, GEMM_T, 0, &r) ? time_graph(b, &r, GEMM_T, 5) : -1;
            release(&r);
            if (ms < 0) {
                printf("  %-13s %-22s not run: %s\n", shape, NAMES[f], pq_last_error());
                continue;
            }
            if (f == F16) t16 = ms;
            printf("  %-13s %-22s %9.1f %9.1f %8.2fx\n", shape, NAMES[f], ms * 1e3, flops / (ms * 1e-3) / 1e12,
                   t16 > 0 ? t16 / ms : 0);
        }
    }
}

static void bench_w8a8(const bench *b) {
    const fmt fmts[] = {F16, I8A8, F8A8};
    enum { NT = 4 };
    const int TS[NT] = {1, 16, 17, 32};
    printf("W8A8 at small T (tokens padded to 32 for cuBLASLt), CUDA-graph replay, weights from HBM:\n");
    printf("  %-13s %4s %-22s %9s %9s\n", "shape", "T", "format", "us/call", "vs FP16");
    for (int s = 0; s < NSHAPES; s++) {
        char shape[32];
        snprintf(shape, sizeof shape, "%dx%d", ROWS[s], COLS[s]);
        double t16[NT] = {0};
        for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
            fmt f = fmts[k];
            runner r;
            int ok = prepare(b, f, s, TS[NT - 1], 1, &r);
            for (int t = 0; t < NT; t++) {
                double ms = ok ? time_graph(b, &r, TS[t], 20) : -1;
                if (ms < 0) {
                    printf("  %-13s %4d %-22s not run: %s\n", shape, TS[t], NAMES[f], pq_last_error());
                    continue;
                }
                if (f == F16) t16[t] = ms;
                printf("  %-13s %4d %-22s %9.2f %8.2fx\n", shape, TS[t], NAMES[f], ms * 1e3,
                       t16[t] > 0 ? t16[t] / ms : 0);
            }
            release(&r);
        }
    }
}

// ---- attention ---------------------------------------------------------------------------

#define ATT_T 2048
#define ATT_CTX 8192
static const pq_attn_shape ATT = {32, 8, 128, 0};

typedef struct {
    const float *d_q;
    const uint16_t *d_k, *d_v;
    uint16_t *d_out;
    void *d_ws;
    int T, pos0, n_ctx;
    void *stream;
} att_job;

static pq_status att_prefill(void *ud, int i) {
    att_job *j = ud;
    return pq_attention_prefill_cuda(&ATT, PQ_ACT_F16, j->d_q, j->d_k, j->d_v, j->T, 0, j->d_out, j->stream);
}

static pq_status att_decode(void *ud, int i) {
    att_job *j = ud;
    return pq_attention_decode_cuda(&ATT, PQ_ACT_F16, j->d_q, j->d_k, j->d_v, j->pos0, NULL, j->n_ctx, j->d_out,
                                    j->d_ws, j->stream);
}

// Device buffers for attention at ATT over a cache of ATT_CTX rows (random
// FP16 keys and values, random f32 queries for ATT_T tokens).
static void att_setup(void *st, att_job *j) {
    size_t qn = (size_t)ATT_T * ATT.n_heads * ATT.head_dim, kn = (size_t)ATT_CTX * ATT.n_kv * ATT.head_dim;
    float *hq = malloc(qn * 4);
    uint16_t *hk = malloc(kn * 2);
    for (size_t i = 0; i < qn; i++) hq[i] = pq_test_normal();
    for (size_t i = 0; i < kn; i++) hk[i] = pq_f32_to_fp16(pq_test_normal());
    void *q, *k, *v, *o, *ws;
    if (pq_cuda_alloc(qn * 4, &q) != PQ_OK || pq_cuda_alloc(kn * 2, &k) != PQ_OK || pq_cuda_alloc(kn * 2, &v) != PQ_OK ||
        pq_cuda_alloc(qn * 2, &o) != PQ_OK || pq_cuda_alloc(pq_attention_cuda_ws_bytes(&ATT, ATT_CTX), &ws) != PQ_OK ||
        pq_cuda_to_device(q, hq, qn * 4) != PQ_OK || pq_cuda_to_device(k, hk, kn * 2) != PQ_OK ||
        pq_cuda_to_device(v, hk, kn * 2) != PQ_OK)
        FAIL_EXIT("attention buffers");
    free(hq);
    free(hk);
    *j = (att_job){q, k, v, o, ws, ATT_T, 0, ATT_CTX, st};
}

static void att_free(att_job *j) {
    pq_cuda_free((void *)j->d_q);
    pq_cuda_free((void *)j->d_k);
    pq_cuda_free((void *)j->d_v);
    pq_cuda_free(j->d_out);
    pq_cuda_free(j->d_ws);
}

static void bench_attn(const bench *b) {
    att_job j;
    att_setup(b->st, &j);
    double ms;
    // causal: QK^T and PV over T(T+1)/2 (query, key) pairs, 2 FLOPs per multiply-add
    double flops = 2.0 * 2.0 * ((double)ATT_T * (ATT_T + 1) / 2) * ATT.head_dim * ATT.n_heads;
    printf("attention, %d/%d heads, head_dim %d, FP16, CUDA-graph replay:\n", ATT.n_heads, ATT.n_kv, ATT.head_dim);
    if (pq_cuda_time_graph(b->st, att_prefill, &j, 2, 4, 5, &ms) != PQ_OK) FAIL_EXIT("prefill attention");
    double att_tf = flops / (ms * 1e-3) / 1e12;
    printf("  prefill %d tokens (causal): %.3f ms, %.1f TFLOP/s\n", ATT_T, ms, att_tf);
    // the tensor-core reference: cuBLAS FP16 4096 x 4096 at ATT_T tokens
    runner r;
    double gemm_ms = -1;
    for (int s = 0; s < NSHAPES; s++)
        if (ROWS[s] == 4096 && COLS[s] == 4096 && prepare(b, F16, s, ATT_T, 0, &r)) {
            gemm_ms = time_graph(b, &r, ATT_T, 5);
            release(&r);
        }
    if (gemm_ms > 0) {
        double gemm_tf = 2.0 * ATT_T * 4096.0 * 4096.0 / (gemm_ms * 1e-3) / 1e12;
        printf("  cuBLAS FP16 GEMM 4096x4096 at %d tokens: %.1f TFLOP/s; attention at %.0f%% of it (issue 13's target "
               ">= 50%%: %s)\n", ATT_T, gemm_tf, 100 * att_tf / gemm_tf, att_tf >= 0.5 * gemm_tf ? "met" : "MISSED");
    } else {
        printf("  cuBLAS FP16 GEMM baseline not run: %s\n", pq_last_error());
    }
    const int lens[] = {2048, 8192};
    for (int i = 0; i < 2; i++) {
        j.pos0 = lens[i] - 1;
        if (pq_cuda_time_graph(b->st, att_decode, &j, 2, 16, 20, &ms) != PQ_OK) FAIL_EXIT("decode attention");
        double bytes = 2.0 * lens[i] * ATT.n_kv * ATT.head_dim * 2; // K and V read once
        printf("  decode at cache length %d (split-KV): %.2f us, %.0f GB/s of K/V (%.0f%% of the memcpy bandwidth)\n",
               lens[i], ms * 1e3, bytes / (ms * 1e-3) / 1e9, 100 * bytes / (ms * 1e-3) / 1e9 / b->copy_gbs);
    }
    att_free(&j);
}

// Plain launches for Nsight Compute (tests/gpu_check.sh profiles the first
// gemv_tiled, fa2_prefill and decode_split launches).
static void bench_ncu(const bench *b) {
    runner r;
    int s = 3; // 4096 x 14336
    if (!prepare(b, W4G128, s, 1, 0, &r)) FAIL_EXIT("W4A16 upload");
    for (int i = 0; i < 3; i++)
        if (run_one(&r, i) != PQ_OK) FAIL_EXIT("W4A16 GEMV");
    release(&r);
    att_job j;
    att_setup(b->st, &j);
    j.pos0 = ATT_T - 1;
    double ms;
    if (att_prefill(&j, 0) != PQ_OK) FAIL_EXIT("prefill attention");
    // one decode call, timed only so that the stream is waited for
    if (pq_cuda_time(b->st, att_decode, &j, 0, 1, &ms) != PQ_OK) FAIL_EXIT("decode attention");
    att_free(&j);
    printf("ncu part: 3 W4A16 g128 GEMVs at 4096x14336, 1 prefill attention (%d tokens), 1 decode attention at "
           "%d\n", ATT_T, ATT_T);
}

int main(int argc, char **argv) {
    const char *part = argc > 1 ? argv[1] : "all";
    int layers = argc > 2 ? atoi(argv[2]) : 22;
    int all = !strcmp(part, "all");
    if (layers < 1 || (!all && strcmp(part, "gemv") && strcmp(part, "gemm") && strcmp(part, "w8a8") &&
                       strcmp(part, "attn") && strcmp(part, "ncu") && strcmp(part, "engine"))) {
        fprintf(stderr, "usage: bench_cuda [gemv|gemm|w8a8|attn|engine|all|ncu] [layers >= 1]\n");
        return 2;
    }
    if (pq_cuda_device_count() < 1) {
        printf("skip - bench_cuda: no GPU\n");
        return 0;
    }
    pq_test_seed();
    bench b;
    if (pq_cuda_device_info_get(&b.dev) != PQ_OK) FAIL_EXIT("device");
    if (pq_cuda_copy_gbs((size_t)1 << 30, 20, &b.copy_gbs) != PQ_OK) FAIL_EXIT("memcpy");
    printf("device: %s, sm_%d%d, %d SMs, %.0f GiB, L2 %.0f MiB\n", b.dev.name, b.dev.cc_major, b.dev.cc_minor,
           b.dev.sms, b.dev.mem_bytes / 1073741824.0, b.dev.l2_bytes / 1048576.0);
    printf("memory bandwidth: peak %.0f GB/s (2 x memory clock x bus width); device-to-device cudaMemcpy of 1 GiB "
           "%.0f GB/s read+write (%.0f%% of peak)\n\n", b.dev.peak_gbs, b.copy_gbs,
           100 * b.copy_gbs / b.dev.peak_gbs);
    // each weight in copies totalling >= 4 x L2 (and >= 256 MiB): HBM reads
    b.stream_bytes = 4.0 * b.dev.l2_bytes > 268435456.0 ? 4.0 * b.dev.l2_bytes : 268435456.0;
    uint16_t *d_x;
    float *d_y;
    size_t nx = (size_t)GEMM_T * MAX_COLS;
    uint16_t *hx = malloc(nx * 2);
    for (size_t i = 0; i < nx; i++) hx[i] = pq_f32_to_fp16(pq_test_normal());
    if (pq_cuda_stream_create(&b.st) != PQ_OK || pq_cuda_alloc(nx * 2, (void **)&d_x) != PQ_OK ||
        pq_cuda_alloc((size_t)GEMM_T * MAX_ROWS * 4, (void **)&d_y) != PQ_OK ||
        pq_cuda_to_device(d_x, hx, nx * 2) != PQ_OK)
        FAIL_EXIT("buffers");
    free(hx);
    b.d_x = d_x, b.d_y = d_y;
    if (all || !strcmp(part, "gemv")) bench_gemv(&b);
    if (all || !strcmp(part, "gemm")) bench_gemm(&b);
    if (all || !strcmp(part, "w8a8")) bench_w8a8(&b);
    if (all || !strcmp(part, "attn")) bench_attn(&b);
    if (!strcmp(part, "ncu")) bench_ncu(&b);
    pq_cuda_free(d_x);
    pq_cuda_free(d_y);
    pq_cuda_stream_destroy(b.st);
    if (all || !strcmp(part, "engine")) bench_engine(layers);
    return 0;
}
#endif
