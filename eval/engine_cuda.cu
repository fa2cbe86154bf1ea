// The CUDA backend of the inference engine (eval/backend.h), the GPU twin of
// eval/engine_cpu.c + eval/block_cpu.c.
//
// Weights are uploaded once, dense ones as FP16 and quantized ones as
// stored (kernels/linear_cuda.h); the KV cache is FP16 on the device; the
// residual stream and every matrix-product output are f32; the inputs of
// matrix products (normed activations, attention output, SwiGLU output) are
// FP16. All work goes on one stream with one linear-layer context (cuBLAS,
// cuBLASLt, the workspace of the largest linear), and forward() waits for
// it so that a fault is reported by the call that caused it. One engine
// must not be used by two threads at once.
//
// One decoder block, T tokens at positions pos0.. (shapes per token):
//   xn = rmsnorm(x)                                FP16 [H]
//   q, k, v = xn Wq^T (+b), xn Wk^T, xn Wv^T      f32 [qd], [kvd], [kvd]
//   rope(q), rope(k); k, v -> cache rows pos0..    FP16
//   att = attention(q, cache)                      FP16 [qd]
//   x += att Wo^T                                  f32 [H]
//   xn = rmsnorm(x); act = silu(xn Wg^T) * (xn Wu^T)   FP16 [I]
//   x += act Wd^T
// After the last block xn = rmsnorm_final(x) stays on the device; logits()
// multiplies the rows it is asked for by the output head, in chunks.
#include "kernels/cuda_util.cuh"

extern "C" {
#include "eval/backend.h"
#include "kernels/ops.h"
}
#include "kernels/linear_cuda.h"
#include "kernels/ops_cuda.h"

// Rows of logits computed per device GEMM in logits() (bounds the f32
// logits buffer at LOGIT_ROWS x vocab).
#define LOGIT_ROWS 64

typedef struct {
    pq_linear_cuda lin[PQ_NLINEAR];
    float *d_attn_norm, *d_mlp_norm; // f32 [H]
} cuda_layer;

typedef struct {
    pq_backend base;
    const pq_model *m;
    int device, max_ctx, last_T;
    cudaStream_t stream;
    pq_cuda_ctx *ctx;               // cuBLAS / cuBLASLt handles and the linear layers' workspace
    pq_linear_cuda embed, lm_head;  // lm_head aliases embed's weight when they are the same tensor
    cuda_layer *layers;             // [n_layers]
    float *d_final_norm;            // f32 [H]
    double *d_inv_freq;             // [head_dim/2]
    int32_t *d_tokens;              // [max_ctx]
    float *d_x;                     // f32 [max_ctx][H]  residual stream
    uint16_t *d_xn;                 // FP16 [max_ctx][H] normed input of q/k/v and gate/up; after forward, the final-normed rows
    float *d_q, *d_k, *d_v;         // f32 [max_ctx][qd], [max_ctx][kvd] x2
    uint16_t *d_att;                // FP16 [max_ctx][qd]
    float *d_gate, *d_up;           // f32 [max_ctx][I]
    uint16_t *d_act;                // FP16 [max_ctx][I]
    float *d_out;                   // f32 [max_ctx][H]  o_proj / down_proj output
    float *d_cs, *d_sn;             // f32 [max_ctx][head_dim/2]  RoPE tables of the current call
    uint16_t *d_kcache, *d_vcache;  // FP16 [n_layers][max_ctx][kvd]
    float *d_logits;                // f32 [LOGIT_ROWS][vocab]
} cuda_backend;

// ---- devices -------------------------------------------------------------------

// Compute capability the kernels are built for (sm_80, sm_90 + compute_90 PTX).
#define MIN_CC_MAJOR 8

// Index of the first usable device, or -1 with the reason in why[].
static int first_usable_device(int *count_usable, char *why, size_t why_len) {
    int n = 0, first = -1, usable = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(why, why_len, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        *count_usable = 0;
        return -1;
    }
    snprintf(why, why_len, "the CUDA runtime reports 0 devices");
    for (int d = 0; d < n; d++) {
        int major = 0, minor = 0;
        e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d);
        if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            snprintf(why, why_len, "cudaDeviceGetAttribute(device %d): %s", d, cudaGetErrorString(e));
            continue;
        }
        if (major < MIN_CC_MAJOR) {
            snprintf(why, why_len, "device %d has compute capability %d.%d; pq's CUDA kernels need %d.0 or newer", d,
                     major, minor, MIN_CC_MAJOR);
            continue;
        }
        if (first < 0) first = d;
        usable++;
    }
    *count_usable = usable;
    return first;
}

int pq_cuda_device_count(void) {
    char why[256];
    int usable;
    first_usable_device(&usable, why, sizeof why);
    return usable;
}

// ---- forward ---------------------------------------------------------------------

static pq_status run_block(cuda_backend *cb, int l, int T, int pos0) {
    const pq_config *c = &cb->m->cfg;
    const cuda_layer *L = &cb->layers[l];
    cudaStream_t st = cb->stream;
    pq_cuda_ctx *ctx = cb->ctx;
    int H = c->hidden, hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    size_t layer_off = (size_t)l * cb->max_ctx * kvd;
    uint16_t *kc = cb->d_kcache + layer_off, *vc = cb->d_vcache + layer_off;
    pq_attn_shape as = {c->n_heads, c->n_kv_heads, hd, pq_config_window(c, l)};
    // attention
    PQ_TRY(pq_rmsnorm_cuda(cb->d_x, L->d_attn_norm, T, H, c->rms_eps, cb->d_xn, st));
    PQ_TRY(pq_linear_cuda_forward(&L->lin[PQ_Q], cb->d_xn, T, cb->d_q, ctx));
    PQ_TRY(pq_linear_cuda_forward(&L->lin[PQ_K], cb->d_xn, T, cb->d_k, ctx));
    PQ_TRY(pq_linear_cuda_forward(&L->lin[PQ_V], cb->d_xn, T, cb->d_v, ctx));
    PQ_TRY(pq_rope_apply_cuda(cb->d_q, T, qd, c->n_heads, hd, cb->d_cs, cb->d_sn, st));
    PQ_TRY(pq_rope_apply_cuda(cb->d_k, T, kvd, c->n_kv_heads, hd, cb->d_cs, cb->d_sn, st));
    PQ_TRY(pq_f32_to_f16_cuda(cb->d_k, (size_t)T * kvd, kc + (size_t)pos0 * kvd, st));
    PQ_TRY(pq_f32_to_f16_cuda(cb->d_v, (size_t)T * kvd, vc + (size_t)pos0 * kvd, st));
    PQ_TRY(pq_attention_cuda(&as, cb->d_q, kc, vc, T, pos0, cb->d_att, st));
    PQ_TRY(pq_linear_cuda_forward(&L->lin[PQ_O], cb->d_att, T, cb->d_out, ctx));
    PQ_TRY(pq_add_cuda(cb->d_x, cb->d_out, (size_t)T * H, st));
    // MLP
    PQ_TRY(pq_rmsnorm_cuda(cb->d_x, L->d_mlp_norm, T, H, c->rms_eps, cb->d_xn, st));
    PQ_TRY(pq_linear_cuda_forward(&L->lin[PQ_GATE], cb->d_xn, T, cb->d_gate, ctx));
    PQ_TRY(pq_linear_cuda_forward(&L->lin[PQ_UP], cb->d_xn, T, cb->d_up, ctx));
    PQ_TRY(pq_swiglu_cuda(cb->d_gate, cb->d_up, (size_t)T * c->intermediate, cb->d_act, st));
    PQ_TRY(pq_linear_cuda_forward(&L->lin[PQ_DOWN], cb->d_act, T, cb->d_out, ctx));
    PQ_TRY(pq_add_cuda(cb->d_x, cb->d_out, (size_t)T * H, st));
    return PQ_OK;
}

static pq_status enqueue_forward(cuda_backend *cb, const int32_t *tokens, int T, int pos0) {
    const pq_config *c = &cb->m->cfg;
    cudaStream_t st = cb->stream;
    // pageable source: the call returns once `tokens` has been read
    PQ_CUDA_TRY(cudaMemcpyAsync(cb->d_tokens, tokens, (size_t)T * sizeof(int32_t), cudaMemcpyHostToDevice, st));
    PQ_TRY(pq_embed_cuda(cb->embed.d_w, cb->d_tokens, T, c->hidden, cb->d_x, st));
    PQ_TRY(pq_rope_table_cuda(cb->d_inv_freq, c->head_dim, pos0, T, cb->d_cs, cb->d_sn, st));
    for (int l = 0; l < c->n_layers; l++) PQ_TRY(run_block(cb, l, T, pos0));
    PQ_TRY(pq_rmsnorm_cuda(cb->d_x, cb->d_final_norm, T, c->hidden, c->rms_eps, cb->d_xn, st));
    return PQ_OK;
}

static pq_status cuda_forward(pq_backend *b, const int32_t *tokens, int T, int pos0) {
    cuda_backend *cb = (cuda_backend *)b;
    // eval/engine.c has checked T >= 1, pos0 + T <= max_ctx and the token ids
    PQ_ASSERT(T >= 1 && pos0 >= 0 && pos0 + T <= cb->max_ctx);
    PQ_CUDA_TRY(cudaSetDevice(cb->device)); // the calling thread may not be the creating one
    cb->last_T = 0; // no valid rows until this call has finished
    pq_status s = enqueue_forward(cb, tokens, T, pos0);
    // wait even after a failed launch, so that nothing is left running
    cudaError_t e = cudaStreamSynchronize(cb->stream);
    if (s != PQ_OK) return s;
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return PQ_FAIL(PQ_ERR_CUDA, "forward of %d tokens at position %d: cudaStreamSynchronize: %s", T, pos0,
                       cudaGetErrorString(e));
    }
    cb->last_T = T;
    return PQ_OK;
}

static pq_status cuda_logits(pq_backend *b, int row0, int n, float *logits) {
    cuda_backend *cb = (cuda_backend *)b;
    PQ_FAIL_IF(row0 < 0 || n < 0 || row0 + n > cb->last_T, PQ_ERR_ARG,
               "logits rows [%d, %d) outside the last forward call's %d rows", row0, row0 + n, cb->last_T);
    int H = cb->m->cfg.hidden, V = cb->m->cfg.vocab;
    PQ_CUDA_TRY(cudaSetDevice(cb->device));
    for (int r = 0; r < n; r += LOGIT_ROWS) {
        int nr = n - r < LOGIT_ROWS ? n - r : LOGIT_ROWS;
        PQ_TRY(pq_linear_cuda_forward(&cb->lm_head, cb->d_xn + (size_t)(row0 + r) * H, nr, cb->d_logits, cb->ctx));
        // pageable destination: returns when the copy is done (the stream is
        // waited for first), so d_logits is free for the next chunk
        PQ_CUDA_TRY(cudaMemcpyAsync(logits + (size_t)r * V, cb->d_logits, (size_t)nr * V * sizeof(float),
                                    cudaMemcpyDeviceToHost, cb->stream));
    }
    PQ_CUDA_TRY(cudaStreamSynchronize(cb->stream));
    return PQ_OK;
}

// ---- create / free -----------------------------------------------------------------

static void cuda_free(pq_backend *b) {
    cuda_backend *cb = (cuda_backend *)b;
    cudaSetDevice(cb->device);
    if (cb->stream) cudaStreamSynchronize(cb->stream);
    if (cb->layers) {
        for (int l = 0; l < cb->m->cfg.n_layers; l++) {
            for (int i = 0; i < PQ_NLINEAR; i++) pq_linear_cuda_free(&cb->layers[l].lin[i]);
            cudaFree(cb->layers[l].d_attn_norm);
            cudaFree(cb->layers[l].d_mlp_norm);
        }
        free(cb->layers);
    }
    pq_linear_cuda_free(&cb->lm_head); // before embed: it may borrow embed's weight
    pq_linear_cuda_free(&cb->embed);
    void *bufs[] = {cb->d_final_norm, cb->d_inv_freq, cb->d_tokens, cb->d_x,      cb->d_xn,     cb->d_q,
                    cb->d_k,          cb->d_v,        cb->d_att,    cb->d_gate,   cb->d_up,     cb->d_act,
                    cb->d_out,        cb->d_cs,       cb->d_sn,     cb->d_kcache, cb->d_vcache, cb->d_logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
    pq_cuda_ctx_free(cb->ctx);
    if (cb->stream) cudaStreamDestroy(cb->stream);
    free(cb);
}

// cudaMalloc of `bytes` into *d, naming `what` on failure.
static pq_status dev_alloc(void **d, size_t bytes, const char *what) {
    cudaError_t e = cudaMalloc(d, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *d = NULL;
        return PQ_FAIL(PQ_ERR_CUDA, "cudaMalloc of %.1f MiB for %s: %s", bytes / 1048576.0, what,
                       cudaGetErrorString(e));
    }
    return PQ_OK;
}

// A device copy of n host floats.
static pq_status dev_vector(float **d, const float *host, size_t n, const char *what) {
    PQ_TRY(dev_alloc((void **)d, n * sizeof(float), what));
    PQ_CUDA_TRY(cudaMemcpy(*d, host, n * sizeof(float), cudaMemcpyHostToDevice));
    return PQ_OK;
}

static pq_status upload_weights(cuda_backend *cb) {
    const pq_model *m = cb->m;
    const pq_config *c = &m->cfg;
    char what[128];
    // the embedding gather reads FP16 rows
    PQ_FAIL_IF(m->embed.fmt != PQ_W_DENSE, PQ_ERR_FORMAT,
               "%s: a quantized model.embed_tokens is not supported by the CUDA backend", m->dir);
    PQ_TRY(pq_linear_cuda_upload(&m->embed, "model.embed_tokens", &cb->embed));
    if (m->lm_head.w == m->embed.w && m->lm_head.fmt == m->embed.fmt && m->lm_head.dense_type == m->embed.dense_type &&
        m->lm_head.rows == m->embed.rows && m->lm_head.cols == m->embed.cols && !m->lm_head.bias)
        cb->lm_head = pq_linear_cuda_alias(&cb->embed);
    else
        PQ_TRY(pq_linear_cuda_upload(&m->lm_head, "lm_head", &cb->lm_head));
    PQ_TRY(dev_vector(&cb->d_final_norm, m->final_norm, (size_t)c->hidden, "model.norm"));
    cb->layers = (cuda_layer *)calloc((size_t)c->n_layers, sizeof *cb->layers);
    PQ_FAIL_IF(!cb->layers, PQ_ERR_NOMEM, "out of memory");
    for (int l = 0; l < c->n_layers; l++) {
        const pq_layer *L = &m->layers[l];
        for (int i = 0; i < PQ_NLINEAR; i++) {
            snprintf(what, sizeof what, "model.layers.%d.%s", l, pq_linear_slot_name((pq_linear_slot)i));
            PQ_TRY(pq_linear_cuda_upload(&L->lin[i], what, &cb->layers[l].lin[i]));
        }
        snprintf(what, sizeof what, "model.layers.%d.input_layernorm", l);
        PQ_TRY(dev_vector(&cb->layers[l].d_attn_norm, L->attn_norm, (size_t)c->hidden, what));
        snprintf(what, sizeof what, "model.layers.%d.post_attention_layernorm", l);
        PQ_TRY(dev_vector(&cb->layers[l].d_mlp_norm, L->mlp_norm, (size_t)c->hidden, what));
    }
    return PQ_OK;
}

// The largest workspace a linear needs: max_ctx tokens through the layers,
// LOGIT_ROWS through the head.
static size_t workspace_bytes(const cuda_backend *cb) {
    size_t ws = pq_linear_cuda_workspace_bytes(&cb->lm_head, LOGIT_ROWS);
    for (int l = 0; l < cb->m->cfg.n_layers; l++)
        for (int i = 0; i < PQ_NLINEAR; i++) {
            size_t b = pq_linear_cuda_workspace_bytes(&cb->layers[l].lin[i], cb->max_ctx);
            if (b > ws) ws = b;
        }
    return ws;
}

static pq_status alloc_activations(cuda_backend *cb) {
    const pq_config *c = &cb->m->cfg;
    size_t T = (size_t)cb->max_ctx, H = (size_t)c->hidden, half = (size_t)(c->head_dim / 2);
    size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t I = (size_t)c->intermediate, kv = (size_t)c->n_layers * T * kvd;
    PQ_TRY(dev_alloc((void **)&cb->d_tokens, T * sizeof(int32_t), "token ids"));
    PQ_TRY(dev_alloc((void **)&cb->d_x, T * H * sizeof(float), "the residual stream"));
    PQ_TRY(dev_alloc((void **)&cb->d_xn, T * H * sizeof(uint16_t), "normed activations"));
    PQ_TRY(dev_alloc((void **)&cb->d_q, T * qd * sizeof(float), "queries"));
    PQ_TRY(dev_alloc((void **)&cb->d_k, T * kvd * sizeof(float), "keys"));
    PQ_TRY(dev_alloc((void **)&cb->d_v, T * kvd * sizeof(float), "values"));
    PQ_TRY(dev_alloc((void **)&cb->d_att, T * qd * sizeof(uint16_t), "attention output"));
    PQ_TRY(dev_alloc((void **)&cb->d_gate, T * I * sizeof(float), "MLP gate"));
    PQ_TRY(dev_alloc((void **)&cb->d_up, T * I * sizeof(float), "MLP up"));
    PQ_TRY(dev_alloc((void **)&cb->d_act, T * I * sizeof(uint16_t), "MLP activations"));
    PQ_TRY(dev_alloc((void **)&cb->d_out, T * H * sizeof(float), "block outputs"));
    PQ_TRY(dev_alloc((void **)&cb->d_cs, T * half * sizeof(float), "RoPE cos table"));
    PQ_TRY(dev_alloc((void **)&cb->d_sn, T * half * sizeof(float), "RoPE sin table"));
    PQ_TRY(dev_alloc((void **)&cb->d_kcache, kv * sizeof(uint16_t), "the key cache"));
    PQ_TRY(dev_alloc((void **)&cb->d_vcache, kv * sizeof(uint16_t), "the value cache"));
    PQ_TRY(dev_alloc((void **)&cb->d_logits, (size_t)LOGIT_ROWS * c->vocab * sizeof(float), "logits"));
    // the cache rows a call reads were all written by it or an earlier call;
    // zeroing makes a bug there show up as wrong numbers, not as NaN noise
    PQ_CUDA_TRY(cudaMemset(cb->d_kcache, 0, kv * sizeof(uint16_t)));
    PQ_CUDA_TRY(cudaMemset(cb->d_vcache, 0, kv * sizeof(uint16_t)));
    // RoPE inverse frequencies, computed on the host exactly as the CPU backend does
    const size_t nf = half ? half : 1;
    double *inv_freq = (double *)malloc(nf * sizeof(double));
    PQ_FAIL_IF(!inv_freq, PQ_ERR_NOMEM, "out of memory");
    pq_rope_params rp = {c->rope_theta, c->rope_llama3, c->rope_factor, c->rope_low_freq_factor,
                         c->rope_high_freq_factor, c->rope_orig_max_pos};
    pq_rope_inv_freq(&rp, c->head_dim, inv_freq);
    pq_status s = dev_alloc((void **)&cb->d_inv_freq, nf * sizeof(double), "RoPE frequencies");
    if (s == PQ_OK) {
        cudaError_t e = cudaMemcpy(cb->d_inv_freq, inv_freq, half * sizeof(double), cudaMemcpyHostToDevice);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            s = PQ_FAIL(PQ_ERR_CUDA, "cudaMemcpy of the RoPE frequencies: %s", cudaGetErrorString(e));
        }
    }
    free(inv_freq);
    return s;
}

static pq_status setup(cuda_backend *cb, int device) {
    const pq_config *c = &cb->m->cfg;
    PQ_FAIL_IF(c->head_dim < 2 || c->head_dim % 2 || c->head_dim > PQ_ATTN_CUDA_MAX_HD, PQ_ERR_FORMAT,
               "%s: head_dim %d is not supported by the CUDA backend (even, at most %d)", cb->m->dir, c->head_dim,
               PQ_ATTN_CUDA_MAX_HD);
    PQ_CUDA_TRY(cudaSetDevice(device));
    cudaDeviceProp prop;
    PQ_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
    snprintf(cb->base.desc, sizeof cb->base.desc, "cuda (%.100s)", prop.name);
    PQ_CUDA_TRY(cudaStreamCreate(&cb->stream));
    PQ_TRY(upload_weights(cb));
    PQ_TRY(pq_cuda_ctx_create(cb->stream, workspace_bytes(cb), &cb->ctx));
    PQ_TRY(alloc_activations(cb));
    return PQ_OK;
}

pq_status pq_backend_cuda_create(const pq_model *m, int max_ctx, pq_backend **out) {
    *out = NULL;
    char why[256];
    int usable;
    int device = first_usable_device(&usable, why, sizeof why);
    PQ_FAIL_IF(device < 0, PQ_ERR_NO_DEVICE, "--device cuda: no CUDA device found (%s)", why);
    PQ_FAIL_IF(max_ctx < 1, PQ_ERR_ARG, "context of %d tokens", max_ctx);
    cuda_backend *cb = (cuda_backend *)calloc(1, sizeof *cb);
    PQ_FAIL_IF(!cb, PQ_ERR_NOMEM, "out of memory");
    cb->base.forward = cuda_forward;
    cb->base.logits = cuda_logits;
    cb->base.free = cuda_free;
    cb->m = m;
    cb->device = device;
    cb->max_ctx = max_ctx;
    pq_status s = setup(cb, device);
    if (s != PQ_OK) {
        cuda_free(&cb->base);
        return s;
    }
    *out = &cb->base;
    return PQ_OK;
}
