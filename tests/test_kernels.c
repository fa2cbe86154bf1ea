// Dense weight kernels, the linear-layer driver, attention and RoPE: every
// optimized path against its _ref on fresh random inputs.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "common/sys.h"
#include "kernels/attention.h"
#include "kernels/blas.h"
#include "kernels/cpu.h"
#include "kernels/dense.h"
#include "kernels/gemm.h"
#include "kernels/linear.h"
#include "kernels/loss.h"
#include "kernels/ops.h"
#include "tests/test.h"

static void *make_dense(pq_dense_type dt, int rows, int cols) {
    size_t n = (size_t)rows * cols;
    void *w = pq_alloc(n * (dt == PQ_DENSE_F32 ? 4 : 2));
    for (size_t i = 0; i < n; i++) {
        float v = pq_test_normal() * 0.1f;
        if (i % 97 == 0) v *= 1e-4f; // include fp16 subnormals
        if (dt == PQ_DENSE_F32) ((float *)w)[i] = v;
        else if (dt == PQ_DENSE_F16) ((uint16_t *)w)[i] = pq_f32_to_fp16(v);
        else ((uint16_t *)w)[i] = pq_f32_to_bf16(v);
    }
    return w;
}

static const char *DT_NAMES[] = {"F32", "F16", "BF16"};

static void check_half_conversions(void) {
    // every fp16 bit pattern round-trips through f32 exactly (NaNs stay NaN)
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = pq_fp16_to_f32((uint16_t)h);
        uint16_t back = pq_f32_to_fp16(f);
        if (isnan(f) ? !((back & 0x7c00) == 0x7c00 && (back & 0x3ff)) : back != h) bad++;
    }
    PQ_CHECK(bad == 0, "fp16 -> f32 -> fp16 is the identity on all 65536 patterns (%d bad)", bad);
    // rounding: ties to even, overflow, smallest subnormal
    PQ_CHECK(pq_f32_to_fp16(1.0f + 1.0f / 2048) == 0x3c00 && pq_f32_to_fp16(1.0f + 3.0f / 2048) == 0x3c02,
             "f32 -> fp16 ties to even");
    PQ_CHECK(pq_f32_to_fp16(65520.0f) == 0x7c00 && pq_f32_to_fp16(65519.0f) == 0x7bff, "f32 -> fp16 overflow threshold");
    PQ_CHECK(pq_f32_to_fp16(5.9604644775390625e-8f) == 1 && pq_f32_to_fp16(2.98023223876953125e-8f) == 0,
             "f32 -> fp16 smallest subnormal, tie to zero");
    PQ_CHECK(pq_f32_to_bf16(1.0f + 1.0f / 256) == 0x3f80 && pq_f32_to_bf16(1.0f + 3.0f / 256) == 0x3f82,
             "f32 -> bf16 ties to even");
}

static void check_dense(pq_dense_type dt) {
    int rows = 37 + (int)(pq_test_u64() % 40), cols = 5 + (int)(pq_test_u64() % 600);
    void *w = make_dense(dt, rows, cols);
    float *a = pq_alloc((size_t)rows * cols * 4), *b = pq_alloc((size_t)rows * cols * 4);
    pq_test_poison(a, (size_t)rows * cols);
    pq_test_poison(b, (size_t)rows * cols);
    pq_dense_rows_ref(dt, w, cols, 3, rows - 3, a);
    pq_dense_rows_cpu(dt, w, cols, 3, rows - 3, b);
    if (pq_cpu_isa() == PQ_ISA_SCALAR) // the _cpu version is the _ref: nothing to compare
        pq_test_skip("%s rows->f32 cpu == ref: the dispatch runs the _ref itself", DT_NAMES[dt]);
    else
        PQ_CHECK(memcmp(a, b, (size_t)(rows - 3) * cols * 4) == 0, "%s rows->f32 cpu == ref bit for bit (%dx%d)",
                 DT_NAMES[dt], rows, cols);
    for (int T = 1; T <= PQ_GEMV_MAX_T; T++) {
        float *x = pq_alloc((size_t)T * cols * 4), *y0 = pq_alloc((size_t)T * rows * 4), *y1 = pq_alloc((size_t)T * rows * 4);
        pq_test_fill(x, (size_t)T * cols, 1.0f);
        pq_test_poison(y0, (size_t)T * rows);
        pq_test_poison(y1, (size_t)T * rows);
        pq_dense_gemv_ref(dt, w, cols, 0, rows, x, T, y0, rows);
        // every ISA this CPU has, each entry point directly; the others skipped
        for (int isa = PQ_ISA_AVX2; isa <= PQ_ISA_AVX512; isa++) {
            if (isa > (int)pq_cpu_isa()) {
                pq_test_skip("%s gemv %s T=%d: this CPU lacks the instruction set", DT_NAMES[dt],
                             pq_isa_name((pq_isa)isa), T);
                continue;
            }
            pq_test_poison(y1, (size_t)T * rows);
            if (isa == PQ_ISA_AVX2) pq_dense_gemv_avx2(dt, w, cols, 0, rows, x, T, y1, rows);
            else pq_dense_gemv_avx512(dt, w, cols, 0, rows, x, T, y1, rows);
            // fp32 accumulation of `cols` products in a different order vs a double
            // reference: relative L2 ~ sqrt(cols) * 2^-24, far below 1e-5
            double e = pq_rel_l2(y1, y0, (size_t)T * rows);
            PQ_CHECK(e < 1e-5, "%s gemv %s T=%d vs ref rel L2 %.2e (%dx%d)", DT_NAMES[dt], pq_isa_name((pq_isa)isa), T,
                     e, rows, cols);
            // rows 1..rows-2 only (an offset start, and a count of another residue mod 4 than rows: the
            // T=1 paths take rows four at a time, so one of the two calls ends on its one-row tail)
            pq_test_poison(y1, (size_t)T * rows);
            if (isa == PQ_ISA_AVX2) pq_dense_gemv_avx2(dt, w, cols, 1, rows - 2, x, T, y1, rows);
            else pq_dense_gemv_avx512(dt, w, cols, 1, rows - 2, x, T, y1, rows);
            double e2 = 0;
            for (int t = 0; t < T; t++) {
                double d = pq_rel_l2(y1 + (size_t)t * rows + 1, y0 + (size_t)t * rows + 1, (size_t)rows - 2);
                if (!(d <= e2)) e2 = d; // NaN (a row not written) sticks
            }
            PQ_CHECK(e2 < 1e-5, "%s gemv %s T=%d rows 1..%d vs ref rel L2 %.2e", DT_NAMES[dt],
                     pq_isa_name((pq_isa)isa), T, rows - 2, e2);
        }
        pq_free(x); pq_free(y0); pq_free(y1);
    }
    pq_free(w); pq_free(a); pq_free(b);
}

static void check_linear(pq_dense_type dt, int T, int rows, int cols, int nthreads, int with_bias) {
    pq_pool *pool;
    pq_pool_create(nthreads, &pool);
    void *w = make_dense(dt, rows, cols);
    float *bias = NULL;
    if (with_bias) { bias = pq_alloc((size_t)rows * 4); pq_test_fill(bias, rows, 1.0f); }
    pq_linear L = {.fmt = PQ_W_DENSE, .rows = rows, .cols = cols, .dense_type = dt, .w = w, .bias = bias};
    float *x = pq_alloc((size_t)T * cols * 4), *y0 = pq_alloc((size_t)T * rows * 4), *y1 = pq_alloc((size_t)T * rows * 4);
    void *ws = pq_alloc(pq_linear_workspace_bytes(&L, pq_pool_size(pool)) + 1);
    pq_test_fill(x, (size_t)T * cols, 1.0f);
    pq_test_poison(y1, (size_t)T * rows);
    pq_linear_forward_ref(&L, x, T, y0);
    pq_linear_forward(&L, x, T, y1, ws, pool);
    // sgemm accumulates in fp32 (blocked order): relative L2 ~ sqrt(cols)*2^-24
    double e = pq_rel_l2(y1, y0, (size_t)T * rows);
    PQ_CHECK(e < 1e-5, "linear %s T=%d %dx%d threads=%d%s vs ref: rel L2 %.2e", DT_NAMES[dt], T, rows, cols,
             nthreads, with_bias ? " +bias" : "", e);
    if (T > PQ_GEMV_MAX_T) { // the GEMM path: one FMA chain per output, whatever the split (kernels/gemm.h)
        pq_pool *one;
        pq_pool_create(1, &one);
        float *y2 = pq_alloc((size_t)T * rows * 4), *wf = pq_alloc((size_t)rows * cols * 4);
        void *ws1 = pq_alloc(pq_linear_workspace_bytes(&L, 1));
        pq_linear_forward(&L, x, T, y2, ws1, one);
        pq_dense_rows_ref(dt, w, cols, 0, rows, wf);
        pq_gemm_ref(x, T, wf, rows, cols, y0, rows);
        if (bias)
            for (int t = 0; t < T; t++)
                for (int r = 0; r < rows; r++) y0[(size_t)t * rows + r] += bias[r];
        PQ_CHECK(memcmp(y1, y2, (size_t)T * rows * 4) == 0 && memcmp(y1, y0, (size_t)T * rows * 4) == 0,
                 "linear %s T=%d %dx%d: threads %d and 1 equal pq_gemm_ref bit for bit", DT_NAMES[dt], T, rows, cols,
                 nthreads);
        pq_free(y2); pq_free(wf); pq_free(ws1);
        pq_pool_free(one);
    }
    pq_free(x); pq_free(y0); pq_free(y1); pq_free(ws); pq_free(w); pq_free(bias);
    pq_pool_free(pool);
}

// The packed GEMM with one tile: every token block times every panel
// (filled 8 rows at a time, as kernels/linear.c does, with a short last
// panel), equal bit for bit to pq_gemm_ref; nothing outside the n columns
// written. Shapes with tails in T, n and K.
static void check_gemm_tile(pq_gemm_tile tl, const char *name, int T, int n, int K) {
    float *x = pq_alloc((size_t)T * K * 4), *w = pq_alloc((size_t)n * K * 4);
    float *want = pq_alloc((size_t)T * (n + 1) * 4), *got = pq_alloc((size_t)T * (n + 1) * 4);
    float *xp = pq_alloc(pq_gemm_x_floats(tl, T, K) * 4), *wp = pq_alloc((size_t)tl.nr * K * 4);
    pq_test_fill(x, (size_t)T * K, 1.0f);
    pq_test_fill(w, (size_t)n * K, 0.1f);
    pq_test_poison(want, (size_t)T * (n + 1));
    pq_test_poison(got, (size_t)T * (n + 1));
    pq_gemm_ref(x, T, w, n, K, want, n + 1);
    int nb = (T + tl.mr - 1) / tl.mr;
    pq_gemm_pack_x(tl, x, T, K, 0, 1, xp);
    if (nb > 1) pq_gemm_pack_x(tl, x, T, K, 1, nb - 1, xp);
    for (int r0 = 0; r0 < n; r0 += tl.nr) {
        int np = n - r0 < tl.nr ? n - r0 : tl.nr;
        if (np < tl.nr) pq_gemm_pad_w(tl, np, K, wp);
        for (int i = 0; i < np; i += 8)
            pq_gemm_pack_w(tl, w + (size_t)(r0 + i) * K, i, np - i < 8 ? np - i : 8, K, wp);
        for (int b = 0; b < nb; b++) {
            int mt = T - b * tl.mr < tl.mr ? T - b * tl.mr : tl.mr;
            pq_gemm_block_cpu(tl, xp + (size_t)b * tl.mr * K, wp, K, mt, np, got + (size_t)b * tl.mr * (n + 1) + r0,
                              n + 1);
        }
    }
    int bad = 0;
    for (int t = 0; t < T; t++) {
        bad += memcmp(got + (size_t)t * (n + 1), want + (size_t)t * (n + 1), (size_t)n * 4) != 0;
        bad += !isnan(got[(size_t)t * (n + 1) + n]);
    }
    PQ_CHECK(bad == 0, "gemm %s tile %dx%d T=%d n=%d K=%d == pq_gemm_ref bit for bit, column n untouched (%d bad rows)",
             name, tl.mr, tl.nr, T, n, K, bad);
    // the FMA chain itself against a double accumulator: |error| grows like sqrt(K) * 2^-24
    float *df = pq_alloc((size_t)T * n * 4), *gf = pq_alloc((size_t)T * n * 4);
    for (int t = 0; t < T; t++)
        for (int r = 0; r < n; r++) {
            double a = 0;
            for (int k = 0; k < K; k++) a += (double)w[(size_t)r * K + k] * x[(size_t)t * K + k];
            df[(size_t)t * n + r] = (float)a;
            gf[(size_t)t * n + r] = got[(size_t)t * (n + 1) + r];
        }
    double e = pq_rel_l2(gf, df, (size_t)T * n);
    PQ_CHECK(e < 1e-5, "gemm %s T=%d n=%d K=%d vs double: rel L2 %.2e", name, T, n, K, e);
    pq_free(df); pq_free(gf);
    pq_free(x); pq_free(w); pq_free(want); pq_free(got); pq_free(xp); pq_free(wp);
}

// pq_gemm_pack_dense of this CPU's tile against the documented panel
// layout (row r, column k at (r / h) K h + k h + r % h, h = nr / 2): every
// dense type, panels full and short, at row offsets 0 and 16, K with and
// without a tail of the 16- and 8-column steps; rows past r0 + n untouched.
static void check_pack_dense(void) {
    pq_gemm_tile tl = pq_gemm_tile_cpu();
    int h = tl.nr / 2, Ks[] = {576, 37, 16, 3}, cases[][2] = {{0, 32}, {0, 16}, {16, 16}, {0, 20}, {16, 5}, {0, 5}};
    int bad = 0, n_cases = 0;
    for (int dt = 0; dt < 3; dt++)
        for (int ki = 0; ki < 4; ki++)
            for (int ci = 0; ci < 6; ci++) {
                int K = Ks[ki], r0 = cases[ci][0], n = cases[ci][1];
                if (r0 + n > tl.nr) continue;
                size_t es = dt == PQ_DENSE_F32 ? 4 : 2, rows = 40;
                uint8_t *w = pq_alloc(rows * K * es);
                float *f = pq_alloc(rows * K * 4), *wp = pq_alloc((size_t)tl.nr * K * 4), *want = pq_alloc((size_t)tl.nr * K * 4);
                pq_test_fill(f, rows * K, 3.0f);
                for (size_t i = 0; i < rows * K; i++) {
                    if (dt == PQ_DENSE_F32) memcpy(w + 4 * i, &f[i], 4);
                    else {
                        uint16_t v = dt == PQ_DENSE_F16 ? pq_f32_to_fp16(f[i]) : pq_f32_to_bf16(f[i]);
                        memcpy(w + 2 * i, &v, 2);
                    }
                }
                pq_test_poison(wp, (size_t)tl.nr * K);
                memcpy(want, wp, (size_t)tl.nr * K * 4);
                for (int r = 0; r < n; r++)
                    for (int k = 0; k < K; k++)
                        want[(size_t)((r0 + r) / h) * K * h + (size_t)k * h + (r0 + r) % h] =
                            pq_dense_at((pq_dense_type)dt, w, (size_t)(3 + r) * K + k);
                pq_gemm_pack_dense(tl, (pq_dense_type)dt, w, K, 3, r0, n, wp);
                bad += memcmp(wp, want, (size_t)tl.nr * K * 4) != 0, n_cases++;
                pq_free(w); pq_free(f); pq_free(wp); pq_free(want);
            }
    PQ_CHECK(bad == 0, "pack_dense %s tile %dx%d: the panel layout exactly, other rows untouched (%d of %d cases differ)",
             pq_isa_name(pq_cpu_isa()), tl.mr, tl.nr, bad, n_cases);
}

// pq_bf16_round_n and the AMX packing of x: each value as pq_f32_to_bf16
// (ties to even, NaN quiet, overflow to Inf, subnormals kept), zeros past K.
static void check_bf16_rounding(void) {
    const float special[] = {0.0f, -0.0f, 1.0f, 1.00390625f, 1.01171875f, 1.0f + 0x1p-8f + 0x1p-20f, -3.0e38f,
                             3.3961e38f, INFINITY, -INFINITY, NAN, 1e-40f, -1e-45f, 0x1p-126f};
    enum { NS = sizeof special / sizeof special[0], K = 77, T = 3 };
    float v[NS], x[T * K];
    memcpy(v, special, sizeof v);
    pq_bf16_round_n(v, NS);
    int bad = 0;
    for (int i = 0; i < NS; i++) {
        uint16_t want = pq_f32_to_bf16(special[i]);
        bad += isnan(special[i]) ? !isnan(v[i]) : memcmp(&v[i], &(float){pq_bf16_to_f32(want)}, 4) != 0;
    }
    PQ_CHECK(bad == 0, "pq_bf16_round_n: %d special values as pq_f32_to_bf16 (%d differ)", NS, bad);
    if (!pq_cpu_amx()) {
        pq_test_skip("pq_gemm_amx_pack_x: the CPU has no usable AMX tiles");
        return;
    }
    pq_test_fill(x, (size_t)T * K, 1.0f);
    for (int i = 0; i < NS; i++) x[K + 5 * i] = special[i];
    int ld = pq_gemm_amx_ld(K);
    uint16_t *xb = pq_alloc((size_t)T * ld * 2);
    memset(xb, 0xff, (size_t)T * ld * 2);
    pq_gemm_amx_pack_x(x, K, 1, 2, xb); // tokens 1 and 2 only
    bad = 0;
    for (int t = 1; t < T; t++)
        for (int k = 0; k < ld; k++)
            bad += xb[(size_t)t * ld + k] != (k < K ? pq_f32_to_bf16(x[(size_t)t * K + k]) : 0);
    for (int k = 0; k < ld; k++) bad += xb[k] != 0xffff;
    PQ_CHECK(bad == 0, "pq_gemm_amx_pack_x: K=%d, tokens 1..2 as pq_f32_to_bf16 with zeros to %d, token 0 untouched "
             "(%d differ)", K, ld, bad);
    pq_free(xb);
}

// The BF16 GEMM on AMX tiles (rows r0..r0+n of a packed weight of `rows`)
// against pq_gemm_bf16_ref. Both sum the same exact products in f32 in
// different orders: each is within (K - 1) * 2^-24 * sum |product| of the
// exact sum (the f32 summation bound), so they differ by at most twice that
// (the tiles' own additions are no worse: measured 4.5e-9 rms of sum
// |product| against the FMA chain's 8-9e-9 at K = 576 and 1536).
// Nothing outside rows r0..r0+n of y is written.
static void check_gemm_amx(int T, int rows, int r0, int n, int K) {
    float *x = pq_alloc((size_t)T * K * 4), *w = pq_alloc((size_t)rows * K * 4);
    float *want = pq_alloc((size_t)T * rows * 4), *got = pq_alloc((size_t)T * rows * 4);
    uint16_t *wp = pq_alloc(pq_gemm_amx_w_values(rows, K) * 2), *xb = pq_alloc((size_t)T * pq_gemm_amx_ld(K) * 2);
    pq_test_fill(x, (size_t)T * K, 1.0f);
    pq_test_fill(w, (size_t)rows * K, 0.1f);
    pq_test_poison(got, (size_t)T * rows);
    for (int i = 0; i < rows; i += 16) pq_gemm_amx_pack_w(w + (size_t)i * K, i, rows - i < 16 ? rows - i : 16, K, wp);
    pq_gemm_amx_pad_w(rows, K, wp);
    pq_gemm_amx_pack_x(x, K, 0, T, xb);
    pq_gemm_amx(xb, T, K, wp, r0, n, got, rows);
    pq_gemm_bf16_ref(x, T, w + (size_t)r0 * K, n, K, want + r0, rows);
    int bad = 0;
    double worst = 0;
    for (int t = 0; t < T; t++)
        for (int r = 0; r < rows; r++) {
            float g = got[(size_t)t * rows + r];
            if (r < r0 || r >= r0 + n) {
                bad += !isnan(g);
                continue;
            }
            double mag = 0;
            for (int k = 0; k < K; k++) {
                float a = x[(size_t)t * K + k], b = w[(size_t)r * K + k];
                mag += fabs((double)pq_bf16_to_f32(pq_f32_to_bf16(a)) * pq_bf16_to_f32(pq_f32_to_bf16(b)));
            }
            double err = fabs((double)g - want[(size_t)t * rows + r]), bound = 2.0 * K * 0x1p-24 * mag + 1e-37;
            worst = err / bound > worst ? err / bound : worst;
            bad += !(err <= bound);
        }
    PQ_CHECK(bad == 0, "gemm amx bf16 T=%d rows %d..%d of %d K=%d vs pq_gemm_bf16_ref: within 2 K 2^-24 sum|p| "
             "(worst %.2f of it), other rows untouched (%d bad)", T, r0, r0 + n, rows, K, worst, bad);
    pq_free(x); pq_free(w); pq_free(want); pq_free(got); pq_free(wp); pq_free(xb);
}

static void check_gemm_bf16(void) {
    check_bf16_rounding();
    if (!pq_cpu_amx()) {
        pq_test_skip("gemm amx bf16: the CPU has no usable AMX tiles");
        return;
    }
    check_gemm_amx(37, 75, 0, 75, 172);  // tails everywhere: 37 tokens, 75 rows, K = 172
    check_gemm_amx(16, 64, 32, 32, 32);  // one step, the second block of rows
    check_gemm_amx(1, 20, 0, 20, 1);     // one column
    check_gemm_amx(33, 100, 64, 36, 576);
    check_gemm_amx(512, 96, 32, 64, 1536);
}

static void check_gemm(void) {
    struct { pq_gemm_tile tl; const char *name; pq_isa needs; } tiles[] = {
        {{4, 8}, "scalar", PQ_ISA_SCALAR},
        {{PQ_GEMM_MR_AVX2, PQ_GEMM_NR_AVX2}, "avx2", PQ_ISA_AVX2},
        {{PQ_GEMM_MR_AVX512, PQ_GEMM_NR_AVX512}, "avx512", PQ_ISA_AVX512},
    };
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
        if (pq_cpu_isa() < tiles[i].needs) {
            pq_test_skip("gemm %s: this CPU (or PQ_ISA) does not run it", tiles[i].name);
            continue;
        }
        check_gemm_tile(tiles[i].tl, tiles[i].name, 37, 75, 172);
        check_gemm_tile(tiles[i].tl, tiles[i].name, 5, 8, 3);
        check_gemm_tile(tiles[i].tl, tiles[i].name, 24, 64, 64);
    }
}

// pq_nll_cpu against the double _ref. Its exps are f32 (within 2 ulp) and
// x - max is rounded to f32 (relative 2^-24 of |x - max|, here < 60), so the
// sum is off by a relative ~1e-6 at most and its log by as much: 1e-5.
static void check_nll(void) {
    int vocabs[] = {49152, 1000, 13};
    double worst = 0;
    for (int v = 0; v < 3; v++) {
        int V = vocabs[v];
        float *l = pq_alloc((size_t)V * 4);
        for (int rep = 0; rep < 4; rep++) {
            pq_test_fill(l, V, rep + 1.0f);
            int target = (int)(pq_test_u64() % (uint64_t)V);
            double d = fabs(pq_nll_cpu(l, V, target) - pq_nll_ref(l, V, target));
            if (!(d <= worst)) worst = d;
        }
        l[V / 2] = NAN;
        PQ_CHECK(!isfinite(pq_nll_cpu(l, V, 0)), "nll cpu: a NaN logit in a row of %d gives a non-finite loss", V);
        pq_free(l);
    }
    PQ_CHECK(worst < 1e-5, "nll %s vs ref: worst |difference| %.2e", pq_isa_name(pq_cpu_isa()), worst);
}

// pq_swiglu_cpu against the _ref (expf): the vector exp is within 2 ulp of
// expf, 1 + e and the division add an ulp each: relative 1e-6.
static void check_swiglu(void) {
    size_t n = 1000;
    float *g = pq_alloc(n * 4), *u = pq_alloc(n * 4), *a = pq_alloc(n * 4), *b = pq_alloc(n * 4);
    pq_test_fill(g, n, 8.0f);
    pq_test_fill(u, n, 1.0f);
    g[0] = -95.0f, g[1] = 95.0f, g[2] = 0.0f; // past the exp's clamp on both sides
    memcpy(a, g, n * 4);
    memcpy(b, g, n * 4);
    pq_swiglu_ref(a, u, n);
    pq_swiglu_cpu(b, u, n);
    PQ_CHECK(pq_allclose(b, a, n, 1e-30, 1e-6), "swiglu %s vs ref (|g| up to 95)", pq_isa_name(pq_cpu_isa()));
    g[3] = NAN;
    pq_swiglu_cpu(g, u, n);
    PQ_CHECK(isnan(g[3]), "swiglu cpu: NaN stays NaN");
    pq_free(g); pq_free(u); pq_free(a); pq_free(b);
}

// pq_sgemm_nt (OpenBLAS) against its _ref on strided operands, alpha and
// beta: fp32 blocked sums vs a double accumulator, relative L2 ~ sqrt(K) * 2^-24.
static void check_sgemm_nt(int M, int N, int K, float alpha, float beta) {
    int lda = K + 3, ldb = K + 5, ldc = N + 2;
    float *A = pq_alloc((size_t)M * lda * 4), *B = pq_alloc((size_t)N * ldb * 4);
    float *C0 = pq_alloc((size_t)M * ldc * 4), *C1 = pq_alloc((size_t)M * ldc * 4);
    pq_test_fill(A, (size_t)M * lda, 1.0f);
    pq_test_fill(B, (size_t)N * ldb, 1.0f);
    pq_test_fill(C0, (size_t)M * ldc, 1.0f);
    memcpy(C1, C0, (size_t)M * ldc * 4);
    pq_sgemm_nt_ref(M, N, K, alpha, A, lda, B, ldb, beta, C0, ldc);
    pq_sgemm_nt(M, N, K, alpha, A, lda, B, ldb, beta, C1, ldc);
    double e = pq_rel_l2(C1, C0, (size_t)M * ldc); // the padding columns stay equal (untouched by both)
    PQ_CHECK(e < 1e-5, "sgemm_nt %dx%dx%d alpha %g beta %g, strided, vs ref: rel L2 %.2e", M, N, K, alpha, beta, e);
    pq_free(A); pq_free(B); pq_free(C0); pq_free(C1);
}

static void check_attention(int n_heads, int n_kv, int hd, int T, int pos0, int window) {
    pq_pool *pool;
    pq_pool_create(2, &pool);
    pq_attn_shape s = {n_heads, n_kv, hd, window};
    int n = pos0 + T;
    float *q = pq_alloc((size_t)T * n_heads * hd * 4), *k = pq_alloc((size_t)n * n_kv * hd * 4),
          *v = pq_alloc((size_t)n * n_kv * hd * 4), *o0 = pq_alloc((size_t)T * n_heads * hd * 4),
          *o1 = pq_alloc((size_t)T * n_heads * hd * 4);
    pq_test_fill(q, (size_t)T * n_heads * hd, 1.0f);
    pq_test_fill(k, (size_t)n * n_kv * hd, 1.0f);
    pq_test_fill(v, (size_t)n * n_kv * hd, 1.0f);
    pq_test_poison(o1, (size_t)T * n_heads * hd);
    void *ws = pq_alloc(pq_attention_workspace_bytes(&s, n, 2));
    pq_attention_ref(&s, q, k, v, T, pos0, o0);
    pq_attention_cpu(&s, q, k, v, T, pos0, o1, ws, pool);
    // fp32 scores/softmax vs a double reference: errors ~1e-7 relative per element
    double e = pq_rel_l2(o1, o0, (size_t)T * n_heads * hd);
    PQ_CHECK(e < 1e-5, "attention (%s) heads %d/%d hd %d T=%d pos0=%d window=%d: rel L2 %.2e",
             pq_isa_name(pq_cpu_isa()), n_heads, n_kv, hd, T, pos0, window, e);
    if (T > 1) { // the prefill's sums have a fixed order: 1 and 3 threads give the same bits as 2
        float *o2 = pq_alloc((size_t)T * n_heads * hd * 4);
        int same = 1;
        for (int threads = 1; threads <= 3; threads += 2) {
            pq_pool *p = NULL;
            if (threads > 1) pq_pool_create(threads, &p);
            void *w = pq_alloc(pq_attention_workspace_bytes(&s, n, threads));
            pq_attention_cpu(&s, q, k, v, T, pos0, o2, w, p);
            same &= memcmp(o1, o2, (size_t)T * n_heads * hd * 4) == 0;
            pq_free(w);
            pq_pool_free(p);
        }
        PQ_CHECK(same, "attention (%s) heads %d/%d hd %d T=%d pos0=%d: 1, 2 and 3 threads give the same bits",
                 pq_isa_name(pq_cpu_isa()), n_heads, n_kv, hd, T, pos0);
        pq_free(o2);
    }
    if (T == 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) { // the AVX2 head, called directly
        int j0 = window > 0 && pos0 - window + 1 > 0 ? pos0 - window + 1 : 0, nk = pos0 - j0 + 1;
        float *S = pq_alloc((size_t)nk * 4);
        pq_test_poison(o1, (size_t)n_heads * hd);
        for (int h = 0; h < n_heads; h++)
            pq_attn_head_avx2(hd, nk, n_kv * hd, 1.0f / sqrtf((float)hd), q + (size_t)h * hd,
                              k + ((size_t)j0 * n_kv + h / (n_heads / n_kv)) * hd,
                              v + ((size_t)j0 * n_kv + h / (n_heads / n_kv)) * hd, S, o1 + (size_t)h * hd);
        e = pq_rel_l2(o1, o0, (size_t)n_heads * hd);
        PQ_CHECK(e < 1e-5, "attention head avx2 heads %d/%d hd %d pos0=%d window=%d: rel L2 %.2e", n_heads, n_kv, hd,
                 pos0, window, e);
        pq_free(S);
    }
    pq_free(q); pq_free(k); pq_free(v); pq_free(o0); pq_free(o1); pq_free(ws);
    pq_pool_free(pool);
}

// The _cpu versions of RMSNorm, RoPE, the residual add and the |x|
// statistics against their _ref bit for bit (the vector versions do the
// _ref's operations in its order): row and column counts around the vector
// widths, RMSNorm in place, statistics with NaN, infinities and -0.
static int same_bits(const void *a, const void *b, size_t bytes) { return memcmp(a, b, bytes) == 0; }

static void check_ops(void) {
    const char *isa = pq_isa_name(pq_cpu_isa());
    int Ts[] = {1, 3, 8, 13, 37}, ns[] = {5, 64, 172, 576};
    int bad = 0, cases = 0;
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 4; b++) {
            int T = Ts[a], n = ns[b];
            size_t tn = (size_t)T * n;
            float *x = pq_alloc(tn * 4), *w = pq_alloc((size_t)n * 4), *y0 = pq_alloc(tn * 4), *y1 = pq_alloc(tn * 4);
            pq_test_fill(x, tn, 3.0f);
            pq_test_fill(w, n, 1.0f);
            pq_rmsnorm_ref(x, w, T, n, 1e-5f, y0);
            pq_rmsnorm_cpu(x, w, T, n, 1e-5f, y1);
            bad += !same_bits(y0, y1, tn * 4);
            memcpy(y1, x, tn * 4);
            pq_rmsnorm_cpu(y1, w, T, n, 1e-5f, y1); // in place
            bad += !same_bits(y0, y1, tn * 4);
            memcpy(y0, x, tn * 4), memcpy(y1, x, tn * 4);
            pq_add_ref(y0, w, (size_t)n), pq_add_cpu(y1, w, (size_t)n);
            bad += !same_bits(y0, y1, tn * 4);
            cases += 3;
            pq_free(x); pq_free(w); pq_free(y0); pq_free(y1);
        }
    PQ_CHECK(bad == 0, "rmsnorm (in place too) and add %s == _ref bit for bit (%d of %d cases differ)", isa, bad, cases);
    int dims[][3] = {{64, 9, 576}, {20, 3, 70}, {6, 2, 12}, {128, 2, 300}}; // head_dim, heads, stride
    bad = 0;
    for (int d = 0; d < 4; d++) {
        int hd = dims[d][0], heads = dims[d][1], stride = dims[d][2], T = 11;
        float *x0 = pq_alloc((size_t)T * stride * 4), *x1 = pq_alloc((size_t)T * stride * 4);
        float *cs = pq_alloc((size_t)T * hd / 2 * 4), *sn = pq_alloc((size_t)T * hd / 2 * 4);
        pq_test_fill(x0, (size_t)T * stride, 2.0f);
        pq_test_fill(cs, (size_t)T * hd / 2, 1.0f);
        pq_test_fill(sn, (size_t)T * hd / 2, 1.0f);
        memcpy(x1, x0, (size_t)T * stride * 4);
        pq_rope_apply_ref(x0, T, stride, heads, hd, cs, sn);
        pq_rope_apply_cpu(x1, T, stride, heads, hd, cs, sn);
        bad += !same_bits(x0, x1, (size_t)T * stride * 4);
        pq_free(x0); pq_free(x1); pq_free(cs); pq_free(sn);
    }
    PQ_CHECK(bad == 0, "rope %s == _ref bit for bit, the columns past the heads untouched (%d of 4 shapes differ)", isa,
             bad);
    // the finite scan: lengths around its blocks and lanes, -0 and subnormals,
    // a NaN or an infinity (one or two) anywhere, none
    bad = 0, cases = 0;
    size_t lens[] = {0, 1, 7, 8, 33, 1023, 1024, 1025, 5000};
    float *xs = pq_alloc(5000 * 4);
    for (int a = 0; a < 9; a++)
        for (int k = 0; k < 4; k++) {
            size_t n = lens[a];
            pq_test_fill(xs, n, 100.0f);
            if (n > 2) xs[n / 3] = -0.0f, xs[n / 2] = 1e-40f;
            size_t at = n ? (size_t)(pq_test_u64() % n) : 0;
            if (n && k == 1) xs[at] = NAN;
            if (n && k == 2) xs[at] = -INFINITY, xs[n - 1] = NAN;
            if (n && k == 3) xs[at] = 3e38f; // finite, the largest
            float m0 = -1, m1 = -2;
            long long b0 = pq_scan_finite_ref(xs, n, &m0), b1 = pq_scan_finite_cpu(xs, n, &m1);
            bad += b0 != b1 || (b0 < 0 && !same_bits(&m0, &m1, 4)) || (k == 1 && n && b0 != (long long)at);
            cases++;
        }
    pq_free(xs);
    PQ_CHECK(bad == 0, "finite scan %s == _ref: the first NaN / Inf, else the same max |x| (%d of %d cases differ)",
             isa, bad, cases);
    bad = 0;
    int T = 29, cols = 300, ranges[][2] = {{0, 300}, {0, 256}, {256, 300}, {3, 40}, {17, 18}};
    float *x = pq_alloc((size_t)T * cols * 4);
    pq_test_fill(x, (size_t)T * cols, 5.0f);
    x[3] = NAN, x[cols + 3] = 7.0f, x[5] = INFINITY, x[cols + 6] = -INFINITY, x[7] = -0.0f, x[2 * cols + 299] = NAN;
    for (int r = 0; r < 5; r++) {
        double s0[300], s1[300];
        float m0[300], m1[300];
        for (int c = 0; c < cols; c++) s0[c] = s1[c] = c * 0.25, m0[c] = m1[c] = c % 3 ? 0.5f : 0.0f;
        pq_abs_stats_ref(x, T, cols, ranges[r][0], ranges[r][1], s0, m0);
        pq_abs_stats_cpu(x, T, cols, ranges[r][0], ranges[r][1], s1, m1);
        bad += !same_bits(s0, s1, sizeof s0) || !same_bits(m0, m1, sizeof m0);
    }
    PQ_CHECK(bad == 0, "abs stats %s == _ref bit for bit over column ranges, NaN / Inf / -0 included (%d of 5 differ)",
             isa, bad);
    pq_free(x);
}

// The AVX-512 softmax against the AVX2 one bit for bit, every length to
// 70 and some longer, scores up to +-60 (exps near the clamp's ends too).
static void check_softmax(void) {
    if (pq_cpu_isa() < PQ_ISA_AVX512) {
        pq_test_skip("softmax avx512: this CPU (or PQ_ISA) does not run it");
        return;
    }
    int bad = 0, lens = 0;
    float a[600], b[600];
    for (int n = 1; n <= 600; n = n < 70 ? n + 1 : n * 2 + 3) {
        pq_test_fill(a, (size_t)n, 60.0f);
        memcpy(b, a, (size_t)n * 4);
        pq_softmax_avx2(a, n);
        pq_softmax_avx512(b, n);
        bad += memcmp(a, b, (size_t)n * 4) != 0, lens++;
    }
    PQ_CHECK(bad == 0, "softmax avx512 == avx2 bit for bit (%d of %d lengths differ)", bad, lens);
}

static void check_rope(void) {
    // rotate_half on one head by hand: position 1, theta 10000, head_dim 4
    pq_rope_params rp = {10000.0f, 0, 0, 0, 0, 0};
    double inv[2];
    pq_rope_inv_freq(&rp, 4, inv);
    float cs[2], sn[2], x[4] = {1, 2, 3, 4};
    pq_rope_table(inv, 4, 1, 1, cs, sn);
    pq_rope_apply_ref(x, 1, 4, 1, 4, cs, sn);
    // pairs (0,2) rotated by 1 rad, (1,3) by 0.01 rad
    float want[4] = {(float)(1 * cos(1.0) - 3 * sin(1.0)), (float)(2 * cos(0.01) - 4 * sin(0.01)),
                     (float)(3 * cos(1.0) + 1 * sin(1.0)), (float)(4 * cos(0.01) + 2 * sin(0.01))};
    PQ_CHECK(pq_allclose(x, want, 4, 1e-6, 1e-6), "rope rotate_half pairs (i, i+d/2)");
    // llama3 scaling (Llama 3.1's rope_scaling: factor 8, low 1, high 4, 8192)
    // against transformers' _compute_llama3_parameters written out: wavelengths
    // under 8192/4 keep their frequency, over 8192/1 are divided by the factor,
    // and in between blend the two by s = (8192 / wavelen - 1) / (4 - 1)
    pq_rope_params l3 = {500000.0f, 1, 8.0f, 1.0f, 4.0f, 8192};
    double f0[64], f1[64];
    rp.theta = 500000.0f;
    pq_rope_inv_freq(&rp, 128, f0);
    pq_rope_inv_freq(&l3, 128, f1);
    int bands[3] = {0, 0, 0}, bad = 0;
    for (int i = 0; i < 64; i++) {
        double want = pow(500000.0, -2.0 * i / 128), wavelen = 2 * M_PI / want;
        if (wavelen < 8192 / 4.0) bands[0]++;
        else if (wavelen > 8192 / 1.0) want /= 8, bands[2]++;
        else {
            double s = (8192 / wavelen - 1) / (4 - 1);
            want = (1 - s) * want / 8 + s * want, bands[1]++;
        }
        bad += fabs(f0[i] - pow(500000.0, -2.0 * i / 128)) > 1e-12 * f0[i] || fabs(f1[i] - want) > 1e-12 * want;
    }
    PQ_CHECK(bad == 0 && bands[0] && bands[1] && bands[2],
             "rope inverse frequencies: plain, and llama3 scaling in its three bands (%d high, %d blended, %d low "
             "frequencies; %d wrong)", bands[0], bands[1], bands[2], bad);
}

// The prefill attention's pieces against their _ref bit for bit (the same
// fused multiply-add chains): head dimensions of every tile width and none,
// blocks of 1..64 queries, causal ends (from a block's first key, or 100
// keys on) and ends of a sliding window's rows; the mix's P zero past each
// row's end, as the attention leaves it.
static void check_attn_pieces(void) {
    if (pq_cpu_isa() < PQ_ISA_AVX2) {
        pq_test_skip("attention scores / mix avx2, avx512: this CPU (or PQ_ISA) does not run them");
        return;
    }
    int hds[] = {8, 16, 20, 24, 40, 64, 128}, nqs[] = {1, 5, 13, 64}, offs[] = {0, 7, 100};
    int bad_s2 = 0, bad_s5 = 0, bad_m2 = 0, bad_m5 = 0, cases = 0;
    for (int a = 0; a < 7; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 3; c++) {
                int hd = hds[a], nq = nqs[b], end[64], kmax = 0;
                for (int r = 0; r < nq; r++) end[r] = offs[c] + r + 1 - (c == 2 && r % 3 == 1), kmax = end[r];
                int ld = (kmax + PQ_ATTN_KEYS - 1) / PQ_ATTN_KEYS * PQ_ATTN_KEYS, ldq = hd + 3, ldv = 2 * hd;
                float *q = pq_alloc((size_t)nq * ldq * 4), *k = pq_alloc((size_t)kmax * ldv * 4),
                      *kt = pq_alloc((size_t)ld * hd * 4), *S[3], *o[3];
                pq_test_fill(q, (size_t)nq * ldq, 1.0f);
                pq_test_fill(k, (size_t)kmax * ldv, 1.0f);
                pq_attn_pack_keys(kmax, hd, k, ldv, kt);
                for (int i = 0; i < 3; i++) {
                    S[i] = pq_alloc((size_t)nq * ld * 4), o[i] = pq_alloc((size_t)nq * hd * 4);
                    memset(S[i], 0, (size_t)nq * ld * 4);
                }
                pq_attn_scores_ref(nq, end, hd, 0.125f, q, ldq, kt, S[0], ld);
                pq_attn_scores_avx2(nq, end, hd, 0.125f, q, ldq, kt, S[1], ld);
                if (pq_cpu_isa() >= PQ_ISA_AVX512) pq_attn_scores_avx512(nq, end, hd, 0.125f, q, ldq, kt, S[2], ld);
                for (int r = 0; r < nq; r++) {
                    bad_s2 += memcmp(S[0] + (size_t)r * ld, S[1] + (size_t)r * ld, (size_t)end[r] * 4) != 0;
                    bad_s5 += pq_cpu_isa() >= PQ_ISA_AVX512 &&
                              memcmp(S[0] + (size_t)r * ld, S[2] + (size_t)r * ld, (size_t)end[r] * 4) != 0;
                }
                float *P = S[0]; // the ref's scores as weights, zero past each row's end
                for (int r = 0; r < nq; r++)
                    for (int j = end[r]; j < ld; j++) P[(size_t)r * ld + j] = 0;
                pq_attn_mix_ref(nq, end, hd, P, ld, k, ldv, o[0], hd);
                if (hd % 8 == 0) {
                    pq_attn_mix_avx2(nq, end, hd, P, ld, k, ldv, o[1], hd);
                    bad_m2 += memcmp(o[0], o[1], (size_t)nq * hd * 4) != 0;
                }
                if (hd % 16 == 0 && pq_cpu_isa() >= PQ_ISA_AVX512) {
                    pq_attn_mix_avx512(nq, end, hd, P, ld, k, ldv, o[2], hd);
                    bad_m5 += memcmp(o[0], o[2], (size_t)nq * hd * 4) != 0;
                }
                cases++;
                for (int i = 0; i < 3; i++) pq_free(S[i]), pq_free(o[i]);
                pq_free(q), pq_free(k), pq_free(kt);
            }
    PQ_CHECK(bad_s2 == 0 && bad_m2 == 0, "attention scores / mix avx2 == _ref bit for bit (%d score rows, %d mixes "
             "of %d cases differ)", bad_s2, bad_m2, cases);
    if (pq_cpu_isa() < PQ_ISA_AVX512) pq_test_skip("attention scores / mix avx512: this CPU (or PQ_ISA) does not run them");
    else PQ_CHECK(bad_s5 == 0 && bad_m5 == 0, "attention scores / mix avx512 == _ref bit for bit (%d score rows, %d "
                  "mixes of %d cases differ)", bad_s5, bad_m5, cases);
}

static void check_attentions(void) {
    check_attention(8, 4, 8, 17, 0, 0);
    check_attention(8, 4, 8, 70, 0, 0);
    check_attention(4, 1, 16, 1, 33, 0);
    check_attention(9, 3, 64, 1, 0, 0);
    check_attention(9, 3, 64, 1, 200, 0);
    check_attention(4, 2, 20, 1, 90, 16);
    check_attention(6, 2, 64, 130, 20, 0);
    check_attention(4, 2, 8, 90, 10, 16);
    check_attention(9, 3, 64, 512, 0, 0);  // SmolLM2's heads, a whole window
    check_attention(3, 3, 20, 49, 7, 0);   // one query past a task's block; a head dimension of no tile width
    check_attention(2, 1, 40, 97, 0, 33);
}

int main(int argc, char **argv) {
    pq_test_seed();
    if (argc > 1 && strcmp(argv[1], "--attention") == 0) {
        PQ_CHECK(pq_blas_init() == PQ_OK, "OpenBLAS loads (%s)", pq_last_error());
        check_attentions();
        return pq_test_done();
    }
    if (argc > 1 && strcmp(argv[1], "--gemm") == 0) {
        PQ_CHECK(pq_blas_init() == PQ_OK, "OpenBLAS loads (%s)", pq_last_error());
        check_gemm();
        check_gemm_bf16();
        check_pack_dense();
        check_nll();
        check_swiglu();
        check_ops();
        check_linear(PQ_DENSE_F16, 37, 517, 172, 2, 1);
        return pq_test_done();
    }
    printf("# isa %s\n", pq_isa_name(pq_cpu_isa()));
    PQ_CHECK(pq_blas_init() == PQ_OK, "OpenBLAS loads (%s)", pq_last_error());
    printf("# OpenBLAS core %s\n", pq_blas_core());
    check_half_conversions();
    for (int dt = 0; dt < 3; dt++) check_dense((pq_dense_type)dt);
    for (int dt = 0; dt < 3; dt++) {
        check_linear((pq_dense_type)dt, 1, 300, 172, 2, 0);
        check_linear((pq_dense_type)dt, 3, 64, 64, 1, 1);
        check_linear((pq_dense_type)dt, 37, 517, 172, 2, 1);
        check_linear((pq_dense_type)dt, 200, 1000, 260, 2, 0);
    }
    check_linear(PQ_DENSE_F16, 700, 100, 72, 2, 1); // more tokens than one GEMM chunk (512)
    check_gemm();
    check_gemm_bf16();
    check_pack_dense();
    check_nll();
    check_swiglu();
    check_sgemm_nt(37, 172, 64, 1.0f, 0.0f);
    check_sgemm_nt(300, 65, 517, 0.5f, 1.0f);
    check_attentions();
    check_attn_pieces();
    check_rope();
    check_ops();
    check_softmax();
    if (!getenv("PQ_ISA")) {
        pq_test_rerun_with_isa("attention", "scalar", "--attention"); // the portable decode head
        pq_test_rerun_with_isa("gemm, nll, swiglu and ops", "scalar", "--gemm"); // the portable packing and dispatch
        if (pq_cpu_isa() == PQ_ISA_AVX512) pq_test_rerun_with_isa("gemm, nll, swiglu and ops", "avx2", "--gemm");
    }
    return pq_test_done();
}
