// quant/fold.c — per-channel scales folded into a widened block (see fold.h).
#include "quant/fold.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/sys.h"
#include "kernels/ops.h"

// Rows per task of the pooled loops.
#define FOLD_ROWS 32

// Rows [r0, r0 + n) of W widened into w (row r at w + r * cols).
typedef struct {
    const pq_linear *W;
    float *w;
} widen_job;

static void widen_task(void *ctx, int i, int tid) {
    widen_job *j = ctx;
    int r0 = i * FOLD_ROWS, n = j->W->rows - r0 < FOLD_ROWS ? j->W->rows - r0 : FOLD_ROWS;
    pq_linear_rows(j->W, r0, n, j->w + (size_t)r0 * j->W->cols);
}

pq_status pq_fold_block_load(const pq_config *c, const pq_layer *L, int layer, const char *name, pq_pool *pool,
                             pq_fold_block *b) {
    memset(b, 0, sizeof *b);
    b->c = c;
    size_t H = (size_t)c->hidden;
    b->attn_norm = pq_alloc(H * sizeof(float));
    b->mlp_norm = pq_alloc(H * sizeof(float));
    int ok = b->attn_norm && b->mlp_norm;
    for (int s = 0; s < PQ_NLINEAR && ok; s++) {
        const pq_linear *lin = &L->lin[s];
        b->rows[s] = lin->rows, b->cols[s] = lin->cols;
        ok = (b->w[s] = pq_alloc((size_t)lin->rows * lin->cols * sizeof(float))) != NULL;
        if (ok && lin->bias) ok = (b->bias[s] = pq_alloc((size_t)lin->rows * sizeof(float))) != NULL;
    }
    if (!ok) {
        pq_fold_block_free(b);
        return PQ_FAIL(PQ_ERR_NOMEM, "layer %d: out of memory for a widened copy of the block", layer);
    }
    memcpy(b->attn_norm, L->attn_norm, H * sizeof(float));
    memcpy(b->mlp_norm, L->mlp_norm, H * sizeof(float));
    for (int s = 0; s < PQ_NLINEAR; s++) {
        const pq_linear *lin = &L->lin[s];
        size_t n = (size_t)lin->rows * lin->cols;
        if (lin->fmt != PQ_W_DENSE) {
            pq_fold_block_free(b);
            return PQ_FAIL(PQ_ERR_FORMAT, "%s: model.layers.%d.%s is not a dense weight", name, layer,
                           pq_linear_slot_name((pq_linear_slot)s));
        }
        widen_job wj = {lin, b->w[s]};
        pq_pool_for(pool, (lin->rows + FOLD_ROWS - 1) / FOLD_ROWS, widen_task, &wj);
        if (lin->bias) memcpy(b->bias[s], lin->bias, (size_t)lin->rows * sizeof(float));
        long long bad = pq_scan_finite_cpu(b->w[s], n, NULL);
        if (bad >= 0) {
            int nan = isnan(b->w[s][bad]);
            pq_fold_block_free(b);
            return PQ_FAIL(PQ_ERR_NUMERIC, "%s/model.layers.%d.%s.weight: weight [%lld, %lld] is %s", name, layer,
                           pq_linear_slot_name((pq_linear_slot)s), bad / lin->cols, bad % lin->cols,
                           nan ? "NaN" : "Inf");
        }
    }
    return PQ_OK;
}

void pq_fold_block_free(pq_fold_block *b) {
    if (!b) return;
    for (int s = 0; s < PQ_NLINEAR; s++) pq_free(b->w[s]), pq_free(b->bias[s]);
    pq_free(b->attn_norm);
    pq_free(b->mlp_norm);
    memset(b, 0, sizeof *b);
}

pq_layer pq_fold_block_layer(const pq_fold_block *b) {
    pq_layer L = {.attn_norm = b->attn_norm, .mlp_norm = b->mlp_norm};
    for (int s = 0; s < PQ_NLINEAR; s++) {
        L.lin[s] = (pq_linear){.fmt = PQ_W_DENSE, .rows = b->rows[s], .cols = b->cols[s],
                               .dense_type = PQ_DENSE_F32, .w = b->w[s], .bias = b->bias[s]};
        L.bias[s] = b->bias[s];
    }
    return L;
}

// Output width of a block's linear (the shapes eval/model.c checks).
static int slot_rows(const pq_config *c, pq_linear_slot s) {
    switch (s) {
    case PQ_Q: return c->n_heads * c->head_dim;
    case PQ_K: case PQ_V: return c->n_kv_heads * c->head_dim;
    case PQ_O: case PQ_DOWN: return c->hidden;
    default: return c->intermediate;
    }
}

int pq_fold_usable(const pq_config *c, int g) {
    const pq_input_group *G = &PQ_INPUT_GROUPS[g];
    return G->from != PQ_FROM_LINEAR || slot_rows(c, G->from_slot) == pq_input_group_cols(c, g);
}

int pq_fold_group_of(pq_linear_slot slot) {
    for (int g = 0; g < PQ_NGROUPS; g++)
        for (int k = 0; k < PQ_INPUT_GROUPS[g].n; k++)
            if (PQ_INPUT_GROUPS[g].members[k] == slot) return g;
    PQ_ASSERT(0);
    return -1;
}

typedef struct {
    const float *x, *s;
    float *y;
    int T, cols, divide;
} cols_job;

static void cols_task(void *ctx, int i, int tid) {
    cols_job *j = ctx;
    int t1 = j->T - i * FOLD_ROWS < FOLD_ROWS ? j->T : (i + 1) * FOLD_ROWS;
    for (int t = i * FOLD_ROWS; t < t1; t++) {
        const float *x = j->x + (size_t)t * j->cols;
        float *y = j->y + (size_t)t * j->cols;
        if (j->divide)
            for (int c = 0; c < j->cols; c++) y[c] = x[c] / j->s[c];
        else
            for (int c = 0; c < j->cols; c++) y[c] = x[c] * j->s[c];
    }
}

void pq_fold_scale_cols(const float *x, float *y, int T, int cols, const float *s, int divide, pq_pool *pool) {
    cols_job j = {x, s, y, T, cols, divide};
    pq_pool_for(pool, (T + FOLD_ROWS - 1) / FOLD_ROWS, cols_task, &j);
}

// w [rows][cols] and bias (if any): row r divided by s[r].
typedef struct {
    float *w, *bias;
    int rows, cols;
    const float *s;
} rows_job;

static void rows_task(void *ctx, int i, int tid) {
    rows_job *j = ctx;
    int r0 = i * FOLD_ROWS, r1 = j->rows - r0 < FOLD_ROWS ? j->rows : r0 + FOLD_ROWS;
    for (int r = r0; r < r1; r++) {
        float *w = j->w + (size_t)r * j->cols;
        for (int c = 0; c < j->cols; c++) w[c] /= j->s[r];
        if (j->bias) j->bias[r] /= j->s[r];
    }
}

void pq_fold_apply(pq_fold_block *b, int g, const float *s, pq_pool *pool) {
    const pq_config *c = b->c;
    const pq_input_group *G = &PQ_INPUT_GROUPS[g];
    int cols = pq_input_group_cols(c, g);
    PQ_ASSERT(pq_fold_usable(c, g));
    for (int k = 0; k < G->n; k++) {
        float *w = b->w[G->members[k]];
        pq_fold_scale_cols(w, w, b->rows[G->members[k]], cols, s, 0, pool);
    }
    if (G->from != PQ_FROM_LINEAR) {
        float *norm = G->from == PQ_FROM_ATTN_NORM ? b->attn_norm : b->mlp_norm;
        for (int j = 0; j < c->hidden; j++) norm[j] /= s[j];
        return;
    }
    pq_linear_slot p = G->from_slot;
    rows_job j = {b->w[p], b->bias[p], b->rows[p], b->cols[p], s};
    pq_pool_for(pool, (b->rows[p] + FOLD_ROWS - 1) / FOLD_ROWS, rows_task, &j);
}

void pq_fold_target(int layer, int g, char *buf, size_t cap) {
    const pq_input_group *G = &PQ_INPUT_GROUPS[g];
    if (G->from == PQ_FROM_ATTN_NORM) snprintf(buf, cap, "model.layers.%d.input_layernorm.weight", layer);
    else if (G->from == PQ_FROM_MLP_NORM) snprintf(buf, cap, "model.layers.%d.post_attention_layernorm.weight", layer);
    else snprintf(buf, cap, "model.layers.%d.%s.bias", layer, pq_linear_slot_name(G->from_slot));
}

int pq_fold_target_len(const pq_config *c, const pq_layer *L, int g) {
    const pq_input_group *G = &PQ_INPUT_GROUPS[g];
    return G->from == PQ_FROM_LINEAR ? L->lin[G->from_slot].rows : c->hidden;
}

void pq_fold_install(pq_layer *L, int g, float *v) {
    const pq_input_group *G = &PQ_INPUT_GROUPS[g];
    if (G->from == PQ_FROM_ATTN_NORM) L->attn_norm = v;
    else if (G->from == PQ_FROM_MLP_NORM) L->mlp_norm = v;
    else L->lin[G->from_slot].bias = v;
}
