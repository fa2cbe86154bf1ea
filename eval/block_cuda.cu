// One Llama decoder block on the GPU (eval/block_cuda.h).
#include "kernels/cuda_util.cuh"

extern "C" {
#include "kernels/ops.h"
}
#include "eval/block_cuda.h"
#include "kernels/ops_cuda.h"

// ---- weights ---------------------------------------------------------------------

static pq_status layer_upload(const pq_config *c, const pq_layer *L, int layer, pq_act_dtype dt,
                              pq_block_cuda_layer *out) {
    char what[128];
    for (int i = 0; i < PQ_NLINEAR; i++) {
        snprintf(what, sizeof what, "model.layers.%d.%s", layer, pq_linear_slot_name((pq_linear_slot)i));
        PQ_TRY(pq_linear_cuda_upload(&L->lin[i], what, dt, &out->lin[i]));
    }
    snprintf(what, sizeof what, "model.layers.%d.input_layernorm", layer);
    PQ_TRY(pq_cuda_copy_named((void **)&out->d_attn_norm, L->attn_norm, (size_t)c->hidden * sizeof(float),
                              what));
    snprintf(what, sizeof what, "model.layers.%d.post_attention_layernorm", layer);
    PQ_TRY(pq_cuda_copy_named((void **)&out->d_mlp_norm, L->mlp_norm, (size_t)c->hidden * sizeof(float),
                              what));
    return PQ_OK;
}

pq_status pq_block_cuda_layer_upload(const pq_config *c, const pq_layer *L, int layer, pq_act_dtype dt,
                                     pq_block_cuda_layer *out) {
    memset(out, 0, sizeof *out);
    pq_status s = layer_upload(c, L, layer, dt, out);
    if (s != PQ_OK) pq_block_cuda_layer_free(out);
    return s;
}

pq_status pq_block_cuda_linear_replace(const pq_config *c, pq_block_cuda_layer *L, int layer, pq_linear_slot slot,
                                       const pq_linear *W, pq_act_dtype dt) {
    char what[128];
    snprintf(what, sizeof what, "model.layers.%d.%s", layer, pq_linear_slot_name(slot));
    pq_linear_cuda_free(&L->lin[slot]);
    return pq_linear_cuda_upload(W, what, dt, &L->lin[slot]);
}

void pq_block_cuda_layer_free(pq_block_cuda_layer *L) {
    if (!L) return;
    for (int i = 0; i < PQ_NLINEAR; i++) pq_linear_cuda_free(&L->lin[i]);
    cudaFree(L->d_attn_norm);
    cudaFree(L->d_mlp_norm);
    memset(L, 0, sizeof *L);
}

size_t pq_block_cuda_layer_workspace_bytes(const pq_block_cuda_layer *L, int max_T) {
    size_t ws = 0;
    for (int i = 0; i < PQ_NLINEAR; i++) {
        size_t b = pq_linear_cuda_workspace_bytes(&L->lin[i], max_T);
        if (b > ws) ws = b;
    }
    return ws;
}

// ---- scratch ---------------------------------------------------------------------

static pq_status scratch_alloc(pq_block_cuda_scratch *s, const pq_config *c, int max_T, int n_ctx) {
    size_t T = (size_t)max_T, H = (size_t)c->hidden, half = (size_t)(c->head_dim / 2);
    size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t I = (size_t)c->intermediate;
    s->max_T = max_T, s->n_ctx = n_ctx;
    pq_attn_shape as = {c->n_heads, c->n_kv_heads, c->head_dim, 0};
    PQ_TRY(pq_cuda_malloc_named(&s->d_attn_ws, pq_attention_cuda_ws_bytes(&as, n_ctx), "attention slices"));
    PQ_TRY(pq_cuda_malloc_named((void **)&s->d_xn, T * H * sizeof(uint16_t), "normed activations"));
    PQ_TRY(pq_cuda_malloc_named((void **)&s->d_q, T * qd * sizeof(float), "queries"));
    PQ_TRY(pq_cuda_malloc_named((void **)&s->d_k, T * kvd * sizeof(float), "keys"));
    PQ_TRY(pq_cuda_malloc_named((void **)&s->d_v, T * kvd * sizeof(float), "values"));
    PQ_TRY(pq_cuda_malloc_named((void **)&s->d_att, T * qd * sizeof(uint16_t), "attention output"));
    PQ_TRY(pq_cuda_malloc_named((void **)&s->d_gate, T * I * sizeof(float), "MLP gate"));
    PQ_TRY(pq_cuda_malloc_named((void **)&s->d_up, T * I * sizeof(float), "MLP up"));
    PQ_TRY(pq_cuda_malloc_named((void **)&s->d_act, T * I * sizeof(uint16_t), "MLP activations"));
    PQ_TRY(pq_cuda_malloc_named((void **)&s->d_out, T * H * sizeof(float), "block outputs"));
    PQ_TRY(pq_cuda_malloc_named((void **)&s->d_cs, T * half * sizeof(float), "RoPE cos table"));
    PQ_TRY(pq_cuda_malloc_named((void **)&s->d_sn, T * half * sizeof(float), "RoPE sin table"));
    // RoPE inverse frequencies, computed on the host exactly as the CPU backend does
    const size_t nf = half ? half : 1;
    double *inv_freq = (double *)malloc(nf * sizeof(double));
    PQ_FAIL_IF(!inv_freq, PQ_ERR_NOMEM, "out of memory");
    pq_rope_params rp = {c->rope_theta, c->rope_llama3, c->rope_factor, c->rope_low_freq_factor,
                         c->rope_high_freq_factor, c->rope_orig_max_pos};
    pq_rope_inv_freq(&rp, c->head_dim, inv_freq);
    pq_status st = pq_cuda_malloc_named((void **)&s->d_inv_freq, nf * sizeof(double), "RoPE frequencies");
    if (st == PQ_OK) {
        cudaError_t e = cudaMemcpy(s->d_inv_freq, inv_freq, half * sizeof(double), cudaMemcpyHostToDevice);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            st = PQ_FAIL(PQ_ERR_CUDA, "cudaMemcpy of the RoPE frequencies: %s", cudaGetErrorString(e));
        }
    }
    free(inv_freq);
    return st;
}

pq_status pq_block_cuda_scratch_init(pq_block_cuda_scratch *s, const pq_config *c, int max_T, int n_ctx,
                                     pq_act_dtype dt) {
    memset(s, 0, sizeof *s);
    PQ_FAIL_IF(max_T < 1 || n_ctx < max_T, PQ_ERR_ARG, "block scratch for %d tokens over %d positions", max_T, n_ctx);
    s->dt = dt;
    pq_status st = scratch_alloc(s, c, max_T, n_ctx);
    if (st != PQ_OK) pq_block_cuda_scratch_free(s);
    return st;
}

void pq_block_cuda_scratch_free(pq_block_cuda_scratch *s) {
    if (!s) return;
    void *bufs[] = {s->d_xn,  s->d_q,   s->d_k,  s->d_v,  s->d_att,      s->d_gate,   s->d_up,
                    s->d_act, s->d_out, s->d_cs, s->d_sn, s->d_inv_freq, s->d_attn_ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
    memset(s, 0, sizeof *s);
}

pq_status pq_block_cuda_rope_prepare(pq_block_cuda_scratch *s, const pq_config *c, int pos0, const int32_t *d_pos,
                                     int T, void *stream) {
    PQ_ASSERT(T >= 1 && T <= s->max_T);
    return pq_rope_table_cuda(s->d_inv_freq, c->head_dim, pos0, d_pos, T, s->d_cs, s->d_sn, stream);
}

// ---- forward ---------------------------------------------------------------------

static pq_status hook(const pq_block_cuda_hooks *h, int layer, pq_linear_slot slot, const uint16_t *d_x, int T,
                      int cols, void *stream) {
    return h && h->linear_input ? h->linear_input(h->ud, layer, slot, d_x, T, cols, stream) : PQ_OK;
}

pq_status pq_block_forward_cuda(const pq_config *c, const pq_block_cuda_layer *L, int layer, float *d_x, int T,
                                int pos0, const int32_t *d_pos, uint16_t *d_kcache, uint16_t *d_vcache,
                                pq_block_cuda_scratch *s, pq_cuda_ctx *ctx, void *stream,
                                const pq_block_cuda_hooks *hooks) {
    PQ_ASSERT(T >= 1 && T <= s->max_T && (d_pos ? T == 1 : pos0 + T <= s->n_ctx));
    const int H = c->hidden, hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    const pq_act_dtype dt = s->dt;
    pq_attn_shape as = {c->n_heads, c->n_kv_heads, hd, pq_config_window(c, layer)};
    // attention
    PQ_TRY(pq_rmsnorm_cuda(dt, d_x, L->d_attn_norm, T, H, c->rms_eps, s->d_xn, stream));
    PQ_TRY(hook(hooks, layer, PQ_Q, s->d_xn, T, H, stream));
    PQ_TRY(pq_linear_cuda_forward(&L->lin[PQ_Q], s->d_xn, T, s->d_q, ctx));
    PQ_TRY(pq_linear_cuda_forward(&L->lin[PQ_K], s->d_xn, T, s->d_k, ctx));
    PQ_TRY(pq_linear_cuda_forward(&L->lin[PQ_V], s->d_xn, T, s->d_v, ctx));
    PQ_TRY(pq_rope_apply_cuda(s->d_q, T, qd, c->n_heads, hd, s->d_cs, s->d_sn, stream));
    PQ_TRY(pq_rope_apply_cuda(s->d_k, T, kvd, c->n_kv_heads, hd, s->d_cs, s->d_sn, stream));
    PQ_TRY(pq_kv_store_cuda(dt, s->d_k, s->d_v, T, kvd, pos0, d_pos, d_kcache, d_vcache, stream));
    PQ_TRY(pq_attention_cuda(&as, dt, s->d_q, d_kcache, d_vcache, T, pos0, d_pos, s->n_ctx, s->d_att, s->d_attn_ws,
                             stream));
    PQ_TRY(hook(hooks, layer, PQ_O, s->d_att, T, qd, stream));
    PQ_TRY(pq_linear_cuda_forward(&L->lin[PQ_O], s->d_att, T, s->d_out, ctx));
    PQ_TRY(pq_add_cuda(d_x, s->d_out, (size_t)T * H, stream));
    // MLP
    PQ_TRY(pq_rmsnorm_cuda(dt, d_x, L->d_mlp_norm, T, H, c->rms_eps, s->d_xn, stream));
    PQ_TRY(hook(hooks, layer, PQ_GATE, s->d_xn, T, H, stream));
    PQ_TRY(pq_linear_cuda_forward(&L->lin[PQ_GATE], s->d_xn, T, s->d_gate, ctx));
    PQ_TRY(pq_linear_cuda_forward(&L->lin[PQ_UP], s->d_xn, T, s->d_up, ctx));
    PQ_TRY(pq_swiglu_cuda(dt, s->d_gate, s->d_up, (size_t)T * c->intermediate, s->d_act, stream));
    PQ_TRY(hook(hooks, layer, PQ_DOWN, s->d_act, T, c->intermediate, stream));
    PQ_TRY(pq_linear_cuda_forward(&L->lin[PQ_DOWN], s->d_act, T, s->d_out, ctx));
    PQ_TRY(pq_add_cuda(d_x, s->d_out, (size_t)T * H, stream));
    return PQ_OK;
}
