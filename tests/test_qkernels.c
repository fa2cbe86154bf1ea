// Quantized weight kernels (kernels/qpack.h, kernels/fp8.h) and their use
// through kernels/linear.h: every optimized path against its _ref on fresh
// random inputs, outputs poisoned before each call. Without PQ_ISA set the
// binary also re-runs its dispatch checks under PQ_ISA=scalar and avx2.
#include <cpuid.h>

#include "common/half.h"
#include "common/sys.h"
#include "kernels/blas.h"
#include "kernels/cpu.h"
#include "kernels/fp8.h"
#include "kernels/gemm.h"
#include "kernels/linear.h"
#include "kernels/qpack.h"
#include "tests/test.h"

// GEMV and linear tolerance (relative L2 vs the double _ref): fp32 sums of
// at most a few hundred products in another order, the zero point split off
// (sum q x - z sum x: ~2x larger terms) and sgemm's blocked order give
// ~sqrt(cols) * 2^-24 * 2 ~ 1e-6; the AVX-512 4-bit path's fixed-point x
// (each element within 2^-23 of its word's largest |x|) adds ~2e-7.
#define TOL 1e-5

// The ISA entry points are called directly when the CPU has the ISA,
// whatever PQ_ISA says.
static int have_avx2(void) {
    unsigned a, b, c, d; // F16C through CPUID: clang's __builtin_cpu_supports does not know it
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __get_cpuid(1, &a, &b, &c, &d) &&
           (c & bit_F16C);
}
static int have_avx512(void) {
    return have_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni");
}

// The optimized versions a check covers: the dispatched _cpu one (unless
// the dispatch chose the _ref itself), AVX2 and AVX-512. A version this CPU
// lacks is skipped (one skip line per version), never a buffer compared
// with itself.
typedef enum { V_CPU, V_AVX2, V_AVX512, NV } version;
static const char *const VNAME[NV] = {"cpu", "avx2", "avx512"};
static int have(version v) {
    return v == V_CPU ? pq_cpu_isa() > PQ_ISA_SCALAR : v == V_AVX2 ? have_avx2() : have_avx512();
}
static int skipped(version v, const char *what) {
    static int said[NV];
    if (have(v)) return 0;
    if (!said[v]++)
        pq_test_skip("every %s check (the first: %s): %s", VNAME[v], what, v == V_CPU ? "the dispatch runs the _ref "
                     "itself (PQ_ISA=scalar or no AVX2)" : "this CPU lacks the instruction set");
    return 1;
}

// ---- random weights ---------------------------------------------------------

typedef struct {
    pq_qpack q;
    uint32_t *packed;
    float *scales;
    uint8_t *zeros;
    int32_t *g_idx;
} qweight;

// group 0: per channel; gidx: a GPTQ act-order g_idx (columns in a random
// order, consecutive runs of `group` of them share a group)
static qweight make_qpack(int rows, int cols, int bits, int group, int asym, int gidx) {
    qweight w = {0};
    group = group ? group : cols;
    int wpr = pq_qpack_words_per_row(cols, bits), ng = pq_qpack_ngroups(cols, group), per = 32 / bits;
    w.packed = pq_calloc((size_t)rows * wpr * 4);
    w.scales = pq_alloc((size_t)rows * ng * 4);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            uint32_t code = (uint32_t)(pq_test_u64() % (1u << bits));
            w.packed[(size_t)r * wpr + c / per] |= code << (c % per * bits);
        }
    for (size_t i = 0; i < (size_t)rows * ng; i++) w.scales[i] = 0.01f + 0.02f * fabsf(pq_test_uniform());
    if (asym) {
        w.zeros = pq_alloc((size_t)rows * ng);
        for (size_t i = 0; i < (size_t)rows * ng; i++) w.zeros[i] = (uint8_t)(pq_test_u64() % (1u << bits));
    }
    if (gidx) {
        int *perm = malloc((size_t)cols * sizeof *perm);
        for (int c = 0; c < cols; c++) perm[c] = c;
        for (int c = cols - 1; c > 0; c--) {
            int k = (int)(pq_test_u64() % (uint64_t)(c + 1)), t = perm[c];
            perm[c] = perm[k];
            perm[k] = t;
        }
        w.g_idx = pq_alloc((size_t)cols * 4);
        for (int i = 0; i < cols; i++) w.g_idx[perm[i]] = i / group;
        free(perm);
    }
    w.q = (pq_qpack){rows, cols, bits, group, w.packed, w.scales, w.zeros, w.g_idx};
    return w;
}

static void free_qpack(qweight *w) { pq_free(w->packed); pq_free(w->scales); pq_free(w->zeros); pq_free(w->g_idx); }

static uint8_t random_fp8(void) {
    uint8_t b;
    do b = (uint8_t)pq_test_u64(); while ((b & 0x7f) == 0x7f);
    return b;
}

static pq_linear make_linear(const char *kind, int rows, int cols, qweight *qw, void **data, float **scales) {
    pq_linear L = {.rows = rows, .cols = cols};
    *data = NULL;
    *scales = NULL;
    // W8A8: "a8i" INT8 dynamic per token, "a8is" INT8 static, "a8f" FP8 dynamic
    if (!strncmp(kind, "a8", 2)) {
        int fp8 = kind[2] == 'f';
        L = make_linear(fp8 ? "fp8" : "int8", rows, cols, qw, data, scales);
        L.act = (pq_actq){fp8 ? PQ_ACTQ_FP8 : PQ_ACTQ_INT8, kind[3] == 's' ? 0.02f : 0.0f};
        return L;
    }
    if (!strcmp(kind, "int8") || !strcmp(kind, "fp8") || !strcmp(kind, "fp8t")) {
        uint8_t *q = pq_alloc((size_t)rows * cols);
        float *s = pq_alloc((size_t)rows * 4);
        for (size_t i = 0; i < (size_t)rows * cols; i++) q[i] = kind[0] == 'i' ? (uint8_t)pq_test_u64() : random_fp8();
        for (int r = 0; r < rows; r++) s[r] = 0.001f + 0.01f * fabsf(pq_test_uniform());
        *data = q;
        *scales = s;
        if (kind[0] == 'i') L.fmt = PQ_W_INT8, L.i8 = (pq_int8_weight){rows, cols, (const int8_t *)q, s};
        else L.fmt = PQ_W_FP8, L.f8 = (pq_fp8_weight){rows, cols, q, s, kind[3] != 't'};
        return L;
    }
    int bits, group, asym, gidx; // "q<bits>g<group>[a][x]"
    char flags[8] = "";
    sscanf(kind, "q%dg%d%7s", &bits, &group, flags);
    asym = strchr(flags, 'a') != NULL;
    gidx = strchr(flags, 'x') != NULL;
    *qw = make_qpack(rows, cols, bits, group, asym, gidx);
    L.fmt = PQ_W_QPACK;
    L.q = qw->q;
    return L;
}

// ---- FP8 E4M3 encode / decode ----------------------------------------------

// The nearest finite code by exhaustive search, ties to the even code,
// saturating: an independent statement of the rounding rule.
static uint8_t encode_search(float x) {
    float a = fabsf(x);
    int best = 0;
    double bd = INFINITY;
    for (int b = 0; b <= 0x7e; b++) {
        double d = fabs((double)pq_fp8_e4m3_decode((uint8_t)b) - a);
        if (d < bd || (d == bd && (b & 1) == 0)) bd = d, best = b;
    }
    return (uint8_t)(best | (signbit(x) ? 0x80 : 0));
}

static void check_fp8_codec(void) {
    int bad = 0;
    for (int b = 0; b < 256; b++) {
        if ((b & 0x7f) == 0x7f) continue;
        if (pq_fp8_e4m3_encode(pq_fp8_e4m3_decode((uint8_t)b)) != b) bad++;
    }
    PQ_CHECK(bad == 0, "fp8 encode(decode(b)) == b for all 254 non-NaN codes (%d bad)", bad);
    PQ_CHECK(isnan(pq_fp8_e4m3_decode(0x7f)) && isnan(pq_fp8_e4m3_decode(0xff)) &&
                 pq_fp8_e4m3_decode(0x7e) == 448.0f && pq_fp8_e4m3_decode(0xfe) == -448.0f &&
                 pq_fp8_e4m3_decode(0x08) == 0x1p-6f && pq_fp8_e4m3_decode(0x01) == 0x1p-9f &&
                 pq_fp8_e4m3_decode(0x07) == 7 * 0x1p-9f && signbit(pq_fp8_e4m3_decode(0x80)) &&
                 pq_fp8_e4m3_decode(0x38) == 1.0f && pq_fp8_e4m3_decode(0x39) == 1.125f,
             "fp8 decode: NaN, +-448, smallest normal 2^-6, subnormals m*2^-9, -0, 1, 1.125");
    // every midpoint between adjacent codes rounds to the even one; one ulp
    // either side rounds to the nearer
    int ties = 0, sides = 0;
    for (int b = 0; b < 0x7e; b++)
        for (int sgn = 0; sgn < 2; sgn++) {
            float lo = pq_fp8_e4m3_decode((uint8_t)b), hi = pq_fp8_e4m3_decode((uint8_t)(b + 1));
            float mid = (lo + hi) / 2, s = sgn ? -1.0f : 1.0f;
            int even = (b & 1) ? b + 1 : b, sb = sgn << 7;
            if (pq_fp8_e4m3_encode(s * mid) != (even | sb)) ties++;
            if (pq_fp8_e4m3_encode(s * nextafterf(mid, 0)) != (b | sb) ||
                pq_fp8_e4m3_encode(s * nextafterf(mid, INFINITY)) != ((b + 1) | sb))
                sides++;
        }
    PQ_CHECK(ties == 0 && sides == 0,
             "fp8 encode: 252 midpoints tie to even (%d bad), neighbours round to nearest (%d bad)", ties, sides);
    PQ_CHECK(pq_fp8_e4m3_encode(448.0f) == 0x7e && pq_fp8_e4m3_encode(449.0f) == 0x7e &&
                 pq_fp8_e4m3_encode(464.0f) == 0x7e && pq_fp8_e4m3_encode(1e30f) == 0x7e &&
                 pq_fp8_e4m3_encode(INFINITY) == 0x7e && pq_fp8_e4m3_encode(-INFINITY) == 0xfe &&
                 pq_fp8_e4m3_encode(-500.0f) == 0xfe,
             "fp8 encode saturates to +-448 (448, 449, 464, 1e30, +-Inf, -500)");
    PQ_CHECK(pq_fp8_e4m3_encode(NAN) == 0x7f && pq_fp8_e4m3_encode(-NAN) == 0xff, "fp8 encode NaN -> 0x7f with sign");
    PQ_CHECK(pq_fp8_e4m3_encode(0x1p-10f) == 0 && pq_fp8_e4m3_encode(nextafterf(0x1p-10f, 1)) == 1 &&
                 pq_fp8_e4m3_encode(3 * 0x1p-10f) == 2 && pq_fp8_e4m3_encode(5 * 0x1p-10f) == 2 &&
                 pq_fp8_e4m3_encode(15 * 0x1p-10f) == 8 && pq_fp8_e4m3_encode(1e-30f) == 0 &&
                 pq_fp8_e4m3_encode(-1e-45f) == 0x80 && pq_fp8_e4m3_encode(-0.0f) == 0x80 &&
                 pq_fp8_e4m3_encode(-0x1p-9f) == 0x81,
             "fp8 encode subnormals: 2^-10 -> 0, 3*2^-10 -> 2, 5*2^-10 -> 2, 15*2^-10 -> 8 (2^-6), -0, f32 subnormal");
    // random values over the whole range against the exhaustive search
    bad = 0;
    for (int i = 0; i < 200000; i++) {
        float x = ldexpf(pq_test_uniform(), (int)(pq_test_u64() % 28) - 16);
        if (pq_fp8_e4m3_encode(x) != encode_search(x)) bad++;
    }
    PQ_CHECK(bad == 0, "fp8 encode == exhaustive nearest-even search on 200000 random values (%d bad)", bad);
}

// ---- rows and GEMV, format by format ----------------------------------------

typedef void (*gemv_fn)(const float *x, int T, float *y); // y[T][rows]

// Activations with outliers, as LLMs have: about one element in 64 (at
// least one per token) `outlier` times larger than the rest.
static void fill_outliers(float *x, int T, int cols, float outlier) {
    pq_test_fill(x, (size_t)T * cols, 1.0f);
    for (int t = 0; t < T; t++)
        for (int k = 0; k <= cols / 64; k++) x[(size_t)t * cols + pq_test_u64() % (uint64_t)cols] *= outlier;
}

// The GEMV entry points of one weight, compared with its _ref for T = 1..4
// (outlier 1: plain normal x).
static double gemv_err(int rows, int cols, gemv_fn ref, gemv_fn opt, float outlier) {
    double worst = 0;
    for (int T = 1; T <= PQ_GEMV_MAX_T; T++) {
        float *x = pq_alloc((size_t)T * cols * 4), *y0 = pq_alloc((size_t)T * rows * 4),
              *y1 = pq_alloc((size_t)T * rows * 4);
        if (outlier == 1) pq_test_fill(x, (size_t)T * cols, 1.0f);
        else fill_outliers(x, T, cols, outlier);
        pq_test_poison(y0, (size_t)T * rows);
        pq_test_poison(y1, (size_t)T * rows);
        ref(x, T, y0);
        opt(x, T, y1);
        double e = pq_rel_l2(y1, y0, (size_t)T * rows);
        if (!(e <= worst)) worst = e;
        pq_free(x); pq_free(y0); pq_free(y1);
    }
    return worst;
}

static const pq_qpack *cur_q;
static float *cur_xp;
static void q_ref(const float *x, int T, float *y) { pq_qpack_gemv_ref(cur_q, 0, cur_q->rows, x, T, y, cur_q->rows); }
static void q_cpu(const float *x, int T, float *y) {
    pq_qpack_gemv_prepare_cpu(cur_q, x, T, cur_xp);
    // two row ranges, as the threads of pq_linear_forward would split them
    int h = cur_q->rows / 3;
    pq_qpack_gemv_cpu(cur_q, 0, h, x, T, cur_xp, y, cur_q->rows);
    pq_qpack_gemv_cpu(cur_q, h, cur_q->rows - h, x, T, cur_xp, y, cur_q->rows);
}
static void q_avx2(const float *x, int T, float *y) {
    pq_qpack_gemv_prepare(cur_q, x, T, 8, cur_xp);
    pq_qpack_gemv_avx2(cur_q, 0, cur_q->rows, x, T, cur_xp, y, cur_q->rows);
}
static void q_avx512(const float *x, int T, float *y) {
    pq_qpack_gemv_prepare(cur_q, x, T, 16, cur_xp);
    pq_qpack_gemv_avx512(cur_q, 0, cur_q->rows, x, T, cur_xp, y, cur_q->rows);
}

static void check_qpack(int bits, int group, int asym, int gidx, int cols) {
    int rows = 20 + (int)(pq_test_u64() % 40), r0 = 1 + (int)(pq_test_u64() % 5);
    qweight w = make_qpack(rows, cols, bits, group, asym, gidx);
    char name[96], gname[16] = "per-channel";
    if (group) snprintf(gname, sizeof gname, "g%d", group);
    snprintf(name, sizeof name, "q%d %s %s%s %dx%d", bits, gname, asym ? "asym" : "sym", gidx ? " g_idx" : "", rows,
             cols);
    size_t n = (size_t)(rows - r0) * cols;
    float *a = pq_alloc(n * 4), *b = pq_alloc(n * 4);
    pq_test_poison(a, n);
    pq_qpack_rows_ref(&w.q, r0, rows - r0, a);
    for (version v = V_CPU; v < NV; v++) {
        if (skipped(v, name)) continue;
        pq_test_poison(b, n);
        if (v == V_CPU) pq_qpack_rows_cpu(&w.q, r0, rows - r0, b);
        else if (v == V_AVX2) pq_qpack_rows_avx2(&w.q, r0, rows - r0, b);
        else pq_qpack_rows_avx512(&w.q, r0, rows - r0, b);
        PQ_CHECK(!memcmp(a, b, n * 4), "%s rows %s == ref bit for bit", name, VNAME[v]);
    }

    cur_q = &w.q;
    cur_xp = pq_alloc(pq_qpack_gemv_prepare_bytes(&w.q, PQ_GEMV_MAX_T));
    const char *kind[NV] = {"", pq_qpack_gemv_aligned(&w.q, 8) ? " (aligned)" : " (gathered)",
                            pq_qpack_gemv_fixed(&w.q, 16)     ? " (fixed)"
                            : pq_qpack_gemv_aligned(&w.q, 16) ? " (aligned)"
                                                              : " (gathered)"};
    const gemv_fn fns[NV] = {q_cpu, q_avx2, q_avx512};
    for (version v = V_CPU; v < NV; v++)
        for (int o = 0; o < 2 && !skipped(v, name); o++) {
            double e = gemv_err(rows, cols, q_ref, fns[v], o ? 1000.0f : 1.0f);
            PQ_CHECK(e < TOL, "%s gemv %s%s T=1..4%s rel L2 %.1e", name, VNAME[v], kind[v],
                     o ? " x with 1000x outliers" : "", e);
        }
    if (have_avx512() && !pq_qpack_gemv_fixed(&w.q, 16) && pq_qpack_gemv_aligned(&w.q, 16)) {
        // one token takes rows four at a time: each row's bits as a call for that row alone
        float *x = pq_alloc((size_t)cols * 4), *y0 = pq_alloc((size_t)rows * 4), *y1 = pq_alloc((size_t)rows * 4);
        fill_outliers(x, 1, cols, 1000.0f);
        pq_test_poison(y0, rows);
        pq_test_poison(y1, rows);
        pq_qpack_gemv_prepare(&w.q, x, 1, 16, cur_xp);
        pq_qpack_gemv_avx512(&w.q, 0, rows, x, 1, cur_xp, y0, rows);
        for (int r = 0; r < rows; r++) pq_qpack_gemv_avx512(&w.q, r, 1, x, 1, cur_xp, y1, rows);
        PQ_CHECK(!memcmp(y0, y1, (size_t)rows * 4), "%s gemv avx512 (aligned) T=1: %d rows in fours == row by row, "
                 "bit for bit", name, rows);
        pq_free(x); pq_free(y0); pq_free(y1);
    }
    pq_free(cur_xp);
    if (have_avx512() && pq_qpack_gemv_fixed(&w.q, 16)) { // the AVX-512 blocks are the C ones, byte for byte
        int T = 1 + (int)(pq_test_u64() % PQ_GEMV_MAX_T);
        size_t nx = (size_t)T * cols, nxp = pq_qpack_gemv_prepare_bytes(&w.q, T);
        float *x = pq_alloc(nx * 4);
        uint8_t *p0 = pq_alloc(nxp), *p1 = pq_alloc(nxp);
        fill_outliers(x, T, cols, 1000.0f);
        memset(p0, 0xa5, nxp);
        memset(p1, 0xa5, nxp);
        pq_qpack_gemv_prepare(&w.q, x, T, 16, (float *)p0);
        pq_qpack_gemv_prepare_avx512(&w.q, x, T, (float *)p1);
        PQ_CHECK(!memcmp(p0, p1, (size_t)pq_qpack_fixed_blocks(&w.q) * T * 512), "%s prepare avx512 blocks == C blocks (T=%d)",
                 name, T);
        pq_free(x); pq_free(p0); pq_free(p1);
    }
    pq_free(a); pq_free(b);
    free_qpack(&w);
}

// The fixed-point activations of the 4-bit AVX-512 GEMV (qpack.h) on edge
// cases: each word's digits, 2^k and sum against the documented rule (the
// short last block's missing words as x = 0), the AVX-512 prepare against
// the C one, and the GEMV of every path on them. COLS: three blocks, a short
// fourth of one whole word, and a partial word of 3 columns.
static void check_fixed_point(void) {
    enum { T = 4, COLS = 3 * 128 + 8 + 3, ROWS = 33, NW = COLS / 8, NB = (NW + 15) / 16 };
    qweight w = make_qpack(ROWS, COLS, 4, 128, 1, 0);
    float *x = pq_alloc((size_t)T * COLS * 4);
    fill_outliers(x, T, COLS, 1e6f);
    float *w0 = x + 8 * 8; // words 8.. of token 0
    for (int i = 0; i < 8; i++) {
        w0[i] = 0;                                          // an all-zero word
        w0[8 + i] = 1e-40f * pq_test_normal();              // subnormals: k = -126, v = 0
        w0[16 + i] = 1e-32f * pq_test_normal();             // below 2^-104: k = -126, a few bits
        w0[24 + i] = 1e30f * pq_test_normal();              // huge
        w0[32 + i] = ldexpf(i - 3.5f, -20);                 // ties to even once scaled
        w0[40 + i] = w0[48 + i] = pq_test_normal();
    }
    w0[32] = ldexpf(4194304.0f, -20);                     // max 2^22 * 2^-20: k = -20, v = i - 3.5 rounded
    w0[43] = ldexpf(8355711.0f, -10);                     // exactly the largest v: k = -10
    w0[53] = -ldexpf(8355711.5f, -10);                    // just above it: k = -9
    x[1 * COLS + 200] = NAN;
    x[2 * COLS + 17] = -INFINITY;

    size_t nxp = pq_qpack_gemv_prepare_bytes(&w.q, T);
    uint8_t *p0 = pq_alloc(nxp), *p1 = pq_alloc(nxp);
    memset(p0, 0xa5, nxp);
    memset(p1, 0xa5, nxp);
    pq_qpack_gemv_prepare(&w.q, x, T, 16, (float *)p0);
    int bad = 0, words = 0;
    double X[T][4] = {{0}}; // COLS has 4 groups of 128, the last one of 11 columns
    for (int b = 0; b < NB; b++)
        for (int t = 0; t < T; t++) {
            const uint8_t *blk = p0 + ((size_t)b * T + t) * 512;
            for (int j = 0; j < 16; j++, words++) {
                const float zeros[8] = {0};
                const float *xw = 16 * b + j < NW ? x + (size_t)t * COLS + b * 128 + 8 * j : zeros;
                float S, m = 0;
                int32_t V;
                memcpy(&S, blk + 384 + 4 * j, 4);
                memcpy(&V, blk + 448 + 4 * j, 4);
                X[t][b] += (double)S * V;
                int finite = 1;
                for (int i = 0; i < 8; i++) finite &= isfinite(xw[i]), m = fmaxf(m, fabsf(xw[i]));
                int wbad = finite ? !(S >= 0x1p-126f && (S == 0x1p-126f || m > 8355711.0f * S / 2)) : !isnan(S);
                int32_t sum = 0;
                for (int i = 0; i < 8; i++) {
                    const int8_t *d = (const int8_t *)blk + (i % 2) * 64 + 4 * j + i / 2;
                    int32_t v = d[0] * 65536 + d[128] * 256 + d[256];
                    sum += v;
                    if (!finite) { wbad |= v != 0; continue; }
                    double err = fabs((double)S * v - xw[i]);
                    wbad |= v < -8355711 || v > 8355711 || err > S / 2 || err > fmax(1.004 * 0x1p-23 * m, 0x1p-127);
                    wbad |= err == S / 2 && v % 2 != 0; // a tie went to the odd neighbour
                }
                bad += wbad || V != sum;
            }
        }
    const float *Xp = (const float *)(p0 + (size_t)NB * T * 512);
    for (int t = 0; t < T; t++)
        for (int g = 0; g < 4; g++) {
            float want = (float)X[t][g];
            bad += memcmp(&Xp[t * 4 + g], &want, 4) != 0;
        }
    PQ_CHECK(bad == 0 && words == NB * T * 16,
             "fixed-point x (C prepare): 2^k minimal, v = sum of digits within 2^k/2 and 1.004 * 2^-23 * word max "
             "of x, ties to even, V = sum v, X = sum 2^k v per group, NaN/Inf words NaN (%d bad of %d words, %d sums)",
             bad, words, 4 * T);
    if (have_avx512()) {
        pq_qpack_gemv_prepare_avx512(&w.q, x, T, (float *)p1);
        int same = !memcmp(p0, p1, (size_t)NB * T * 512);
        if (pq_cpu_isa() == PQ_ISA_AVX512) {
            memset(p1, 0xa5, nxp);
            pq_qpack_gemv_prepare_cpu(&w.q, x, T, (float *)p1);
            same &= !memcmp(p0, p1, nxp);
        }
        PQ_CHECK(same, "fixed-point x: avx512 blocks, cpu prepare == C prepare on zeros, subnormals, 1e30, ties, the "
                       "largest v, NaN, -Inf, 1e6x outliers");
    }

    // tokens 0 and 3 against the _ref; token 1 (NaN) all NaN, token 2 (-Inf) all non-finite
    float y0[T * ROWS], y[T * ROWS];
    pq_qpack_gemv_ref(&w.q, 0, ROWS, x, T, y0, ROWS);
    int nonfinite = 0;
    for (int r = 0; r < ROWS; r++) nonfinite += !isnan(y0[ROWS + r]) + !!isfinite(y0[2 * ROWS + r]);
    PQ_CHECK(nonfinite == 0, "fixed-point x: gemv ref on the edge cases: NaN x -> NaN, Inf x -> non-finite (%d rows "
             "not)", nonfinite);
    for (version v = V_CPU; v < NV; v++) {
        if (skipped(v, "fixed-point x: gemv on the edge cases")) continue;
        pq_test_poison(y, (size_t)T * ROWS);
        if (v == V_CPU) pq_qpack_gemv_prepare_cpu(&w.q, x, T, (float *)p1);
        if (v == V_AVX2) pq_qpack_gemv_prepare(&w.q, x, T, 8, (float *)p1);
        if (v == V_CPU) pq_qpack_gemv_cpu(&w.q, 0, ROWS, x, T, (float *)p1, y, ROWS);
        if (v == V_AVX2) pq_qpack_gemv_avx2(&w.q, 0, ROWS, x, T, (float *)p1, y, ROWS);
        if (v == V_AVX512) pq_qpack_gemv_avx512(&w.q, 0, ROWS, x, T, (float *)p0, y, ROWS);
        double worst = 0;
        nonfinite = 0;
        for (int t = 0; t < T; t += 3) worst = fmax(worst, pq_rel_l2(y + t * ROWS, y0 + t * ROWS, ROWS));
        for (int r = 0; r < ROWS; r++) nonfinite += !isnan(y[ROWS + r]) + !!isfinite(y[2 * ROWS + r]);
        PQ_CHECK(worst < TOL && nonfinite == 0, "fixed-point x: gemv %s on the edge cases: rel L2 %.1e, NaN x -> NaN, "
                 "Inf x -> non-finite (%d rows not)", VNAME[v], worst, nonfinite);
    }
    pq_free(x); pq_free(p0); pq_free(p1);
    free_qpack(&w);
}

static const pq_fp8_weight *cur_f8;
static const pq_int8_weight *cur_i8;
static void f8_ref(const float *x, int T, float *y) { pq_fp8_gemv_ref(cur_f8, 0, cur_f8->rows, x, T, y, cur_f8->rows); }
static void f8_cpu(const float *x, int T, float *y) { pq_fp8_gemv_cpu(cur_f8, 0, cur_f8->rows, x, T, y, cur_f8->rows); }
static void f8_avx2(const float *x, int T, float *y) {
    pq_fp8_gemv_avx2(cur_f8, 0, cur_f8->rows, x, T, y, cur_f8->rows);
}
static void f8_avx512(const float *x, int T, float *y) {
    pq_fp8_gemv_avx512(cur_f8, 0, cur_f8->rows, x, T, y, cur_f8->rows);
}
static void i8_ref(const float *x, int T, float *y) {
    pq_int8_gemv_ref(cur_i8, 0, cur_i8->rows, x, T, y, cur_i8->rows);
}
static void i8_cpu(const float *x, int T, float *y) {
    pq_int8_gemv_cpu(cur_i8, 0, cur_i8->rows, x, T, y, cur_i8->rows);
}
static void i8_avx2(const float *x, int T, float *y) {
    pq_int8_gemv_avx2(cur_i8, 0, cur_i8->rows, x, T, y, cur_i8->rows);
}
static void i8_avx512(const float *x, int T, float *y) {
    pq_int8_gemv_avx512(cur_i8, 0, cur_i8->rows, x, T, y, cur_i8->rows);
}

static void check_fp8_int8(int rows, int cols) {
    void *data;
    float *scales;
    qweight unused;
    const char *kinds[] = {"fp8", "fp8t", "int8"};
    for (int k = 0; k < 3; k++) {
        pq_linear L = make_linear(kinds[k], rows, cols, &unused, &data, &scales);
        size_t n = (size_t)rows * cols;
        float *a = pq_alloc(n * 4), *b = pq_alloc(n * 4);
        pq_test_poison(a, n);
        int fp8 = L.fmt == PQ_W_FP8;
        cur_f8 = &L.f8, cur_i8 = &L.i8;
        if (fp8) pq_fp8_rows_ref(&L.f8, 0, rows, a);
        else pq_int8_rows_ref(&L.i8, 0, rows, a);
        for (version v = V_CPU; v <= V_AVX2; v++) {
            if (skipped(v, kinds[k])) continue;
            pq_test_poison(b, n);
            if (fp8) (v == V_CPU ? pq_fp8_rows_cpu : pq_fp8_rows_avx2)(&L.f8, 0, rows, b);
            else (v == V_CPU ? pq_int8_rows_cpu : pq_int8_rows_avx2)(&L.i8, 0, rows, b);
            PQ_CHECK(!memcmp(a, b, n * 4), "%s rows %s == ref bit for bit (%dx%d)", kinds[k], VNAME[v], rows, cols);
        }
        const gemv_fn fns[2][NV] = {{i8_cpu, i8_avx2, i8_avx512}, {f8_cpu, f8_avx2, f8_avx512}};
        for (version v = V_CPU; v < NV; v++) {
            if (skipped(v, kinds[k])) continue;
            double e = gemv_err(rows, cols, fp8 ? f8_ref : i8_ref, fns[fp8][v], 1);
            PQ_CHECK(e < TOL, "%s gemv %s T=1..4 rel L2 %.1e (%dx%d)", kinds[k], VNAME[v], e, rows, cols);
        }
        pq_free(a); pq_free(b); pq_free(data); pq_free(scales);
    }
}

// All 256 codes (NaN included) through the vector decoder, and NaN codes in
// a row make that row's GEMV NaN, wherever they sit.
static void check_fp8_all_codes(void) {
    int rows = 4, cols = 256 + 37;
    uint8_t *q = pq_alloc((size_t)rows * cols);
    float s[4] = {1.0f, 0.37f, 3e-3f, 1e5f};
    float *a = pq_alloc((size_t)rows * cols * 4), *b = pq_alloc((size_t)rows * cols * 4);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) q[r * cols + c] = (uint8_t)(c < 256 ? (c + 77 * r) & 255 : random_fp8());
    pq_fp8_weight w = {rows, cols, q, s, 1};
    pq_test_poison(a, (size_t)rows * cols);
    pq_test_poison(b, (size_t)rows * cols);
    pq_fp8_rows_ref(&w, 0, rows, a);
    for (version v = V_CPU; v <= V_AVX2; v++) {
        if (skipped(v, "fp8 rows of all 256 codes")) continue;
        pq_test_poison(b, (size_t)rows * cols);
        (v == V_CPU ? pq_fp8_rows_cpu : pq_fp8_rows_avx2)(&w, 0, rows, b);
        PQ_CHECK(!memcmp(a, b, (size_t)rows * cols * 4), "fp8 rows of all 256 codes (NaN, -0, subnormals) %s == ref "
                 "bit for bit", VNAME[v]);
    }
    // row 0 clean; NaN codes at column 100, 280 and the last: in the 32/64-byte steps, the masked
    // AVX-512 tail and the scalar AVX2 tail
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) q[r * cols + c] = random_fp8();
    q[1 * cols + 100] = 0x7f;
    q[2 * cols + 280] = 0xff;
    q[3 * cols + cols - 1] = 0x7f;
    float x[293], y[4];
    pq_test_fill(x, (size_t)cols, 1.0f);
    void (*const fns[1 + NV])(const pq_fp8_weight *, int, int, const float *, int, float *, int) = {
        pq_fp8_gemv_ref, pq_fp8_gemv_cpu, pq_fp8_gemv_avx2, pq_fp8_gemv_avx512};
    for (int k = 0; k <= NV; k++) {
        if (k > 0 && skipped((version)(k - 1), "fp8 gemv with NaN codes")) continue;
        pq_test_poison(y, 4);
        fns[k](&w, 0, rows, x, 1, y, rows);
        PQ_CHECK(!isnan(y[0]) && isnan(y[1]) && isnan(y[2]) && isnan(y[3]),
                 "fp8 gemv %s: a NaN code anywhere in a row gives NaN (a clean row does not)", k ? VNAME[k - 1] : "ref");
    }
    pq_free(q); pq_free(a); pq_free(b);
}

// ---- pq_linear_forward ---------------------------------------------------------

// BF16 products (pq_linear_pack_panels with bf16) for T tokens against
// pq_gemm_bf16_ref on the format's _ref rows (+ bias): bit for bit where the
// FMA kernels run them; on AMX tiles within twice the f32 summation bound
// (K - 1) 2^-24 sum |product| of the exact sum that binds both (the
// reasoning of test_kernels.c's check_gemm_amx). The output of one thread
// is kept in *one; with more threads it must be the same bits.
static void check_linear_bf16(pq_linear *L, const char *kind, int T, int nt, void *ws, pq_pool *pool, float **one) {
    int rows = L->rows, cols = L->cols, bad = 0;
    float *x = pq_alloc((size_t)T * cols * 4), *y = pq_alloc((size_t)T * rows * 4),
          *want = pq_alloc((size_t)T * rows * 4), *w = pq_alloc((size_t)rows * cols * 4),
          *panels = pq_alloc(pq_linear_panels_bytes(L, 1));
    for (size_t i = 0; i < (size_t)T * cols; i++) // the same x for every thread count: a fixed sequence in [-1, 1]
        x[i] = (float)((uint32_t)(i * 2654435761u) % 2001u) / 1000.0f - 1.0f;
    pq_test_poison(y, (size_t)T * rows);
    pq_linear_pack_panels(L, panels, 1, ws, pool);
    pq_linear_forward(L, x, T, y, ws, pool);
    L->panels = NULL, L->bf16 = 0;
    pq_linear_rows_ref(L, 0, rows, w);
    pq_gemm_bf16_ref(x, T, w, rows, cols, want, rows);
    for (int t = 0; t < T; t++)
        for (int r = 0; r < rows; r++) {
            size_t i = (size_t)t * rows + r;
            if (L->bias) want[i] += L->bias[r];
            if (!pq_cpu_amx()) {
                bad += memcmp(&y[i], &want[i], 4) != 0;
                continue;
            }
            double mag = 0;
            for (int k = 0; k < cols; k++)
                mag += fabs((double)pq_bf16_to_f32(pq_f32_to_bf16(x[(size_t)t * cols + k])) *
                            pq_bf16_to_f32(pq_f32_to_bf16(w[(size_t)r * cols + k])));
            bad += !(fabs((double)y[i] - want[i]) <= 2.0 * cols * 0x1p-24 * mag + 1e-37);
        }
    PQ_CHECK(bad == 0, "linear %s %dx%d%s T=%d threads=%d, BF16 products (%s) vs pq_gemm_bf16_ref: %s (%d bad)", kind,
             rows, cols, L->bias ? " +bias" : "", T, nt, pq_cpu_amx() ? "amx" : "fma",
             pq_cpu_amx() ? "within 2 K 2^-24 sum|p|" : "bit for bit", bad);
    if (nt == 1) *one = y, y = NULL;
    else PQ_CHECK(!memcmp(*one, y, (size_t)T * rows * 4), "linear %s %dx%d T=%d BF16 products: threads %d == 1, bit "
                  "for bit", kind, rows, cols, T, nt);
    pq_free(x); pq_free(y); pq_free(want); pq_free(w); pq_free(panels);
}

static void check_linear(const char *kind, int rows, int cols, int with_bias) {
    static const int Ts[] = {1, 3, 37, 200};
    void *data;
    float *scales, *bias = NULL;
    qweight qw = {0};
    pq_linear L = make_linear(kind, rows, cols, &qw, &data, &scales);
    if (with_bias) { bias = pq_alloc((size_t)rows * 4); pq_test_fill(bias, rows, 1.0f); }
    L.bias = bias;
    float *bf16_out[2] = {NULL, NULL}; // check_linear_bf16's outputs of one thread
    for (int nt = 1; nt <= 2; nt++) {
        pq_pool *pool;
        pq_pool_create(nt, &pool);
        void *ws = pq_alloc(pq_linear_workspace_bytes(&L, nt) + 1);
        for (int k = 0; k < 4; k++) {
            int T = Ts[k];
            float *x = pq_alloc((size_t)T * cols * 4), *y0 = pq_alloc((size_t)T * rows * 4),
                  *y1 = pq_alloc((size_t)T * rows * 4);
            pq_test_fill(x, (size_t)T * cols, 1.0f);
            pq_test_poison(y1, (size_t)T * rows);
            pq_linear_forward_ref(&L, x, T, y0);
            pq_linear_forward(&L, x, T, y1, ws, pool);
            double e = pq_rel_l2(y1, y0, (size_t)T * rows);
            PQ_CHECK(e < TOL, "linear %s %dx%d%s T=%d threads=%d (%s) vs ref: rel L2 %.1e", kind, rows, cols,
                     with_bias ? " +bias" : "", T, nt, T <= PQ_GEMV_MAX_T ? "gemv" : "panels+sgemm", e);
            pq_free(x); pq_free(y0); pq_free(y1);
        }
        // packed once (pq_linear_pack_panels): the same bits, over one and two chunks of tokens
        for (int T = 200; L.act.type == PQ_ACTQ_NONE && T <= 700; T += 500) {
            float *x = pq_alloc((size_t)T * cols * 4), *y0 = pq_alloc((size_t)T * rows * 4),
                  *y1 = pq_alloc((size_t)T * rows * 4), *panels = pq_alloc(pq_linear_panels_bytes(&L, 0));
            pq_test_fill(x, (size_t)T * cols, 1.0f);
            pq_test_poison(y1, (size_t)T * rows);
            pq_linear_forward(&L, x, T, y0, ws, pool);
            pq_linear_pack_panels(&L, panels, 0, ws, pool);
            pq_linear_forward(&L, x, T, y1, ws, pool);
            L.panels = NULL;
            PQ_CHECK(!memcmp(y0, y1, (size_t)T * rows * 4), "linear %s %dx%d%s T=%d threads=%d: packed once = packed "
                     "per chunk, bit for bit", kind, rows, cols, with_bias ? " +bias" : "", T, nt);
            pq_free(x); pq_free(y0); pq_free(y1); pq_free(panels);
        }
        for (int i = 0; L.act.type == PQ_ACTQ_NONE && i < 2; i++)
            check_linear_bf16(&L, kind, 200 + 500 * i, nt, ws, pool, &bf16_out[i]);
        pq_free(ws);
        pq_pool_free(pool);
    }
    if (L.fmt == PQ_W_QPACK) free_qpack(&qw);
    pq_free(data); pq_free(scales); pq_free(bias); pq_free(bf16_out[0]); pq_free(bf16_out[1]);
}

// pq_linear_forward_group: each member's output equal bit for bit to
// pq_linear_forward's (same kernels, same row split), mixed formats, rows
// not multiples of the task size, one and two threads, GEMV and GEMM sizes
// (W8A8 members that quantize their input alike share it; more tokens than
// one W8A8 chunk).
static void check_linear_group(const char *const *kinds, const int *rows, int n, int cols) {
    static const int Ts[] = {1, 4, 37, 530};
    qweight qw[PQ_LINEAR_GROUP_MAX];
    memset(qw, 0, sizeof qw);
    pq_linear L[PQ_LINEAR_GROUP_MAX];
    const pq_linear *W[PQ_LINEAR_GROUP_MAX];
    void *data[PQ_LINEAR_GROUP_MAX];
    float *scales[PQ_LINEAR_GROUP_MAX], *bias = pq_alloc((size_t)rows[0] * 4);
    pq_test_fill(bias, rows[0], 1.0f);
    for (int i = 0; i < n; i++) {
        L[i] = make_linear(kinds[i], rows[i], cols, &qw[i], &data[i], &scales[i]);
        W[i] = &L[i];
    }
    L[0].bias = bias;
    for (int nt = 1; nt <= 2; nt++) {
        pq_pool *pool;
        pq_pool_create(nt, &pool);
        size_t wsb = 0;
        for (int i = 0; i < n; i++) wsb = pq_linear_workspace_bytes(&L[i], nt) > wsb ? pq_linear_workspace_bytes(&L[i], nt) : wsb;
        void *ws = pq_alloc(wsb);
        for (int k = 0; k < 3 + (kinds[0][0] == 'a'); k++) { // more than a W8A8 chunk: W8A8 groups
            int T = Ts[k], same = 1;
            float *x = pq_alloc((size_t)T * cols * 4), *y0[PQ_LINEAR_GROUP_MAX], *y1[PQ_LINEAR_GROUP_MAX];
            pq_test_fill(x, (size_t)T * cols, 1.0f);
            for (int i = 0; i < n; i++) {
                y0[i] = pq_alloc((size_t)T * rows[i] * 4);
                y1[i] = pq_alloc((size_t)T * rows[i] * 4);
                pq_test_poison(y1[i], (size_t)T * rows[i]);
                pq_linear_forward(&L[i], x, T, y0[i], ws, pool);
            }
            pq_linear_forward_group(W, y1, n, x, T, ws, pool);
            for (int i = 0; i < n; i++) {
                same = same && !memcmp(y0[i], y1[i], (size_t)T * rows[i] * 4);
                pq_free(y0[i]); pq_free(y1[i]);
            }
            PQ_CHECK(same, "linear group %s,%s%s%s x %d T=%d threads=%d equals pq_linear_forward of each, bit for bit",
                     kinds[0], kinds[1], n > 2 ? "," : "", n > 2 ? kinds[2] : "", cols, T, nt);
            pq_free(x);
        }
        pq_free(ws);
        pq_pool_free(pool);
    }
    for (int i = 0; i < n; i++) {
        if (L[i].fmt == PQ_W_QPACK) free_qpack(&qw[i]);
        pq_free(data[i]); pq_free(scales[i]);
    }
    pq_free(bias);
}

int main(void) {
    pq_test_seed();
    const char *forced = getenv("PQ_ISA");
    printf("# isa %s%s\n", pq_isa_name(pq_cpu_isa()), forced ? " (PQ_ISA)" : "");
    PQ_CHECK(pq_blas_init() == PQ_OK, "OpenBLAS loads (%s)", pq_last_error());
    check_fp8_codec();
    check_fp8_all_codes();
    check_fp8_int8(37, 172);
    check_fp8_int8(50, 257);
    check_fp8_int8(9, 100);

    static const int bitss[] = {2, 3, 4, 5, 8}, groups[] = {32, 64, 128, 0}, colss[] = {172, 100, 257, 512};
    int k = 0;
    for (int bi = 0; bi < 5; bi++)
        for (int gi = 0; gi < 4; gi++)
            for (int asym = 0; asym < 2; asym++)
                for (int gidx = 0; gidx < 2; gidx++) {
                    int b = bitss[bi];
                    if (b == 4 || b == 8)
                        for (int ci = 0; ci < 4; ci++) check_qpack(b, groups[gi], asym, gidx, colss[ci]);
                    else check_qpack(b, groups[gi], asym, gidx, colss[k++ % 4]);
                }
    check_fixed_point();
    // shapes with several blocks per group and several groups per block
    check_qpack(4, 256, 0, 0, 1024);
    check_qpack(4, 32, 1, 0, 1024);
    check_qpack(2, 64, 1, 0, 1000);
    check_qpack(6, 96, 1, 0, 960);

    static const char *kinds[] = {"q4g128", "q4g32a", "q4g128x", "q4g0", "q3g64a", "q8g0", "q2g32a", "q5g128ax",
                                  "int8", "fp8", "fp8t"};
    for (int i = 0; i < 11; i++) {
        check_linear(kinds[i], 300, 172, 0);
        check_linear(kinds[i], 517, 257, 1);
    }
    check_linear("q4g128", 64, 512, 1);
    check_linear("q4g32a", 100, 100, 0);
    check_linear_group((const char *[]){"q4g64", "q4g64", "q4g64"}, (const int[]){576, 192, 192}, 3, 576);
    check_linear_group((const char *[]){"q4g32a", "q8g0", "q3g64ax"}, (const int[]){300, 37, 517}, 3, 257);
    check_linear_group((const char *[]){"int8", "q4g128"}, (const int[]){172, 300}, 2, 172);
    check_linear_group((const char *[]){"a8i", "a8i", "a8i"}, (const int[]){576, 192, 192}, 3, 576);
    check_linear_group((const char *[]){"a8is", "a8is"}, (const int[]){300, 37}, 2, 172);
    check_linear_group((const char *[]){"a8i", "a8is"}, (const int[]){100, 300}, 2, 257);
    check_linear_group((const char *[]){"a8f", "a8f"}, (const int[]){130, 65}, 2, 100);

    if (!forced) {
        pq_test_rerun_with_isa("all", "scalar", NULL);
        pq_test_rerun_with_isa("all", "avx2", NULL);
    }
    return pq_test_done();
}
