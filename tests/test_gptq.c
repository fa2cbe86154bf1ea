// GPTQ (quant/gptq.c) and its linear algebra (quant/linalg.c): the blocked
// factorizations against the unblocked ones; the blocked, lazy-batch solver
// against a plain double implementation of the same update rule written
// here in its simplest form (identical codes); GPTQ beats RTN on correlated
// inputs; a failing Cholesky raises the dampening; H = I gives RTN's codes;
// results do not depend on the thread count.
#include "tests/test.h"

#include <string.h>

#include "common/sys.h"
#include "kernels/blas.h"
#include "kernels/cpu.h"
#include "quant/gptq.h"
#include "quant/linalg.h"
#include "quant/rtn.h"

// RTN into a new quantized tensor q (the caller frees it, also on error).
static pq_status rtn_new(const float *w, int rows, int cols, const pq_scheme *s, pq_dtype dt, const char *name,
                         pq_pool *pool, pq_qtensor *q, double *err) {
    pq_status st = pq_qtensor_init(q, s, rows, cols, dt);
    return st != PQ_OK ? st : pq_rtn_quantize(w, s, name, pool, q, err);
}

// ---- helpers ---------------------------------------------------------------

// A random SPD matrix: M M^T + n I with M n x n normal.
static double *random_spd(int n) {
    double *m = malloc((size_t)n * n * sizeof(double)), *a = calloc((size_t)n * n, sizeof(double));
    for (size_t i = 0; i < (size_t)n * n; i++) m[i] = pq_test_normal();
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = i == j ? n : 0;
            for (int k = 0; k < n; k++) s += m[(size_t)i * n + k] * m[(size_t)j * n + k];
            a[(size_t)i * n + j] = s;
        }
    free(m);
    return a;
}

static double max_abs_diff(const double *a, const double *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs(a[i] - b[i]));
    return d;
}

// h = X^T X for x [T][cols] in f32 (double accumulation).
static float *hessian_of(const float *x, int T, int cols) {
    float *h = malloc((size_t)cols * cols * sizeof(float));
    for (int i = 0; i < cols; i++)
        for (int j = 0; j < cols; j++) {
            double s = 0;
            for (int t = 0; t < T; t++) s += (double)x[(size_t)t * cols + i] * x[(size_t)t * cols + j];
            h[(size_t)i * cols + j] = (float)s;
        }
    return h;
}

// Correlated inputs: x = z A, A a random mixing matrix with a few dominant
// directions, channels of very different scales (as in LLM activations).
static float *correlated_inputs(int T, int cols) {
    float *z = malloc((size_t)T * cols * sizeof(float)), *a = malloc((size_t)cols * cols * sizeof(float));
    float *x = malloc((size_t)T * cols * sizeof(float));
    pq_test_fill(z, (size_t)T * cols, 1.0f);
    for (int i = 0; i < cols; i++)
        for (int j = 0; j < cols; j++)
            a[(size_t)i * cols + j] = (i == j ? 1.0f : 0.0f) + 0.5f * pq_test_normal() / sqrtf((float)(i + 1));
    for (int t = 0; t < T; t++)
        for (int j = 0; j < cols; j++) {
            double s = 0;
            for (int i = 0; i < cols; i++) s += (double)z[(size_t)t * cols + i] * a[(size_t)i * cols + j];
            x[(size_t)t * cols + j] = (float)s * (1.0f + 4.0f * (j % 7 == 0));
        }
    free(z);
    free(a);
    return x;
}

typedef struct {
    pq_qtensor q;
    pq_gptq_hessian h;
    void *hws;
    double loss;
    pq_status st;
} gptq_run;

static gptq_run run_gptq(const float *w, int rows, int cols, const float *h, const pq_gptq_params *p, pq_pool *pool) {
    gptq_run r = {0};
    r.hws = pq_alloc(pq_gptq_hessian_bytes(cols));
    void *ws = pq_alloc(pq_gptq_solve_bytes(rows, cols, p));
    r.q = (pq_qtensor){.fmt = PQ_W_QPACK, .rows = rows, .cols = cols, .bits = p->bits,
                       .group = p->group > 0 && p->group < cols ? p->group : cols, .scale_dtype = PQ_DT_F16};
    r.st = pq_gptq_prepare(h, cols, p, "test", r.hws, pool, &r.h);
    if (r.st == PQ_OK) r.st = pq_qtensor_alloc(&r.q, !p->sym);
    if (r.st == PQ_OK && pq_gptq_has_g_idx(p, cols)) r.q.g_idx = pq_alloc((size_t)cols * sizeof(int32_t));
    if (r.st == PQ_OK) r.st = pq_gptq_solve(w, rows, &r.h, p, "test", ws, pool, &r.q, &r.loss);
    pq_free(ws);
    return r;
}

static void free_run(gptq_run *r) {
    pq_qtensor_free(&r->q);
    pq_free(r->hws);
}

static float *dequant(const pq_qtensor *q) {
    float *w = malloc((size_t)q->rows * q->cols * sizeof(float));
    pq_linear L = pq_qtensor_linear(q);
    pq_linear_rows_ref(&L, 0, q->rows, w);
    return w;
}

// ||(W - Q) X^T||^2 / ||W X^T||^2 in double.
static double output_error(const float *w, const float *wq, int rows, int cols, const float *x, int T) {
    double num = 0, den = 0;
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < T; t++) {
            double a = 0, b = 0;
            for (int c = 0; c < cols; c++) {
                a += (double)w[(size_t)r * cols + c] * x[(size_t)t * cols + c];
                b += (double)wq[(size_t)r * cols + c] * x[(size_t)t * cols + c];
            }
            num += (a - b) * (a - b);
            den += a * a;
        }
    return num / den;
}

// ---- linalg ------------------------------------------------------------------

static void test_linalg(pq_pool *pool) {
    const int sizes[] = {1, 7, 128, 200, 300};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        size_t nn = (size_t)n * n;
        double *a = random_spd(n), *b = malloc(nn * sizeof(double)), *c = malloc(nn * sizeof(double));
        void *ws = pq_alloc(pq_linalg_workspace_bytes(n));
        memcpy(b, a, nn * sizeof(double));
        memcpy(c, a, nn * sizeof(double));
        int rb = pq_chol_lower(b, n, pool), rc = pq_chol_lower_ref(c, n);
        // n-term dot products of O(sqrt(n))-sized factors: ~n * 2^-52 relative to the largest element
        double scale = sqrt((double)n * 2), tol = 1e-13 * n * scale;
        PQ_CHECK(rb == 0 && rc == 0 && max_abs_diff(b, c, nn) <= tol, "chol n=%d: blocked == unblocked (max diff %.2e)", n,
                 max_abs_diff(b, c, nn));
        pq_trinv_lower(b, n, ws, pool);
        pq_trinv_lower_ref(c, n);
        PQ_CHECK(max_abs_diff(b, c, nn) <= 1e-12, "trinv n=%d: blocked == unblocked (max diff %.2e)", n,
                 max_abs_diff(b, c, nn));
        // U^T U = H^-1  <=>  U H U^T = I
        memcpy(b, a, nn * sizeof(double));
        int ru = pq_inv_chol_upper(b, n, ws, pool);
        double worst = 0, below = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                double s = 0;
                for (int k = i; k < n; k++)
                    for (int l = j; l < n; l++) s += b[(size_t)i * n + k] * a[(size_t)k * n + l] * b[(size_t)j * n + l];
                worst = fmax(worst, fabs(s - (i == j)));
                if (j < i) below = fmax(below, fabs(b[(size_t)i * n + j]));
            }
        PQ_CHECK(ru == 0 && worst < 1e-10 && below == 0 && b[0] > 0,
                 "inv_chol_upper n=%d: upper, U H U^T = I (max error %.2e)", n, worst);
        free(a);
        free(b);
        free(c);
        pq_free(ws);
    }
    double bad[4] = {1, 2, 2, 1}; // eigenvalues 3 and -1
    PQ_CHECK(pq_chol_lower(bad, 2, pool) == 2, "chol of an indefinite matrix reports the failing pivot");
}

// ---- (a) blocked == plain --------------------------------------------------

// The plainest GPTQ: H^-1 by Gauss-Jordan, its upper Cholesky factor, then
// column by column with the update applied to every later column at once.
// codes[r][c] (signed, natural order), scales [r][ng].
static void plain_gptq(const float *w, int rows, int cols, const float *hf, const pq_gptq_params *p, double damp,
                       int *codes, float *scales) {
    int n = cols, G = p->group > 0 && p->group < cols ? p->group : cols, ng = (cols + G - 1) / G;
    double *H = calloc((size_t)n * n, sizeof(double)), *inv = calloc((size_t)n * n, sizeof(double));
    double *W = malloc((size_t)rows * n * sizeof(double)), mean = 0;
    int *perm = malloc((size_t)n * sizeof(int)), *dead = calloc((size_t)n, sizeof(int));
    float *zeros = calloc((size_t)rows * ng, sizeof(float)), *f = malloc((size_t)n * sizeof(float));
    for (int i = 0; i < n; i++) {
        dead[i] = hf[(size_t)i * n + i] == 0;
        mean += dead[i] ? 1 : hf[(size_t)i * n + i];
        perm[i] = i;
    }
    mean /= n;
    for (int i = 1; i < n && p->act_order; i++) // insertion sort: descending diag, ties by index
        for (int k = i; k > 0; k--) {
            double a = dead[perm[k - 1]] ? 1 : hf[(size_t)perm[k - 1] * n + perm[k - 1]];
            double b = dead[perm[k]] ? 1 : hf[(size_t)perm[k] * n + perm[k]];
            if (b > a) { int t = perm[k]; perm[k] = perm[k - 1]; perm[k - 1] = t; } else break;
        }
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) H[(size_t)i * n + j] = hf[(size_t)perm[i] * n + perm[j]];
        if (dead[perm[i]]) H[(size_t)i * n + i] = 1;
        H[(size_t)i * n + i] += damp * mean;
        inv[(size_t)i * n + i] = 1;
    }
    for (int c = 0; c < n; c++) { // Gauss-Jordan with partial pivoting
        int piv = c;
        for (int r = c + 1; r < n; r++) if (fabs(H[(size_t)r * n + c]) > fabs(H[(size_t)piv * n + c])) piv = r;
        for (int k = 0; k < n; k++) {
            double t = H[(size_t)c * n + k]; H[(size_t)c * n + k] = H[(size_t)piv * n + k]; H[(size_t)piv * n + k] = t;
            t = inv[(size_t)c * n + k]; inv[(size_t)c * n + k] = inv[(size_t)piv * n + k]; inv[(size_t)piv * n + k] = t;
        }
        double d = H[(size_t)c * n + c];
        for (int k = 0; k < n; k++) H[(size_t)c * n + k] /= d, inv[(size_t)c * n + k] /= d;
        for (int r = 0; r < n; r++) {
            if (r == c) continue;
            double m = H[(size_t)r * n + c];
            for (int k = 0; k < n; k++) H[(size_t)r * n + k] -= m * H[(size_t)c * n + k], inv[(size_t)r * n + k] -= m * inv[(size_t)c * n + k];
        }
    }
    // U = L^T for inv = L L^T (symmetrized first)
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++) inv[(size_t)i * n + j] = inv[(size_t)j * n + i] = 0.5 * (inv[(size_t)i * n + j] + inv[(size_t)j * n + i]);
    pq_chol_lower_ref(inv, n);
    double *U = H; // reuse: U[i][j] = L[j][i]
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) U[(size_t)i * n + j] = j >= i ? inv[(size_t)j * n + i] : 0;
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) W[(size_t)r * n + i] = dead[perm[i]] ? 0 : w[(size_t)r * n + perm[i]];
    if (p->static_groups && G < cols)
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < n; c++) f[c] = dead[c] ? 0 : w[(size_t)r * n + c];
            for (int g = 0; g < ng; g++)
                pq_rtn_group_params(f + g * G, g * G + G < n ? G : n - g * G, p->bits, p->sym, p->observer, PQ_DT_F16,
                                    &scales[(size_t)r * ng + g], &zeros[(size_t)r * ng + g]);
        }
    for (int i = 0; i < n; i++)
        for (int r = 0; r < rows; r++) {
            double *Wr = W + (size_t)r * n;
            int g = p->static_groups && G < cols ? perm[i] / G : i / G;
            if ((!p->static_groups || G == cols) && i % G == 0) {
                int len = i + G < n ? G : n - i;
                for (int c = 0; c < len; c++) f[c] = (float)Wr[i + c];
                pq_rtn_group_params(f, len, p->bits, p->sym, p->observer, PQ_DT_F16, &scales[(size_t)r * ng + g], &zeros[(size_t)r * ng + g]);
            }
            float sc = scales[(size_t)r * ng + g], z = zeros[(size_t)r * ng + g];
            float code = pq_rtn_code((float)Wr[i], sc, z, p->bits);
            codes[(size_t)r * n + perm[i]] = (int)code;
            double err = (Wr[i] - (double)(sc * (code - z))) / U[(size_t)i * n + i];
            for (int c = i + 1; c < n; c++) Wr[c] -= err * U[(size_t)i * n + c];
        }
    free(H); free(inv); free(W); free(perm); free(dead); free(zeros); free(f);
}

static void test_blocked_vs_plain(pq_pool *pool) {
    struct { int rows, cols, group, bits, sym, act, stat, block; } cs[] = {
        {16, 64, 32, 4, 1, 0, 0, 128},   {20, 172, 32, 4, 1, 0, 0, 16},  {20, 172, 32, 3, 0, 1, 0, 64},
        {70, 96, 0, 4, 1, 1, 0, 128},    {33, 100, 32, 3, 1, 1, 0, 40},  {24, 130, 64, 4, 0, 1, 1, 32},
        {65, 64, 0, 3, 0, 0, 0, 8},      {16, 160, 128, 4, 1, 0, 1, 128}, {8, 256, 32, 4, 0, 1, 0, 128},
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        int rows = cs[k].rows, cols = cs[k].cols, T = 3 * cols;
        pq_gptq_params p = pq_gptq_default_params();
        p.bits = cs[k].bits, p.group = cs[k].group, p.sym = cs[k].sym, p.act_order = cs[k].act;
        p.static_groups = cs[k].stat, p.block_size = cs[k].block;
        float *w = malloc((size_t)rows * cols * sizeof(float)), *x = correlated_inputs(T, cols);
        pq_test_fill(w, (size_t)rows * cols, 0.05f);
        for (int t = 0; t < T; t++) x[(size_t)t * cols + 5] = 0; // a dead column
        float *h = hessian_of(x, T, cols);
        gptq_run r = run_gptq(w, rows, cols, h, &p, pool);
        int G = p.group > 0 && p.group < cols ? p.group : cols, ng = (cols + G - 1) / G, diff = 0, sdiff = 0;
        int *codes = malloc((size_t)rows * cols * sizeof(int));
        float *scales = calloc((size_t)rows * ng, sizeof(float));
        if (r.st == PQ_OK) {
            plain_gptq(w, rows, cols, h, &p, r.h.damp, codes, scales);
            pq_linear L = pq_qtensor_linear(&r.q);
            for (int i = 0; i < rows; i++) {
                for (int c = 0; c < cols; c++) diff += pq_qpack_code(&L.q, i, c) - (1 << (p.bits - 1)) != codes[(size_t)i * cols + c];
                for (int g = 0; g < ng; g++) sdiff += r.q.scales[(size_t)i * ng + g] != scales[(size_t)i * ng + g];
            }
        }
        PQ_CHECK(r.st == PQ_OK && diff == 0 && sdiff == 0 && r.h.n_dead == 1,
                 "blocked == plain: %dx%d group %d %d-bit %s%s%s block %d: %d codes and %d scales differ", rows, cols,
                 cs[k].group, p.bits, p.sym ? "sym" : "asym", p.act_order ? " act-order" : "",
                 p.static_groups ? " static-groups" : "", p.block_size, diff, sdiff);
        free_run(&r);
        free(w); free(x); free(h); free(codes); free(scales);
    }
}

// ---- (b) GPTQ beats RTN ---------------------------------------------------------

static void test_beats_rtn(pq_pool *pool) {
    int rows = 96, cols = 256, T = 1024;
    float *w = malloc((size_t)rows * cols * sizeof(float)), *x = correlated_inputs(T, cols);
    pq_test_fill(w, (size_t)rows * cols, 0.05f);
    float *h = hessian_of(x, T, cols);
    const int bits[] = {4, 3}, groups[] = {32, 0};
    for (int b = 0; b < 2; b++)
        for (int g = 0; g < 2; g++)
            for (int act = 0; act < 2; act++) {
                pq_gptq_params p = pq_gptq_default_params();
                p.bits = bits[b], p.group = groups[g], p.act_order = act;
                gptq_run r = run_gptq(w, rows, cols, h, &p, pool);
                pq_scheme s = {PQ_SCHEME_W4A16, bits[b], 0, groups[g] ? groups[g] : PQ_GROUP_CHANNEL, 1, PQ_ACT_NONE, PQ_ACTORDER_NONE, PQ_OBSERVER_MINMAX, 0};
                pq_qtensor qr;
                pq_status st = rtn_new(w, rows, cols, &s, PQ_DT_F16, "rtn", pool, &qr, NULL);
                double eg = 1, er = 0;
                if (r.st == PQ_OK && st == PQ_OK) {
                    float *dg = dequant(&r.q), *dr = dequant(&qr);
                    eg = output_error(w, dg, rows, cols, x, T);
                    er = output_error(w, dr, rows, cols, x, T);
                    free(dg), free(dr);
                    pq_qtensor_free(&qr);
                }
                PQ_CHECK(eg < er, "W%d %s%s: GPTQ output error %.4e < RTN %.4e (%.2fx lower)", bits[b],
                         groups[g] ? "g32" : "channel", act ? " act-order" : "", eg, er, er / eg);
                free_run(&r);
            }
    free(w); free(x); free(h);
}

// The loss GPTQ reports is tr(dW Hd dW^T) for the damped Hessian.
static void test_loss(pq_pool *pool) {
    int rows = 24, cols = 80, T = 200;
    float *w = malloc((size_t)rows * cols * sizeof(float)), *x = correlated_inputs(T, cols);
    pq_test_fill(w, (size_t)rows * cols, 0.05f);
    float *h = hessian_of(x, T, cols);
    pq_gptq_params p = pq_gptq_default_params();
    p.group = 32, p.act_order = 1;
    gptq_run r = run_gptq(w, rows, cols, h, &p, pool);
    float *d = dequant(&r.q);
    double mean = 0, tr = 0;
    for (int i = 0; i < cols; i++) mean += h[(size_t)i * cols + i];
    mean /= cols;
    for (int i = 0; i < rows; i++)
        for (int a = 0; a < cols; a++)
            for (int b = 0; b < cols; b++) {
                double hab = h[(size_t)a * cols + b] + (a == b ? r.h.damp * mean : 0);
                tr += ((double)w[(size_t)i * cols + a] - d[(size_t)i * cols + a]) * hab *
                      ((double)w[(size_t)i * cols + b] - d[(size_t)i * cols + b]);
            }
    PQ_CHECK(r.st == PQ_OK && fabs(r.loss - tr) <= 1e-6 * tr, "loss %.9g = tr(dW Hd dW^T) %.9g", r.loss, tr);
    free(d); free_run(&r); free(w); free(x); free(h);
}

// pq_gptq_errors: the output error's numerator from the loss equals
// tr(dW H dW^T) with the undamped H, dead columns and act-order included,
// symmetric and asymmetric (a grid without an exact 0: test_ggml_grid).
static void test_errors(pq_pool *pool, pq_pool *pool3) {
    int rows = 70, cols = 96, T = 300;
    float *w = malloc((size_t)rows * cols * sizeof(float)), *x = correlated_inputs(T, cols);
    pq_test_fill(w, (size_t)rows * cols, 0.05f);
    for (int t = 0; t < T; t++) x[(size_t)t * cols + 7] = x[(size_t)t * cols + 50] = 0; // dead columns
    float *h = hessian_of(x, T, cols);
    for (int sym = 0; sym < 2; sym++) {
        pq_gptq_params p = pq_gptq_default_params();
        p.group = 32, p.act_order = 1, p.sym = sym;
        gptq_run r = run_gptq(w, rows, cols, h, &p, pool);
        float *d = dequant(&r.q);
        double num = 0, e2 = 0, n2 = 0;
        for (int i = 0; i < rows; i++)
            for (int a = 0; a < cols; a++) {
                double da = (double)w[(size_t)i * cols + a] - d[(size_t)i * cols + a];
                e2 += da * da, n2 += (double)w[(size_t)i * cols + a] * w[(size_t)i * cols + a];
                for (int b = 0; b < cols; b++)
                    num += da * h[(size_t)a * cols + b] * ((double)w[(size_t)i * cols + b] - d[(size_t)i * cols + b]);
            }
        pq_linear L = pq_qtensor_linear(&r.q);
        void *ws1 = pq_alloc(pq_gptq_errors_bytes(rows, cols, pq_pool_size(pool)));
        void *ws3 = pq_alloc(pq_gptq_errors_bytes(rows, cols, pq_pool_size(pool3)));
        double rel = -1, out = -1, rel3 = -1, out3 = -1;
        pq_gptq_errors(w, &L, &r.h, r.loss, ws1, pool, &rel, &out);
        pq_gptq_errors(w, &L, &r.h, r.loss, ws3, pool3, &rel3, &out3);
        // the loss is exact up to the solve's double rounding; the direct sum
        // multiplies f32 values in double: both within ~1e-12 of the truth,
        // the dampening's part (~1% of the loss) subtracted
        PQ_CHECK(r.st == PQ_OK && r.h.n_dead == 2 && fabs(out - num) <= 1e-9 * num && fabs(rel - e2 / n2) <= 1e-12 * rel &&
                     rel == rel3 && out == out3,
                 "%s: output error from the loss %.12g = tr(dW H dW^T) %.12g, weight error %.9g = %.9g, 1 and 3 "
                 "threads equal", sym ? "sym" : "asym", out, num, rel, e2 / n2);
        pq_free(ws1), pq_free(ws3);
        free(d);
        free_run(&r);
    }
    free(w); free(x); free(h);
}

// ---- (c) failing Cholesky, zero and bad Hessians -------------------------------

static void test_damp_and_degenerate(pq_pool *pool) {
    int rows = 16, cols = 48;
    float *w = malloc((size_t)rows * cols * sizeof(float)), *h = calloc((size_t)cols * cols, sizeof(float));
    pq_test_fill(w, (size_t)rows * cols, 0.05f);
    // indefinite: diag 1 except one -2 (mean ~0.94): +0.0094 and +0.094 fail, +0.94 still fails, +9.4 works
    for (int i = 0; i < cols; i++) h[(size_t)i * cols + i] = i == 7 ? -2.0f : 1.0f;
    pq_gptq_params p = pq_gptq_default_params();
    p.group = 32;
    gptq_run r = run_gptq(w, rows, cols, h, &p, pool);
    int finite = 1;
    for (int i = 0; r.st == PQ_OK && i < r.q.nscales; i++) finite &= isfinite(r.q.scales[i]) && r.q.scales[i] > 0;
    PQ_CHECK(r.st == PQ_OK && r.h.retries == 3 && fabs(r.h.damp - 10.0) < 1e-9 && finite && isfinite(r.loss),
             "indefinite Hessian: Cholesky retried %d times, damp raised to %g, finite scales and loss %g", r.h.retries,
             r.h.damp, r.loss);
    free_run(&r);
    h[7 * cols + 7] = -1e30f; // hopeless even at damp 100
    r = run_gptq(w, rows, cols, h, &p, pool);
    PQ_CHECK(r.st == PQ_ERR_NUMERIC && strstr(pq_last_error(), "not positive definite even with dampening 100"),
             "a hopeless Hessian is PQ_ERR_NUMERIC: %s", pq_last_error());
    free_run(&r);
    h[7 * cols + 7] = NAN;
    r = run_gptq(w, rows, cols, h, &p, pool);
    PQ_CHECK(r.st == PQ_ERR_NUMERIC && strstr(pq_last_error(), "Hessian element [7, 7] is NaN"),
             "a NaN in the Hessian is refused by position: %s", pq_last_error());
    free_run(&r);
    memset(h, 0, (size_t)cols * cols * sizeof(float)); // no input at all: every column dead
    p.sym = 0;
    r = run_gptq(w, rows, cols, h, &p, pool);
    int zero = r.st == PQ_OK && r.h.n_dead == cols && r.loss == 0;
    if (zero) {
        float *d = dequant(&r.q);
        for (int i = 0; i < rows * cols; i++) zero &= d[i] == 0;
        free(d);
    }
    PQ_CHECK(zero, "all-zero Hessian: every column dead, weights quantize to 0, loss 0");
    free_run(&r);
    p.damp = 0;
    r = run_gptq(w, rows, cols, h, &p, pool);
    PQ_CHECK(r.st == PQ_ERR_ARG, "damp 0 refused: %s", pq_last_error());
    free_run(&r);
    free(w); free(h);
}

// ---- (d) H = I gives RTN ------------------------------------------------------------

// GPTQ with H = I: RTN's scales and zeros (pq_rtn_group_params at each group
// start), each code RTN's f32 rounding of the weight (pq_rtn_code).
static void test_identity_is_rtn(pq_pool *pool) {
    struct { int cols, group, bits, sym, act, stat, mse; } cs[] = {
        {64, 32, 4, 1, 0, 0, 0}, {172, 32, 4, 0, 1, 0, 0}, {172, 64, 3, 1, 0, 1, 0}, {100, 0, 2, 0, 1, 0, 0},
        {96, 32, 8, 1, 1, 1, 0}, {130, 128, 5, 0, 0, 0, 0}, {172, 64, 4, 1, 0, 0, 1}, {172, 32, 4, 0, 1, 1, 1},
        {130, 0, 3, 1, 1, 0, 1},
    };
    int rows = 40;
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        int cols = cs[k].cols;
        float *w = malloc((size_t)rows * cols * sizeof(float)), *h = calloc((size_t)cols * cols, sizeof(float));
        pq_test_fill(w, (size_t)rows * cols, 0.05f);
        for (int i = 0; i < cols; i++) h[(size_t)i * cols + i] = 1;
        pq_gptq_params p = pq_gptq_default_params();
        p.bits = cs[k].bits, p.group = cs[k].group, p.sym = cs[k].sym, p.act_order = cs[k].act;
        p.static_groups = cs[k].stat;
        p.observer = cs[k].mse ? PQ_OBSERVER_MSE : PQ_OBSERVER_MINMAX;
        gptq_run r = run_gptq(w, rows, cols, h, &p, pool);
        pq_scheme s = {PQ_SCHEME_W4A16, p.bits, 0, p.group ? p.group : PQ_GROUP_CHANNEL, p.sym, PQ_ACT_NONE, PQ_ACTORDER_NONE, p.observer, 0};
        pq_qtensor q;
        pq_status st = rtn_new(w, rows, cols, &s, PQ_DT_F16, "rtn", NULL, &q, NULL);
        // RTN's scales and zeros; its codes recomputed in f32 from the unrounded
        // weights, as GPTQ's f32 working copy is quantized (quant/rtn.h:
        // pq_rtn_code; RTN itself divides in the scale dtype)
        int ng = st == PQ_OK ? pq_qtensor_ngroups(&q) : 0, gs = p.group ? p.group : cols;
        if (st == PQ_OK && q.packed) memset(q.packed, 0, (size_t)rows * pq_qpack_words_per_row(cols, p.bits) * 4);
        for (int i = 0; i < rows && st == PQ_OK; i++)
            for (int c = 0; c < cols; c++) {
                size_t g = (size_t)i * ng + c / gs;
                float z = q.zeros ? (float)((int)q.zeros[g] - (1 << (p.bits - 1))) : 0;
                pq_qtensor_set_code(&q, i, c, (int)pq_rtn_code(w[(size_t)i * cols + c], q.scales[g], z, p.bits));
            }
        size_t words = (size_t)rows * pq_qpack_words_per_row(cols, p.bits);
        int same = r.st == PQ_OK && st == PQ_OK && memcmp(r.q.packed, q.packed, words * 4) == 0 &&
                   memcmp(r.q.scales, q.scales, (size_t)q.nscales * sizeof(float)) == 0 &&
                   (p.sym || memcmp(r.q.zeros, q.zeros, (size_t)q.nscales) == 0);
        PQ_CHECK(same, "H = I: GPTQ == RTN scales and zeros, codes rounded in f32 (%d cols, group %d, %d-bit %s%s%s%s)", cols,
                 p.group, p.bits, p.sym ? "sym" : "asym", p.act_order ? ", act-order" : "",
                 p.static_groups ? ", static" : "", cs[k].mse ? ", mse observer" : "");
        if (st == PQ_OK) pq_qtensor_free(&q);
        free_run(&r);
        free(w); free(h);
    }
}

// ---- threads ------------------------------------------------------------------------

static void test_threads(void) {
    int rows = 200, cols = 300, T = 600;
    float *w = malloc((size_t)rows * cols * sizeof(float)), *x = correlated_inputs(T, cols);
    pq_test_fill(w, (size_t)rows * cols, 0.05f);
    float *h = hessian_of(x, T, cols);
    pq_gptq_params p = pq_gptq_default_params();
    p.group = 64, p.act_order = 1, p.sym = 0;
    pq_pool *p1, *p3;
    pq_pool_create(1, &p1);
    pq_pool_create(3, &p3);
    gptq_run a = run_gptq(w, rows, cols, h, &p, p1), b = run_gptq(w, rows, cols, h, &p, p3);
    size_t words = (size_t)rows * pq_qpack_words_per_row(cols, p.bits);
    int same = a.st == PQ_OK && b.st == PQ_OK && memcmp(a.q.packed, b.q.packed, words * 4) == 0 &&
               memcmp(a.q.scales, b.q.scales, (size_t)a.q.nscales * 4) == 0 &&
               memcmp(a.q.g_idx, b.q.g_idx, (size_t)cols * 4) == 0 && a.loss == b.loss &&
               memcmp(a.h.u, b.h.u, (size_t)cols * cols * sizeof(double)) == 0;
    PQ_CHECK(same, "1 and 3 threads: bit-identical factor, codes, scales, g_idx and loss");
    free_run(&a); free_run(&b);
    pq_pool_free(p1); pq_pool_free(p3);
    free(w); free(x); free(h);
}

// The column loop's update on fresh random inputs: every version this CPU
// runs equals the _ref bit for bit (one multiply and one subtract per
// element in each: no tolerance), on strided rows, lengths with every tail
// (0 .. 2 vector widths + 1) and elements right of n untouched.
static void test_rank1(void) {
    enum { R = 9, N = 19, LD = 23 };
    double W0[R * LD], W1[R * LD], W2[R * LD], e[R], u[N];
    int bad = 0, isa = pq_cpu_isa();
    for (int n = 0; n <= N; n++) {
        for (int i = 0; i < R * LD; i++) W0[i] = W1[i] = W2[i] = pq_test_normal();
        for (int k = 0; k < R; k++) e[k] = pq_test_normal() * 1e3;
        for (int c = 0; c < N; c++) u[c] = pq_test_normal() * 1e-3;
        pq_gptq_rank1_ref(W0, LD, e, R, u, n);
        pq_gptq_rank1_cpu(W1, LD, e, R, u, n);
        if (isa >= PQ_ISA_AVX2) pq_gptq_rank1_avx2(W2, LD, e, R, u, n);
        else memcpy(W2, W0, sizeof W0);
        bad += memcmp(W0, W1, sizeof W0) != 0 || memcmp(W0, W2, sizeof W0) != 0;
    }
    PQ_CHECK(bad == 0, "gptq rank-1 update (isa %s, and avx2) == the _ref bit for bit, n 0..%d (%d differ)",
             pq_isa_name(isa), N, bad);
}

// The blocked Cholesky's panel step on fresh random inputs: every version
// this CPU runs equals the _ref bit for bit (each product rounded, then
// subtracted, in the same order per row: no tolerance), for row counts with
// every lane tail (and of the AVX-512 version's four interleaved groups of
// 8), a short last block (kb < PQ_LINALG_NB) and a strided panel.
static void test_chol_panel(void) {
    enum { N = 150, LDA = 153 };
    double *a0 = malloc(sizeof(double) * N * LDA), *a1 = malloc(sizeof(double) * N * LDA),
           *a2 = malloc(sizeof(double) * N * LDA);
    int bad = 0, isa = pq_cpu_isa(), cases = 0;
    for (int kb = 1; kb <= PQ_LINALG_NB; kb += kb < 8 ? 1 : 37) {
        int k0 = N - kb - 13 > 0 ? 5 : 0;
        for (int rows = 0; rows <= 41 && k0 + kb + rows <= N; rows += rows < 13 || rows >= 31 ? 1 : 9, cases++) {
            for (int i = 0; i < N * LDA; i++) a0[i] = a1[i] = a2[i] = pq_test_normal();
            for (int c = 0; c < kb; c++) a0[(size_t)(k0 + c) * LDA + k0 + c] = a1[(size_t)(k0 + c) * LDA + k0 + c] =
                a2[(size_t)(k0 + c) * LDA + k0 + c] = 1.5 + c % 3; // the factor's diagonal
            int i0 = k0 + kb, i1 = i0 + rows;
            pq_chol_panel_ref(a0, LDA, i0, i1, k0, kb);
            pq_chol_panel_cpu(a1, LDA, i0, i1, k0, kb);
            if (isa >= PQ_ISA_AVX2) pq_chol_panel_avx2(a2, LDA, i0, i1, k0, kb);
            else memcpy(a2, a0, sizeof(double) * N * LDA);
            bad += memcmp(a0, a1, sizeof(double) * N * LDA) != 0 || memcmp(a0, a2, sizeof(double) * N * LDA) != 0;
        }
    }
    PQ_CHECK(bad == 0, "Cholesky panel step (isa %s, and avx2) == the _ref bit for bit, %d cases (%d differ)",
             pq_isa_name(isa), cases, bad);
    free(a0), free(a1), free(a2);
}

// The triangular inverse's stripe step on fresh random inputs: every
// version this CPU runs equals the _ref bit for bit (each product rounded,
// then added, in the same order per element: no tolerance), for every
// stripe width 1 .. PQ_LINALG_LANES, stripes that start inside the matrix,
// and rows right after the stripe and far below it.
static void test_trinv_stripe(void) {
    enum { N = 40, LDA = 43 };
    double a0[N * LDA], a1[N * LDA], a2[N * LDA];
    int bad = 0, isa = pq_cpu_isa(), cases = 0;
    for (int w = 1; w <= PQ_LINALG_LANES; w++)
        for (int c0 = 0; c0 <= 9; c0 += 3, cases++) {
            for (int i = 0; i < N * LDA; i++) a0[i] = a1[i] = a2[i] = pq_test_normal();
            for (int i = 0; i < N; i++) a0[i * LDA + i] = a1[i * LDA + i] = a2[i * LDA + i] = 1.5 + i % 3;
            int c1 = c0 + w;
            pq_trinv_stripe_ref(a0, LDA, c1, N, c0, c1);
            pq_trinv_stripe_cpu(a1, LDA, c1, N, c0, c1);
            if (isa >= PQ_ISA_AVX2) pq_trinv_stripe_avx2(a2, LDA, c1, N, c0, c1);
            else memcpy(a2, a0, sizeof a0);
            bad += memcmp(a0, a1, sizeof a0) != 0 || memcmp(a0, a2, sizeof a0) != 0;
        }
    PQ_CHECK(bad == 0, "triangular inverse stripe step (isa %s, and avx2) == the _ref bit for bit, %d cases (%d differ)",
             pq_isa_name(isa), cases, bad);
}

// A matrix of one diagonal block: the blocked Cholesky and inverse run only
// their vector diagonal-block loops, which reorder the plain loops without
// changing any element's operations: the _ref's bits exactly.
static void test_diag_block_exact(pq_pool *pool) {
    const int sizes[] = {1, 5, 8, 9, 45, 100, PQ_LINALG_NB};
    int bad = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        size_t nn = (size_t)n * n;
        double *a = random_spd(n), *b = malloc(nn * sizeof(double));
        void *ws = pq_alloc(pq_linalg_workspace_bytes(n));
        memcpy(b, a, nn * sizeof(double));
        bad += pq_chol_lower(b, n, pool) != 0 || pq_chol_lower_ref(a, n) != 0 || memcmp(a, b, nn * sizeof(double)) != 0;
        pq_trinv_lower(b, n, ws, pool);
        pq_trinv_lower_ref(a, n);
        bad += memcmp(a, b, nn * sizeof(double)) != 0;
        free(a), free(b), pq_free(ws);
    }
    PQ_CHECK(bad == 0, "one diagonal block (n <= %d): blocked Cholesky and inverse == the _ref bit for bit (%d differ)",
             PQ_LINALG_NB, bad);
}

int main(void) {
    pq_test_seed();
    if (pq_blas_init() != PQ_OK) {
        printf("FAIL - OpenBLAS: %s\n", pq_last_error());
        return 1;
    }
    pq_pool *pool;
    pq_pool_create(2, &pool);
    test_rank1();
    test_chol_panel();
    test_trinv_stripe();
    test_diag_block_exact(pool);
    test_linalg(pool);
    test_blocked_vs_plain(pool);
    test_beats_rtn(pool);
    test_loss(pool);
    pq_pool *pool3;
    pq_pool_create(3, &pool3);
    test_errors(pool, pool3);
    pq_pool_free(pool3);
    test_damp_and_degenerate(pool);
    test_identity_is_rtn(pool);
    test_threads();
    pq_pool_free(pool);
    return pq_test_done();
}
