// W8A8 kernels (kernels/w8a8.h) and their use through kernels/linear.h:
// the activation quantizers against hand-computed codes and byte for byte
// across ISAs, the INT8 product exactly equal to the _ref (int32 sums and
// scaled floats, memcmp), the FP8 product within the fp32-summation bound
// of its exact spec, and pq_linear_forward against pq_linear_forward_ref.
#include <cpuid.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/half.h"
#include "common/sys.h"
#include "kernels/blas.h"
#include "kernels/cpu.h"
#include "kernels/linear.h"
#include "kernels/w8a8.h"
#include "tests/test.h"

// The ISA entry points are called directly when the CPU has the ISA.
static int have_avx2(void) {
    unsigned a, b, c, d;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __get_cpuid(1, &a, &b, &c, &d) &&
           (c & bit_F16C);
}
static int have_avx512(void) {
    return have_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni");
}

typedef void (*quant_fn)(const float *, int, int, float, pq_w8a8_act *);

typedef struct {
    void *mem;
    pq_w8a8_act a;
    size_t bytes;
} act_buf;

// A poisoned act buffer for T x cols.
static act_buf act_new(int T, int cols) {
    act_buf b;
    b.bytes = pq_w8a8_act_bytes(T, cols);
    b.mem = pq_alloc(b.bytes);
    memset(b.mem, 0xa5, b.bytes);
    b.a = pq_w8a8_act_view(b.mem, T, cols);
    return b;
}

static int act_equal(const pq_w8a8_act *x, const pq_w8a8_act *y) {
    return !memcmp(x->q, y->q, (size_t)x->T * x->ld) && !memcmp(x->scale, y->scale, (size_t)x->T * 4) &&
           !memcmp(x->sum, y->sum, (size_t)x->T * 4);
}

// ---- activation quantizers: hand-computed cases ------------------------------

static void check_int8_cases(void) {
    // amax 127: 127 / amax = 1 exactly, so the codes are rne(x)
    const float x[] = {127, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.49f, -127, 126.5f};
    const int8_t want[] = {127, 0, 2, 2, 0, -2, -2, 3, -127, 126};
    int n = 10;
    act_buf b = act_new(1, n);
    pq_actq_int8_ref(x, 1, n, 0, &b.a);
    int sum = 0;
    for (int i = 0; i < n; i++) sum += want[i];
    PQ_CHECK(!memcmp(b.a.q, want, (size_t)n) && b.a.scale[0] == 1.0f && b.a.sum[0] == sum && b.a.q[n] == 0 &&
                 b.a.q[b.a.ld - 1] == 0,
             "int8 dynamic: ties to even, scale amax/127, sum, zero pads");
    // static scale 0.5: x / 0.5, saturating to [-128, 127]
    const float xs[] = {0.25f, 0.75f, 1.25f, 100, -100, -64, 63.75f, -63.75f};
    const int8_t ws[] = {0, 2, 2, 127, -128, -128, 127, -128};
    act_buf s = act_new(1, 8);
    pq_actq_int8_ref(xs, 1, 8, 0.5f, &s.a);
    PQ_CHECK(!memcmp(s.a.q, ws, 8) && s.a.scale[0] == 0.5f, "int8 static 0.5: rne, clamp to [-128, 127]");
    // a zero row; a row with a NaN; a row with an Inf; a denormal amax (127/amax = Inf: 0 * Inf codes 0)
    float rows[4][3] = {{0, -0.0f, 0}, {1, NAN, 2}, {1, -INFINITY, 2}, {1e-40f, 0, -1e-40f}};
    act_buf z = act_new(4, 3);
    pq_actq_int8_ref(&rows[0][0], 4, 3, 0, &z.a);
    const int8_t *q = z.a.q;
    size_t ld = (size_t)z.a.ld;
    PQ_CHECK(z.a.scale[0] == 0 && !q[0] && !q[1] && !q[2] && z.a.sum[0] == 0, "int8: a zero row has scale 0, codes 0");
    PQ_CHECK(isnan(z.a.scale[1]) && isnan(z.a.scale[2]) && !q[ld] && !q[ld + 1] && !q[ld + 2] && !q[2 * ld] &&
                 !q[2 * ld + 2],
             "int8: a NaN or an Inf in a token gives scale NaN and codes 0");
    // 127 / 1e-40 overflows to Inf: +-Inf saturate to 127 / -128, 0 * Inf = NaN codes 0 (as cvt.rni.sat)
    PQ_CHECK(q[3 * ld] == 127 && q[3 * ld + 1] == 0 && q[3 * ld + 2] == -128 && z.a.scale[3] == 1e-40f / 127,
             "int8: a denormal amax: codes 127, 0, -128");
    pq_free(b.mem); pq_free(s.mem); pq_free(z.mem);
}

static void check_fp8_cases(void) {
    // amax 448: scale 1, the codes are e4m3(x)
    const float x[] = {448, 1.0f, 1.0625f, 1.1875f, -3.0f, 0x1p-9f, 0x1p-10f, 0x3p-10f, -0.0f};
    const uint8_t want[] = {0x7e, 0x38, 0x38, 0x3a, 0xc4, 0x01, 0x00, 0x02, 0x80};
    act_buf b = act_new(1, 9);
    pq_actq_fp8_ref(x, 1, 9, 0, &b.a);
    PQ_CHECK(!memcmp(b.a.q, want, 9) && b.a.scale[0] == 1.0f, "fp8 dynamic: scale amax/448, e4m3 ties to even");
    // static 2: x * 0.5, saturating at 448
    const float xs[] = {2, 1000, -1e30f, 0x1p-9f};
    const uint8_t ws[] = {0x38, 0x7e, 0xfe, 0x00};
    act_buf s = act_new(1, 4);
    pq_actq_fp8_ref(xs, 1, 4, 2.0f, &s.a);
    PQ_CHECK(!memcmp(s.a.q, ws, 4) && s.a.scale[0] == 2.0f, "fp8 static 2: x/2, saturating");
    float rows[3][2] = {{0, 0}, {1e-6f, -1e-6f}, {NAN, 1}};
    act_buf z = act_new(3, 2);
    pq_actq_fp8_ref(&rows[0][0], 3, 2, 0, &z.a);
    const uint8_t *q = (const uint8_t *)z.a.q;
    size_t ld = (size_t)z.a.ld;
    // 1e-6 * 448 * 512 = 0.2294 = 1.835 * 2^-3: mantissa rne(0.835 * 8) = 7, exponent -3 + 7: code 0x27
    PQ_CHECK(z.a.scale[0] == PQ_FP8_MIN_SCALE && !q[0] && !q[1], "fp8: a zero row has the floor scale, codes 0");
    PQ_CHECK(z.a.scale[1] == PQ_FP8_MIN_SCALE && q[ld] == 0x27 && q[ld + 1] == 0xa7,
             "fp8: amax below 448/(448*512) uses the floor scale 1/(448*512)");
    PQ_CHECK(isnan(z.a.scale[2]) && !q[2 * ld] && !q[2 * ld + 1], "fp8: a NaN token gives scale NaN, codes 0");
    pq_free(b.mem); pq_free(s.mem); pq_free(z.mem);
}

// ---- activation quantizers: every version byte for byte ----------------------

// Rows of varied magnitude (1e-30 .. 1e30), some zero, one with a NaN, one
// with an Inf; with `bits`, raw random finite bit patterns.
static void fill_tokens(float *x, int T, int cols, int bits) {
    for (int t = 0; t < T; t++) {
        float *r = x + (size_t)t * cols, mag = powf(10.0f, (float)(pq_test_u64() % 61) - 30.0f);
        for (int c = 0; c < cols; c++) {
            if (!bits) { r[c] = mag * pq_test_normal(); continue; }
            uint32_t u;
            do u = (uint32_t)pq_test_u64(); while ((u & 0x7f800000u) == 0x7f800000u);
            r[c] = pq_f32_from_bits(u);
        }
        if (t % 7 == 3) memset(r, 0, (size_t)cols * 4);
    }
    if (T > 5) x[(size_t)5 * cols + cols / 2] = NAN;
    if (T > 6) x[(size_t)6 * cols] = -INFINITY;
}

static void check_quant_isa(const char *what, quant_fn ref, quant_fn cpu, quant_fn avx2, quant_fn avx512, int T,
                            int cols, float static_scale, int bits) {
    float *x = pq_alloc((size_t)T * cols * 4);
    fill_tokens(x, T, cols, bits);
    act_buf want = act_new(T, cols), got = act_new(T, cols);
    ref(x, T, cols, static_scale, &want.a);
    // the _cpu version under a scalar dispatch is the _ref itself: skipped, not compared with itself
    quant_fn fns[3] = {pq_cpu_isa() > PQ_ISA_SCALAR ? cpu : NULL, have_avx2() ? avx2 : NULL,
                       have_avx512() ? avx512 : NULL};
    const char *names[3] = {"cpu", "avx2", "avx512"};
    for (int k = 0; k < 3; k++) {
        if (!fns[k]) {
            pq_test_skip("%s %s: %s", what, names[k], k ? "the CPU lacks it" : "the dispatch runs the _ref itself");
            continue;
        }
        memset(got.mem, 0x5a, got.bytes);
        fns[k](x, T, cols, static_scale, &got.a);
        PQ_CHECK(act_equal(&got.a, &want.a), "%s %s T=%d cols=%d%s%s == ref (codes, scales, sums)", what, names[k],
                 T, cols, static_scale > 0 ? " static" : "", bits ? " random bits" : "");
    }
    pq_free(x); pq_free(want.mem); pq_free(got.mem);
}

// ---- INT8 x INT8 ---------------------------------------------------------------

typedef struct {
    int8_t *q;
    float *scales, *bias;
    pq_int8_weight w;
} int8w;

static int8w int8_new(int rows, int cols, int extreme) {
    int8w m;
    m.q = pq_alloc((size_t)rows * cols);
    m.scales = pq_alloc((size_t)rows * 4);
    m.bias = pq_alloc((size_t)rows * 4);
    for (size_t i = 0; i < (size_t)rows * cols; i++) m.q[i] = extreme ? -128 : (int8_t)pq_test_u64();
    for (int r = 0; r < rows; r++) m.scales[r] = 0.001f + 0.01f * fabsf(pq_test_uniform()), m.bias[r] = pq_test_normal();
    m.w = (pq_int8_weight){rows, cols, m.q, m.scales};
    return m;
}

static void int8_free(int8w *m) { pq_free(m->q); pq_free(m->scales); pq_free(m->bias); }

// Rows [r0, r0 + n) of a rows-row weight, T tokens, ldy = rows + 3; the
// int32 sums and the floats (with and without bias) of every version equal
// the _ref's, poison included where nothing is written.
static void check_gemm(int rows, int cols, int T, int r0, int n, int extreme) {
    int8w m = int8_new(rows, cols, extreme);
    float *x = pq_alloc((size_t)T * cols * 4);
    act_buf a = act_new(T, cols);
    if (extreme) { // every code -128: the largest |sum| there is, 16384 * cols
        memset(a.a.q, 0, (size_t)T * a.a.ld);
        for (int t = 0; t < T; t++) memset(a.a.q + (size_t)t * a.a.ld, 0x80, (size_t)cols), a.a.sum[t] = -128 * cols,
                                    a.a.scale[t] = 0.5f;
    } else {
        fill_tokens(x, T, cols, 0);
        // static scales put -128 codes in; dynamic ones the usual +-127
        pq_actq_int8_ref(x, T, cols, T % 2 ? 0 : 0.01f, &a.a);
    }
    int ldy = rows + 3;
    size_t ny = (size_t)T * ldy;
    int32_t *acc[5];
    float *y[5];
    for (int k = 0; k < 5; k++) acc[k] = pq_alloc(ny * 4), y[k] = pq_alloc(ny * 4);
    void *scratch = pq_alloc(pq_w8a8_gemm_scratch_bytes(n, cols));
    const char *names[5] = {"ref", "cpu", "avx2", "avx512", "amx"};
    for (int bias = 0; bias < 2; bias++) {
        for (int k = 0; k < 5; k++) {
            if ((k == 2 && !have_avx2()) || (k == 3 && !have_avx512()) || (k == 4 && !pq_cpu_amx())) continue;
            if (!bias) memset(acc[k], 0x7f, ny * 4);
            pq_test_poison(y[k], ny);
            pq_w8a8_out oa = {NULL, acc[k], ldy, NULL}, oy = {y[k], NULL, ldy, bias ? m.bias : NULL};
            const pq_w8a8_out *os[2] = {&oa, &oy};
            for (int i = bias; i < 2; i++) {
                if (k == 0) pq_w8a8_gemm_ref(&m.w, r0, n, &a.a, os[i]);
                if (k == 1) pq_w8a8_gemm_cpu(&m.w, r0, n, &a.a, os[i], scratch);
                if (k == 2) pq_w8a8_gemm_avx2(&m.w, r0, n, &a.a, os[i]);
                if (k == 3) pq_w8a8_gemm_avx512(&m.w, r0, n, &a.a, os[i], scratch);
                if (k == 4) pq_w8a8_gemm_amx(&m.w, r0, n, &a.a, os[i], scratch);
            }
        }
        for (int k = 1; k < 5; k++) {
            if (k == 4 && !pq_cpu_amx()) continue; // one skip line for all shapes, in main
            if ((k == 1 && pq_cpu_isa() == PQ_ISA_SCALAR) || (k == 2 && !have_avx2()) || (k == 3 && !have_avx512())) {
                pq_test_skip("w8a8 gemm %s: %s", names[k], k == 1 ? "the dispatch runs the _ref itself"
                                                                   : "the CPU lacks it");
                continue;
            }
            int same = (bias || !memcmp(acc[k], acc[0], ny * 4)) && !memcmp(y[k], y[0], ny * 4);
            PQ_CHECK(same, "w8a8 gemm %s %dx%d rows [%d, %d) T=%d%s%s: %s == ref exactly", names[k], rows, cols, r0,
                     r0 + n, T, extreme ? " all -128" : "", bias ? " +bias" : "",
                     bias ? "floats" : "int32 sums and floats");
        }
    }
    // the int32 sums against an int64 sum (the _ref's own arithmetic is the spec, this checks it too)
    int ok = 1;
    for (int t = 0; t < T && ok; t++)
        for (int r = r0; r < r0 + n; r++) {
            int64_t s = 0;
            for (int c = 0; c < cols; c++) s += (int64_t)a.a.q[(size_t)t * a.a.ld + c] * m.q[(size_t)r * cols + c];
            if (s != acc[0][(size_t)t * ldy + r]) { ok = 0; break; }
        }
    PQ_CHECK(ok, "w8a8 gemm ref %dx%d T=%d: int32 sums == int64 sums", rows, cols, T);
    for (int k = 0; k < 5; k++) pq_free(acc[k]), pq_free(y[k]);
    pq_free(scratch); pq_free(x); pq_free(a.mem);
    int8_free(&m);
}

// ---- FP8 x FP8 ------------------------------------------------------------------

static uint8_t random_fp8(void) {
    uint8_t b;
    do b = (uint8_t)pq_test_u64(); while ((b & 0x7f) == 0x7f);
    return b;
}

// E4M3 -> BF16, every code: the scalar spec equals the exact decode, and the
// AMX path's vector decoding (a row of all 256 codes, twice, so that some
// land in a tail of fewer than 32 columns) equals the spec, zeros past cols.
static void check_fp8_bf16(void) {
    int bad = 0;
    for (int b = 0; b < 256; b++) {
        uint16_t h = pq_fp8_e4m3_bf16((uint8_t)b);
        uint32_t u = (uint32_t)h << 16;
        float f, want = pq_fp8_e4m3_decode((uint8_t)b);
        memcpy(&f, &u, 4);
        bad += isnan(want) ? !isnan(f) : memcmp(&f, &want, 4) != 0;
    }
    PQ_CHECK(bad == 0, "pq_fp8_e4m3_bf16: every code's BF16 is its exact value (%d differ)", bad);
    if (!pq_cpu_amx()) return;
    int cols = 500, ld = 512;
    act_buf a = act_new(2, cols);
    for (int t = 0; t < 2; t++)
        for (int c = 0; c < cols; c++) a.a.q[(size_t)t * a.a.ld + c] = (int8_t)(uint8_t)((c + 77 * t) % 256);
    uint16_t *xb = pq_alloc((size_t)2 * ld * 2);
    memset(xb, 0xff, (size_t)2 * ld * 2);
    pq_w8a8_fp8_decode_amx(&a.a, 0, 2, xb);
    bad = 0;
    for (int t = 0; t < 2; t++)
        for (int c = 0; c < ld; c++)
            bad += xb[(size_t)t * ld + c] != (c < cols ? pq_fp8_e4m3_bf16((uint8_t)a.a.q[(size_t)t * a.a.ld + c]) : 0);
    PQ_CHECK(bad == 0, "pq_w8a8_fp8_decode_amx: every code as pq_fp8_e4m3_bf16, zeros to 32 columns (%d differ)", bad);
    pq_free(xb); pq_free(a.mem);
}

// pq_w8a8_fp8_cpu (fp32 sums) against the exact spec: per element
// |got - want| <= |sx sw| * cols * 2^-24 * sum_c |products| (any order of
// fp32 additions) + 2^-22 |want| (the epilogue's three roundings and the
// spec's own rounding of the sum to float).
static void check_fp8(int rows, int cols, int T, int per_channel) {
    uint8_t *q = pq_alloc((size_t)rows * cols);
    float *scales = pq_alloc((size_t)rows * 4), *bias = pq_alloc((size_t)rows * 4);
    for (size_t i = 0; i < (size_t)rows * cols; i++) q[i] = random_fp8();
    for (int r = 0; r < rows; r++) scales[r] = 0.001f + 0.01f * fabsf(pq_test_uniform()), bias[r] = pq_test_normal();
    pq_fp8_weight w = {rows, cols, q, scales, per_channel};
    float *x = pq_alloc((size_t)T * cols * 4);
    void *xd = pq_alloc(pq_w8a8_fp8_decoded_bytes(T, cols));
    for (size_t i = 0; i < (size_t)T * cols; i++) x[i] = pq_test_normal();
    x[3] = 3000.0f; // token 0 with an outlier: most of its codes subnormal or 0
    act_buf a = act_new(T, cols);
    pq_actq_fp8_cpu(x, T, cols, 0, &a.a);
    pq_w8a8_fp8_decode_cpu(&a.a, 0, 1, xd);
    if (T > 1) pq_w8a8_fp8_decode_cpu(&a.a, 1, T - 1, xd);
    float *want = pq_alloc((size_t)T * rows * 4), *got = pq_alloc((size_t)T * rows * 4);
    void *scratch = pq_alloc(pq_w8a8_fp8_scratch_bytes(rows, cols));
    pq_w8a8_out ow = {want, NULL, rows, bias}, og = {got, NULL, rows, bias};
    pq_test_poison(got, (size_t)T * rows);
    pq_w8a8_fp8_ref(&w, 0, rows, &a.a, &ow);
    pq_w8a8_fp8_cpu(&w, 0, rows, &a.a, xd, &og, scratch);
    int ok = 1;
    double worst = 0;
    float value[256];
    for (int b = 0; b < 256; b++) value[b] = pq_fp8_e4m3_decode((uint8_t)b);
    for (int t = 0; t < T; t++)
        for (int r = 0; r < rows; r++) {
            double mag = 0;
            for (int c = 0; c < cols; c++)
                mag += fabs((double)value[(uint8_t)a.a.q[(size_t)t * a.a.ld + c]] * value[q[(size_t)r * cols + c]]);
            double sxw = fabs((double)a.a.scale[t] * scales[per_channel ? r : 0]);
            double g = got[(size_t)t * rows + r], e = want[(size_t)t * rows + r];
            double lim = sxw * cols * 0x1p-24 * mag + 0x1p-22 * fabs(e), err = fabs(g - e);
            if (!(err <= lim)) ok = 0;
            if (lim > 0 && err / lim > worst) worst = err / lim;
        }
    PQ_CHECK(ok, "w8a8 fp8 cpu %dx%d T=%d %s (%s) within the fp32-sum bound of the exact spec (worst %.2f of it)",
             rows, cols, T, per_channel ? "channel" : "tensor",
             T <= PQ_GEMV_MAX_T ? "gemv" : pq_cpu_amx() ? "amx" : "sgemm", worst);
    // a NaN weight code makes its row NaN, as in the spec
    q[cols + cols / 2] = 0x7f;
    pq_test_poison(got, (size_t)T * rows);
    pq_w8a8_fp8_ref(&w, 0, rows, &a.a, &ow);
    pq_w8a8_fp8_cpu(&w, 0, rows, &a.a, xd, &og, scratch);
    PQ_CHECK(isnan(want[1]) && isnan(got[1]) && !isnan(got[0]) && !isnan(want[0]),
             "w8a8 fp8 T=%d: a NaN weight code gives NaN in its row only", T);
    pq_free(q); pq_free(scales); pq_free(bias); pq_free(x); pq_free(xd); pq_free(want); pq_free(got);
    pq_free(scratch); pq_free(a.mem);
}

// ---- pq_linear_forward -------------------------------------------------------------

static void check_linear(pq_actq_type type, float static_scale, int rows, int cols) {
    static const int Ts[] = {1, 4, 37, 600};
    int8w m = int8_new(rows, cols, 0);
    uint8_t *f8 = pq_alloc((size_t)rows * cols);
    for (size_t i = 0; i < (size_t)rows * cols; i++) f8[i] = random_fp8();
    pq_linear L = {.rows = rows, .cols = cols, .act = {type, static_scale}, .bias = m.bias};
    if (type == PQ_ACTQ_INT8) L.fmt = PQ_W_INT8, L.i8 = m.w;
    else L.fmt = PQ_W_FP8, L.f8 = (pq_fp8_weight){rows, cols, f8, m.scales, 1};
    for (int nt = 1; nt <= 2; nt++) {
        pq_pool *pool;
        pq_pool_create(nt, &pool);
        void *ws = pq_alloc(pq_linear_workspace_bytes(&L, nt));
        for (int k = 0; k < 4; k++) {
            int T = Ts[k];
            float *x = pq_alloc((size_t)T * cols * 4), *y0 = pq_alloc((size_t)T * rows * 4),
                  *y1 = pq_alloc((size_t)T * rows * 4);
            pq_test_fill(x, (size_t)T * cols, 1.0f);
            pq_test_poison(y1, (size_t)T * rows);
            pq_linear_forward_ref(&L, x, T, y0);
            pq_linear_forward(&L, x, T, y1, ws, pool);
            const char *path = T <= PQ_GEMV_MAX_T ? "gemv" : T > 512 ? "2 chunks" : "gemm";
            if (type == PQ_ACTQ_INT8) {
                PQ_CHECK(!memcmp(y0, y1, (size_t)T * rows * 4), "linear w8a8 int8%s %dx%d T=%d threads=%d (%s) == ref",
                         static_scale > 0 ? " static" : "", rows, cols, T, nt, path);
            } else { // fp32 sums of cols exact products, scale ~ amax/448 * 0.01: see check_fp8 for a strict bound
                double e = pq_rel_l2(y1, y0, (size_t)T * rows);
                PQ_CHECK(e < 1e-5, "linear w8a8 fp8%s %dx%d T=%d threads=%d (%s) vs ref: rel L2 %.1e",
                         static_scale > 0 ? " static" : "", rows, cols, T, nt, path, e);
            }
            pq_free(x); pq_free(y0); pq_free(y1);
        }
        pq_free(ws);
        pq_pool_free(pool);
    }
    pq_free(f8);
    int8_free(&m);
}

// The whole binary again in a child process with PQ_ISA=isa (the _cpu
// dispatch and pq_linear_forward then take that ISA's kernels).
static void rerun_with_isa(const char *isa) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("PQ_ISA", isa, 1);
        execl("/proc/self/exe", "test_w8a8", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    PQ_CHECK(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "all checks pass under PQ_ISA=%s", isa);
}

int main(void) {
    pq_test_seed();
    const char *forced = getenv("PQ_ISA");
    printf("# isa %s%s%s\n", pq_isa_name(pq_cpu_isa()), pq_cpu_amx() ? "+amx" : "", forced ? " (PQ_ISA)" : "");
    PQ_CHECK(pq_blas_init() == PQ_OK, "OpenBLAS loads (%s)", pq_last_error());
    check_int8_cases();
    check_fp8_cases();
    static const int qcols[] = {1, 7, 64, 172, 2048, 5632};
    for (int i = 0; i < 6; i++) {
        check_quant_isa("actq int8", pq_actq_int8_ref, pq_actq_int8_cpu, pq_actq_int8_avx2, pq_actq_int8_avx512, 9,
                        qcols[i], 0, 0);
        check_quant_isa("actq fp8", pq_actq_fp8_ref, pq_actq_fp8_cpu, pq_actq_fp8_avx2, pq_actq_fp8_avx512, 9,
                        qcols[i], 0, 0);
    }
    check_quant_isa("actq int8", pq_actq_int8_ref, pq_actq_int8_cpu, pq_actq_int8_avx2, pq_actq_int8_avx512, 9, 172,
                    0.02f, 0);
    // static scale 1: e4m3 of random finite floats of every exponent (subnormal, saturating, ...)
    check_quant_isa("actq fp8", pq_actq_fp8_ref, pq_actq_fp8_cpu, pq_actq_fp8_avx2, pq_actq_fp8_avx512, 4, 4099,
                    1.0f, 1);
    check_quant_isa("actq int8", pq_actq_int8_ref, pq_actq_int8_cpu, pq_actq_int8_avx2, pq_actq_int8_avx512, 4, 4099,
                    1.0f, 1);

    if (!pq_cpu_amx()) pq_test_skip("w8a8 gemm amx: the CPU (or PQ_ISA) lacks AMX tiles");
    static const int ks[] = {64, 172, 2048, 5632}, Ts[] = {1, 3, 37, 512};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) check_gemm(77, ks[i], Ts[j], 5, 77 - 5 - 3, 0);
    check_gemm(16, 5632, 13, 0, 16, 1);
    check_gemm(50, 100, 27, 3, 47, 0); // a token block of 16 + 11 (two AMX tiles of different heights)
    check_gemm(33, 8, 2, 0, 33, 1);

    check_fp8_bf16();
    for (int j = 0; j < 4; j++) check_fp8(45, 172, Ts[j], j % 2);
    check_fp8(50, 100, 27, 1); // a token block of 16 + 11, 100 columns (a tail of 4 past 96)
    check_fp8(40, 2048, 37, 1);

    check_linear(PQ_ACTQ_INT8, 0, 100, 172);
    check_linear(PQ_ACTQ_INT8, 0.05f, 100, 172);
    check_linear(PQ_ACTQ_INT8, 0, 300, 1030);
    check_linear(PQ_ACTQ_FP8, 0, 100, 172);
    check_linear(PQ_ACTQ_FP8, 0.01f, 100, 172);
    check_linear(PQ_ACTQ_FP8, 0, 576, 1536);
    check_linear(PQ_ACTQ_FP8, 0, 1536, 576);
    if (!forced) {
        rerun_with_isa("scalar");
        rerun_with_isa("avx2");
        if (pq_cpu_amx()) rerun_with_isa("avx512"); // the VNNI GEMM through the dispatch
    }
    return pq_test_done();
}
