// The CUDA backend of the inference engine (eval/backend.h), the GPU twin of
// eval/engine_cpu.c + eval/block_cpu.c.
//
// Weights are uploaded once, dense ones in the activation type and
// quantized ones as kernels/linear_cuda.h stores them. The activation type
// (matrix inputs, KV cache; kernels/ops_cuda.h) is BF16 for a model whose
// embedding is stored in BF16, FP16 otherwise; the residual stream and
// every matrix-product output are f32. All work goes on one stream with one
// linear-layer context (cuBLAS, cuBLASLt, the workspace of the largest
// linear), and forward() waits for it so that a fault is reported by the
// call that caused it. One engine must not be used by two threads at once.
//
// The decoder blocks are eval/block_cuda.h's (shared with the calibration
// driver). After the last block xn = rmsnorm_final(x) stays on the device;
// logits() multiplies the rows it is asked for by the output head, in
// chunks, and copies them out; nll() multiplies them in the same chunks and
// reduces each row to its loss on the device (kernels/ops_cuda.h's
// pq_nll_cuda), so a perplexity run copies one float per scored token.
//
// Decode steps (one token) run as a CUDA graph: the second such step
// captures the whole forward (a copy of the token and its position from
// pinned host memory to the device, the embedding, every block with the
// position read from the device, the final norm), and every later step
// writes its token and position and replays it: ~17 launches per block and
// their host-side cost become one launch. A capture that fails turns the
// graphs off for the engine (the step then runs as plain launches).
#include "kernels/cuda_util.cuh"

#include <cstdlib>

extern "C" {
#include "eval/backend.h"
}
#include "eval/block_cuda.h"
#include "kernels/linear_cuda.h"
#include "kernels/ops_cuda.h"

// Rows of logits per device GEMM in logits() / nll(): as many as fit
// LOGIT_BYTES of f32 logits, at least LOGIT_ROWS_MIN (and at most the
// context): a perplexity window's head GEMM reads the head's weight once
// per chunk, so few chunks matter at a large vocabulary.
#define LOGIT_BYTES ((size_t)256 << 20)
#define LOGIT_ROWS_MIN 64

typedef struct {
    pq_backend base;
    const pq_model *m;
    int device, max_ctx, logit_rows;
    pq_act_dtype dt;
    cudaStream_t stream;
    pq_cuda_ctx *ctx;               // cuBLAS / cuBLASLt handles and the linear layers' workspace
    pq_linear_cuda embed, lm_head;  // lm_head aliases embed's weight when they are the same tensor
    pq_block_cuda_layer *layers;    // [n_layers]
    float *d_final_norm;            // f32 [H]
    int32_t *d_tokens;              // [max_ctx] token ids; the loss's targets
    float *d_x;                     // f32 [max_ctx][H]  residual stream
    pq_block_cuda_scratch s;        // max_ctx tokens; after forward, s.d_xn holds the final-normed rows
    uint16_t *d_kcache, *d_vcache;  // [n_layers][max_ctx][kvd] of the activation type
    float *d_logits;                // f32 [logit_rows][vocab]
    float *d_nll;                   // f32 [max_ctx]
    // the decode step's graph
    int graphs;                     // 0: off (asked, or a capture failed)
    int steps;                      // one-token forwards so far
    int32_t *h_step, *d_step;       // {token, position}: pinned host, device
    cudaGraphExec_t step_exec;
} cuda_backend;

// ---- forward ---------------------------------------------------------------------

// Embedding, blocks, final norm of T tokens whose ids are on the device, at
// positions pos0.. (or, T = 1, at *d_pos).
static pq_status enqueue_forward(cuda_backend *cb, const int32_t *d_tok, int T, int pos0, const int32_t *d_pos) {
    const pq_config *c = &cb->m->cfg;
    cudaStream_t st = cb->stream;
    PQ_TRY(pq_embed_cuda(cb->dt, cb->embed.d_w, d_tok, T, c->hidden, cb->d_x, st));
    PQ_TRY(pq_block_cuda_rope_prepare(&cb->s, c, pos0, d_pos, T, st));
    size_t kv_layer = (size_t)cb->max_ctx * c->n_kv_heads * c->head_dim;
    for (int l = 0; l < c->n_layers; l++)
        PQ_TRY(pq_block_forward_cuda(c, &cb->layers[l], l, cb->d_x, T, pos0, d_pos, cb->d_kcache + l * kv_layer,
                                     cb->d_vcache + l * kv_layer, &cb->s, cb->ctx, st, NULL));
    PQ_TRY(pq_rmsnorm_cuda(cb->dt, cb->d_x, cb->d_final_norm, T, c->hidden, c->rms_eps, cb->s.d_xn, st));
    return PQ_OK;
}

// Captures the decode step into cb->step_exec; on failure the graphs stay
// off and the stream is usable again.
static void capture_step(cuda_backend *cb) {
    cudaGraph_t g = NULL;
    cb->graphs = 0;
    if (cudaStreamBeginCapture(cb->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    pq_status s = PQ_OK;
    if (cudaMemcpyAsync(cb->d_step, cb->h_step, 2 * sizeof(int32_t), cudaMemcpyHostToDevice, cb->stream) !=
        cudaSuccess)
        s = PQ_ERR_CUDA;
    if (s == PQ_OK) s = enqueue_forward(cb, cb->d_step, 1, 0, cb->d_step + 1);
    cudaError_t e = cudaStreamEndCapture(cb->stream, &g);
    if (s == PQ_OK && e == cudaSuccess && cudaGraphInstantiate(&cb->step_exec, g, 0) == cudaSuccess) cb->graphs = 1;
    else cb->step_exec = NULL;
    if (g) cudaGraphDestroy(g);
    (void)cudaGetLastError();
}

static pq_status cuda_forward(pq_backend *b, const int32_t *tokens, int T, int pos0) {
    cuda_backend *cb = (cuda_backend *)b;
    // eval/engine.c has checked T >= 1, pos0 + T <= max_ctx and the token ids
    PQ_ASSERT(T >= 1 && pos0 >= 0 && pos0 + T <= cb->max_ctx);
    PQ_CUDA_TRY(cudaSetDevice(cb->device)); // the calling thread may not be the creating one
    pq_status s = PQ_OK;
    int replayed = 0;
    if (T == 1 && cb->graphs && cb->steps++ >= 1) {
        // the previous replay has finished reading h_step (forward waits below)
        cb->h_step[0] = tokens[0], cb->h_step[1] = pos0;
        if (!cb->step_exec) capture_step(cb);
        if (cb->step_exec) {
            replayed = 1;
            if (cudaGraphLaunch(cb->step_exec, cb->stream) != cudaSuccess) {
                (void)cudaGetLastError();
                s = PQ_FAIL(PQ_ERR_CUDA, "replaying the decode step's CUDA graph at position %d", pos0);
            }
        }
    }
    if (!replayed) {
        // pageable source: the call returns once `tokens` has been read
        cudaError_t e = cudaMemcpyAsync(cb->d_tokens, tokens, (size_t)T * sizeof(int32_t), cudaMemcpyHostToDevice,
                                        cb->stream);
        s = e == cudaSuccess ? enqueue_forward(cb, cb->d_tokens, T, pos0, NULL)
                             : PQ_FAIL(PQ_ERR_CUDA, "cudaMemcpyAsync of the token ids: %s", cudaGetErrorString(e));
    }
    // wait even after a failed launch, so that nothing is left running
    cudaError_t e = cudaStreamSynchronize(cb->stream);
    if (s != PQ_OK) return s;
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return PQ_FAIL(PQ_ERR_CUDA, "forward of %d tokens at position %d: cudaStreamSynchronize: %s", T, pos0,
                       cudaGetErrorString(e));
    }
    return PQ_OK;
}

static pq_status cuda_logits(pq_backend *b, int row0, int n, float *logits) {
    cuda_backend *cb = (cuda_backend *)b;
    int H = cb->m->cfg.hidden, V = cb->m->cfg.vocab;
    PQ_CUDA_TRY(cudaSetDevice(cb->device));
    for (int r = 0; r < n; r += cb->logit_rows) {
        int nr = n - r < cb->logit_rows ? n - r : cb->logit_rows;
        PQ_TRY(pq_linear_cuda_forward(&cb->lm_head, cb->s.d_xn + (size_t)(row0 + r) * H, nr, cb->d_logits, cb->ctx));
        // pageable destination: returns when the copy is done (the stream is
        // waited for first), so d_logits is free for the next chunk
        PQ_CUDA_TRY(cudaMemcpyAsync(logits + (size_t)r * V, cb->d_logits, (size_t)nr * V * sizeof(float),
                                    cudaMemcpyDeviceToHost, cb->stream));
    }
    PQ_CUDA_TRY(cudaStreamSynchronize(cb->stream));
    return PQ_OK;
}

static pq_status cuda_nll(pq_backend *b, int row0, int n, const int32_t *targets, double *nll) {
    cuda_backend *cb = (cuda_backend *)b;
    int H = cb->m->cfg.hidden, V = cb->m->cfg.vocab;
    if (n == 0) return PQ_OK;
    PQ_CUDA_TRY(cudaSetDevice(cb->device));
    PQ_CUDA_TRY(cudaMemcpyAsync(cb->d_tokens, targets, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice,
                                cb->stream));
    for (int r = 0; r < n; r += cb->logit_rows) {
        int nr = n - r < cb->logit_rows ? n - r : cb->logit_rows;
        PQ_TRY(pq_linear_cuda_forward(&cb->lm_head, cb->s.d_xn + (size_t)(row0 + r) * H, nr, cb->d_logits, cb->ctx));
        PQ_TRY(pq_nll_cuda(cb->d_logits, nr, V, cb->d_tokens + r, cb->d_nll + r, cb->stream));
    }
    float *h = (float *)malloc((size_t)n * sizeof(float));
    PQ_FAIL_IF(!h, PQ_ERR_NOMEM, "out of memory");
    cudaError_t e = cudaMemcpyAsync(h, cb->d_nll, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost, cb->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cb->stream);
    for (int i = 0; e == cudaSuccess && i < n; i++) nll[i] = h[i];
    free(h);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return PQ_FAIL(PQ_ERR_CUDA, "the loss of %d rows on the device: %s", n, cudaGetErrorString(e));
    }
    return PQ_OK;
}

// ---- create / free -----------------------------------------------------------------

static void cuda_free(pq_backend *b) {
    cuda_backend *cb = (cuda_backend *)b;
    cudaSetDevice(cb->device);
    if (cb->stream) cudaStreamSynchronize(cb->stream);
    if (cb->step_exec) cudaGraphExecDestroy(cb->step_exec);
    if (cb->layers) {
        for (int l = 0; l < cb->m->cfg.n_layers; l++) pq_block_cuda_layer_free(&cb->layers[l]);
        free(cb->layers);
    }
    pq_linear_cuda_free(&cb->lm_head); // before embed: it may borrow embed's weight
    pq_linear_cuda_free(&cb->embed);
    pq_block_cuda_scratch_free(&cb->s);
    void *bufs[] = {cb->d_final_norm, cb->d_tokens, cb->d_x, cb->d_kcache, cb->d_vcache, cb->d_logits, cb->d_nll,
                    cb->d_step};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
    if (cb->h_step) cudaFreeHost(cb->h_step);
    pq_cuda_ctx_free(cb->ctx);
    if (cb->stream) cudaStreamDestroy(cb->stream);
    free(cb);
}

static pq_status upload_weights(cuda_backend *cb) {
    const pq_model *m = cb->m;
    const pq_config *c = &m->cfg;
    // the embedding gather reads rows of the activation type
    PQ_FAIL_IF(m->embed.fmt != PQ_W_DENSE, PQ_ERR_FORMAT,
               "%s: a quantized model.embed_tokens is not supported by the CUDA backend", m->dir);
    PQ_TRY(pq_linear_cuda_upload(&m->embed, "model.embed_tokens", cb->dt, &cb->embed));
    if (m->lm_head.w == m->embed.w && m->lm_head.fmt == m->embed.fmt && m->lm_head.dense_type == m->embed.dense_type &&
        m->lm_head.rows == m->embed.rows && m->lm_head.cols == m->embed.cols && !m->lm_head.bias)
        cb->lm_head = pq_linear_cuda_alias(&cb->embed);
    else
        PQ_TRY(pq_linear_cuda_upload(&m->lm_head, "lm_head", cb->dt, &cb->lm_head));
    PQ_TRY(pq_cuda_copy_named((void **)&cb->d_final_norm, m->final_norm, (size_t)c->hidden * sizeof(float),
                              "model.norm"));
    cb->layers = (pq_block_cuda_layer *)calloc((size_t)c->n_layers, sizeof *cb->layers);
    PQ_FAIL_IF(!cb->layers, PQ_ERR_NOMEM, "out of memory");
    for (int l = 0; l < c->n_layers; l++)
        PQ_TRY(pq_block_cuda_layer_upload(c, &m->layers[l], l, cb->dt, &cb->layers[l]));
    return PQ_OK;
}

// The largest workspace a linear needs: max_ctx tokens through the layers,
// logit_rows through the head.
static size_t workspace_bytes(const cuda_backend *cb) {
    size_t ws = pq_linear_cuda_workspace_bytes(&cb->lm_head, cb->logit_rows);
    for (int l = 0; l < cb->m->cfg.n_layers; l++) {
        size_t b = pq_block_cuda_layer_workspace_bytes(&cb->layers[l], cb->max_ctx);
        if (b > ws) ws = b;
    }
    return ws;
}

static pq_status alloc_activations(cuda_backend *cb) {
    const pq_config *c = &cb->m->cfg;
    size_t T = (size_t)cb->max_ctx, H = (size_t)c->hidden;
    size_t kvd = (size_t)c->n_kv_heads * c->head_dim, kv = (size_t)c->n_layers * T * kvd;
    PQ_TRY(pq_cuda_malloc_named((void **)&cb->d_tokens, T * sizeof(int32_t), "token ids"));
    PQ_TRY(pq_cuda_malloc_named((void **)&cb->d_x, T * H * sizeof(float), "the residual stream"));
    PQ_TRY(pq_block_cuda_scratch_init(&cb->s, c, cb->max_ctx, cb->max_ctx, cb->dt));
    PQ_TRY(pq_cuda_malloc_named((void **)&cb->d_kcache, kv * sizeof(uint16_t), "the key cache"));
    PQ_TRY(pq_cuda_malloc_named((void **)&cb->d_vcache, kv * sizeof(uint16_t), "the value cache"));
    PQ_TRY(pq_cuda_malloc_named((void **)&cb->d_logits, (size_t)cb->logit_rows * c->vocab * sizeof(float),
                                "logits"));
    PQ_TRY(pq_cuda_malloc_named((void **)&cb->d_nll, T * sizeof(float), "the loss"));
    PQ_TRY(pq_cuda_malloc_named((void **)&cb->d_step, 2 * sizeof(int32_t), "the decode step"));
    PQ_CUDA_TRY(cudaHostAlloc((void **)&cb->h_step, 2 * sizeof(int32_t), cudaHostAllocDefault));
    // the cache rows a call reads were all written by it or an earlier call;
    // zeroing makes a bug there show up as wrong numbers, not as NaN noise
    PQ_CUDA_TRY(cudaMemset(cb->d_kcache, 0, kv * sizeof(uint16_t)));
    PQ_CUDA_TRY(cudaMemset(cb->d_vcache, 0, kv * sizeof(uint16_t)));
    return PQ_OK;
}

static pq_status setup(cuda_backend *cb, int device) {
    const pq_config *c = &cb->m->cfg;
    PQ_FAIL_IF(c->head_dim < 2 || c->head_dim % 2 || c->head_dim > PQ_ATTN_CUDA_MAX_HD, PQ_ERR_FORMAT,
               "%s: head_dim %d is not supported by the CUDA backend (even, at most %d)", cb->m->dir, c->head_dim,
               PQ_ATTN_CUDA_MAX_HD);
    PQ_CUDA_TRY(cudaSetDevice(device));
    cudaDeviceProp prop;
    PQ_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
    const pq_linear *emb = &cb->m->embed;
    cb->dt = emb->fmt == PQ_W_DENSE && emb->dense_type == PQ_DENSE_BF16 ? PQ_ACT_BF16 : PQ_ACT_F16;
    snprintf(cb->base.desc, sizeof cb->base.desc, "cuda (%.100s, %s activations)", prop.name,
             pq_act_dtype_name(cb->dt));
    size_t rows = LOGIT_BYTES / ((size_t)c->vocab * sizeof(float));
    if (rows < LOGIT_ROWS_MIN) rows = LOGIT_ROWS_MIN;
    cb->logit_rows = rows < (size_t)cb->max_ctx ? (int)rows : cb->max_ctx;
    PQ_CUDA_TRY(cudaStreamCreate(&cb->stream));
    PQ_TRY(upload_weights(cb));
    PQ_TRY(pq_cuda_ctx_create(cb->stream, workspace_bytes(cb), &cb->ctx));
    PQ_TRY(alloc_activations(cb));
    return PQ_OK;
}

pq_status pq_backend_cuda_create(const pq_model *m, int max_ctx, int graphs, pq_backend **out) {
    *out = NULL;
    char why[256];
    int device = pq_cuda_first_device(why, sizeof why);
    PQ_FAIL_IF(device < 0, PQ_ERR_NO_DEVICE, "--device cuda: no usable CUDA device (%s)", why);
    PQ_FAIL_IF(max_ctx < 1, PQ_ERR_ARG, "context of %d tokens", max_ctx);
    cuda_backend *cb = (cuda_backend *)calloc(1, sizeof *cb);
    PQ_FAIL_IF(!cb, PQ_ERR_NOMEM, "out of memory");
    cb->base.forward = cuda_forward;
    cb->base.logits = cuda_logits;
    cb->base.nll = cuda_nll;
    cb->base.free = cuda_free;
    cb->m = m;
    cb->device = device;
    cb->max_ctx = max_ctx;
    cb->graphs = graphs;
    pq_status s = setup(cb, device);
    if (s != PQ_OK) {
        cuda_free(&cb->base);
        return s;
    }
    *out = &cb->base;
    return PQ_OK;
}
