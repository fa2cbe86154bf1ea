// quant/awq.c — AWQ's scale and clip searches (see awq.h).
#include "quant/awq.h"

#include <math.h>
#include <string.h>

#include "common/sys.h"
#include "kernels/blas.h"
#include "kernels/ggml_blocks.h"
#include "quant/ggml_grid.h"
#include "quant/rtn.h"

#define CLIP_ROWS 64

void pq_awq_scales(const float *xmean, int n, double alpha, float *s) {
    double lo = INFINITY, hi = 0;
    for (int j = 0; j < n; j++) {
        double v = pow(fmax(xmean[j], PQ_AWQ_MIN_XMEAN), alpha);
        s[j] = (float)v;
        lo = fmin(lo, s[j]), hi = fmax(hi, s[j]);
    }
    double norm = sqrt(hi * lo);
    for (int j = 0; j < n; j++) s[j] = (float)(s[j] / norm);
}

pq_status pq_awq_search_scale(const float *xmean, int n, int grid, pq_awq_loss_fn loss, void *ud, float *s_best,
                              float *tmp, double *alpha, double *best_loss, double *history) {
    int best = -1;
    double best_l = INFINITY;
    for (int i = 0; i < grid; i++) {
        double l;
        pq_awq_scales(xmean, n, (double)i / grid, tmp);
        PQ_TRY(loss(ud, tmp, &l));
        if (history) history[i] = l;
        if (l < best_l) { // strictly: the first minimum wins, as in the reference
            best_l = l, best = i;
            memcpy(s_best, tmp, (size_t)n * sizeof(float));
        }
    }
    PQ_FAIL_IF(best < 0, PQ_ERR_NUMERIC, "AWQ: no scale on the grid of %d gives a finite output error", grid);
    *alpha = (double)best / grid;
    *best_loss = best_l;
    return PQ_OK;
}

// A GGUF scheme's groups are the blocks of the matrix's type (the whole row
// for llama.cpp's F16 fallback, which needs no clipping).
static int group_len(const pq_scheme *s, int cols) {
    int t = pq_scheme_ggml_type_for(s, cols);
    if (t >= 0) return t == PQ_GGML_F16 ? cols : pq_ggml_grid_block(t);
    return s->group > 0 && s->group < cols ? s->group : cols;
}

int pq_awq_ngroups(const pq_scheme *s, int cols) {
    int len = group_len(s, cols);
    return (cols + len - 1) / len;
}

void pq_awq_clip_apply(float *w, int rows, int cols, const pq_scheme *s, const float *clip) {
    int len = group_len(s, cols), ng = pq_awq_ngroups(s, cols);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            float m = clip[(size_t)r * ng + c / len], *v = &w[(size_t)r * cols + c];
            *v = *v > m ? m : *v < -m ? -m : *v;
        }
}

typedef struct {
    const float *w, *x;
    int rows, cols, T, len, ng, ncand, clip_grid;
    int ggml;              // a GGUF scheme: the matrix's ggml type, else -1
    const pq_scheme *s;
    pq_dtype sdt;
    float *clip;
    float *buf;            // per thread: D [CLIP_ROWS][len], E [T][CLIP_ROWS], wc [len]
    double *err, *err0;    // [rows][ng]
} clip_job;

// Rows [ci * CLIP_ROWS, ..): every group, every candidate.
static void clip_chunk(void *ctx, int ci, int tid) {
    clip_job *j = ctx;
    int r0 = ci * CLIP_ROWS, nr = j->rows - r0 < CLIP_ROWS ? j->rows - r0 : CLIP_ROWS;
    float *D = j->buf + (size_t)tid * ((size_t)CLIP_ROWS * j->len + (size_t)j->T * CLIP_ROWS + j->len);
    float *E = D + (size_t)CLIP_ROWS * j->len, *wc = E + (size_t)j->T * CLIP_ROWS;
    for (int g = 0; g < j->ng; g++) {
        int c0 = g * j->len, n = j->cols - c0 < j->len ? j->cols - c0 : j->len;
        float org[CLIP_ROWS];
        for (int r = 0; r < nr; r++) {
            const float *w = j->w + (size_t)(r0 + r) * j->cols + c0;
            org[r] = 0;
            for (int c = 0; c < n; c++) org[r] = fabsf(w[c]) > org[r] ? fabsf(w[c]) : org[r];
            j->err[(size_t)(r0 + r) * j->ng + g] = INFINITY;
        }
        for (int i = 0; i < j->ncand; i++) {
            int usable[CLIP_ROWS];
            for (int r = 0; r < nr; r++) {
                const float *w = j->w + (size_t)(r0 + r) * j->cols + c0;
                float m = (float)(org[r] * (1.0 - (double)i / j->clip_grid)), sc, z;
                for (int c = 0; c < n; c++) wc[c] = w[c] > m ? m : w[c] < -m ? -m : w[c];
                if (j->ggml >= 0) { // a GGUF scheme: ggml's RTN of the clamped block
                    usable[r] = 1;
                    pq_ggml_fake_quant(j->ggml, wc, n, D + (size_t)r * n);
                    for (int c = 0; c < n; c++) D[(size_t)r * n + c] -= w[c];
                    continue;
                }
                usable[r] = pq_rtn_group_params(wc, n, j->s->bits, j->s->sym, j->s->observer, j->sdt, &sc, &z);
                for (int c = 0; c < n && usable[r]; c++) { // the code RTN will store for the clipped weight
                    float code = pq_rtn_code_dtype(pq_round_to_dtype(wc[c], j->sdt), sc, z, j->s->bits, j->sdt);
                    D[(size_t)r * n + c] = sc * (code - z) - w[c];
                }
                if (!usable[r]) memset(D + (size_t)r * n, 0, (size_t)n * sizeof(float));
            }
            // E [T][nr] = X_g D^T: each token's output error per row
            pq_sgemm_nt(j->T, nr, n, 1.0f, j->x + c0, j->cols, D, n, 0.0f, E, nr);
            for (int r = 0; r < nr; r++) {
                double e = 0;
                for (int t = 0; t < j->T; t++) e += (double)E[(size_t)t * nr + r] * E[(size_t)t * nr + r];
                e /= j->T;
                size_t k = (size_t)(r0 + r) * j->ng + g;
                if (i == 0) j->err0[k] = usable[r] ? e : INFINITY;
                if (usable[r] && e < j->err[k]) {
                    j->err[k] = e;
                    j->clip[k] = (float)(org[r] * (1.0 - (double)i / j->clip_grid));
                }
            }
        }
        for (int r = 0; r < nr; r++) // no usable candidate (a scale overflows): leave the row unclipped
            if (!(j->err[(size_t)(r0 + r) * j->ng + g] < INFINITY)) j->clip[(size_t)(r0 + r) * j->ng + g] = org[r];
    }
}

pq_status pq_awq_search_clip(const float *w, int rows, int cols, const pq_scheme *s, pq_dtype scale_dtype,
                             const float *x, int T, int clip_grid, double max_shrink, pq_pool *pool, float *clip,
                             double *err, double *err0) {
    clip_job j = {w, x, rows, cols, T, group_len(s, cols), pq_awq_ngroups(s, cols), 0, clip_grid,
                  pq_scheme_ggml_type_for(s, cols), s, scale_dtype, clip, NULL, NULL, NULL};
    j.ncand = (int)(clip_grid * max_shrink);
    if (j.ncand < 1) j.ncand = 1;
    size_t per = (size_t)CLIP_ROWS * j.len + (size_t)T * CLIP_ROWS + j.len, cells = (size_t)rows * j.ng;
    j.buf = pq_alloc((size_t)pq_pool_size(pool) * per * sizeof(float));
    j.err = pq_alloc(cells * sizeof(double));
    j.err0 = pq_alloc(cells * sizeof(double));
    pq_status st = PQ_OK;
    PQ_CHECK_GOTO(!j.buf || !j.err || !j.err0, st, PQ_ERR_NOMEM, "AWQ clip search: out of memory (%d x %d, %d tokens)",
                  rows, cols, T);
    pq_pool_for(pool, (rows + CLIP_ROWS - 1) / CLIP_ROWS, clip_chunk, &j);
    double e = 0, e0 = 0;
    for (size_t k = 0; k < cells; k++)
        if (j.err[k] < INFINITY) e += j.err[k], e0 += j.err0[k];
    if (err) *err = e;
    if (err0) *err0 = e0;
done:
    pq_free(j.buf);
    pq_free(j.err);
    pq_free(j.err0);
    return st;
}
