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

size_t pq_block_panels_bytes(const pq_layer *L, int bf16) {
    size_t b = 0;
    for (int k = 0; k < PQ_NLINEAR; k++) b += pq_linear_panels_bytes(&L->lin[k], bf16);
    return b;
}

void pq_block_pack_panels(pq_layer *L, void *buf, int bf16, void *ws, pq_pool *pool) {
    size_t off = 0;
    for (int k = 0; k < PQ_NLINEAR; k++) {
        size_t b = pq_linear_panels_bytes(&L->lin[k], bf16);
        if (b) pq_linear_pack_panels(&L->lin[k], (char *)buf + off, bf16, ws, pool);
        off += b;
    }
}

void pq_block_rope_prepare(pq_block_scratch *s, const double *inv_freq, int head_dim, int pos0, int T) {
    pq_rope_table(inv_freq, head_dim, pos0, T, s->rope_cos, s->rope_sin);
}

// The element-wise ops of a block run over the pool in tasks of OP_ROWS
// tokens (one task, on the caller, for a decode step).
#define OP_ROWS 16

typedef enum { OP_RMSNORM, OP_ADD, OP_SWIGLU, OP_ROPE } op_kind;

typedef struct {
    op_kind kind;
    int T, n;          // tokens, floats per token (ROPE: the row stride)
    float *y;          // RMSNORM: out; ADD: y += x; SWIGLU: the gate; ROPE: rotated in place
    const float *x;    // RMSNORM: in; ADD: x; SWIGLU: up
    const float *w;    // RMSNORM: the norm's weight
    float eps;
    int heads, head_dim;
    const float *cs, *sn;
} op_job;

static void op_task(void *ctx, int i, int tid) {
    const op_job *j = ctx;
    int t0 = i * OP_ROWS, nt = j->T - t0 < OP_ROWS ? j->T - t0 : OP_ROWS;
    size_t off = (size_t)t0 * j->n, len = (size_t)nt * j->n;
    switch (j->kind) {
    case OP_RMSNORM: pq_rmsnorm_cpu(j->x + off, j->w, nt, j->n, j->eps, j->y + off); break;
    case OP_ADD: pq_add_cpu(j->y + off, j->x + off, len); break;
    case OP_SWIGLU: pq_swiglu_cpu(j->y + off, j->x + off, len); break;
    case OP_ROPE: {
        size_t half = (size_t)j->head_dim / 2;
        pq_rope_apply_cpu(j->y + off, nt, j->n, j->heads, j->head_dim, j->cs + t0 * half, j->sn + t0 * half);
        break;
    }
    }
}

static void run_op(pq_pool *pool, op_job j) {
    pq_pool_for(pool, (j.T + OP_ROWS - 1) / OP_ROWS, op_task, &j);
}

static void rmsnorm(pq_pool *pool, const float *x, const float *w, int T, int n, float eps, float *y) {
    run_op(pool, (op_job){.kind = OP_RMSNORM, .T = T, .n = n, .y = y, .x = x, .w = w, .eps = eps});
}

static void rope(pq_pool *pool, float *x, int T, int stride, int heads, int head_dim, const pq_block_scratch *s) {
    run_op(pool, (op_job){.kind = OP_ROPE, .T = T, .n = stride, .y = x, .heads = heads, .head_dim = head_dim,
                          .cs = s->rope_cos, .sn = s->rope_sin});
}

static void hook(const pq_block_hooks *h, int layer, pq_linear_slot slot, const float *x, int T, int cols) {
    if (h && h->linear_input) h->linear_input(h->ud, layer, slot, x, T, cols);
}

static void hook_out(const pq_block_hooks *h, int layer, const pq_layer *L, pq_linear_slot slot, const float *y,
                     int T) {
    if (h && h->linear_output) h->linear_output(h->ud, layer, slot, y, T, L->lin[slot].rows);
}

void pq_block_forward_cpu(const pq_config *c, const pq_layer *L, int layer, float *x, int T, int pos0,
                          float *kcache, float *vcache, pq_block_scratch *s, pq_pool *pool,
                          const pq_block_hooks *hooks) {
    PQ_ASSERT(T <= s->max_T && pos0 + T <= s->max_ctx);
    int H = c->hidden, hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    // attention
    rmsnorm(pool, x, L->attn_norm, T, H, c->rms_eps, s->xn);
    hook(hooks, layer, PQ_Q, s->xn, T, H);
    float *kdst = kcache + (size_t)pos0 * kvd, *vdst = vcache + (size_t)pos0 * kvd;
    const pq_linear *qkv[] = {&L->lin[PQ_Q], &L->lin[PQ_K], &L->lin[PQ_V]};
    pq_linear_forward_group(qkv, (float *const[]){s->q, kdst, vdst}, 3, s->xn, T, s->lin_ws, pool);
    hook_out(hooks, layer, L, PQ_Q, s->q, T);
    hook_out(hooks, layer, L, PQ_K, kdst, T);
    hook_out(hooks, layer, L, PQ_V, vdst, T);
    rope(pool, s->q, T, qd, c->n_heads, hd, s);
    rope(pool, kdst, T, kvd, c->n_kv_heads, hd, s);
    pq_attn_shape as = {c->n_heads, c->n_kv_heads, hd, pq_config_window(c, layer)};
    pq_attention_cpu(&as, s->q, kcache, vcache, T, pos0, s->att, s->attn_ws, pool);
    hook(hooks, layer, PQ_O, s->att, T, qd);
    pq_linear_forward(&L->lin[PQ_O], s->att, T, s->out, s->lin_ws, pool);
    hook_out(hooks, layer, L, PQ_O, s->out, T);
    run_op(pool, (op_job){.kind = OP_ADD, .T = T, .n = H, .y = x, .x = s->out});
    // MLP
    rmsnorm(pool, x, L->mlp_norm, T, H, c->rms_eps, s->xn);
    hook(hooks, layer, PQ_GATE, s->xn, T, H);
    const pq_linear *gate_up[] = {&L->lin[PQ_GATE], &L->lin[PQ_UP]};
    pq_linear_forward_group(gate_up, (float *const[]){s->gate, s->up}, 2, s->xn, T, s->lin_ws, pool);
    hook_out(hooks, layer, L, PQ_GATE, s->gate, T);
    hook_out(hooks, layer, L, PQ_UP, s->up, T);
    run_op(pool, (op_job){.kind = OP_SWIGLU, .T = T, .n = c->intermediate, .y = s->gate, .x = s->up});
    hook(hooks, layer, PQ_DOWN, s->gate, T, c->intermediate);
    if (hooks && hooks->inputs_only) return;
    pq_linear_forward(&L->lin[PQ_DOWN], s->gate, T, s->out, s->lin_ws, pool);
    hook_out(hooks, layer, L, PQ_DOWN, s->out, T);
    run_op(pool, (op_job){.kind = OP_ADD, .T = T, .n = H, .y = x, .x = s->out});
}
