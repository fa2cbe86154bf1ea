// quant/gptq.c — GPTQ for one weight matrix (see gptq.h).
#include "quant/gptq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/blas.h"
#include "kernels/cpu.h"
#include "kernels/ops.h"
#include "quant/linalg.h"
#include "quant/rtn.h"

#define ALIGN(n) (((n) + 63) / 64 * 64)

pq_gptq_params pq_gptq_default_params(void) {
    return (pq_gptq_params){.bits = 4, .group = 128, .sym = 1, .damp = 0.01, .block_size = 128};
}

pq_status pq_gptq_check(double damp, int block_size) {
    PQ_FAIL_IF(!(damp >= PQ_GPTQ_DAMP_MIN && damp <= PQ_GPTQ_DAMP_MAX), PQ_ERR_ARG, "--damp %g: not in [%g, %g]", damp,
               PQ_GPTQ_DAMP_MIN, PQ_GPTQ_DAMP_MAX);
    PQ_FAIL_IF(block_size < 1 || block_size > 65536, PQ_ERR_ARG, "--block-size %d: not in 1..65536", block_size);
    return PQ_OK;
}

size_t pq_gptq_errors_bytes(int rows, int cols, int nthreads) {
    size_t chunks = (size_t)(rows + PQ_GPTQ_ROWS - 1) / PQ_GPTQ_ROWS;
    return ALIGN((size_t)nthreads * PQ_GPTQ_ROWS * cols * sizeof(float)) + chunks * 4 * sizeof(double);
}

typedef struct {
    const float *w;
    const pq_linear *q;
    const unsigned char *dead; // or NULL
    float *rows;               // per thread: PQ_GPTQ_ROWS x cols
    double *sums;              // per chunk: ||dW||^2, ||W||^2, ||dW'||^2, the dead columns' ||dW'||^2
} errors_job;

static void errors_chunk(void *ctx, int ci, int tid) {
    errors_job *j = ctx;
    int cols = j->q->cols, r0 = ci * PQ_GPTQ_ROWS, n = j->q->rows - r0 < PQ_GPTQ_ROWS ? j->q->rows - r0 : PQ_GPTQ_ROWS;
    float *v = j->rows + (size_t)tid * PQ_GPTQ_ROWS * cols;
    pq_linear_rows(j->q, r0, n, v);
    double e2 = 0, n2 = 0, d2 = 0, dead2 = 0;
    for (int r = 0; r < n; r++)
        for (int c = 0; c < cols; c++) {
            double x = j->w[(size_t)(r0 + r) * cols + c], q = v[(size_t)r * cols + c], d = x - q;
            e2 += d * d;
            n2 += x * x;
            if (j->dead && j->dead[c]) dead2 += q * q; // W' is 0 there
            else d2 += d * d;
        }
    double *o = j->sums + (size_t)ci * 4;
    o[0] = e2, o[1] = n2, o[2] = d2, o[3] = dead2;
}

void pq_gptq_errors(const float *w, const pq_linear *q, const pq_gptq_hessian *h, double loss, void *ws,
                    pq_pool *pool, double *weight_rel, double *out_sq) {
    int chunks = (q->rows + PQ_GPTQ_ROWS - 1) / PQ_GPTQ_ROWS;
    errors_job j = {w, q, h ? h->dead : NULL, ws, NULL};
    j.sums = (double *)((char *)ws + ALIGN((size_t)pq_pool_size(pool) * PQ_GPTQ_ROWS * q->cols * sizeof(float)));
    pq_pool_for(pool, chunks, errors_chunk, &j);
    double t[4] = {0, 0, 0, 0};
    for (int i = 0; i < chunks; i++)
        for (int k = 0; k < 4; k++) t[k] += j.sums[(size_t)i * 4 + k];
    *weight_rel = t[1] > 0 ? t[0] / t[1] : 0;
    if (!h) return;
    // loss = tr(dW' Hd dW'^T), Hd = H + lambda I with a dead column's diagonal
    // 1 + lambda (its H row and column are 0): H's part is all that is left
    double e = loss - h->lambda * (t[2] + t[3]) - t[3];
    *out_sq = e > 0 ? e : 0; // rounding, where dW X is ~0
}

static int grouped(const pq_gptq_params *p, int cols) { return p->group > 0 && p->group < cols; }

int pq_gptq_has_g_idx(const pq_gptq_params *p, int cols) {
    return p->act_order && !p->static_groups && grouped(p, cols);
}

// ---- the Hessian --------------------------------------------------------

size_t pq_gptq_hessian_bytes(int cols) {
    size_t n = (size_t)cols, u = n * n > 2 * n ? n * n : 2 * n; // u also holds the sort keys
    return ALIGN(u * sizeof(double)) + ALIGN(pq_linalg_workspace_bytes(cols)) + ALIGN(n * sizeof(int)) + ALIGN(n);
}

typedef struct {
    double v;
    int i;
} key;

// descending diag, ties by index: a total order, so the permutation is deterministic
static int cmp_key(const void *a, const void *b) {
    const key *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

size_t pq_gptq_order_bytes(int cols) {
    size_t n = (size_t)cols;
    return ALIGN(n * sizeof(key)) + ALIGN(n * sizeof(int)) + ALIGN(n);
}

// The column order and dead columns into out->perm / out->dead (set by the
// caller), keys: [cols] scratch; *mean: the mean diagonal (a dead column's as 1).
static pq_status order(const float *h, int cols, const pq_gptq_params *p, const char *name, key *keys,
                       pq_gptq_hessian *out, double *mean) {
    size_t n = (size_t)cols;
    PQ_FAIL_IF(!(p->damp > 0 && p->damp <= PQ_GPTQ_DAMP_MAX), PQ_ERR_ARG, "%s: dampening %g not in (0, %g]", name,
               p->damp, PQ_GPTQ_DAMP_MAX);
    long long bad = pq_scan_finite_cpu(h, n * n, NULL);
    size_t k = (size_t)bad;
    PQ_FAIL_IF(bad >= 0, PQ_ERR_NUMERIC, "%s: Hessian element [%zu, %zu] is %s", name, k / n, k % n,
               isnan(h[k]) ? "NaN" : "Inf");
    double m = 0;
    out->n_dead = 0;
    for (int i = 0; i < cols; i++) {
        double d = h[(size_t)i * n + i];
        out->dead[i] = d == 0;
        out->n_dead += out->dead[i];
        keys[i] = (key){out->dead[i] ? 1.0 : d, i};
        m += keys[i].v;
    }
    *mean = m / cols;
    if (p->act_order) qsort(keys, n, sizeof *keys, cmp_key);
    for (int i = 0; i < cols; i++) out->perm[i] = p->act_order ? keys[i].i : i;
    return PQ_OK;
}

pq_status pq_gptq_order(const float *h, int cols, const pq_gptq_params *p, const char *name, void *ws,
                        pq_gptq_hessian *out, double *mean) {
    size_t n = (size_t)cols;
    char *b = ws;
    *out = (pq_gptq_hessian){.cols = cols, .damp = p->damp};
    out->perm = (int *)(b + ALIGN(n * sizeof(key)));
    out->dead = (unsigned char *)((char *)out->perm + ALIGN(n * sizeof(int)));
    return order(h, cols, p, name, (key *)ws, out, mean);
}

// Rows of the permuted, dampened Hessian per task of pq_gptq_prepare.
#define DAMPED_ROWS 32

typedef struct {
    const float *h;
    pq_gptq_hessian *hs;
    double lambda;
} damped_job;

// Rows [i0, i0 + DAMPED_ROWS) of u = h[perm][perm] + lambda I (a dead column's diagonal 1 + lambda).
static void damped_rows(void *ctx, int t, int tid) {
    const damped_job *j = ctx;
    const pq_gptq_hessian *hs = j->hs;
    size_t n = (size_t)hs->cols;
    for (int i = t * DAMPED_ROWS; i < hs->cols && i < (t + 1) * DAMPED_ROWS; i++) {
        const float *hr = j->h + (size_t)hs->perm[i] * n;
        for (size_t c = 0; c < n; c++) hs->u[i * n + c] = hr[hs->perm[c]];
        if (hs->dead[hs->perm[i]]) hs->u[i * n + i] = 1;
        hs->u[i * n + i] += j->lambda;
    }
}

pq_status pq_gptq_prepare(const float *h, int cols, const pq_gptq_params *p, const char *name, void *ws,
                          pq_pool *pool, pq_gptq_hessian *out) {
    size_t n = (size_t)cols, u_bytes = ALIGN((n * n > 2 * n ? n * n : 2 * n) * sizeof(double));
    char *b = ws;
    pq_gptq_hessian hs = {.cols = cols, .u = (double *)b};
    void *lws = b + u_bytes;
    hs.perm = (int *)(b + u_bytes + ALIGN(pq_linalg_workspace_bytes(cols)));
    hs.dead = (unsigned char *)((char *)hs.perm + ALIGN(n * sizeof(int)));
    double mean;
    PQ_TRY(order(h, cols, p, name, (key *)hs.u, &hs, &mean));
    for (hs.damp = p->damp;; hs.damp *= 10, hs.retries++) {
        PQ_FAIL_IF(hs.damp > PQ_GPTQ_DAMP_MAX * (1 + 1e-9), PQ_ERR_NUMERIC,
                   "%s: the Hessian is not positive definite even with dampening %g (x mean diagonal)", name,
                   hs.damp / 10);
        damped_job dj = {h, &hs, hs.damp * mean};
        pq_pool_for(pool, (cols + DAMPED_ROWS - 1) / DAMPED_ROWS, damped_rows, &dj);
        if (pq_inv_chol_upper(hs.u, cols, lws, pool) == 0) break;
    }
    hs.lambda = hs.damp * mean;
    *out = hs;
    return PQ_OK;
}

// ---- the column loop, on any grid -------------------------------------------

void pq_gptq_rank1_ref(double *W, size_t ldw, const double *e, int rows, const double *u, int n) {
    for (int k = 0; k < rows; k++)
        for (int c = 0; c < n; c++) W[(size_t)k * ldw + c] -= e[k] * u[c];
}

void pq_gptq_rank1_cpu(double *W, size_t ldw, const double *e, int rows, const double *u, int n) {
    if (pq_cpu_isa() >= PQ_ISA_AVX512) pq_gptq_rank1_avx512(W, ldw, e, rows, u, n);
    else if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_gptq_rank1_avx2(W, ldw, e, rows, u, n);
    else pq_gptq_rank1_ref(W, ldw, e, rows, u, n);
}

// Columns per lazy batch: block_size, rounded to whole grids chosen on the fly.
static int batch_len(int block_size, int cols, const pq_gptq_grid *g) {
    int b = block_size, G = g->group;
    if (g->choose && g->on_the_fly && G < cols) b = b >= G ? b / G * G : G;
    return b < cols ? b : cols;
}

static int nchunks(int rows) { return (rows + PQ_GPTQ_ROWS - 1) / PQ_GPTQ_ROWS; }

pq_status pq_gptq_check_output(const pq_qtensor *q, int rows, int cols, const pq_gptq_params *p, const char *name) {
    PQ_FAIL_IF(p->bits < 2 || p->bits > 8 || p->block_size < 1, PQ_ERR_ARG, "%s: %d bits, block size %d", name,
               p->bits, p->block_size);
    PQ_FAIL_IF((q->fmt != PQ_W_QPACK && q->fmt != PQ_W_INT8) || q->rows != rows || q->cols != cols ||
                   q->bits != p->bits || (q->fmt == PQ_W_QPACK && q->group != (grouped(p, cols) ? p->group : cols)) ||
                   (q->zeros == NULL) != (p->sym != 0) || (q->g_idx == NULL) != !pq_gptq_has_g_idx(p, cols),
               PQ_ERR_ARG, "%s: the output tensor does not match the GPTQ parameters", name);
    return PQ_OK;
}

size_t pq_gptq_run_bytes(int rows, int cols, int batch) {
    size_t r = (size_t)rows, c = (size_t)cols, nc = (size_t)nchunks(rows);
    return ALIGN(r * c * sizeof(double)) + ALIGN(r * (size_t)batch * sizeof(double)) + ALIGN(nc * c * sizeof(float)) +
           ALIGN(nc * sizeof(double)) + ALIGN(nc * sizeof(int));
}

typedef struct {
    const float *w;
    const pq_gptq_hessian *h;
    const pq_gptq_grid *g;
    int rows, cols, blen;
    double *W, *E, *loss; // W [rows][cols] permuted; E [rows][blen]
    float *fbuf;          // [chunks][cols] what choose reads
    int *bad;             // [chunks] 1 + the row whose grid could not be chosen, or 0
} run_job;

// Rows [r0, r1): the whole algorithm, batch by batch; within a batch column
// by column, a column's codes chosen in one call for all the rows.
static void run_chunk(void *ctx, int ci, int tid) {
    run_job *j = ctx;
    const pq_gptq_grid *g = j->g;
    const int *perm = j->h->perm, cols = j->cols, G = g->group, fly = g->choose && g->on_the_fly;
    const double *U = j->h->u;
    int r0 = ci * PQ_GPTQ_ROWS, r1 = r0 + PQ_GPTQ_ROWS < j->rows ? r0 + PQ_GPTQ_ROWS : j->rows, n = r1 - r0, bad = 0;
    float *f = j->fbuf + (size_t)ci * cols, x[PQ_GPTQ_ROWS], v[PQ_GPTQ_ROWS];
    double e[PQ_GPTQ_ROWS];
    double *W = j->W + (size_t)r0 * cols, *E = j->E + (size_t)r0 * j->blen, loss = 0;
    for (int r = r0; r < r1; r++) {
        const float *wr = j->w + (size_t)r * cols;
        double *Wr = W + (size_t)(r - r0) * cols;
        for (int i = 0; i < cols; i++) Wr[i] = j->h->dead[perm[i]] ? 0.0 : wr[perm[i]];
        if (!g->choose || fly) continue; // static: every grid of the row now
        for (int c = 0; c < cols; c++) f[c] = j->h->dead[c] ? 0.0f : wr[c];
        for (int c = 0; c < cols; c += G)
            if (!g->choose(g->ctx, tid, r, c / G, f + c, c + G < cols ? G : cols - c)) {
                j->bad[ci] = r + 1;
                return;
            }
    }
    for (int i1 = 0; i1 < cols; i1 += j->blen) {
        int i2 = i1 + j->blen < cols ? i1 + j->blen : cols;
        for (int i = i1; i < i2; i++) {
            // A grid starts: chosen from the weights as updated so far. A row
            // whose grid cannot be chosen drops out with the rows after it;
            // the rest finish the batch and the chunk stops, naming the first
            // row that fails (as a row-by-row loop would).
            for (int k = 0, len = i + G < cols ? G : cols - i; fly && i % G == 0 && k < n; k++) {
                for (int c = 0; c < len; c++) f[c] = (float)W[(size_t)k * cols + i + c];
                if (!g->choose(g->ctx, tid, r0 + k, i / G, f, len)) bad = r0 + k + 1, n = k;
            }
            for (int k = 0; k < n; k++) x[k] = (float)W[(size_t)k * cols + i];
            g->quantize(g->ctx, tid, r0, n, (fly ? i : perm[i]) / G, perm[i], x, v);
            const double *Ui = U + (size_t)i * cols;
            for (int k = 0; k < n; k++) {
                e[k] = (W[(size_t)k * cols + i] - (double)v[k]) / Ui[i];
                E[(size_t)k * j->blen + i - i1] = e[k];
            }
            pq_gptq_rank1_cpu(W + i + 1, cols, e, n, Ui + i + 1, i2 - i - 1);
        }
        j->bad[ci] = bad;
        if (bad) return;
        for (int k = 0; k < n; k++) // in the order of a row-by-row loop
            for (int i = 0; i < i2 - i1; i++) loss += E[(size_t)k * j->blen + i] * E[(size_t)k * j->blen + i];
        // the lazy batch update of everything right of the batch
        pq_dgemm_nn(n, cols - i2, i2 - i1, -1.0, E, j->blen, U + (size_t)i1 * cols + i2, cols, 1.0, W + i2, cols);
    }
    j->loss[ci] = loss;
}

int pq_gptq_run(const float *w, int rows, const pq_gptq_hessian *h, int block_size, const pq_gptq_grid *g, void *ws,
                pq_pool *pool, double *loss) {
    int cols = h->cols, nc = nchunks(rows);
    size_t r = (size_t)rows, c = (size_t)cols;
    char *b = ws;
    run_job j = {.w = w, .h = h, .g = g, .rows = rows, .cols = cols, .blen = batch_len(block_size, cols, g)};
    j.W = (double *)b;
    j.E = (double *)(b += ALIGN(r * c * sizeof(double)));
    j.fbuf = (float *)(b += ALIGN(r * j.blen * sizeof(double)));
    j.loss = (double *)(b += ALIGN((size_t)nc * c * sizeof(float)));
    j.bad = (int *)(b += ALIGN((size_t)nc * sizeof(double)));
    memset(j.bad, 0, (size_t)nc * sizeof(int));
    pq_pool_for(pool, nc, run_chunk, &j);
    double total = 0;
    for (int i = 0; i < nc; i++) {
        if (j.bad[i]) return j.bad[i] - 1;
        total += j.loss[i];
    }
    if (loss) *loss = total;
    return -1;
}

// ---- the solve on pq's integer groups ---------------------------------------

typedef struct { const pq_gptq_params *p; pq_qtensor *q; } int_grid; // the ctx of int_choose, int_quantize

// Chooses and stores the scale and zero of group g of row r from x[n].
static int int_choose(void *ctx, int tid, int r, int g, const float *x, int n) {
    const int_grid *k = ctx;
    float sc, z;
    if (!pq_rtn_group_params(x, n, k->p->bits, k->p->sym, k->p->observer, k->q->scale_dtype, &sc, &z)) return 0;
    size_t at = (size_t)r * pq_qtensor_ngroups(k->q) + g;
    k->q->scales[at] = sc;
    if (k->q->zeros) k->q->zeros[at] = (uint8_t)((int)z + (1 << (k->p->bits - 1)));
    return 1;
}

static void int_quantize(void *ctx, int tid, int r0, int n, int g, int c, const float *x, float *v) {
    const int_grid *k = ctx;
    int bits = k->p->bits, ng = pq_qtensor_ngroups(k->q);
    float codes[PQ_GPTQ_ROWS];
    PQ_ASSERT(n <= PQ_GPTQ_ROWS); // run_chunk quantizes one chunk's rows at a time
    for (size_t m = 0, at = (size_t)r0 * ng + g; m < (size_t)n; m++, at += ng) {
        float sc = k->q->scales[at], z = k->q->zeros ? (float)(k->q->zeros[at] - (1 << (bits - 1))) : 0;
        codes[m] = pq_rtn_code(x[m], sc, z, bits);
        v[m] = sc * (codes[m] - z);
    }
    pq_qtensor_set_column(k->q, r0, n, c, codes);
}

// The groups of p over cols columns as a grid; a row's single group (per
// channel) is chosen on the fly, at column 0, before any update.
static pq_gptq_grid int_grid_of(const pq_gptq_params *p, int cols, int_grid *k) {
    int G = grouped(p, cols) ? p->group : cols;
    return (pq_gptq_grid){.group = G, .on_the_fly = !p->static_groups || G == cols, .choose = int_choose,
                          .quantize = int_quantize, .ctx = k};
}

int pq_gptq_batch_len(const pq_gptq_params *p, int cols) {
    pq_gptq_grid g = int_grid_of(p, cols, NULL);
    return batch_len(p->block_size, cols, &g);
}

size_t pq_gptq_solve_bytes(int rows, int cols, const pq_gptq_params *p) {
    return pq_gptq_run_bytes(rows, cols, pq_gptq_batch_len(p, cols));
}

pq_status pq_gptq_solve(const float *w, int rows, const pq_gptq_hessian *h, const pq_gptq_params *p,
                        const char *name, void *ws, pq_pool *pool, pq_qtensor *q, double *loss) {
    int cols = h->cols;
    PQ_TRY(pq_gptq_check_output(q, rows, cols, p, name));
    int_grid k = {p, q};
    pq_gptq_grid g = int_grid_of(p, cols, &k);
    if (q->g_idx)
        for (int i = 0; i < cols; i++) q->g_idx[h->perm[i]] = i / p->group;
    int bad = pq_gptq_run(w, rows, h, p->block_size, &g, ws, pool, loss);
    PQ_FAIL_IF(bad >= 0, PQ_ERR_NUMERIC, "%s: row %d: a scale overflows %s", name, bad, pq_dtype_name(q->scale_dtype));
    return PQ_OK;
}
