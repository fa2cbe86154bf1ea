// quant/gptq.c — GPTQ for one weight matrix (see gptq.h).
#include "quant/gptq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/blas.h"
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

double pq_gptq_rel_error(const float *w, const pq_linear *q, float *row) {
    double e2 = 0, n2 = 0;
    for (int r = 0; r < q->rows; r++) {
        pq_linear_rows(q, r, 1, row);
        for (int c = 0; c < q->cols; c++) {
            double x = w[(size_t)r * q->cols + c], d = x - row[c];
            e2 += d * d;
            n2 += x * x;
        }
    }
    return n2 > 0 ? e2 / n2 : 0;
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
    for (size_t k = 0; k < n * n; k++)
        PQ_FAIL_IF(!isfinite(h[k]), PQ_ERR_NUMERIC, "%s: Hessian element [%zu, %zu] is %s", name, k / n, k % n,
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
        for (int i = 0; i < cols; i++) {
            const float *hr = h + (size_t)hs.perm[i] * n;
            for (int j = 0; j < cols; j++) hs.u[(size_t)i * n + j] = hr[hs.perm[j]];
            if (hs.dead[hs.perm[i]]) hs.u[(size_t)i * n + i] = 1;
            hs.u[(size_t)i * n + i] += hs.damp * mean;
        }
        if (pq_inv_chol_upper(hs.u, cols, lws, pool) == 0) break;
    }
    *out = hs;
    return PQ_OK;
}

// ---- the solve ------------------------------------------------------------

int pq_gptq_batch_len(const pq_gptq_params *p, int cols) {
    int b = p->block_size;
    if (grouped(p, cols) && !p->static_groups) b = b >= p->group ? b / p->group * p->group : p->group;
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

size_t pq_gptq_solve_bytes(int rows, int cols, const pq_gptq_params *p) {
    size_t r = (size_t)rows, c = (size_t)cols, nc = (size_t)nchunks(rows);
    return ALIGN(r * c * sizeof(double)) + ALIGN(r * pq_gptq_batch_len(p, cols) * sizeof(double)) +
           ALIGN(nc * c * sizeof(float)) + ALIGN(nc * sizeof(double)) + ALIGN(nc * sizeof(int));
}

typedef struct {
    const float *w;
    const pq_gptq_hessian *h;
    const pq_gptq_params *p;
    pq_qtensor *q;
    int rows, cols, blen, ng, group; // group: columns per group (cols when per channel)
    double *W, *E, *loss;            // W [rows][cols] permuted; E [rows][blen]
    float *fbuf;                     // [chunks][cols]
    int *bad;                        // [chunks] 1 + the row whose scale overflowed, or 0
} solve_job;

// Chooses and stores the scale and zero of group g of row r from n weights.
static int set_params(solve_job *j, int r, int g, const float *w, int n, float *sc, float *z) {
    if (!pq_rtn_group_params(w, n, j->p->bits, j->p->sym, j->p->observer, j->q->scale_dtype, sc, z)) return 0;
    j->q->scales[(size_t)r * j->ng + g] = *sc;
    if (j->q->zeros) j->q->zeros[(size_t)r * j->ng + g] = (uint8_t)((int)*z + (1 << (j->p->bits - 1)));
    return 1;
}

static void get_params(const solve_job *j, int r, int g, float *sc, float *z) {
    *sc = j->q->scales[(size_t)r * j->ng + g];
    *z = j->q->zeros ? (float)(j->q->zeros[(size_t)r * j->ng + g] - (1 << (j->p->bits - 1))) : 0;
}

// static_groups: every group's scale of row r from the unmodified row (dead
// columns zeroed), natural order; f is a [cols] buffer. 0 on overflow.
static int static_params(solve_job *j, int r, float *f) {
    const float *wr = j->w + (size_t)r * j->cols;
    float sc, z;
    for (int c = 0; c < j->cols; c++) f[c] = j->h->dead[c] ? 0.0f : wr[c];
    for (int g = 0, c0 = 0; g < j->ng; g++, c0 += j->group)
        if (!set_params(j, r, g, f + c0, c0 + j->group < j->cols ? j->group : j->cols - c0, &sc, &z)) return 0;
    return 1;
}

// Rows [r0, r1): the whole algorithm, batch by batch.
static void solve_chunk(void *ctx, int ci, int tid) {
    solve_job *j = ctx;
    const pq_gptq_params *p = j->p;
    const int *perm = j->h->perm, cols = j->cols, G = j->group, bits = p->bits;
    const double *U = j->h->u;
    int r0 = ci * PQ_GPTQ_ROWS, r1 = r0 + PQ_GPTQ_ROWS < j->rows ? r0 + PQ_GPTQ_ROWS : j->rows;
    int on_the_fly = !p->static_groups || G == cols;
    float *f = j->fbuf + (size_t)ci * cols;
    double loss = 0;
    for (int r = r0; r < r1; r++) {
        const float *wr = j->w + (size_t)r * cols;
        double *Wr = j->W + (size_t)r * cols;
        for (int i = 0; i < cols; i++) Wr[i] = j->h->dead[perm[i]] ? 0.0 : wr[perm[i]];
        if (!on_the_fly && !static_params(j, r, f)) {
            j->bad[ci] = r + 1;
            return;
        }
    }
    for (int i1 = 0; i1 < cols; i1 += j->blen) {
        int i2 = i1 + j->blen < cols ? i1 + j->blen : cols;
        for (int r = r0; r < r1; r++) {
            double *Wr = j->W + (size_t)r * cols, *Er = j->E + (size_t)r * j->blen;
            float sc = 0, z = 0;
            for (int i = i1; i < i2; i++) {
                int g = on_the_fly ? i / G : perm[i] / G;
                if (on_the_fly && i % G == 0) {
                    int len = i + G < cols ? G : cols - i;
                    for (int c = 0; c < len; c++) f[c] = (float)Wr[i + c];
                    if (!set_params(j, r, g, f, len, &sc, &z)) {
                        j->bad[ci] = r + 1;
                        return;
                    }
                } else {
                    get_params(j, r, g, &sc, &z);
                }
                float code = pq_rtn_code((float)Wr[i], sc, z, bits);
                pq_qtensor_set_code(j->q, r, perm[i], (int)code);
                const double *Ui = U + (size_t)i * cols;
                double err = (Wr[i] - (double)(sc * (code - z))) / Ui[i];
                loss += err * err;
                Er[i - i1] = err;
                for (int c = i + 1; c < i2; c++) Wr[c] -= err * Ui[c];
            }
        }
        // the lazy batch update of everything right of the batch
        pq_dgemm_nn(r1 - r0, cols - i2, i2 - i1, -1.0, j->E + (size_t)r0 * j->blen, j->blen, U + (size_t)i1 * cols + i2,
                    cols, 1.0, j->W + (size_t)r0 * cols + i2, cols);
    }
    j->loss[ci] = loss;
}

pq_status pq_gptq_solve(const float *w, int rows, const pq_gptq_hessian *h, const pq_gptq_params *p,
                        const char *name, void *ws, pq_pool *pool, pq_qtensor *q, double *loss) {
    int cols = h->cols, nc = nchunks(rows);
    PQ_TRY(pq_gptq_check_output(q, rows, cols, p, name));
    size_t r = (size_t)rows, c = (size_t)cols;
    char *b = ws;
    solve_job j = {.w = w, .h = h, .p = p, .q = q, .rows = rows, .cols = cols, .blen = pq_gptq_batch_len(p, cols),
                   .ng = pq_qtensor_ngroups(q), .group = grouped(p, cols) ? p->group : cols};
    j.W = (double *)b;
    j.E = (double *)(b += ALIGN(r * c * sizeof(double)));
    j.fbuf = (float *)(b += ALIGN(r * j.blen * sizeof(double)));
    j.loss = (double *)(b += ALIGN((size_t)nc * c * sizeof(float)));
    j.bad = (int *)(b += ALIGN((size_t)nc * sizeof(double)));
    memset(j.bad, 0, (size_t)nc * sizeof(int));
    if (q->g_idx)
        for (int i = 0; i < cols; i++) q->g_idx[h->perm[i]] = i / p->group;
    pq_pool_for(pool, nc, solve_chunk, &j);
    double total = 0;
    for (int i = 0; i < nc; i++) {
        PQ_FAIL_IF(j.bad[i], PQ_ERR_NUMERIC, "%s: row %d: a scale overflows %s", name, j.bad[i] - 1,
                   pq_dtype_name(q->scale_dtype));
        total += j.loss[i];
    }
    if (loss) *loss = total;
    return PQ_OK;
}
