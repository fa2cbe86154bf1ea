// RTN quantization (quant/rtn.c) and the scheme table (formats/scheme.c):
// hand-computed codes, RNE ties, clamping, ragged groups, asymmetric zero
// points, FP8 saturation, NaN/Inf refused by name, determinism across thread
// counts, scales exactly representable in their stored dtype, and bits per
// weight.
#include "tests/test.h"

#include "common/half.h"
#include "common/sys.h"
#include "kernels/cpu.h"
#include "kernels/fp8.h"
#include "quant/rtn.h"
#include "formats/scheme.h"

// RTN into a new quantized tensor q (the caller frees it, also on error).
static pq_status rtn_new(const float *w, int rows, int cols, const pq_scheme *s, pq_dtype dt, const char *name,
                         pq_pool *pool, pq_qtensor *q, double *err) {
    pq_status st = pq_qtensor_init(q, s, rows, cols, dt);
    return st != PQ_OK ? st : pq_rtn_quantize(w, s, name, pool, q, err);
}

static pq_scheme int_scheme(int bits, int group, int sym) {
    return (pq_scheme){PQ_SCHEME_W4A16, bits, 0, group, sym, PQ_ACT_NONE, PQ_ACTORDER_NONE, PQ_OBSERVER_MINMAX, 0};
}

// The dequantized matrix of q as the engine's specification computes it.
static float *dequant(const pq_qtensor *q) {
    float *w = malloc((size_t)q->rows * q->cols * sizeof(float));
    pq_linear L = pq_qtensor_linear(q);
    pq_linear_rows_ref(&L, 0, q->rows, w);
    return w;
}

static void test_sym_hand(void) {
    // s = 7.5 / 7.5 = 1 exactly: codes are rne(w) clamped to [-8, 7]
    const float w[8] = {7.5f, -7.5f, 2.5f, -0.5f, 3.49f, 1.5f, 0.0f, -3.5f};
    pq_scheme s = int_scheme(4, PQ_GROUP_CHANNEL, 1);
    pq_qtensor q;
    PQ_CHECK(rtn_new(w, 1, 8, &s, PQ_DT_F16, "hand", NULL, &q, NULL) == PQ_OK, "int4 sym quantizes");
    // unsigned codes 15 0 10 8 11 10 8 4, low nibble first
    PQ_CHECK(q.packed[0] == 0x48AB8A0Fu && q.scales[0] == 1.0f && !q.zeros,
             "int4 sym: hand codes (7.5 clamps to 7, -7.5 ties to -8, 2.5 to 2, 1.5 to 2): word %08x scale %g",
             q.packed[0], q.scales[0]);
    float *d = dequant(&q);
    const float want[8] = {7, -8, 2, 0, 3, 2, 0, -4};
    PQ_CHECK(memcmp(d, want, sizeof want) == 0, "int4 sym: dequantized values");
    free(d);
    pq_qtensor_free(&q);

    // int8 per channel (w8a8 storage): s = 127.5 / 127.5 = 1
    const float w8[4] = {127.5f, -127.5f, 0.5f, 1.5f};
    pq_scheme s8;
    PQ_CHECK(pq_scheme_make("w8a8", PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, &s8) == PQ_OK, "w8a8 scheme");
    PQ_CHECK(rtn_new(w8, 1, 4, &s8, PQ_DT_F16, "hand8", NULL, &q, NULL) == PQ_OK && q.fmt == PQ_W_INT8,
             "int8 quantizes to PQ_W_INT8");
    PQ_CHECK(q.i8[0] == 127 && q.i8[1] == -128 && q.i8[2] == 0 && q.i8[3] == 2 && q.scales[0] == 1.0f,
             "int8: 127.5 clamps to 127, -127.5 ties to -128, 0.5 to 0, 1.5 to 2 (%d %d %d %d)", q.i8[0], q.i8[1],
             q.i8[2], q.i8[3]);
    pq_qtensor_free(&q);
}

static void test_asym_hand(void) {
    // lo = -3, hi = 12: s = 15 / 15 = 1, z = rne(-8 - (-3)) = -5
    const float w[5] = {-3.0f, 0.0f, 4.5f, 12.0f, 5.5f};
    pq_scheme s = int_scheme(4, PQ_GROUP_CHANNEL, 0);
    pq_qtensor q;
    PQ_CHECK(rtn_new(w, 1, 5, &s, PQ_DT_F16, "asym", NULL, &q, NULL) == PQ_OK && q.zeros,
             "int4 asym quantizes with zero points");
    // codes rne(w + z) (compressed-tensors adds z before rounding: 4.5 - 5 =
    // -0.5 and 5.5 - 5 = 0.5 both tie to 0) = -8 -5 0 7 0 -> unsigned 0 3 8 15
    // 8; zero 3
    PQ_CHECK(q.packed[0] == 0x8F830u && q.zeros[0] == 3 && q.scales[0] == 1.0f,
             "int4 asym: hand codes and zero point, rounded after adding z (word %08x zero %d scale %g)",
             q.packed[0], q.zeros[0], q.scales[0]);
    float *d = dequant(&q);
    const float want[5] = {-3, 0, 5, 12, 5};
    PQ_CHECK(memcmp(d, want, sizeof want) == 0, "int4 asym: dequantized values");
    free(d);
    pq_qtensor_free(&q);

    // a row of only positive values: the range still includes 0 (z = -8)
    const float pos[4] = {1.0f, 2.0f, 3.0f, 15.0f};
    PQ_CHECK(rtn_new(pos, 1, 4, &s, PQ_DT_F16, "pos", NULL, &q, NULL) == PQ_OK && q.zeros[0] == 0 &&
                 q.scales[0] == 1.0f,
             "int4 asym: all-positive row has zero point -8 (unsigned 0), scale 1");
    pq_qtensor_free(&q);
}

// Every element is scale[g] * (q - z) with g = c / group, and each group's
// scale comes from its own columns only (the ragged last one included).
static void test_ragged(int group, int sym) {
    int rows = 5, cols = 172, ng = (cols + group - 1) / group;
    float *w = malloc((size_t)rows * cols * sizeof(float));
    pq_test_fill(w, (size_t)rows * cols, 0.05f);
    w[0] = 3.0f; // a large value in group 0 must not leak into the others
    for (int i = 0; i < rows * cols; i++) w[i] = pq_round_to_dtype(w[i], PQ_DT_F16); // an F16 model's weights
    pq_scheme s = int_scheme(4, group, sym);
    pq_qtensor q;
    double err;
    int ok = rtn_new(w, rows, cols, &s, PQ_DT_F16, "ragged", NULL, &q, &err) == PQ_OK;
    PQ_CHECK(ok && pq_qtensor_ngroups(&q) == ng && q.nscales == rows * ng,
             "cols 172 group %d %s: %d groups, the last %d wide", group, sym ? "sym" : "asym", ng,
             cols - (ng - 1) * group);
    if (!ok) return free(w);
    int bad = 0;
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < ng; g++) {
            int c1 = (g + 1) * group < cols ? (g + 1) * group : cols;
            float lo = 0, hi = 0;
            for (int c = g * group; c < c1; c++) lo = fminf(lo, w[r * cols + c]), hi = fmaxf(hi, w[r * cols + c]);
            // each operation in F16 (test_dtype_rounding pins why)
            float want = sym ? pq_round_to_dtype(fmaxf(-lo, hi) / 7.5f, PQ_DT_F16)
                             : pq_round_to_dtype(pq_round_to_dtype(hi - lo, PQ_DT_F16) / 15, PQ_DT_F16);
            bad += q.scales[r * ng + g] != want;
        }
    PQ_CHECK(!bad, "cols 172 group %d %s: every group's scale from its own columns, rounded to F16 (%d wrong)",
             group, sym ? "sym" : "asym", bad);
    float *d = dequant(&q);
    double e2 = 0, n2 = 0, worst = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            float sc = q.scales[r * ng + c / group];
            double e = fabs((double)d[r * cols + c] - w[r * cols + c]);
            worst = fmax(worst, e / sc);
            e2 += e * e, n2 += (double)w[r * cols + c] * w[r * cols + c];
        }
    // half a step, plus what clamping the ends costs (7.5 -> 7, a rounded zero point)
    PQ_CHECK(worst <= 1.0, "cols 172 group %d %s: |w - w'| <= s (worst %.3f s)", group, sym ? "sym" : "asym",
             worst);
    PQ_CHECK(fabs(err - e2 / n2) <= 1e-12 * (1 + e2 / n2), "cols 172 group %d: rel_err %.6g matches %.6g", group,
             err, e2 / n2);
    free(d);
    free(w);
    pq_qtensor_free(&q);
}

// compressed-tensors' arithmetic in the model's dtype, pinned on values where
// it differs from the same formulas in f32 (each found, and its result
// computed, with torch on F16/BF16 tensors as compressed-tensors 0.19's
// calculate_qparams and _quantize run them).
static void test_dtype_rounding(void) {
    float sc, z;
    // sym: s = F16(1 / 7.5) = 0.13330078125; 0.60009765625 / s = 4.50183 in
    // f32 (code 5), 4.5 in F16: the tie goes to the even 4
    const float g1[2] = {1.0f, 0.60009765625f};
    PQ_CHECK(pq_rtn_group_params(g1, 2, 4, 1, PQ_OBSERVER_MINMAX, PQ_DT_F16, &sc, &z) && sc == 0.13330078125f && z == 0 &&
                 pq_rtn_code_dtype(g1[1], sc, z, 4, PQ_DT_F16) == 4 && pq_rtn_code(g1[1], sc, z, 4) == 5,
             "F16 sym: w / s = 4.5018 rounds to 4.5 in F16 and ties to even 4 (f32: 5); scale %.11g", sc);
    // 0.05999755859375 / F16(0.300048828125 / 7.5) = 1.49962 in f32 (code 1),
    // 1.5 in F16: ties to even 2
    const float g2[2] = {0.300048828125f, 0.05999755859375f};
    PQ_CHECK(pq_rtn_group_params(g2, 2, 4, 1, PQ_OBSERVER_MINMAX, PQ_DT_F16, &sc, &z) && sc == 0.040008544921875f &&
                 pq_rtn_code_dtype(g2[1], sc, z, 4, PQ_DT_F16) == 2 && pq_rtn_code(g2[1], sc, z, 4) == 1,
             "F16 sym: w / s = 1.4996 rounds up to 1.5 in F16 and ties to 2 (f32: 1); scale %.11g", sc);
    // asym: hi - lo = 1.00037 is 1 in F16, s = F16(1 / 15) = 0.066650390625
    // (in f64 then rounded: 0.06671142578125)
    const float g3[3] = {-0.000370025634765625f, 1.0f, 0.31005859375f};
    PQ_CHECK(pq_rtn_group_params(g3, 3, 4, 0, PQ_OBSERVER_MINMAX, PQ_DT_F16, &sc, &z) && sc == 0.066650390625f && z == -8 &&
                 pq_rtn_code_dtype(g3[2], sc, z, 4, PQ_DT_F16) == -3,
             "F16 asym: hi - lo rounded to F16 before / 15: scale %.11g (0.066650390625), zero %g, code -3", sc, z);
    // asym zero point: -8 - lo / s = -6.50165 in f32 (z = -7), -6.5 in F16: z = -6
    const float g4[2] = {-0.11102294921875f, 1.0f};
    PQ_CHECK(pq_rtn_group_params(g4, 2, 4, 0, PQ_OBSERVER_MINMAX, PQ_DT_F16, &sc, &z) && sc == 0.0740966796875f && z == -6,
             "F16 asym: -8 - lo / s = -6.5 in F16, zero point ties to even -6 (f32: -7): scale %.11g zero %g", sc, z);
    // BF16: hi - lo = 1.00406 is 1.0078125 in BF16, s = BF16(1.0078125 / 15)
    const float g5[3] = {-0.004058837890625f, 1.0f, 0.310546875f};
    PQ_CHECK(pq_rtn_group_params(g5, 3, 4, 0, PQ_OBSERVER_MINMAX, PQ_DT_BF16, &sc, &z) && sc == 0.0673828125f && z == -8 &&
                 pq_rtn_code_dtype(g5[2], sc, z, 4, PQ_DT_BF16) == -3,
             "BF16 asym: scale %.11g (0.0673828125; f64 then rounded: 0.06689453125), zero %g", sc, z);
    // a zero group: scale eps of the dtype, zero point 0
    const float g6[4] = {0, 0, 0, 0};
    PQ_CHECK(pq_rtn_group_params(g6, 4, 4, 0, PQ_OBSERVER_MINMAX, PQ_DT_F16, &sc, &z) && sc == 0x1p-10f && z == 0,
             "F16 asym zero group: scale F16 eps 2^-10, zero 0 (%g %g)", sc, z);
    // FP8: s = F16(1 / 448) = 0.002231597900390625; 0.0026493072509765625 / s
    // = 1.18718 in f32 (E4M3 0x39 = 1.125), 1.1875 in F16: the E4M3 tie goes to
    // the even 0x3a = 1.25
    const float f[2] = {1.0f, 0.0026493072509765625f};
    pq_scheme s8;
    pq_qtensor q;
    pq_scheme_make("fp8", PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, &s8);
    PQ_CHECK(rtn_new(f, 1, 2, &s8, PQ_DT_F16, "fp8 tie", NULL, &q, NULL) == PQ_OK &&
                 q.scales[0] == 0.002231597900390625f && q.f8[0] == 0x7e && q.f8[1] == 0x3a,
             "F16 FP8: w / s = 1.18718 rounds to 1.1875 in F16, E4M3 ties to even 0x3a (f32: 0x39): %02x",
             q.f8[1]);
    pq_qtensor_free(&q);
}

static void test_nonfinite(void) {
    float w[12];
    pq_test_fill(w, 12, 1.0f);
    w[7] = NAN;
    pq_scheme s = int_scheme(4, PQ_GROUP_CHANNEL, 1);
    pq_qtensor q;
    pq_status st = rtn_new(w, 3, 4, &s, PQ_DT_F16, "model.layers.2.mlp.up_proj.weight", NULL, &q, NULL);
    PQ_CHECK(st == PQ_ERR_NUMERIC && strstr(pq_last_error(), "model.layers.2.mlp.up_proj.weight") &&
                 strstr(pq_last_error(), "[1, 3]") && strstr(pq_last_error(), "NaN"),
             "NaN refused naming the tensor and element: %s", pq_last_error());
    pq_qtensor_free(&q);
    w[7] = -INFINITY;
    pq_scheme f;
    pq_scheme_make("fp8", PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, &f);
    st = rtn_new(w, 3, 4, &f, PQ_DT_BF16, "lm_head.weight", NULL, &q, NULL);
    PQ_CHECK(st == PQ_ERR_NUMERIC && strstr(pq_last_error(), "lm_head.weight") && strstr(pq_last_error(), "Inf"),
             "Inf refused naming the tensor: %s", pq_last_error());
    pq_qtensor_free(&q);
    // an output made for another scheme is refused, not overrun
    pq_scheme s8 = int_scheme(8, PQ_GROUP_CHANNEL, 1);
    w[7] = 0;
    PQ_CHECK(pq_qtensor_init(&q, &s, 3, 4, PQ_DT_F16) == PQ_OK &&
                 pq_rtn_quantize(w, &s8, "other", NULL, &q, NULL) == PQ_ERR_ARG &&
                 strstr(pq_last_error(), "was not made for this scheme"),
             "an output tensor of another scheme is refused: %s", pq_last_error());
    pq_qtensor_free(&q);
}

static void test_fp8(void) {
    // amax / 448 = 1 + 2^-12 rounds down to 1 in F16, so amax / s = 448.1: saturates to 448, never NaN
    const float w[4] = {448.109375f, -448.109375f, 1.0f, 0.0f};
    pq_scheme s;
    pq_scheme_make("fp8", PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, &s);
    pq_qtensor q;
    PQ_CHECK(rtn_new(w, 1, 4, &s, PQ_DT_F16, "sat", NULL, &q, NULL) == PQ_OK && q.fmt == PQ_W_FP8,
             "fp8 quantizes to PQ_W_FP8");
    PQ_CHECK(q.scales[0] == 1.0f && q.f8[0] == 0x7e && q.f8[1] == 0xfe && q.f8[2] == 0x38 && q.f8[3] == 0,
             "fp8: saturates to +-448 (0x7e/0xfe), 1.0 is 0x38 (%02x %02x %02x %02x)", q.f8[0], q.f8[1], q.f8[2],
             q.f8[3]);
    pq_qtensor_free(&q);

    int rows = 7, cols = 40;
    float *m = malloc((size_t)rows * cols * sizeof(float));
    pq_test_fill(m, (size_t)rows * cols, 0.1f);
    pq_scheme t;
    PQ_CHECK(pq_scheme_make("fp8", PQ_GROUP_TENSOR, PQ_SYM_DEFAULT, &t) == PQ_OK, "fp8 per-tensor scheme");
    double err;
    PQ_CHECK(rtn_new(m, rows, cols, &t, PQ_DT_BF16, "pt", NULL, &q, &err) == PQ_OK && q.per_tensor &&
                 q.nscales == 1 && pq_round_to_dtype(q.scales[0], PQ_DT_BF16) == q.scales[0],
             "fp8 per tensor: one scale, exact in BF16");
    // E4M3 has 3 mantissa bits: relative error per element <= 2^-4 (normal range)
    PQ_CHECK(err > 0 && err < 1.0 / 256, "fp8 per tensor: rel err %.3g < 2^-8", err);
    free(m);
    pq_qtensor_free(&q);
}

static int same_qtensor(const pq_qtensor *a, const pq_qtensor *b) {
    size_t n = (size_t)a->rows * a->cols;
    if (a->nscales != b->nscales || memcmp(a->scales, b->scales, (size_t)a->nscales * 4)) return 0;
    if (a->packed && memcmp(a->packed, b->packed, (size_t)a->rows * pq_qpack_words_per_row(a->cols, a->bits) * 4))
        return 0;
    if (a->zeros && memcmp(a->zeros, b->zeros, (size_t)a->nscales)) return 0;
    if (a->i8 && memcmp(a->i8, b->i8, n)) return 0;
    return !a->f8 || memcmp(a->f8, b->f8, n) == 0;
}

static void test_determinism(void) {
    int rows = 97, cols = 200;
    float *w = malloc((size_t)rows * cols * sizeof(float));
    pq_test_fill(w, (size_t)rows * cols, 0.02f);
    pq_pool *pool;
    PQ_CHECK(pq_pool_create(3, &pool) == PQ_OK, "pool of 3 threads");
    const char *names[] = {"w4a16", "w8a16", "w8a8", "fp8"};
    for (int i = 0; i < 4; i++) {
        pq_scheme s;
        pq_scheme_make(names[i], i == 0 ? 64 : PQ_GROUP_DEFAULT, i == 0 ? 0 : PQ_SYM_DEFAULT, &s);
        pq_qtensor a, b, c;
        double ea, eb;
        int ok = rtn_new(w, rows, cols, &s, PQ_DT_F16, "d", NULL, &a, &ea) == PQ_OK &&
                 rtn_new(w, rows, cols, &s, PQ_DT_F16, "d", pool, &b, &eb) == PQ_OK &&
                 rtn_new(w, rows, cols, &s, PQ_DT_F16, "d", pool, &c, NULL) == PQ_OK;
        PQ_CHECK(ok && same_qtensor(&a, &b) && same_qtensor(&b, &c) && ea == eb,
                 "%s: identical codes, scales and error serially and on 3 threads, run twice", names[i]);
        int exact = 1;
        for (int k = 0; ok && k < a.nscales; k++) exact &= pq_round_to_dtype(a.scales[k], PQ_DT_F16) == a.scales[k];
        PQ_CHECK(exact, "%s: every scale is exactly representable in F16", names[i]);
        pq_qtensor_free(&a), pq_qtensor_free(&b), pq_qtensor_free(&c);
    }
    pq_pool_free(pool);
    free(w);
}

// Other bit widths of the packed layout, and a zero row (scale = F16 eps).
static void test_bits_and_zero(void) {
    int rows = 4, cols = 50;
    float *w = malloc((size_t)rows * cols * sizeof(float));
    pq_test_fill(w, (size_t)rows * cols, 1.0f);
    for (int c = 0; c < cols; c++) w[c] = 0; // row 0 all zero
    double prev = 1e9;
    for (int bits = 2; bits <= 8; bits++) {
        pq_scheme s = int_scheme(bits, 16, 0);
        pq_qtensor q;
        double err;
        int ok = rtn_new(w, rows, cols, &s, PQ_DT_F32, "bits", NULL, &q, &err) == PQ_OK;
        float *d = ok ? dequant(&q) : NULL;
        int zero_ok = ok && q.scales[0] == 0x1p-23f;
        for (int c = 0; ok && c < cols; c++) zero_ok &= d[c] == 0;
        PQ_CHECK(ok && err < prev && zero_ok,
                 "%d-bit asym g16: error %.3g below the %d-bit one; the zero row has scale eps and dequantizes to 0",
                 bits, err, bits - 1);
        prev = err;
        free(d);
        pq_qtensor_free(&q);
    }
    free(w);
}

static void test_schemes(void) {
    pq_scheme s;
    struct { const char *name; int group, sym; const char *needle; } bad[] = {
        {"w3a16", PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, "not a scheme"},
        {"w8a8", PQ_GROUP_DEFAULT, 0, "symmetric only"},
        {"w8a8", 128, PQ_SYM_DEFAULT, "per output channel"},
        {"fp8", 64, PQ_SYM_DEFAULT, "per output channel or per tensor"},
        {"fp8-dynamic", PQ_GROUP_DEFAULT, 0, "symmetric only"},
        {"w4a16", 100, PQ_SYM_DEFAULT, "group sizes are 32, 64, 128"},
        {"w4a16", PQ_GROUP_TENSOR, PQ_SYM_DEFAULT, "only available for fp8"},
        {"w8a16", PQ_GROUP_DEFAULT, 0, "symmetric only"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pq_status st = pq_scheme_make(bad[i].name, bad[i].group, bad[i].sym, &s);
        PQ_CHECK(st == PQ_ERR_ARG && strstr(pq_last_error(), bad[i].needle) && strstr(pq_last_error(), bad[i].name),
                 "refused by name: %s", pq_last_error());
    }
    PQ_CHECK(pq_scheme_make("w4a16", PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, &s) == PQ_OK && s.bits == 4 &&
                 s.group == 128 && s.sym && s.act == PQ_ACT_NONE && !strcmp(pq_scheme_format(&s), "pack-quantized"),
             "w4a16 defaults: int4 g128 sym, pack-quantized");
    PQ_CHECK(pq_scheme_make("w8a16", PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, &s) == PQ_OK && s.bits == 8 &&
                 s.group == PQ_GROUP_CHANNEL && pq_scheme_wformat(&s) == PQ_W_QPACK,
             "w8a16 defaults: int8 per channel, pack-quantized");
    PQ_CHECK(pq_scheme_make("w8a8", PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, &s) == PQ_OK && s.act == PQ_ACT_INT8_TOKEN &&
                 pq_scheme_wformat(&s) == PQ_W_INT8 && !strcmp(pq_scheme_format(&s), "int-quantized"),
             "w8a8: int8 weights (int-quantized), int8 dynamic per-token activations");
    PQ_CHECK(pq_scheme_make("fp8", PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, &s) == PQ_OK && s.is_float &&
                 s.act == PQ_ACT_NONE && !strcmp(pq_scheme_format(&s), "naive-quantized"),
             "fp8: E4M3 per channel, weight only, naive-quantized");
    PQ_CHECK(pq_scheme_make("fp8-dynamic", PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, &s) == PQ_OK &&
                 s.act == PQ_ACT_FP8_TOKEN && !strcmp(pq_scheme_format(&s), "float-quantized"),
             "fp8-dynamic: fp8 dynamic per-token activations, float-quantized");
    struct { const char *name; int group, sym; double bpw; } cost[] = {
        {"w4a16", 128, 1, 4 + 16.0 / 128},           {"w4a16", 128, 0, 4 + 20.0 / 128},
        {"w4a16", 32, 1, 4 + 16.0 / 32},             {"w4a16", PQ_GROUP_CHANNEL, 1, 4 + 16.0 / 4096},
        {"w8a16", PQ_GROUP_CHANNEL, 1, 8 + 16.0 / 4096}, {"w8a8", PQ_GROUP_CHANNEL, 1, 8 + 16.0 / 4096},
        {"fp8", PQ_GROUP_TENSOR, 1, 8},
    };
    for (size_t i = 0; i < sizeof cost / sizeof cost[0]; i++) {
        pq_scheme_make(cost[i].name, cost[i].group, cost[i].sym, &s);
        double b = pq_scheme_bits_per_weight(&s, 4096, 4096, 2);
        char desc[64];
        pq_scheme_describe(&s, desc, sizeof desc);
        // the only other bytes are weight_shape (16) and, per tensor, one scale
        PQ_CHECK(fabs(b - cost[i].bpw) < 1e-5, "%s on 4096 x 4096: %.6f bits per weight (%.6f)", desc, b,
                 cost[i].bpw);
    }
}

// The mse observer: on random (Gaussian-like and heavy-tailed) weights, per
// group its |w - w'|^2.4 is never above minmax's and is the least over the
// shrink candidates recomputed here; over the matrix its squared error is
// below minmax's; identical serially and on 3 threads.
static void test_mse_observer(void) {
    int rows = 61, cols = 256;
    float *w = malloc((size_t)rows * cols * sizeof(float));
    pq_test_fill(w, (size_t)rows * cols, 0.02f);
    for (int k = 0; k < rows * cols; k += 97) w[k] *= 6; // a few outliers, where shrinking pays
    pq_pool *pool;
    PQ_CHECK(pq_pool_create(3, &pool) == PQ_OK, "pool of 3 threads");
    for (int v = 0; v < 3; v++) {
        int bits = v == 2 ? 3 : 4, sym = v != 1, group = 32;
        pq_scheme s = int_scheme(bits, group, sym), m = s;
        m.observer = PQ_OBSERVER_MSE;
        pq_qtensor a, b, c;
        double ea, eb, ec;
        int ok = rtn_new(w, rows, cols, &s, PQ_DT_F16, "minmax", NULL, &a, &ea) == PQ_OK &&
                 rtn_new(w, rows, cols, &m, PQ_DT_F16, "mse", NULL, &b, &eb) == PQ_OK &&
                 rtn_new(w, rows, cols, &m, PQ_DT_F16, "mse", pool, &c, &ec) == PQ_OK;
        int never_worse = ok, least = ok, shrunk = 0;
        for (int r = 0; ok && r < rows; r++)
            for (int g = 0; g < cols / group; g++) {
                const float *wg = w + (size_t)r * cols + g * group;
                size_t k = (size_t)r * (cols / group) + g;
                float za = a.zeros ? (float)(a.zeros[k] - (1 << (bits - 1))) : 0;
                float zb = b.zeros ? (float)(b.zeros[k] - (1 << (bits - 1))) : 0;
                double la = pq_rtn_group_lp_error(wg, group, bits, a.scales[k], za);
                double lb = pq_rtn_group_lp_error(wg, group, bits, b.scales[k], zb);
                never_worse &= lb <= la;
                shrunk += b.scales[k] != a.scales[k];
                float shrunk_w[32]; // every candidate: minmax of the weights scaled by p (the range [p lo, p hi])
                for (int i = 0; i < PQ_MSE_STEPS; i++) {
                    double p = 1.0 - i / 100.0;
                    for (int c = 0; c < group; c++) shrunk_w[c] = (float)(p * wg[c]);
                    float sc = 0, z = 0;
                    if (!pq_rtn_group_params(shrunk_w, group, bits, sym, PQ_OBSERVER_MINMAX, PQ_DT_F16, &sc, &z))
                        continue;
                    least &= lb <= pq_rtn_group_lp_error(wg, group, bits, sc, z);
                }
            }
        char d[64];
        pq_scheme_describe(&m, d, sizeof d);
        PQ_CHECK(never_worse && least && shrunk > 0,
                 "%s: per group |dw|^2.4 <= minmax's and the least of the 20 shrinks (%d of %d groups shrunk)", d,
                 shrunk, rows * cols / group);
        PQ_CHECK(ok && eb < ea, "%s: squared error %.4e < minmax's %.4e", d, eb, ea);
        PQ_CHECK(ok && same_qtensor(&b, &c) && eb == ec, "%s: identical serially and on 3 threads", d);
        pq_qtensor_free(&a), pq_qtensor_free(&b), pq_qtensor_free(&c);
    }
    pq_scheme f;
    pq_scheme_make("w4a16", 64, 1, &f);
    PQ_CHECK(f.observer == PQ_OBSERVER_MINMAX, "schemes start with the minmax observer");
    pq_pool_free(pool);
    free(w);
}

// pq_rtn_codes_cpu (AVX2 + F16C where the CPU has it) equals the _ref bit
// for bit: F16 and F32 arithmetic, sym and asym, 3 / 4 / 8 bits, weights
// from tiny (F16 subnormals) to past the clamp, lengths with tails; and
// pq_qtensor_set_codes and pq_qtensor_set_column pack as pq_qtensor_set_code
// does one by one.
static void test_codes_cpu(void) {
    enum { N = 1003 };
    static float w[N], a[N], b[N];
    int bad = 0;
    for (int rep = 0; rep < 24; rep++) {
        float mag = powf(10.0f, (float)(rep % 8) - 6.0f); // 1e-6 .. 10
        for (int i = 0; i < N; i++) w[i] = pq_round_to_dtype(mag * pq_test_normal(), PQ_DT_F16);
        pq_dtype dt = rep % 3 == 2 ? PQ_DT_F32 : PQ_DT_F16;
        int bits = rep % 4 == 3 ? 8 : rep % 4 == 2 ? 3 : 4;
        float scale = pq_round_to_dtype(mag * (0.05f + 0.3f * (float)(rep % 5)), PQ_DT_F16);
        float zero = rep % 2 ? (float)(rep % 7) - 3.0f : 0.0f;
        pq_rtn_codes_ref(w, N - rep, scale, zero, bits, dt, a);
        pq_rtn_codes_cpu(w, N - rep, scale, zero, bits, dt, b);
        bad += memcmp(a, b, (size_t)(N - rep) * sizeof(float)) != 0;
    }
    PQ_CHECK(bad == 0, "rtn codes (isa %s) == the _ref bit for bit, 24 cases (%d differ)", pq_isa_name(pq_cpu_isa()), bad);
    for (int bits = 2; bits <= 8; bits++) {
        pq_scheme s = int_scheme(bits, 32, 1);
        pq_qtensor q1, q2, q3;
        enum { rows = 5, cols = 77 };
        pq_qtensor_init(&q1, &s, rows, cols, PQ_DT_F16);
        pq_qtensor_init(&q2, &s, rows, cols, PQ_DT_F16);
        pq_qtensor_init(&q3, &s, rows, cols, PQ_DT_F16);
        float codes[rows][cols], column[rows];
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                codes[r][c] = (float)((int)(pq_test_u64() % (1u << bits)) - (1 << (bits - 1)));
                pq_qtensor_set_code(&q1, r, c, (int)codes[r][c]);
            }
            pq_qtensor_set_codes(&q2, r, 0, 13, codes[r]);
            pq_qtensor_set_codes(&q2, r, 13, cols - 13, codes[r] + 13);
        }
        for (int c = cols - 1; c >= 0; c--) { // columns in any order, rows in two runs
            for (int r = 0; r < rows; r++) column[r] = codes[r][c];
            pq_qtensor_set_column(&q3, 0, 2, c, column);
            pq_qtensor_set_column(&q3, 2, rows - 2, c, column + 2);
        }
        PQ_CHECK(same_qtensor(&q1, &q2) && same_qtensor(&q1, &q3),
                 "%d-bit: set_codes in two runs, and set_column column by column, pack as set_code one by one", bits);
        pq_qtensor_free(&q1), pq_qtensor_free(&q2), pq_qtensor_free(&q3);
    }
}

int main(int argc, char **argv) {
    pq_test_seed();
    if (argc > 1 && strcmp(argv[1], "--codes") == 0) {
        test_codes_cpu();
        test_determinism();
        return pq_test_done();
    }
    test_codes_cpu();
    if (!getenv("PQ_ISA")) pq_test_rerun_with_isa("rtn codes", "scalar", "--codes");
    test_sym_hand();
    test_asym_hand();
    for (int g = 32; g <= 128; g *= 2) {
        test_ragged(g, 1);
        test_ragged(g, 0);
    }
    test_dtype_rounding();
    test_nonfinite();
    test_fp8();
    test_determinism();
    test_mse_observer();
    test_bits_and_zero();
    test_schemes();
    return pq_test_done();
}
