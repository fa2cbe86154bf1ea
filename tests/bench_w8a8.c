// Benchmark: W8A8 linears on the CPU (kernels/w8a8.h through
// pq_linear_forward, all cores, activation quantization included) on the
// TinyLlama-1.1B shapes, random data, measured in one run so that the
// ratios mean something on a shared machine:
//   - the 512-token GEMM per shape and for one layer's 7 linears (q, k, v,
//     o, gate, up, down): INT8 W8A8 and FP8 W8A8 vs OpenBLAS sgemm with F32
//     weights (its own threads, all cores) and the INT8 weight-only path;
//   - batch-1 GEMV over `layers` layers (22 by default, more weight bytes
//     than the L3): INT8 W8A8 vs INT8 weight-only.
// Each result is the best of ROUNDS passes, the contenders taking turns.
//   build/tests/bench_w8a8 [layers]
#include <string.h>

#include "common/sys.h"
#include "common/threads.h"
#include "kernels/blas.h"
#include "kernels/cpu.h"
#include "kernels/linear.h"
#include "tests/test.h"

#define NSHAPES 4
static const int ROWS[NSHAPES] = {2048, 256, 5632, 2048};
static const int COLS[NSHAPES] = {2048, 2048, 2048, 5632};
static const int PER_LAYER[NSHAPES] = {2, 2, 2, 1}; // q/o, k/v, gate/up, down
#define GEMM_T 512
#define ROUNDS 5

typedef enum { SGEMM, W8A8, FP8A8, INT8W, NKIND } kind;
static const char *NAMES[NKIND] = {"OpenBLAS sgemm F32", "pq W8A8 INT8", "pq W8A8 FP8 (emulated)",
                                   "pq INT8 weight-only"};

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

// The linear of kind k for shape s; its buffers in bufs[0..1].
static pq_linear make_linear(kind k, int s, void *bufs[2]) {
    int rows = ROWS[s], cols = COLS[s];
    size_t n = (size_t)rows * cols;
    pq_linear L = {.rows = rows, .cols = cols};
    float *sc = bufs[1] = pq_alloc((size_t)rows * 4);
    for (int r = 0; r < rows; r++) sc[r] = 0.001f + 0.001f * (float)(r % 7);
    if (k == SGEMM) {
        float *w = bufs[0] = pq_alloc(n * 4);
        pq_test_fill(w, n, 0.02f);
        L.fmt = PQ_W_DENSE;
        L.dense_type = PQ_DENSE_F32;
        L.w = w;
        return L;
    }
    uint8_t *q = bufs[0] = pq_alloc(n);
    fill_bytes(q, n);
    if (k == FP8A8) {
        for (size_t i = 0; i < n; i++) q[i] &= 0xf7; // no NaN codes
        L.fmt = PQ_W_FP8;
        L.f8 = (pq_fp8_weight){rows, cols, q, sc, 1};
        L.act.type = PQ_ACTQ_FP8;
    } else {
        L.fmt = PQ_W_INT8;
        L.i8 = (pq_int8_weight){rows, cols, (const int8_t *)q, sc};
        L.act.type = k == W8A8 ? PQ_ACTQ_INT8 : PQ_ACTQ_NONE;
    }
    return L;
}

static double run(const pq_linear *L, kind k, int T, const float *x, float *y, void *ws, pq_pool *pool) {
    double t0 = pq_now();
    if (k == SGEMM) {
        pq_blas_set_threads(pq_pool_size(pool));
        pq_sgemm_nt(T, L->rows, L->cols, 1.0f, x, L->cols, L->w, L->cols, 0.0f, y, L->rows);
        pq_blas_set_threads(1);
    } else {
        pq_linear_forward(L, x, T, y, ws, pool);
    }
    return pq_now() - t0;
}

int main(int argc, char **argv) {
    int layers = argc > 1 ? atoi(argv[1]) : 22;
    if (layers < 1) { fprintf(stderr, "usage: bench_w8a8 [layers >= 1]\n"); return 2; }
    pq_test_seed();
    pq_pool *pool;
    if (pq_blas_init() != PQ_OK || pq_pool_create(0, &pool) != PQ_OK) {
        fprintf(stderr, "bench_w8a8: %s\n", pq_last_error());
        return 1;
    }
    int nt = pq_pool_size(pool);
    float *x = pq_alloc((size_t)GEMM_T * 5632 * 4), *y = pq_alloc((size_t)GEMM_T * 5632 * 4);
    pq_test_fill(x, (size_t)GEMM_T * 5632, 1.0f);
    size_t wsb = 0;
    pq_linear L[NKIND][NSHAPES];
    void *bufs[NKIND][NSHAPES][2];
    for (int k = 0; k < NKIND; k++)
        for (int s = 0; s < NSHAPES; s++) {
            L[k][s] = make_linear((kind)k, s, bufs[k][s]);
            size_t b = pq_linear_workspace_bytes(&L[k][s], nt);
            wsb = b > wsb ? b : wsb;
        }
    void *ws = pq_alloc(wsb);
    printf("W8A8 on the CPU: TinyLlama-1.1B linear shapes, %d threads, isa %s%s, OpenBLAS core %s\n", nt,
           pq_isa_name(pq_cpu_isa()), pq_cpu_amx() ? "+amx" : "", pq_blas_core());

    printf("%d-token GEMM, best of %d interleaved rounds (W8A8: activation quantization included):\n", GEMM_T,
           ROUNDS);
    double best[NKIND][NSHAPES];
    for (int k = 0; k < NKIND; k++)
        for (int s = 0; s < NSHAPES; s++) best[k][s] = 1e30, run(&L[k][s], (kind)k, GEMM_T, x, y, ws, pool);
    for (int r = 0; r < ROUNDS; r++)
        for (int s = 0; s < NSHAPES; s++)
            for (int k = 0; k < NKIND; k++) {
                double t = run(&L[k][s], (kind)k, GEMM_T, x, y, ws, pool);
                if (t < best[k][s]) best[k][s] = t;
            }
    printf("  %-28s", "shape (rows x cols)");
    for (int k = 0; k < NKIND; k++) printf(" %24s", NAMES[k]);
    printf("   W8A8 vs sgemm\n");
    double layer[NKIND] = {0}, flops = 0;
    for (int s = 0; s < NSHAPES; s++) {
        double f = 2.0 * GEMM_T * ROWS[s] * COLS[s];
        flops += PER_LAYER[s] * f;
        printf("  %4d x %-4d (x%d per layer)  ", ROWS[s], COLS[s], PER_LAYER[s]);
        for (int k = 0; k < NKIND; k++) {
            layer[k] += PER_LAYER[s] * best[k][s];
            printf(" %7.2f ms %6.0f GOP/s", best[k][s] * 1e3, f / best[k][s] / 1e9);
        }
        printf("   %.2fx\n", best[SGEMM][s] / best[W8A8][s]);
    }
    printf("  %-28s", "one layer (7 linears)");
    for (int k = 0; k < NKIND; k++) printf(" %7.2f ms %6.0f GOP/s", layer[k] * 1e3, flops / layer[k] / 1e9);
    double ratio = layer[SGEMM] / layer[W8A8];
    printf("   %.2fx\n  W8A8 INT8 vs OpenBLAS sgemm: %.2fx faster (target >= 1.5x: %s); FP8 W8A8 %.2fx\n\n", ratio,
           ratio, ratio >= 1.5 ? "met" : "MISSED", layer[SGEMM] / layer[FP8A8]);

    // one weight per linear of every layer, shared by both views (W8A8 and weight-only)
    int nlin = 7 * layers, i = 0;
    pq_linear *gv[2] = {malloc((size_t)nlin * sizeof(pq_linear)), malloc((size_t)nlin * sizeof(pq_linear))};
    void *(*gb)[2] = malloc((size_t)nlin * sizeof *gb);
    double gbytes = 0;
    for (int l = 0; l < layers; l++)
        for (int s = 0; s < NSHAPES; s++)
            for (int p = 0; p < PER_LAYER[s]; p++, i++) {
                gv[0][i] = make_linear(INT8W, s, gb[i]);
                gv[1][i] = gv[0][i];
                gv[1][i].act.type = PQ_ACTQ_INT8;
                gbytes += (double)ROWS[s] * COLS[s];
            }
    printf("batch-1 GEMV (T=1) over %d layers (%.0f MB of INT8 weights), best of %d interleaved passes:\n", layers,
           gbytes / 1e6, ROUNDS);
    double gbest[2] = {1e30, 1e30};
    for (int r = 0; r <= ROUNDS; r++) // round 0 warms up
        for (int v = 0; v < 2; v++) {
            double t0 = pq_now();
            for (int j = 0; j < nlin; j++) pq_linear_forward(&gv[v][j], x, 1, y, ws, pool);
            double t = pq_now() - t0;
            if (r && t < gbest[v]) gbest[v] = t;
        }
    for (int v = 0; v < 2; v++)
        printf("  %-22s %8.2f ms %6.1f GB/s of weights\n", NAMES[v ? W8A8 : INT8W], gbest[v] * 1e3,
               gbytes / gbest[v] / 1e9);
    printf("  W8A8 vs INT8 weight-only: %.2fx\n", gbest[0] / gbest[1]);
    for (int j = 0; j < nlin; j++) pq_free(gb[j][0]), pq_free(gb[j][1]);
    free(gv[0]); free(gv[1]); free(gb);
    for (int k = 0; k < NKIND; k++)
        for (int s = 0; s < NSHAPES; s++) pq_free(bufs[k][s][0]), pq_free(bufs[k][s][1]);
    pq_free(ws); pq_free(x); pq_free(y);
    pq_pool_free(pool);
    return 0;
}
