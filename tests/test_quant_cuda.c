// The CUDA kernels of the quantized formats (kernels/quant_cuda.h) against
// their C references on fresh random weights and activations: the fused
// GEMVs (tensor-core and generic), the dequantized panels + cuBLAS, the
// W8A8 activation quantizer and cuBLASLt INT8 / FP8 GEMMs; shapes with
// ragged columns (172, 4096 + 8), row counts that are not a multiple of a
// block, T = 1, 3, 37, 256. The activations are rounded to FP16 before the
// reference sees them (the device's input is FP16), so every difference is
// the device's arithmetic. Without a GPU every check prints skip (FAIL under
// make test-gpu).
#include "common/half.h"
#include "common/sys.h"
#include "kernels/cuda_host.h"
#include "kernels/linear.h"
#include "kernels/quant_cuda.h"
#include "kernels/w8a8.h"
#include "tests/lib/cuda_wrappers.h"
#include "tests/test.h"

static int have_gpu;

// Tolerances (relative L2 of y against pq_linear_forward_ref, which sums the
// f32 weights times x in double):
// - exact FP16 operands summed in f32 (the tensor-core GEMV with one scale
//   per row: INT8, FP8, per-channel QPACK; the generic GEMV): ~sqrt(cols)
//   2^-24 relative, ~1e-6 at 4K columns.
#define TOL_EXACT 1e-5
// - the weight rounded to FP16 before the product (grouped QPACK in the
//   GEMV: (q - z) * scale in FP16; every format in the panel path): 2^-12
//   rms relative per weight, ~2e-4 on a sum of independent terms.
#define TOL_F16W 1e-3
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
    for (int c = 0; gi && c < cols; c++) gi[c] = (int32_t)(pq_test_u64() % (uint64_t)ng);
    w.W = (pq_linear){.fmt = PQ_W_QPACK, .rows = rows, .cols = cols, .q = {rows, cols, bits, g, p, s, z, gi}};
    w.W.bias = bias_of(&w, bias);
    char gname[16] = "channel";
    if (group > 0) snprintf(gname, sizeof gname, "g%d", group);
    snprintf(w.what, sizeof w.what, "QPACK %d-bit %s %s%s%s [%d x %d]%s", bits, gname, asym ? "asym" : "sym",
             gidx ? " g_idx" : "", f32_scales ? " f32 scales" : "", rows, cols, bias ? " + bias" : "");
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

// Fresh activations, rounded to FP16 (what the device multiplies).
static float *make_x(int T, int cols) {
    float *x = malloc((size_t)T * cols * 4);
    pq_test_fill(x, (size_t)T * cols, 1.0f);
    for (size_t i = 0; i < (size_t)T * cols; i++) x[i] = pq_fp16_to_f32(pq_f32_to_fp16(x[i]));
    return x;
}

// ---- checks -------------------------------------------------------------------------

// Whether pq_qlinear_gemv_cuda runs W on the tensor cores with one exact
// scale per row (else: grouped FP16 weights, or the generic kernel).
static int gemv_exact(const pq_linear *W) {
    if (W->fmt != PQ_W_QPACK) return 1;
    const pq_qpack *q = &W->q;
    int tc = (q->bits == 4 || q->bits == 8) && !q->g_idx &&
             (q->group >= q->cols || q->group % (4 * pq_qpack_per_word(q->bits)) == 0);
    return !tc || q->group >= q->cols;
}

// One forward through `path`, against the reference.
static void check_forward(const weight *w, int T, pq_cuda_path path, double tol, const char *how) {
    const pq_linear *W = &w->W;
    float *x = make_x(T, W->cols), *want = malloc((size_t)T * W->rows * 4), *got = malloc((size_t)T * W->rows * 4);
    pq_linear_forward_ref(W, x, T, want);
    pq_test_poison(got, (size_t)T * W->rows);
    pq_status s = pq_cuda_test_qlinear(W, x, T, path, got);
    double err = s == PQ_OK ? pq_rel_l2(got, want, (size_t)T * W->rows) : INFINITY;
    PQ_CHECK(s == PQ_OK && err < tol, "%s, T %d, %s: rel L2 %.2e < %.0e (%s)", w->what, T, how, err, tol,
             s == PQ_OK ? "ok" : pq_last_error());
    free(x); free(want); free(got);
}

static const int TS[] = {1, 3, 37, 256};

// Every token count through pq_linear_cuda_forward, and T = 3 through the
// paths it would not take.
static void check_weight(const weight *w) {
    const pq_linear *W = &w->W;
    for (size_t i = 0; i < sizeof TS / sizeof TS[0]; i++) {
        int T = TS[i];
        double tol = T > PQ_CUDA_GEMV_MAX_T ? TOL_F16W : gemv_exact(W) ? TOL_EXACT : TOL_F16W;
        check_forward(w, T, PQ_CUDA_PATH_AUTO, tol, T > PQ_CUDA_GEMV_MAX_T ? "panels + cuBLAS" : "fused GEMV");
    }
    check_forward(w, 3, PQ_CUDA_PATH_PANEL, TOL_F16W, "panels + cuBLAS (forced)");
    if (W->fmt == PQ_W_QPACK) check_forward(w, 5, PQ_CUDA_PATH_GENERIC, TOL_EXACT, "generic GEMV (forced)");
    // the panels: the _ref's f32 values rounded to FP16, bit for bit
    int r0 = W->rows / 3, n = W->rows - r0;
    float *ref = malloc((size_t)n * W->cols * 4);
    uint16_t *want = malloc((size_t)n * W->cols * 2), *got = malloc((size_t)n * W->cols * 2);
    pq_linear_rows_ref(W, r0, n, ref);
    for (size_t i = 0; i < (size_t)n * W->cols; i++) want[i] = pq_f32_to_fp16(ref[i]);
    memset(got, 0xff, (size_t)n * W->cols * 2);
    pq_status s = pq_cuda_test_qrows(W, r0, n, got);
    PQ_CHECK(s == PQ_OK && memcmp(got, want, (size_t)n * W->cols * 2) == 0,
             "%s: dequantized rows %d..%d == FP16(pq_linear_rows_ref), bit for bit (%s)", w->what, r0, W->rows - 1,
             pq_last_error());
    free(ref); free(want); free(got);
}

static void check_qpack(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "QPACK kernels on the GPU");
    struct { int rows, cols, bits, group, asym, gidx, f32, bias; } c[] = {
        {67, 172, 4, 32, 0, 0, 0, 1},   {67, 4104, 4, 128, 1, 0, 0, 0}, {67, 4104, 4, 0, 1, 0, 0, 0},
        {33, 4104, 4, 64, 0, 0, 1, 1},  {40, 4104, 4, 48, 1, 0, 0, 0},   {67, 172, 4, 32, 1, 1, 0, 0},
        {67, 172, 8, 0, 0, 0, 0, 1},    {40, 4104, 8, 32, 1, 0, 1, 0},  {17, 4104, 8, 128, 0, 0, 0, 0},
        {67, 172, 3, 32, 1, 0, 0, 0},   {33, 4104, 2, 64, 0, 0, 0, 1},   {67, 172, 5, 0, 1, 0, 1, 0},
        {20, 300, 6, 32, 0, 1, 0, 0},   {67, 172, 7, 0, 0, 0, 0, 0},
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
        float *x = make_x(T, cols);
        for (int k = 0; k < cols; k++) x[1 * cols + k] = 0.0f;
        x[2 * cols + 7] = INFINITY;
        x[3 * cols + 100] = NAN;
        for (int k = 0; k < cols; k++) x[4 * cols + k] *= 1e-4f; // tiny: the FP8 scale floor
        pq_actq act = {c[i].type, c[i].st};
        void *mem = pq_alloc(pq_w8a8_act_bytes(T, cols));
        pq_w8a8_act a = pq_w8a8_act_view(mem, T, cols);
        if (act.type == PQ_ACTQ_INT8) pq_actq_int8_ref(x, T, cols, act.static_scale, &a);
        else pq_actq_fp8_ref(x, T, cols, act.static_scale, &a);
        uint8_t *q = malloc((size_t)T * cols);
        float *s = malloc((size_t)T * 4);
        pq_status st = pq_cuda_test_actq(&act, x, T, cols, q, s);
        int codes_ok = st == PQ_OK, scales_ok = st == PQ_OK;
        for (int t = 0; t < T && st == PQ_OK; t++) {
            codes_ok &= memcmp(q + (size_t)t * cols, (uint8_t *)a.q + (size_t)t * a.ld, (size_t)cols) == 0;
            scales_ok &= memcmp(&s[t], &a.scale[t], 4) == 0 || (isnan(s[t]) && isnan(a.scale[t]));
        }
        PQ_CHECK(codes_ok && scales_ok, "%s %s activation codes and scales == _ref byte for byte (%s)",
                 act.type == PQ_ACTQ_INT8 ? "INT8" : "FP8", act.static_scale > 0 ? "static" : "dynamic",
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
        for (size_t k = 0; k < sizeof TS / sizeof TS[0]; k++) {
            int T = TS[k];
            const pq_linear *W = &w.W;
            float *x = make_x(T, W->cols), *want = malloc((size_t)T * W->rows * 4), *got = malloc((size_t)T * W->rows * 4);
            pq_linear_forward_ref(W, x, T, want);
            pq_test_poison(got, (size_t)T * W->rows);
            pq_status s = pq_cuda_test_qlinear(W, x, T, PQ_CUDA_PATH_AUTO, got);
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
    pq_status s = pq_cuda_test_qlinear(&w.W, x, 1, PQ_CUDA_PATH_AUTO, y);
    PQ_CHECK(s == PQ_ERR_FORMAT && strstr(pq_last_error(), "g_idx[5] = 2"), "g_idx outside the groups refused (%s)",
             pq_last_error());
    w.W.act = (pq_actq){PQ_ACTQ_INT8, 0};
    ((int32_t *)w.buf[3])[5] = 1;
    s = pq_cuda_test_qlinear(&w.W, x, 1, PQ_CUDA_PATH_AUTO, y);
    PQ_CHECK(s == PQ_ERR_FORMAT, "activation quantization on a packed weight refused (%s)", pq_last_error());
    weight_free(&w);
    w = make_qpack(16, 64, 4, 32, 1, 0, 0, 0);
    ((uint8_t *)w.buf[2])[3] = 16;
    s = pq_cuda_test_qlinear(&w.W, x, 1, PQ_CUDA_PATH_AUTO, y);
    PQ_CHECK(s == PQ_ERR_FORMAT && strstr(pq_last_error(), "zero point 16 of a 4-bit weight"),
             "a zero point beyond the code range refused (%s)", pq_last_error());
    weight_free(&w);
    w = make_bytes(16, 64, 0, 1, (pq_actq){PQ_ACTQ_FP8, 0}, 0);
    s = pq_cuda_test_qlinear(&w.W, x, 1, PQ_CUDA_PATH_AUTO, y);
    PQ_CHECK(s == PQ_ERR_FORMAT, "FP8 activations with INT8 weights refused (%s)", pq_last_error());
    weight_free(&w);
}

int main(void) {
    pq_test_seed();
    have_gpu = pq_cuda_device_count() > 0;
    check_qpack();
    check_int8_fp8();
    check_actq();
    check_w8a8();
    check_refused();
    return pq_test_done();
}
