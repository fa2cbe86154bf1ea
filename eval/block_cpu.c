#include "block_cpu.h"

#include <string.h>

#include "common/sys.h"
#include "kernels/ops.h"

pq_status pq_block_scratch_init(pq_block_scratch *s, const pq_config *c, int max_T, int max_ctx, int nthreads,
                                const pq_layer *layers, int n_layers, const pq_linear *extra) {
    memset(s, 0, sizeof *s);
    s->max_T = max_T;
    s->max_ctx = max_ctx;
    s->nthreads = nthreads;
    size_t T = (size_t)max_T, qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t lin_ws = extra ? pq_linear_workspace_bytes(extra, nthreads) : 0;
    for (int l = 0; l < n_layers; l++)
        for (int i = 0; i < PQ_NLINEAR; i++) {
            size_t b = pq_linear_workspace_bytes(&layers[l].lin[i], nthreads);
            if (b > lin_ws) lin_ws = b;
        }
    pq_attn_shape as = {c->n_heads, c->n_kv_heads, c->head_dim, 0}; // the workspace does not depend on the window
    s->xn = pq_alloc(T * (size_t)c->hidden * sizeof(float));
    s->q = pq_alloc(T * qd * sizeof(float));
    s->k = pq_alloc(T * kvd * sizeof(float));
    s->v = pq_alloc(T * kvd * sizeof(float));
    s->att = pq_alloc(T * qd * sizeof(float));
    s->gate = pq_alloc(T * (size_t)c->intermediate * sizeof(float));
    s->up = pq_alloc(T * (size_t)c->intermediate * sizeof(float));
    s->out = pq_alloc(T * (size_t)c->hidden * sizeof(float));
    s->rope_cos = pq_alloc(T * (size_t)(c->head_dim / 2) * sizeof(float));
    s->rope_sin = pq_alloc(T * (size_t)(c->head_dim / 2) * sizeof(float));
    s->lin_ws = lin_ws ? pq_alloc(lin_ws) : NULL;
    s->attn_ws = pq_alloc(pq_attention_workspace_bytes(&as, max_ctx, nthreads));
    if (!s->xn || !s->q || !s->k || !s->v || !s->att || !s->gate || !s->up || !s->out || !s->rope_cos ||
        !s->rope_sin || (lin_ws && !s->lin_ws) || !s->attn_ws) {
        pq_block_scratch_free(s);
        return PQ_FAIL(PQ_ERR_NOMEM, "out of memory for activations of %d tokens", max_T);
    }
    return PQ_OK;
}

void pq_block_scratch_free(pq_block_scratch *s) {
    void *ps[] = {s->xn, s->q, s->k, s->v, s->att, s->gate, s->up, s->out, s->rope_cos, s->rope_sin, s->lin_ws, s->attn_ws};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) pq_free(ps[i]);
    memset(s, 0, sizeof *s);
}

void pq_block_rope_prepare(pq_block_scratch *s, const double *inv_freq, int head_dim, int pos0, int T) {
    pq_rope_table(inv_freq, head_dim, pos0, T, s->rope_cos, s->rope_sin);
}

static void hook(const pq_block_hooks *h, int layer, pq_linear_slot slot, const float *x, int T, int cols) {
    if (h && h->linear_input) h->linear_input(h->ud, layer, slot, x, T, cols);
}

void pq_block_forward_cpu(const pq_config *c, const pq_layer *L, int layer, float *x, int T, int pos0,
                          float *kcache, float *vcache, pq_block_scratch *s, pq_pool *pool,
                          const pq_block_hooks *hooks) {
    PQ_ASSERT(T <= s->max_T && pos0 + T <= s->max_ctx);
    int H = c->hidden, hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    // attention
    pq_rmsnorm_ref(x, L->attn_norm, T, H, c->rms_eps, s->xn);
    hook(hooks, layer, PQ_Q, s->xn, T, H);
    float *kdst = kcache + (size_t)pos0 * kvd, *vdst = vcache + (size_t)pos0 * kvd;
    const pq_linear *qkv[] = {&L->lin[PQ_Q], &L->lin[PQ_K], &L->lin[PQ_V]};
    pq_linear_forward_group(qkv, (float *const[]){s->q, kdst, vdst}, 3, s->xn, T, s->lin_ws, pool);
    pq_rope_apply_ref(s->q, T, qd, c->n_heads, hd, s->rope_cos, s->rope_sin);
    pq_rope_apply_ref(kdst, T, kvd, c->n_kv_heads, hd, s->rope_cos, s->rope_sin);
    pq_attn_shape as = {c->n_heads, c->n_kv_heads, hd, pq_config_window(c, layer)};
    pq_attention_cpu(&as, s->q, kcache, vcache, T, pos0, s->att, s->attn_ws, pool);
    hook(hooks, layer, PQ_O, s->att, T, qd);
    pq_linear_forward(&L->lin[PQ_O], s->att, T, s->out, s->lin_ws, pool);
    pq_add_ref(x, s->out, (size_t)T * H);
    // MLP
    pq_rmsnorm_ref(x, L->mlp_norm, T, H, c->rms_eps, s->xn);
    hook(hooks, layer, PQ_GATE, s->xn, T, H);
    const pq_linear *gate_up[] = {&L->lin[PQ_GATE], &L->lin[PQ_UP]};
    pq_linear_forward_group(gate_up, (float *const[]){s->gate, s->up}, 2, s->xn, T, s->lin_ws, pool);
    pq_swiglu_ref(s->gate, s->up, (size_t)T * c->intermediate);
    hook(hooks, layer, PQ_DOWN, s->gate, T, c->intermediate);
    pq_linear_forward(&L->lin[PQ_DOWN], s->gate, T, s->out, s->lin_ws, pool);
    pq_add_ref(x, s->out, (size_t)T * H);
}
