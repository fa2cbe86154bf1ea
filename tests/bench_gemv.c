// Benchmark: the linear layers of a TinyLlama-1.1B-shaped model (hidden
// 2048, intermediate 5632; q/o 2048x2048, k/v 256x2048, gate/up 5632x2048,
// down 2048x5632) in every weight format, random data, all cores, measured
// in one run so that the ratios mean something on a shared machine:
//   - batch-1 GEMV through pq_linear_forward over `layers` layers (22 by
//     default: more weight bytes than the 260 MB L3), as time, GB/s of weight
//     bytes read, speed-up vs F16, and fraction of the memcpy bandwidth
//     measured in the same rounds over 512 MiB;
//   - the 512-token GEMM through pq_linear_forward (dequantized panels +
//     sgemm) vs OpenBLAS sgemm with F32 weights on the same shapes.
// Each result is the best of ROUNDS passes, the formats taking turns.
//   build/tests/bench_gemv [layers]
#include <string.h>

#include "common/half.h"
#include "common/sys.h"
#include "common/threads.h"
#include "kernels/blas.h"
#include "kernels/cpu.h"
#include "kernels/linear.h"
#include "tests/test.h"

#define NSHAPES 7
static const int ROWS[NSHAPES] = {2048, 256, 256, 2048, 5632, 5632, 2048};
static const int COLS[NSHAPES] = {2048, 2048, 2048, 2048, 2048, 2048, 5632};
#define GEMM_T 512
#define ROUNDS 5
#define COPY_BYTES ((size_t)512 << 20)

typedef enum { F32, F16, Q4G128, Q4G32A, INT8, FP8, NFMT } fmt;
static const char *NAMES[NFMT] = {"F32 dense", "F16 dense", "INT4 g128 sym", "INT4 g32 asym", "INT8 per-channel",
                                  "FP8 per-channel"};

// Random bytes, fast (xorshift, 8 bytes per step).
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

// One weight of format f; every buffer it owns is listed in bufs[0..3].
static pq_linear make_weight(fmt f, int rows, int cols, void *bufs[4]) {
    pq_linear L = {.rows = rows, .cols = cols};
    size_t n = (size_t)rows * cols;
    memset(bufs, 0, 4 * sizeof *bufs);
    float *s = bufs[1] = pq_alloc((size_t)rows * (cols / 32 + 1) * 4);
    for (size_t i = 0; i < (size_t)rows * (cols / 32 + 1); i++) s[i] = 0.001f + 0.001f * (float)(i % 7);
    switch (f) {
    case F32: case F16: {
        uint32_t *u = bufs[0] = pq_alloc(n * (f == F32 ? 4 : 2));
        fill_bytes(u, n * (f == F32 ? 4 : 2));
        if (f == F32)
            for (size_t i = 0; i < n; i++) u[i] = (u[i] & 0x807fffffu) | 0x3c000000u; // +-[2^-7, 2^-6)
        else
            for (size_t i = 0; i < n; i++) ((uint16_t *)u)[i] = (((uint16_t *)u)[i] & 0x83ffu) | 0x2000u;
        L.fmt = PQ_W_DENSE;
        L.dense_type = f == F32 ? PQ_DENSE_F32 : PQ_DENSE_F16;
        L.w = u;
        break;
    }
    case Q4G128: case Q4G32A: {
        size_t words = (size_t)rows * pq_qpack_words_per_row(cols, 4);
        uint32_t *p = bufs[0] = pq_alloc(words * 4);
        fill_bytes(p, words * 4);
        int group = f == Q4G128 ? 128 : 32;
        uint8_t *z = NULL;
        if (f == Q4G32A) {
            z = bufs[2] = pq_alloc((size_t)rows * pq_qpack_ngroups(cols, group));
            fill_bytes(z, (size_t)rows * pq_qpack_ngroups(cols, group));
            for (size_t i = 0; i < (size_t)rows * pq_qpack_ngroups(cols, group); i++) z[i] &= 15;
        }
        L.fmt = PQ_W_QPACK;
        L.q = (pq_qpack){rows, cols, 4, group, p, s, z, NULL};
        break;
    }
    case INT8: case FP8: {
        uint8_t *q = bufs[0] = pq_alloc(n);
        fill_bytes(q, n);
        if (f == INT8) {
            L.fmt = PQ_W_INT8;
            L.i8 = (pq_int8_weight){rows, cols, (const int8_t *)q, s};
        } else {
            for (size_t i = 0; i < n; i++) q[i] &= 0xf7; // no NaN codes (0x7f / 0xff)
            L.fmt = PQ_W_FP8;
            L.f8 = (pq_fp8_weight){rows, cols, q, s, 1};
        }
        break;
    }
    case NFMT: break;
    }
    return L;
}

// Bytes a GEMV reads: the codes, the f32 scales and the zero points as they
// sit in memory (the stored size counts scales at 2 bytes).
static size_t bytes_read(const pq_linear *L) {
    switch (L->fmt) {
    case PQ_W_DENSE: return pq_linear_weight_bytes(L);
    case PQ_W_QPACK: {
        size_t ng = (size_t)L->rows * pq_qpack_ngroups(L->cols, L->q.group);
        return (size_t)L->rows * pq_qpack_words_per_row(L->cols, L->q.bits) * 4 + ng * 4 + (L->q.zeros ? ng : 0);
    }
    case PQ_W_INT8: case PQ_W_FP8: return (size_t)L->rows * L->cols + (size_t)L->rows * 4;
    }
    return 0;
}

typedef struct {
    uint8_t *dst;
    const uint8_t *src;
    size_t n;
    int parts;
} copy_job;

static void copy_part(void *ctx, int i, int tid) {
    copy_job *j = ctx;
    size_t a = j->n / j->parts * i, b = i == j->parts - 1 ? j->n : j->n / j->parts * (i + 1);
    memcpy(j->dst + a, j->src + a, b - a);
}

// Seconds to memcpy j->n bytes, split over the threads of pool.
static double copy_pass(copy_job *j, pq_pool *pool) {
    double t0 = pq_now();
    pq_pool_for(pool, j->parts, copy_part, j);
    return pq_now() - t0;
}

// Every linear of `layers` layers in format f (all formats stay resident so
// that the rounds below interleave them: a busy neighbour on a shared machine
// then slows every format alike instead of one).
typedef struct {
    int n;
    pq_linear *L;
    void *(*bufs)[4];
    double bytes;
} model;

static model make_model(fmt f, int layers, int shapes) {
    model m = {layers * shapes, malloc((size_t)layers * shapes * sizeof(pq_linear)),
               malloc((size_t)layers * shapes * sizeof *m.bufs), 0};
    for (int i = 0; i < m.n; i++) {
        m.L[i] = make_weight(f, ROWS[i % NSHAPES], COLS[i % NSHAPES], m.bufs[i]);
        m.bytes += (double)bytes_read(&m.L[i]);
    }
    return m;
}

static void free_model(model *m) {
    for (int i = 0; i < m->n; i++)
        for (int k = 0; k < 4; k++) pq_free(m->bufs[i][k]);
    free(m->L);
    free(m->bufs);
}

// One pass of T tokens over every linear of m: pq_linear_forward, or OpenBLAS
// sgemm with its own threads on the F32 weights when `blas`.
static double pass(const model *m, int T, int blas, pq_pool *pool, const float *x, float *y, void *ws) {
    double t0 = pq_now();
    for (int i = 0; i < m->n; i++) {
        const pq_linear *L = &m->L[i];
        if (blas) pq_sgemm_nt(T, L->rows, L->cols, 1.0f, x, L->cols, L->w, L->cols, 0.0f, y, L->rows);
        else pq_linear_forward(L, x, T, y, ws, pool);
    }
    return pq_now() - t0;
}

int main(int argc, char **argv) {
    int layers = argc > 1 ? atoi(argv[1]) : 22;
    if (layers < 1) { fprintf(stderr, "usage: bench_gemv [layers >= 1]\n"); return 2; }
    pq_test_seed();
    if (pq_blas_init() != PQ_OK) { fprintf(stderr, "bench_gemv: %s\n", pq_last_error()); return 1; }
    pq_pool *pool;
    if (pq_pool_create(0, &pool) != PQ_OK) { fprintf(stderr, "bench_gemv: %s\n", pq_last_error()); return 1; }
    int nt = pq_pool_size(pool);
    float *x = pq_alloc((size_t)GEMM_T * 5632 * 4), *y = pq_alloc((size_t)GEMM_T * 5632 * 4);
    pq_test_fill(x, (size_t)GEMM_T * 5632, 1.0f);
    pq_linear big = {.fmt = PQ_W_QPACK, .rows = 5632, .cols = 5632,
                     .q = {.rows = 5632, .cols = 5632, .bits = 4, .group = 32}}; // the largest workspace
    void *ws = pq_alloc(pq_linear_workspace_bytes(&big, nt));

    printf("TinyLlama-1.1B linear shapes x %d layers, %d threads, isa %s, OpenBLAS core %s\n", layers, nt,
           pq_isa_name(pq_cpu_isa()), pq_blas_core());
    // 512 MiB copied, twice the L3; the buffers' pages are touched first
    copy_job cj = {pq_alloc(COPY_BYTES), pq_alloc(COPY_BYTES), COPY_BYTES, nt};
    memset(cj.dst, 1, COPY_BYTES);
    memset((void *)cj.src, 2, COPY_BYTES);
    double copy_best = 1e30;

    printf("batch-1 GEMV (pq_linear_forward, T=1), best of %d interleaved passes over all layers:\n", ROUNDS);
    printf("  %-18s %9s %10s %8s %10s %12s\n", "format", "MB read", "time ms", "GB/s", "vs memcpy", "speed-up/F16");
    model m[NFMT];
    double best[NFMT];
    for (int f = 0; f < NFMT; f++) m[f] = make_model((fmt)f, layers, NSHAPES), best[f] = 1e30;
    for (int f = 0; f < NFMT; f++) pass(&m[f], 1, 0, pool, x, y, ws); // warm-up
    for (int r = 0; r < ROUNDS; r++) {
        double t = copy_pass(&cj, pool);
        if (t < copy_best) copy_best = t;
        for (int f = 0; f < NFMT; f++) {
            t = pass(&m[f], 1, 0, pool, x, y, ws);
            if (t < best[f]) best[f] = t;
        }
    }
    double bw = COPY_BYTES / copy_best;
    for (int f = 0; f < NFMT; f++) {
        double gbs = m[f].bytes / best[f] / 1e9;
        printf("  %-18s %9.0f %10.2f %8.1f %9.0f%% %11.2fx\n", NAMES[f], m[f].bytes / 1e6, best[f] * 1e3, gbs,
               100 * gbs * 1e9 / bw, best[F16] / best[f]);
        free_model(&m[f]);
    }
    printf("  memcpy (512 MiB, %d threads, same rounds): %.1f GB/s copied (%.1f GB/s read+write)\n", nt, bw / 1e9,
           2 * bw / 1e9);
    pq_free(cj.dst);
    pq_free((void *)cj.src);
    double q4 = best[F16] / best[Q4G128];
    printf("  INT4 g128 vs F16: %.2fx (target >= 3x: %s)\n\n", q4, q4 >= 3 ? "met" : "MISSED");

    printf("%d-token GEMM, one layer's 7 shapes, best of %d interleaved passes:\n", GEMM_T, ROUNDS);
    static const fmt gemm_fmts[] = {F32, F32, Q4G128, INT8};  // [0]: OpenBLAS sgemm
    double flops = 0, gbest[4] = {1e30, 1e30, 1e30, 1e30};
    for (int s = 0; s < NSHAPES; s++) flops += 2.0 * GEMM_T * ROWS[s] * COLS[s];
    model g[4];
    for (int k = 0; k < 4; k++) g[k] = make_model(gemm_fmts[k], 1, NSHAPES);
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < 4; k++) {
            if (k == 0) pq_blas_set_threads(nt);
            double t = pass(&g[k], GEMM_T, k == 0, pool, x, y, ws);
            pq_blas_set_threads(1);
            if (t < gbest[k]) gbest[k] = t;
        }
    printf("  %-34s %8.1f ms %7.1f GFLOP/s\n", "OpenBLAS sgemm, F32 weights", gbest[0] * 1e3, flops / gbest[0] / 1e9);
    for (int k = 1; k < 4; k++) {
        char label[64];
        snprintf(label, sizeof label, "pq_linear_forward %s", NAMES[gemm_fmts[k]]);
        double ratio = gbest[0] / gbest[k];
        printf("  %-34s %8.1f ms %7.1f GFLOP/s  ratio vs sgemm %.2f%s\n", label, gbest[k] * 1e3,
               flops / gbest[k] / 1e9, ratio,
               k == 1 ? "" : ratio >= 0.8 ? " (target >= 0.8: met)" : " (target >= 0.8: MISSED)");
    }
    for (int k = 0; k < 4; k++) free_model(&g[k]);
    pq_free(x);
    pq_free(y);
    pq_free(ws);
    pq_pool_free(pool);
    return 0;
}
