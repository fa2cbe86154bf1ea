// GPTQ on the GPU (quant/gptq_cuda.h) against the CPU's (quant/gptq.h) on
// fresh random problems: H = X^T X of random correlated inputs (a dead
// column included; the dampening is prepare's), W random; several shapes
// (cols not a multiple of the group, rows not a multiple of the kernel's 64,
// act-order with dynamic and static groups, per channel, sym / asym, 3, 4
// and 8 bits, the mse observer, F16 / BF16 / F32 scales). Also: the factor
// U against the CPU's, the dampening raised alike on an indefinite H, the
// CPU's errors for a hopeless or non-finite H and for a scale that
// overflows; the output error measured on the device against
// pq_act_stats_output_error. Skips without a GPU.
#include "tests/test.h"

#include "calib/stats.h"
#include "common/sys.h"
#include "kernels/blas.h"
#include "kernels/cuda_host.h"
#include "quant/gptq.h"
#include "quant/gptq_cuda.h"

static int have_gpu;

typedef struct {
    int rows, cols, group, bits, sym, act, stat, block, mse;
    pq_dtype dt;
} shape;

// x [T][cols] = z A: a random mixing A, channels of different scales, column `dead` always 0.
static float *inputs(int T, int cols, int dead) {
    float *z = malloc((size_t)T * cols * sizeof(float)), *a = malloc((size_t)cols * cols * sizeof(float));
    float *x = malloc((size_t)T * cols * sizeof(float));
    pq_test_fill(z, (size_t)T * cols, 1.0f);
    for (int i = 0; i < cols; i++)
        for (int j = 0; j < cols; j++) a[(size_t)i * cols + j] = (i == j) + 0.5f * pq_test_normal() / sqrtf(i + 1.0f);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < cols; j++) {
            double s = 0;
            for (int i = 0; i < cols; i++) s += (double)z[(size_t)t * cols + i] * a[(size_t)i * cols + j];
            x[(size_t)t * cols + j] = j == dead ? 0.0f : (float)s * (1.0f + 3.0f * (j % 5 == 0));
        }
    free(z);
    free(a);
    return x;
}

// h = X^T X (f32, exactly symmetric: (i, j) and (j, i) are the same sum).
static float *xtx(const float *x, int T, int cols) {
    float *h = malloc((size_t)cols * cols * sizeof(float));
    for (int i = 0; i < cols; i++)
        for (int j = 0; j <= i; j++) {
            double s = 0;
            for (int t = 0; t < T; t++) s += (double)x[(size_t)t * cols + i] * x[(size_t)t * cols + j];
            h[(size_t)i * cols + j] = h[(size_t)j * cols + i] = (float)s;
        }
    return h;
}

static pq_gptq_params params_of(const shape *s) {
    pq_gptq_params p = pq_gptq_default_params();
    p.bits = s->bits, p.group = s->group, p.sym = s->sym, p.act_order = s->act, p.static_groups = s->stat;
    p.block_size = s->block, p.observer = s->mse ? PQ_OBSERVER_MSE : PQ_OBSERVER_MINMAX;
    return p;
}

// A zeroed output tensor for p (as the method makes it); its scales and codes poisoned when `poison`.
static pq_status make_q(const pq_gptq_params *p, int rows, int cols, pq_dtype dt, int poison, pq_qtensor *q) {
    *q = (pq_qtensor){.fmt = PQ_W_QPACK, .rows = rows, .cols = cols, .bits = p->bits,
                      .group = p->group > 0 && p->group < cols ? p->group : cols, .scale_dtype = dt};
    PQ_TRY(pq_qtensor_alloc(q, !p->sym));
    if (pq_gptq_has_g_idx(p, cols)) {
        q->g_idx = pq_alloc((size_t)cols * sizeof(int32_t));
        PQ_FAIL_IF(!q->g_idx, PQ_ERR_NOMEM, "out of memory");
    }
    if (poison) {
        pq_test_poison(q->scales, (size_t)q->nscales);
        memset(q->packed, 0xa5, (size_t)rows * pq_qpack_words_per_row(cols, p->bits) * sizeof(uint32_t));
        if (q->zeros) memset(q->zeros, 0xa5, (size_t)q->nscales);
        if (q->g_idx) memset(q->g_idx, 0xa5, (size_t)cols * sizeof(int32_t));
    }
    return PQ_OK;
}

// sum over rows and tokens of ((W - Q) x_t)^2, in double.
static double recon_error(const float *w, const pq_qtensor *q, const float *x, int T) {
    int rows = q->rows, cols = q->cols;
    float *d = malloc((size_t)rows * cols * sizeof(float));
    pq_linear L = pq_qtensor_linear(q);
    pq_linear_rows_ref(&L, 0, rows, d);
    double e = 0;
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < T; t++) {
            double s = 0;
            for (int c = 0; c < cols; c++)
                s += ((double)w[(size_t)r * cols + c] - d[(size_t)r * cols + c]) * x[(size_t)t * cols + c];
            e += s * s;
        }
    free(d);
    return e;
}

// One shape: CPU prepare + solve, GPU prepare + solve, compared.
static void check_shape(pq_gptq_cuda *g, const shape *s, pq_pool *pool) {
    int rows = s->rows, cols = s->cols, T = 2 * cols;
    pq_gptq_params p = params_of(s);
    float *w = malloc((size_t)rows * cols * sizeof(float)), *x = inputs(T, cols, 7), *h = xtx(x, T, cols);
    pq_test_fill(w, (size_t)rows * cols, 0.05f);
    void *hws = pq_alloc(pq_gptq_hessian_bytes(cols)), *sws = pq_alloc(pq_gptq_solve_bytes(rows, cols, &p));
    void *gws = pq_alloc(pq_gptq_cuda_hessian_bytes(cols));
    double *u = malloc((size_t)cols * cols * sizeof(double)), lc = 0, lg = 0;
    pq_gptq_hessian hc, hg;
    pq_qtensor qc = {0}, qg = {0};
    pq_status st = pq_gptq_prepare(h, cols, &p, "test.layer", hws, pool, &hc);
    if (st == PQ_OK) st = pq_gptq_cuda_prepare(g, h, cols, &p, "test.layer", gws, &hg);
    if (st == PQ_OK) st = pq_gptq_cuda_read_factor(g, u);
    if (st == PQ_OK) st = make_q(&p, rows, cols, s->dt, 0, &qc);
    if (st == PQ_OK) st = make_q(&p, rows, cols, s->dt, 1, &qg);
    if (st == PQ_OK) st = pq_gptq_solve(w, rows, &hc, &p, "test.layer", sws, pool, &qc, &lc);
    if (st == PQ_OK) st = pq_gptq_cuda_solve(g, w, rows, &hg, &p, "test.layer", &qg, &lg);
    char what[160];
    snprintf(what, sizeof what, "%dx%d group %d %d-bit %s%s%s block %d%s %s scales", rows, cols, s->group, s->bits,
             s->sym ? "sym" : "asym", s->act ? " act-order" : "", s->stat ? " static-groups" : "", s->block,
             s->mse ? " mse" : "", pq_dtype_name(s->dt));
    if (st != PQ_OK) {
        PQ_CHECK(0, "GPU GPTQ %s: %s", what, pq_last_error());
        goto done;
    }
    // U: two f64 factorizations in different orders; their difference is
    // ~n kappa(H) 2^-53 relative to U's largest element, kappa <= ~1e4 here
    // (1% dampening of the mean diagonal, diagonal scales within 16x), n <= 300
    double umax = 0, udiff = 0;
    for (size_t k = 0; k < (size_t)cols * cols; k++) {
        umax = fmax(umax, fabs(hc.u[k]));
        udiff = fmax(udiff, fabs(hc.u[k] - u[k]));
    }
    int same_order = memcmp(hc.perm, hg.perm, (size_t)cols * sizeof(int)) == 0 &&
                     memcmp(hc.dead, hg.dead, (size_t)cols) == 0 && hc.n_dead == 1 && hg.n_dead == 1 &&
                     hc.damp == hg.damp && hc.retries == hg.retries;
    PQ_CHECK(same_order && udiff <= 1e-9 * umax, "prepare %s: same order, dead column and dampening; U within %.1e "
             "of the CPU's (max |U| %.3g)", what, udiff / umax, umax);
    // Codes: every scalar step is the CPU's IEEE operation, so codes differ
    // only where U's or the lazy GEMM's rounding (another summation order,
    // ~1e-15 relative) moved a value across a rounding tie of the f32 code:
    // rare, hence >= 99% identical. Rows are independent: a flipped code
    // changes the error its row spreads and so that row's later scales, so
    // scales and zero points are compared in the rows whose codes all agree
    // (at least 95% of them), within a relative 1e-4 (an f32 / BF16 / F16
    // rounding of values that agree to ~1e-15 moves a scale by at most one
    // ulp only at a rounding boundary).
    pq_linear Lc = pq_qtensor_linear(&qc), Lg = pq_qtensor_linear(&qg);
    int ng = pq_qtensor_ngroups(&qc), same_codes = 0, same_rows = 0, bad_scales = 0;
    for (int r = 0; r < rows; r++) {
        int row_same = 1;
        for (int c = 0; c < cols; c++) {
            int a = pq_qpack_code(&Lc.q, r, c) == pq_qpack_code(&Lg.q, r, c);
            same_codes += a;
            row_same &= a;
        }
        same_rows += row_same;
        for (int k = r * ng; row_same && k < (r + 1) * ng; k++)
            bad_scales += !(fabs(qg.scales[k] - qc.scales[k]) <= 1e-4 * fabs(qc.scales[k])) ||
                          (qc.zeros && qc.zeros[k] != qg.zeros[k]);
    }
    double frac = (double)same_codes / ((double)rows * cols);
    int gidx = !qc.g_idx || memcmp(qc.g_idx, qg.g_idx, (size_t)cols * sizeof(int32_t)) == 0;
    PQ_CHECK(frac >= 0.99 && same_rows >= 0.95 * rows && bad_scales == 0 && gidx,
             "solve %s: %.4f%% of codes identical, %d of %d rows all identical, %d of their scales / zero points off "
             "by more than 1e-4, g_idx %s", what, 100 * frac, same_rows, rows, bad_scales, gidx ? "identical" : "DIFFERS");
    // what GPTQ minimizes: the output error over the calibration inputs, within 1% of the CPU's
    double ec = recon_error(w, &qc, x, T), eg = recon_error(w, &qg, x, T);
    PQ_CHECK(fabs(eg - ec) <= 0.01 * ec && fabs(lg - lc) <= 0.01 * lc,
             "solve %s: reconstruction error sum((W-Q)X)^2 %.6g vs CPU %.6g, loss %.6g vs %.6g", what, eg, ec, lg, lc);
    // the output error of the GPU's codes measured on the device and by the
    // CPU's pq_act_stats_output_error: both f32 GEMMs with H (products of
    // cols f32 terms, ~1e-6 relative in another summation order) summed in double
    pq_act_stats as = {.cols = cols, .want = PQ_STAT_XTX, .n = T, .xtx = h};
    void *ews = pq_alloc(pq_act_stats_error_bytes(rows, cols, pq_pool_size(pool)));
    double og = -1, oc = pq_act_stats_output_error(&as, w, &Lg, ews, pool);
    st = pq_gptq_cuda_output_error(g, &og);
    pq_status again = pq_gptq_cuda_output_error(g, &og);
    PQ_CHECK(st == PQ_OK && fabs(og - oc) <= 1e-4 * oc && oc > 0 && again == PQ_ERR_ARG,
             "output error %s on the GPU %.9g vs the CPU's %.9g; a second call without a solve is refused", what, og, oc);
    pq_free(ews);
done:
    pq_qtensor_free(&qc);
    pq_qtensor_free(&qg);
    pq_free(hws), pq_free(sws), pq_free(gws);
    free(u), free(w), free(x), free(h);
}

static void check_solves(pq_pool *pool) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "GPTQ on the GPU against the CPU");
    const shape cs[] = {
        {72, 172, 32, 4, 1, 0, 0, 128, 0, PQ_DT_F16},  {72, 172, 32, 4, 0, 1, 0, 64, 0, PQ_DT_F16},
        {72, 172, 64, 4, 1, 1, 1, 32, 0, PQ_DT_BF16},  {100, 300, 128, 3, 0, 1, 0, 128, 0, PQ_DT_F16},
        {65, 256, 0, 4, 1, 1, 0, 48, 0, PQ_DT_F32},    {72, 172, 32, 4, 0, 0, 0, 128, 1, PQ_DT_F16},
        {40, 130, 32, 8, 1, 0, 1, 16, 0, PQ_DT_F16},   {130, 200, 64, 4, 0, 1, 1, 128, 1, PQ_DT_BF16},
    };
    pq_gptq_cuda *g;
    pq_status st = pq_gptq_cuda_create(&g);
    PQ_CHECK(st == PQ_OK, "pq_gptq_cuda_create: %s", st == PQ_OK ? "ok" : pq_last_error());
    if (st != PQ_OK) return;
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) check_shape(g, &cs[k], pool);
    pq_gptq_cuda_free(g);
}

// The CPU's failure behaviour: an indefinite H raises the dampening alike,
// a hopeless or NaN one is PQ_ERR_NUMERIC naming the layer; a scale that
// overflows its dtype names the row.
static void check_failures(pq_pool *pool) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "GPTQ on the GPU: failures");
    int rows = 16, cols = 48;
    pq_gptq_cuda *g;
    if (pq_gptq_cuda_create(&g) != PQ_OK) {
        PQ_CHECK(0, "pq_gptq_cuda_create: %s", pq_last_error());
        return;
    }
    float *w = malloc((size_t)rows * cols * sizeof(float)), *h = calloc((size_t)cols * cols, sizeof(float));
    void *ws = pq_alloc(pq_gptq_cuda_hessian_bytes(cols)), *hws = pq_alloc(pq_gptq_hessian_bytes(cols));
    pq_test_fill(w, (size_t)rows * cols, 0.05f);
    for (int i = 0; i < cols; i++) h[(size_t)i * cols + i] = i == 7 ? -2.0f : 1.0f;
    pq_gptq_params p = pq_gptq_default_params();
    p.group = 32;
    pq_gptq_hessian hg, hc;
    pq_status sg = pq_gptq_cuda_prepare(g, h, cols, &p, "model.layers.3 q/k/v input", ws, &hg);
    pq_status sc = pq_gptq_prepare(h, cols, &p, "cpu", hws, pool, &hc);
    PQ_CHECK(sg == PQ_OK && sc == PQ_OK && hg.retries == hc.retries && hg.retries == 3 && hg.damp == hc.damp,
             "indefinite Hessian: dampening raised %d times to %g, as on the CPU (%d, %g)", hg.retries, hg.damp,
             hc.retries, hc.damp);
    pq_qtensor q;
    w[3 * cols + 10] = 1e6f; // row 3's first group: a scale of 1e6 / 7.5 overflows F16
    sg = sg == PQ_OK ? make_q(&p, rows, cols, PQ_DT_F16, 1, &q) : sg;
    if (sg == PQ_OK) {
        sg = pq_gptq_cuda_solve(g, w, rows, &hg, &p, "model.layers.3.self_attn.q_proj", &q, NULL);
        PQ_CHECK(sg == PQ_ERR_NUMERIC && strstr(pq_last_error(), "model.layers.3.self_attn.q_proj: row 3: a scale "
                                                                 "overflows"),
                 "an overflowing scale is PQ_ERR_NUMERIC naming the row: %s", pq_last_error());
        pq_qtensor_free(&q);
    }
    h[7 * cols + 7] = -1e30f;
    sg = pq_gptq_cuda_prepare(g, h, cols, &p, "model.layers.3 q/k/v input", ws, &hg);
    PQ_CHECK(sg == PQ_ERR_NUMERIC && strstr(pq_last_error(), "model.layers.3 q/k/v input: the Hessian is not positive "
                                                             "definite even with dampening 100"),
             "a hopeless Hessian is PQ_ERR_NUMERIC naming the layer: %s", pq_last_error());
    h[7 * cols + 7] = 1.0f; // a good factor again, then a NaN: it must not survive the failed prepare
    sg = pq_gptq_cuda_prepare(g, h, cols, &p, "model.layers.3 q/k/v input", ws, &hg);
    h[7 * cols + 7] = NAN;
    if (sg == PQ_OK) sg = pq_gptq_cuda_prepare(g, h, cols, &p, "model.layers.3 q/k/v input", ws, &hg);
    PQ_CHECK(sg == PQ_ERR_NUMERIC && strstr(pq_last_error(), "Hessian element [7, 7] is NaN"),
             "a NaN in the Hessian is refused by position: %s", pq_last_error());
    sg = pq_gptq_cuda_read_factor(g, (double *)hws);
    PQ_CHECK(sg == PQ_ERR_ARG, "after a failed prepare there is no factor to read or solve with: %s", pq_last_error());
    pq_free(ws), pq_free(hws);
    free(w), free(h);
    pq_gptq_cuda_free(g);
}

// Without a GPU: the context is refused by the device rule, nothing leaks.
static void check_no_device(void) {
    if (have_gpu) return;
    pq_gptq_cuda *g = (pq_gptq_cuda *)&have_gpu;
    pq_status st = pq_gptq_cuda_create(&g);
    PQ_CHECK(st == PQ_ERR_NO_DEVICE && g == NULL, "no GPU: pq_gptq_cuda_create is PQ_ERR_NO_DEVICE: %s",
             pq_last_error());
}

int main(void) {
    pq_test_seed();
    have_gpu = pq_cuda_device_count() > 0;
    if (pq_blas_init() != PQ_OK) {
        printf("FAIL - OpenBLAS: %s\n", pq_last_error());
        return 1;
    }
    pq_pool *pool;
    pq_pool_create(2, &pool);
    check_no_device();
    check_solves(pool);
    check_failures(pool);
    pq_pool_free(pool);
    return pq_test_done();
}
