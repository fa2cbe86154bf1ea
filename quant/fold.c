// quant/fold.c — per-channel scales folded into a widened block (see fold.h).
#include "quant/fold.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/sys.h"
#include "kernels/ops.h"

pq_status pq_fold_block_load(const pq_config *c, const pq_layer *L, int layer, const char *name, pq_fold_block *b) {
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
        pq_linear_rows(lin, 0, lin->rows, b->w[s]);
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

void pq_fold_apply(pq_fold_block *b, int g, const float *s) {
    const pq_config *c = b->c;
    const pq_input_group *G = &PQ_INPUT_GROUPS[g];
    int cols = pq_input_group_cols(c, g);
    PQ_ASSERT(pq_fold_usable(c, g));
    for (int k = 0; k < G->n; k++) {
        pq_linear_slot m = G->members[k];
        for (int r = 0; r < b->rows[m]; r++) {
            float *w = b->w[m] + (size_t)r * cols;
            for (int j = 0; j < cols; j++) w[j] *= s[j];
        }
    }
    if (G->from != PQ_FROM_LINEAR) {
        float *norm = G->from == PQ_FROM_ATTN_NORM ? b->attn_norm : b->mlp_norm;
        for (int j = 0; j < c->hidden; j++) norm[j] /= s[j];
        return;
    }
    pq_linear_slot p = G->from_slot;
    for (int r = 0; r < b->rows[p]; r++) {
        float *w = b->w[p] + (size_t)r * b->cols[p];
        for (int j = 0; j < b->cols[p]; j++) w[j] /= s[r];
        if (b->bias[p]) b->bias[p][r] /= s[r];
    }
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
