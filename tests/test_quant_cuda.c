// The CUDA kernels of the quantized formats (kernels/quant_cuda.h) against
// their C references on fresh random weights and activations: the tiled
// tensor-core GEMV (split-K, act-order permutation), the generic GEMV of the
// rows layout, the dequantized panels + cuBLAS, the W8A8 activation
// quantizer and cuBLASLt INT8 / FP8 GEMMs (T = 1, 16, 17, 32: the padding to
// 32 tokens); shapes with ragged columns (172, 4096 + 8), row counts that
// are not a multiple of a block, FP16 and BF16 activations. The activations
// are rounded to the activation type before the reference sees them (the
// device's input is 16-bit), so every difference is the device's
// arithmetic. Without a GPU those checks print skip (FAIL under make
// test-gpu).
//
// Without a GPU, the tiled layout and the GEMV's index algebra are checked
// on the CPU: pq_qtile_ref (the specification of the device's tiling) and
// tests/lib/tiled_emul.c (the kernel's loads, code extraction, mma.sync
// fragments and scale lookups, lane by lane) must together give W x.
#include "common/half.h"
#include "common/sys.h"
#include "kernels/cuda_host.h"
#include "kernels/linear.h"
#include "kernels/quant_cuda.h"
#include "kernels/w8a8.h"
#include "tests/lib/cuda_wrappers.h"
#include "tests/lib/tiled_emul.h"
#include "tests/test.h"

static int have_gpu;

// Tolerances (relative L2 of y against pq_linear_forward_ref, which sums the
// f32 weights times x in double):
// - exact 16-bit operands summed in f32 (the tiled GEMV: exact code products
//   on the tensor cores, each group block's sum times its f32 scale; the
//   generic GEMV): ~sqrt(cols) 2^-24 relative, ~1e-6 at 4K columns.
#define TOL_EXACT 1e-5
// - the weight rounded to the activation type before the product (the
//   panel path, every format): 2^-12 rms relative per weight in FP16 (~2e-4
//   on a sum of independent terms), 2^-9 in BF16.
#define TOL_F16W 1e-3
#define TOL_BF16W 8e-3
// - FP8 x FP8 in cuBLASLt: exact products, but Hopper's FP8 tensor cores
//   keep ~14 mantissa bits inside a k block before cuBLAS adds the block to
//   an f32 sum: 2^-14 = 6e-5 relative per block, a sum of independent ones.
#define TOL_FP8MMA 1e-3

// ---- random weights ----------------------------------------------------------------

typedef struct {
    pq_linear W;
    void *buf[6];
    char what[96];
} weight;

static void weight_free(weight *w) {
    for (int i = 0; i < 6; i++) free(w->buf[i]);
}

static float *bias_of(weight *w, int with_bias) {
    if (!with_bias) return NULL;
    float *b = w->buf[5] = malloc((size_t)w->W.rows * 4);
    pq_test_fill(b, (size_t)w->W.rows, 0.5f);
    return b;
}

// A scale around 0.01: rounded to an FP16 value (as checkpoints store them:
// the device keeps FP16) unless f32 is set (the device keeps f32).
static float rand_scale(int f32) {
    float s = 0.005f + 0.01f * fabsf(pq_test_uniform());
    return f32 ? s : pq_fp16_to_f32(pq_f32_to_fp16(s));
}

// group: columns per group, or 0 for one group per row.
static weight make_qpack(int rows, int cols, int bits, int group, int asym, int gidx, int f32_scales, int bias) {
    weight w;
    memset(&w, 0, sizeof w);
    int g = group > 0 ? group : cols, ng = pq_qpack_ngroups(cols, g), wpr = pq_qpack_words_per_row(cols, bits);
    int per = pq_qpack_per_word(bits);
    uint32_t *p = w.buf[0] = calloc((size_t)rows * wpr, 4);
    float *s = w.buf[1] = malloc((size_t)rows * ng * 4);
    uint8_t *z = asym ? (w.buf[2] = malloc((size_t)rows * ng)) : NULL;
    int32_t *gi = gidx ? (w.buf[3] = malloc((size_t)cols * 4)) : NULL;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            p[(size_t)r * wpr + c / per] |= (uint32_t)(pq_test_u64() % (1u << bits)) << (c % per * bits);
    for (size_t i = 0; i < (size_t)rows * ng; i++) s[i] = rand_scale(f32_scales);
    for (size_t i = 0; z && i < (size_t)rows * ng; i++) z[i] = (uint8_t)(pq_test_u64() % (1u << bits));
    for (int c = 0; gi && gidx == 1 && c < cols; c++) gi[c] = (int32_t)(pq_test_u64() % (uint64_t)ng);
    if (gi && gidx == 2) { // act order: group j / g holds columns perm[j] of a random permutation
        int32_t *perm = malloc((size_t)cols * 4);
        for (int c = 0; c < cols; c++) perm[c] = c;
        for (int c = cols - 1; c > 0; c--) {
            int j = (int)(pq_test_u64() % (uint64_t)(c + 1)), t = perm[c];
            perm[c] = perm[j], perm[j] = t;
        }
        for (int j = 0; j < cols; j++) gi[perm[j]] = j / g;
        free(perm);
    }
    w.W = (pq_linear){.fmt = PQ_W_QPACK, .rows = rows, .cols = cols, .q = {rows, cols, bits, g, p, s, z, gi}};
    w.W.bias = bias_of(&w, bias);
    char gname[16] = "channel";
    if (group > 0) snprintf(gname, sizeof gname, "g%d", group);
    snprintf(w.what, sizeof w.what, "QPACK %d-bit %s %s%s%s [%d x %d]%s", bits, gname, asym ? "asym" : "sym",
             gidx == 2 ? " act-order g_idx" : gidx ? " random g_idx" : "", f32_scales ? " f32 scales" : "", rows, cols, bias ? " + bias" : "");
    return w;
}

// INT8 (fp8 = 0) or FP8 (per-channel or per-tensor) codes; act: W8A8.
static weight make_bytes(int rows, int cols, int fp8, int per_channel, pq_actq act, int bias) {
    weight w;
    memset(&w, 0, sizeof w);
    uint8_t *q = w.buf[0] = malloc((size_t)rows * cols);
    float *s = w.buf[1] = malloc((size_t)rows * 4);
    for (size_t i = 0; i < (size_t)rows * cols; i++) {
        q[i] = (uint8_t)pq_test_u64();
        if (fp8 && (q[i] & 0x7f) == 0x7f) q[i] &= 0xf7; // no NaN codes
        if (!fp8 && q[i] == 0x80) q[i] = 0x81;          // symmetric int8: -127..127
    }
    for (int r = 0; r < rows; r++) s[r] = fp8 ? 0.001f + 0.01f * fabsf(pq_test_uniform()) : rand_scale(1);
    if (fp8) w.W = (pq_linear){.fmt = PQ_W_FP8, .rows = rows, .cols = cols, .f8 = {rows, cols, q, s, per_channel}};
    else w.W = (pq_linear){.fmt = PQ_W_INT8, .rows = rows, .cols = cols, .i8 = {rows, cols, (const int8_t *)q, s}};
    w.W.act = act;
    w.W.bias = bias_of(&w, bias);
    const char *an = act.type == PQ_ACTQ_NONE ? "" : act.static_scale > 0 ? " W8A8 static" : " W8A8 dynamic";
    snprintf(w.what, sizeof w.what, "%s%s%s [%d x %d]%s", fp8 ? "FP8" : "INT8",
             fp8 ? (per_channel ? " per-channel" : " per-tensor") : "", an, rows, cols, bias ? " + bias" : "");
    return w;
}

// Fresh activations, rounded to dt (what the device multiplies).
static float *make_x(pq_act_dtype dt, int T, int cols) {
    float *x = malloc((size_t)T * cols * 4);
    pq_test_fill(x, (size_t)T * cols, 1.0f);
    pq_cuda_test_round(dt, x, (size_t)T * cols);
    return x;
}

// ---- checks -------------------------------------------------------------------------

// One forward through `path`, against the reference; *layout (if not NULL)
// gets 1 when the upload tiled W.
static void check_forward(const weight *w, pq_act_dtype dt, int T, pq_cuda_path path, double tol, const char *how,
                          int *layout) {
    const pq_linear *W = &w->W;
    float *x = make_x(dt, T, W->cols), *want = malloc((size_t)T * W->rows * 4), *got = malloc((size_t)T * W->rows * 4);
    pq_linear_forward_ref(W, x, T, want);
    pq_test_poison(got, (size_t)T * W->rows);
    int lay = -1;
    pq_status s = pq_cuda_test_qlinear(W, dt, x, T, path, got, &lay);
    double err = s == PQ_OK ? pq_rel_l2(got, want, (size_t)T * W->rows) : INFINITY;
    PQ_CHECK(s == PQ_OK && err < tol, "%s (%s), T %d, %s%s: rel L2 %.2e < %.0e (%s)", w->what, pq_act_dtype_name(dt), T,
             how, lay == 1 ? " (tiled)" : lay == 0 ? " (rows layout)" : "", err, tol,
             s == PQ_OK ? "ok" : pq_last_error());
    if (layout) *layout = lay;
    free(x); free(want); free(got);
}

static const int TS[] = {1, 3, 37, 256};

// Every token count through pq_linear_cuda_forward, T = 3 and 32 through the
// paths it would not take, and the dequantized rows, in FP16 and BF16.
static void check_weight(const weight *w) {
    const pq_linear *W = &w->W;
    for (int d = 0; d < 2; d++) {
        pq_act_dtype dt = d ? PQ_ACT_BF16 : PQ_ACT_F16;
        double tol_w = d ? TOL_BF16W : TOL_F16W;
        int layout = -1;
        for (size_t i = 0; i < sizeof TS / sizeof TS[0]; i++) {
            int T = TS[i];
            check_forward(w, dt, T, PQ_CUDA_PATH_AUTO, T > PQ_CUDA_GEMV_MAX_T ? tol_w : TOL_EXACT,
                          T > PQ_CUDA_GEMV_MAX_T ? "panels + cuBLAS" : "fused GEMV", &layout);
        }
        check_forward(w, dt, 3, PQ_CUDA_PATH_PANEL, tol_w, "panels + cuBLAS (forced)", NULL);
        check_forward(w, dt, PQ_CUDA_GEMV_MAX_T, PQ_CUDA_PATH_GEMV, TOL_EXACT, "GEMV at its largest T (forced)", NULL);
        // the panels: the _ref's f32 values rounded to dt, bit for bit (a
        // tiled weight with an act-order perm gives its rows in the stored
        // column order: not compared here, its forwards are)
        if (W->fmt == PQ_W_QPACK && W->q.g_idx && layout == 1) continue;
        int r0 = layout == 1 ? W->rows / 3 / 16 * 16 : W->rows / 3, n = W->rows - r0;
        float *want = malloc((size_t)n * W->cols * 4), *got = malloc((size_t)n * W->cols * 4);
        pq_linear_rows_ref(W, r0, n, want);
        pq_cuda_test_round(dt, want, (size_t)n * W->cols);
        pq_test_poison(got, (size_t)n * W->cols);
        pq_status s = pq_cuda_test_qrows(W, dt, r0, n, got);
        PQ_CHECK(s == PQ_OK && memcmp(got, want, (size_t)n * W->cols * 4) == 0,
                 "%s: dequantized rows %d..%d == %s(pq_linear_rows_ref), bit for bit (%s)", w->what, r0, W->rows - 1,
                 pq_act_dtype_name(dt), pq_last_error());
        free(want); free(got);
    }
}

static void check_qpack(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "QPACK kernels on the GPU");
    // gidx: 1 random groups (the rows layout), 2 act order (tiled with a perm)
    struct { int rows, cols, bits, group, asym, gidx, f32, bias; } c[] = {
        {67, 172, 4, 32, 0, 0, 0, 1},   {67, 4104, 4, 128, 1, 0, 0, 0}, {67, 4104, 4, 0, 1, 0, 0, 0},
        {33, 4104, 4, 64, 0, 0, 1, 1},  {40, 4104, 4, 48, 1, 0, 0, 0},   {67, 172, 4, 32, 1, 1, 0, 0},
        {67, 4104, 4, 128, 1, 2, 0, 0}, {40, 4096, 4, 512, 0, 0, 0, 0},  {16, 8192, 4, 128, 0, 0, 0, 0},
        {67, 172, 8, 0, 0, 0, 0, 1},    {40, 4104, 8, 32, 1, 0, 1, 0},  {17, 4104, 8, 128, 0, 0, 0, 0},
        {45, 4104, 8, 128, 0, 2, 0, 1}, {67, 172, 3, 32, 1, 0, 0, 0},   {33, 4104, 2, 64, 0, 0, 0, 1},
        {67, 172, 5, 0, 1, 0, 1, 0},    {20, 300, 6, 32, 0, 1, 0, 0},   {67, 172, 7, 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        weight w = make_qpack(c[i].rows, c[i].cols, c[i].bits, c[i].group, c[i].asym, c[i].gidx, c[i].f32, c[i].bias);
        check_weight(&w);
        weight_free(&w);
    }
}

static void check_int8_fp8(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "INT8 / FP8 weight-only kernels on the GPU");
    pq_actq none = {PQ_ACTQ_NONE, 0};
    struct { int rows, cols, fp8, per_channel, bias; } c[] = {
        {67, 172, 0, 1, 1}, {45, 4104, 0, 1, 0}, {40, 4104, 1, 1, 1}, {130, 172, 1, 0, 0}, {16, 64, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        weight w = make_bytes(c[i].rows, c[i].cols, c[i].fp8, c[i].per_channel, none, c[i].bias);
        check_weight(&w);
        weight_free(&w);
    }
}

// The W8A8 activation quantizer against the _ref on the same FP16 values:
// codes and scales byte for byte, with a zero token, a token holding an Inf
// and one holding a NaN among the random ones.
static void check_actq(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "W8A8 activation quantization on the GPU");
    const int T = 21, cols = 4104;
    struct { pq_actq_type type; float st; } c[] = {
        {PQ_ACTQ_INT8, 0}, {PQ_ACTQ_INT8, 0.02f}, {PQ_ACTQ_FP8, 0}, {PQ_ACTQ_FP8, 0.005f}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        pq_act_dtype dt = i % 2 ? PQ_ACT_BF16 : PQ_ACT_F16;
        float *x = make_x(dt, T, cols);
        for (int k = 0; k < cols; k++) x[1 * cols + k] = 0.0f;
        x[2 * cols + 7] = INFINITY;
        x[3 * cols + 100] = NAN;
        for (int k = 0; k < cols; k++) x[4 * cols + k] *= 1e-4f; // tiny: the FP8 scale floor
        pq_cuda_test_round(dt, x, (size_t)T * cols);
        pq_actq act = {c[i].type, c[i].st};
        void *mem = pq_alloc(pq_w8a8_act_bytes(T, cols));
        pq_w8a8_act a = pq_w8a8_act_view(mem, T, cols);
        if (act.type == PQ_ACTQ_INT8) pq_actq_int8_ref(x, T, cols, act.static_scale, &a);
        else pq_actq_fp8_ref(x, T, cols, act.static_scale, &a);
        uint8_t *q = malloc((size_t)T * cols);
        float *s = malloc((size_t)T * 4);
        pq_status st = pq_cuda_test_actq(&act, dt, x, T, cols, q, s);
        int codes_ok = st == PQ_OK, scales_ok = st == PQ_OK;
        for (int t = 0; t < T && st == PQ_OK; t++) {
            codes_ok &= memcmp(q + (size_t)t * cols, (uint8_t *)a.q + (size_t)t * a.ld, (size_t)cols) == 0;
            scales_ok &= memcmp(&s[t], &a.scale[t], 4) == 0 || (isnan(s[t]) && isnan(a.scale[t]));
        }
        PQ_CHECK(codes_ok && scales_ok, "%s %s activation codes and scales from %s == _ref byte for byte, padding "
                 "zero (%s)", act.type == PQ_ACTQ_INT8 ? "INT8" : "FP8", act.static_scale > 0 ? "static" : "dynamic",
                 pq_act_dtype_name(dt),
                 st == PQ_OK ? (codes_ok ? "scales differ" : "codes differ") : pq_last_error());
        free(x); free(q); free(s);
        pq_free(mem);
    }
}

// W8A8 forwards: INT8 sums are exact and the epilogue rounds in the _ref's
// order, so INT8 equals the reference bit for bit; FP8 within TOL_FP8MMA.
static void check_w8a8(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "W8A8 GEMMs (cuBLASLt) on the GPU");
    struct { int rows, cols, fp8, per_channel; float st; int bias; } c[] = {
        {40, 4104, 0, 1, 0, 1}, {33, 172, 0, 1, 0.03f, 0}, {67, 172, 1, 1, 0, 1}, {45, 4104, 1, 0, 0.01f, 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        pq_actq act = {c[i].fp8 ? PQ_ACTQ_FP8 : PQ_ACTQ_INT8, c[i].st};
        weight w = make_bytes(c[i].rows, c[i].cols, c[i].fp8, c[i].per_channel, act, c[i].bias);
        // T = 1, 16, 17, 32: padded to 32 tokens (what cuBLASLt's INT8 GEMM accepts)
        static const int TW[] = {1, 16, 17, 32, 37, 256};
        for (size_t k = 0; k < sizeof TW / sizeof TW[0]; k++) {
            int T = TW[k];
            const pq_linear *W = &w.W;
            float *x = make_x(PQ_ACT_F16, T, W->cols), *want = malloc((size_t)T * W->rows * 4), *got = malloc((size_t)T * W->rows * 4);
            pq_linear_forward_ref(W, x, T, want);
            pq_test_poison(got, (size_t)T * W->rows);
            pq_status s = pq_cuda_test_qlinear(W, PQ_ACT_F16, x, T, PQ_CUDA_PATH_AUTO, got, NULL);
            double err = s == PQ_OK ? pq_rel_l2(got, want, (size_t)T * W->rows) : INFINITY;
            if (c[i].fp8)
                PQ_CHECK(s == PQ_OK && err < TOL_FP8MMA, "%s, T %d: rel L2 %.2e < %.0e (%s)", w.what, T, err,
                         TOL_FP8MMA, s == PQ_OK ? "ok" : pq_last_error());
            else
                PQ_CHECK(s == PQ_OK && pq_allclose(got, want, (size_t)T * W->rows, 0, 0),
                         "%s, T %d: == reference bit for bit (%s)", w.what, T, s == PQ_OK ? "ok" : pq_last_error());
            free(x); free(want); free(got);
        }
        weight_free(&w);
    }
}

// Weights the upload refuses.
static void check_refused(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "malformed quantized weights refused by the upload");
    weight w = make_qpack(16, 64, 4, 32, 0, 1, 0, 0);
    ((int32_t *)w.buf[3])[5] = 2; // 2 groups: 0, 1
    float x[64] = {0}, y[16];
    pq_status s = pq_cuda_test_qlinear(&w.W, PQ_ACT_F16, x, 1, PQ_CUDA_PATH_AUTO, y, NULL);
    PQ_CHECK(s == PQ_ERR_FORMAT && strstr(pq_last_error(), "g_idx[5] = 2"), "g_idx outside the groups refused (%s)",
             pq_last_error());
    w.W.act = (pq_actq){PQ_ACTQ_INT8, 0};
    ((int32_t *)w.buf[3])[5] = 1;
    s = pq_cuda_test_qlinear(&w.W, PQ_ACT_F16, x, 1, PQ_CUDA_PATH_AUTO, y, NULL);
    PQ_CHECK(s == PQ_ERR_FORMAT, "activation quantization on a packed weight refused (%s)", pq_last_error());
    weight_free(&w);
    w = make_qpack(16, 64, 4, 32, 1, 0, 0, 0);
    ((uint8_t *)w.buf[2])[3] = 16;
    s = pq_cuda_test_qlinear(&w.W, PQ_ACT_F16, x, 1, PQ_CUDA_PATH_AUTO, y, NULL);
    PQ_CHECK(s == PQ_ERR_FORMAT && strstr(pq_last_error(), "zero point 16 of a 4-bit weight"),
             "a zero point beyond the code range refused (%s)", pq_last_error());
    weight_free(&w);
    w = make_bytes(16, 64, 0, 1, (pq_actq){PQ_ACTQ_FP8, 0}, 0);
    s = pq_cuda_test_qlinear(&w.W, PQ_ACT_F16, x, 1, PQ_CUDA_PATH_AUTO, y, NULL);
    PQ_CHECK(s == PQ_ERR_FORMAT, "FP8 activations with INT8 weights refused (%s)", pq_last_error());
    weight_free(&w);
}

// ---- without a GPU: the tiled layout and the GEMV's index algebra ---------------------

// W (a QPACK weight of 4 or 8 bits whose groups the tiled layout takes) tiled
// by pq_qtile_ref, its scales and zero points laid out [tile][group][16] as
// the upload lays them, run through the lane-by-lane emulation of the tiled
// GEMV, against pq_linear_forward_ref. perm: an act-order weight's stored
// column order (stored column j holds source column perm[j]) or NULL.
static void check_tiled_emulation(const weight *w, const int32_t *perm) {
    const pq_qpack *q = &w->W.q;
    const int rows = q->rows, cols = q->cols, bits = q->bits, T = 9;
    const int ng = pq_qpack_ngroups(cols, q->group), nst = pq_tile_stages(cols, bits), tiles = (rows + 15) / 16;
    const size_t stride = (size_t)pq_qpack_words_per_row(cols, bits) * 4;
    uint32_t *tiled = malloc((size_t)tiles * nst * PQ_TILE_WORDS * 4);
    float *sc = calloc((size_t)tiles * ng * 16, 4);
    uint8_t *zp = q->zeros ? calloc((size_t)tiles * ng * 16, 1) : NULL;
    pq_qtile_ref((const uint8_t *)q->packed, stride, rows, cols, bits, perm, nst, tiled);
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < ng; g++) {
            size_t at = ((size_t)(r / 16) * ng + g) * 16 + r % 16;
            sc[at] = q->scales[(size_t)r * ng + g];
            if (zp) zp[at] = q->zeros[(size_t)r * ng + g];
        }
    float *x = make_x(PQ_ACT_F16, T, cols), *xs = malloc((size_t)T * cols * 4);
    float *want = malloc((size_t)T * rows * 4);
    double *got = malloc((size_t)T * rows * sizeof(double));
    for (int t = 0; t < T; t++)
        for (int j = 0; j < cols; j++) xs[(size_t)t * cols + j] = x[(size_t)t * cols + (perm ? perm[j] : j)];
    pq_linear_forward_ref(&w->W, x, T, want);
    pq_emul_tiled_gemv(tiled, rows, cols, bits, nst, q->group >= cols ? cols : q->group, ng, sc, zp, xs, T, got);
    double num = 0, den = 0;
    for (size_t i = 0; i < (size_t)T * rows; i++) {
        double e = got[i] - want[i];
        num += e * e, den += (double)want[i] * want[i];
    }
    // exact products and scales applied in double against the _ref's f32
    // weights (one rounding each, 2^-24): ~1e-7; a lane holding the wrong
    // columns, a misplaced code or the wrong group's scale gives O(1)
    double err = den > 0 ? sqrt(num / den) : INFINITY;
    PQ_CHECK(err < 1e-6, "%s: pq_qtile_ref + the lane-by-lane tiled GEMV (T %d, %d stages) == W x, rel L2 %.2e",
             w->what, T, nst, err);
    free(tiled); free(sc); free(zp); free(x); free(xs); free(want); free(got);
}

static void check_tiled_cpu(void) {
    struct { int rows, cols, bits, group, asym, actorder; } c[] = {
        {32, 512, 4, 32, 0, 0},  {35, 700, 4, 128, 1, 0}, {16, 1024, 4, 512, 1, 0}, {20, 300, 4, 0, 0, 0},
        {48, 256, 4, 64, 1, 1},  {17, 384, 8, 16, 1, 0},  {32, 256, 8, 128, 0, 0},  {19, 200, 8, 0, 1, 0},
        {16, 512, 8, 256, 0, 1}, {33, 256, 4, 256, 0, 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        weight w = make_qpack(c[i].rows, c[i].cols, c[i].bits, c[i].group, c[i].asym, 0, 0, 0);
        int32_t *perm = NULL;
        if (c[i].actorder) { // a random order; g_idx puts consecutive stored columns in one group
            int cols = c[i].cols;
            perm = malloc((size_t)cols * 4);
            int32_t *gi = w.buf[3] = malloc((size_t)cols * 4);
            for (int k = 0; k < cols; k++) perm[k] = k;
            for (int k = cols - 1; k > 0; k--) {
                int j = (int)(pq_test_u64() % (uint64_t)(k + 1)), t = perm[k];
                perm[k] = perm[j], perm[j] = t;
            }
            for (int j = 0; j < cols; j++) gi[perm[j]] = j / c[i].group;
            w.W.q.g_idx = gi;
            snprintf(w.what + strlen(w.what), sizeof w.what - strlen(w.what), " act order");
        }
        check_tiled_emulation(&w, perm);
        free(perm);
        weight_free(&w);
    }
    // the tiling itself, word by word, on one hand-checkable case: row 9 of a
    // 4-bit weight, column 3 (code 3 of word 0: nibble 5) lands in word
    // ((0 * 2 + 1) * 32 + 1 * 4 + 0) * 4 + 0 = 144 of tile 0,
    // stage 0 (half h = 1, g = 1, chunk 0, k = 0)
    uint8_t src[16 * 4] = {0};
    src[9 * 4 + 1] = 0x70; // row 9: column 3 = code 7 (byte 1, high nibble)
    uint32_t out[PQ_TILE_WORDS];
    pq_qtile_ref(src, 4, 16, 8, 4, NULL, 1, out);
    int others = 0;
    for (int i = 0; i < PQ_TILE_WORDS; i++) others += i != 144 && out[i] != 0;
    PQ_CHECK(out[144] == 7u << 20 && others == 0 && pq_tile_word(9, 0, 1) == 144,
             "pq_qtile_ref: row 9 column 3 of a 4-bit weight is nibble 5 of tiled word 144 (got 0x%08x)", out[144]);
}

// pq_qtile_cuda against pq_qtile_ref, word for word: 4 and 8 bits, ragged
// rows and columns, a perm, in one call and in chunks of rows as the
// upload calls it.
static void check_qtile_gpu(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "the tiling kernel on the GPU");
    struct { int rows, cols, bits, perm, chunk; } c[] = {
        {37, 700, 4, 0, 0}, {37, 700, 4, 1, 16}, {64, 4104, 4, 0, 32}, {19, 200, 8, 1, 0}, {48, 4104, 8, 0, 16},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        const int rows = c[i].rows, cols = c[i].cols, bits = c[i].bits, nst = pq_tile_stages(cols, bits);
        const size_t stride = (size_t)pq_qpack_words_per_row(cols, bits) * 4;
        const size_t words = (size_t)((rows + 15) / 16) * nst * PQ_TILE_WORDS;
        uint8_t *src = malloc((size_t)rows * stride);
        uint32_t *want = malloc(words * 4), *got = malloc(words * 4);
        int32_t *perm = c[i].perm ? malloc((size_t)cols * 4) : NULL;
        for (size_t k = 0; k < (size_t)rows * stride; k++) src[k] = (uint8_t)pq_test_u64();
        for (int k = 0; perm && k < cols; k++) perm[k] = cols - 1 - k;
        pq_qtile_ref(src, stride, rows, cols, bits, perm, nst, want);
        pq_status s = pq_cuda_test_qtile(src, stride, rows, cols, bits, perm, nst, c[i].chunk, got);
        PQ_CHECK(s == PQ_OK && memcmp(got, want, words * 4) == 0,
                 "pq_qtile_cuda %d-bit [%d x %d]%s, %s == pq_qtile_ref word for word (%s)", bits, rows, cols,
                 perm ? " permuted" : "", c[i].chunk ? "in chunks of rows" : "one call", pq_last_error());
        free(src); free(want); free(got); free(perm);
    }
}

int main(void) {
    pq_test_seed();
    have_gpu = pq_cuda_device_count() > 0;
    check_tiled_cpu();
    check_qtile_gpu();
    check_qpack();
    check_int8_fp8();
    check_actq();
    check_w8a8();
    check_refused();
    return pq_test_done();
}
