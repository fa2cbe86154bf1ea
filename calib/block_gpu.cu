// calib/block_gpu.cu — calibration block passes on the GPU, resident
// (calib/block_gpu.h).
#include "kernels/cuda_util.cuh"

extern "C" {
#include "calib/block_gpu.h"
#include "common/half.h"
#include "kernels/cuda_host.h"
}
#include "eval/block_cuda.h"
#include "kernels/ops_cuda.h"

struct pq_calib_gpu {
    pq_config c;
    pq_act_dtype dt;
    int n, len;
    cudaStream_t stream;
    pq_cuda_ctx *ctx;            // created for the loaded block's workspace
    size_t ctx_ws;
    pq_block_cuda_layer layer;   // the loaded block
    int loaded_layer;            // -1: none
    pq_linear src[PQ_NLINEAR];   // what each loaded slot was uploaded from
    pq_block_cuda_scratch s;     // len tokens, RoPE tables of positions 0..len-1
    float *d_X;                  // f32 [n][len][hidden], resident
    float *d_xw;                 // f32 [len][hidden]: a measuring pass's copy of a window
    uint16_t *d_kc, *d_vc;       // [len][kvd]
    unsigned long long *d_bad;   // the first non-finite element of X
    uint16_t *h16;               // host staging of a fetched input (lazy), [len][widest]
    float *h32;                  //   and its f32 copy
    size_t peak;
};

static size_t window_elems(const pq_config *c, int len) { return (size_t)len * c->hidden; }

size_t pq_calib_gpu_device_bytes(const pq_config *c, int n, int len) {
    size_t T = (size_t)len, H = (size_t)c->hidden, qd = (size_t)c->n_heads * c->head_dim;
    size_t kvd = (size_t)c->n_kv_heads * c->head_dim, I = (size_t)c->intermediate;
    size_t X = (size_t)n * T * H * 4, window = T * H * 4, kv = 2 * T * kvd * 2;
    size_t scratch = T * (H * 2 + qd * 4 + 2 * kvd * 4 + qd * 2 + 2 * I * 4 + I * 2 + H * 4 + (size_t)c->head_dim * 4);
    pq_attn_shape as = {c->n_heads, c->n_kv_heads, c->head_dim, 0};
    return X + window + kv + scratch + pq_attention_cuda_ws_bytes(&as, len);
}

pq_act_dtype pq_calib_gpu_dtype(const pq_model *m) {
    return m->embed.fmt == PQ_W_DENSE && m->embed.dense_type == PQ_DENSE_BF16 ? PQ_ACT_BF16 : PQ_ACT_F16;
}

static void note_memory(pq_calib_gpu *g) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    if (total_b - free_b > g->peak) g->peak = total_b - free_b;
}

extern "C" void pq_calib_gpu_free(pq_calib_gpu *g) {
    if (!g) return;
    if (g->stream) cudaStreamSynchronize(g->stream);
    pq_block_cuda_layer_free(&g->layer);
    pq_block_cuda_scratch_free(&g->s);
    void *bufs[] = {g->d_X, g->d_xw, g->d_kc, g->d_vc, g->d_bad};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
    pq_cuda_ctx_free(g->ctx);
    if (g->stream) cudaStreamDestroy(g->stream);
    free(g->h16);
    free(g->h32);
    free(g);
}

static pq_status create(pq_calib_gpu *g) {
    const pq_config *c = &g->c;
    size_t T = (size_t)g->len, kvd = (size_t)c->n_kv_heads * c->head_dim, X = (size_t)g->n * window_elems(c, g->len);
    PQ_FAIL_IF(c->head_dim < 2 || c->head_dim % 2 || c->head_dim > PQ_ATTN_CUDA_MAX_HD, PQ_ERR_FORMAT,
               "calibration on the GPU: head_dim %d is not supported (even, at most %d)", c->head_dim,
               PQ_ATTN_CUDA_MAX_HD);
    PQ_CUDA_TRY(cudaStreamCreate(&g->stream));
    PQ_TRY(pq_block_cuda_scratch_init(&g->s, c, g->len, g->len, g->dt));
    char what[160];
    snprintf(what, sizeof what, "the calibration activations (%d windows of %d tokens, %.1f MiB)", g->n, g->len,
             X * 4 / 1048576.0);
    PQ_TRY(pq_cuda_malloc_named((void **)&g->d_X, X * sizeof(float), what));
    PQ_TRY(pq_cuda_malloc_named((void **)&g->d_xw, window_elems(c, g->len) * sizeof(float), "a calibration window"));
    PQ_TRY(pq_cuda_malloc_named((void **)&g->d_kc, T * kvd * sizeof(uint16_t), "a window's keys"));
    PQ_TRY(pq_cuda_malloc_named((void **)&g->d_vc, T * kvd * sizeof(uint16_t), "a window's values"));
    PQ_TRY(pq_cuda_malloc_named((void **)&g->d_bad, sizeof(unsigned long long), "a flag"));
    PQ_TRY(pq_block_cuda_rope_prepare(&g->s, c, 0, NULL, g->len, g->stream));
    PQ_CUDA_TRY(cudaStreamSynchronize(g->stream));
    note_memory(g);
    return PQ_OK;
}

extern "C" pq_status pq_calib_gpu_create(const pq_config *c, pq_act_dtype dt, int n, int len, pq_calib_gpu **out) {
    *out = NULL;
    pq_device dev;
    PQ_TRY(pq_device_resolve(PQ_DEVICE_CUDA, &dev));
    PQ_FAIL_IF(len < 1 || n < 1, PQ_ERR_ARG, "calibration on the GPU: %d windows of %d tokens", n, len);
    pq_calib_gpu *g = (pq_calib_gpu *)calloc(1, sizeof *g);
    PQ_FAIL_IF(!g, PQ_ERR_NOMEM, "out of memory");
    g->c = *c;
    g->dt = dt;
    g->n = n;
    g->len = len;
    g->loaded_layer = -1;
    pq_status s = create(g);
    if (s != PQ_OK) {
        pq_calib_gpu_free(g);
        return s;
    }
    *out = g;
    return PQ_OK;
}

extern "C" void *pq_calib_gpu_stream(const pq_calib_gpu *g) { return g->stream; }

extern "C" pq_status pq_calib_gpu_set_inputs(pq_calib_gpu *g, const float *X) {
    PQ_CUDA_TRY(cudaMemcpyAsync(g->d_X, X, (size_t)g->n * window_elems(&g->c, g->len) * sizeof(float),
                                cudaMemcpyHostToDevice, g->stream));
    PQ_CUDA_TRY(cudaStreamSynchronize(g->stream));
    return PQ_OK;
}

extern "C" pq_status pq_calib_gpu_get_inputs(pq_calib_gpu *g, float *X) {
    PQ_CUDA_TRY(cudaMemcpyAsync(X, g->d_X, (size_t)g->n * window_elems(&g->c, g->len) * sizeof(float),
                                cudaMemcpyDeviceToHost, g->stream));
    PQ_CUDA_TRY(cudaStreamSynchronize(g->stream));
    return PQ_OK;
}

static void unload(pq_calib_gpu *g) {
    pq_block_cuda_layer_free(&g->layer);
    memset(g->src, 0, sizeof g->src);
    g->loaded_layer = -1;
}

static pq_status load(pq_calib_gpu *g, const pq_layer *L, int layer) {
    if (g->loaded_layer != layer) {
        pq_block_cuda_layer_free(&g->layer);
        PQ_TRY(pq_block_cuda_layer_upload(&g->c, L, layer, g->dt, &g->layer));
        memcpy(g->src, L->lin, sizeof g->src);
        g->loaded_layer = layer;
    } else {
        for (int i = 0; i < PQ_NLINEAR; i++) {
            if (memcmp(&g->src[i], &L->lin[i], sizeof(pq_linear)) == 0) continue;
            memset(&g->src[i], 0, sizeof(pq_linear)); // a failed upload leaves no stale key behind
            PQ_TRY(pq_block_cuda_linear_replace(&g->c, &g->layer, layer, (pq_linear_slot)i, &L->lin[i], g->dt));
            g->src[i] = L->lin[i];
        }
        // the norms are small: always from the layer as it is now
        PQ_CUDA_TRY(cudaMemcpy(g->layer.d_attn_norm, L->attn_norm, (size_t)g->c.hidden * sizeof(float),
                               cudaMemcpyHostToDevice));
        PQ_CUDA_TRY(cudaMemcpy(g->layer.d_mlp_norm, L->mlp_norm, (size_t)g->c.hidden * sizeof(float),
                               cudaMemcpyHostToDevice));
    }
    size_t ws = pq_block_cuda_layer_workspace_bytes(&g->layer, g->len);
    if (!g->ctx || ws > g->ctx_ws) {
        pq_cuda_ctx_free(g->ctx);
        g->ctx = NULL;
        PQ_TRY(pq_cuda_ctx_create(g->stream, ws, &g->ctx));
        g->ctx_ws = ws;
    }
    return PQ_OK;
}

extern "C" pq_status pq_calib_gpu_load(pq_calib_gpu *g, const pq_layer *L, int layer) {
    PQ_CUDA_TRY(cudaStreamSynchronize(g->stream)); // the previous pass is done with what is replaced
    pq_status s = load(g, L, layer);
    if (s != PQ_OK) unload(g);
    note_memory(g);
    return s;
}

// The block's hook: the device input handed on as it is.
typedef struct {
    const pq_calib_gpu_hooks *h;
} hook_ctx;

static pq_status on_input(void *ud, int layer, pq_linear_slot slot, const uint16_t *d_x, int T, int cols,
                          void *stream) {
    const pq_calib_gpu_hooks *h = ((hook_ctx *)ud)->h;
    return h->input(h->ud, layer, slot, d_x, T, cols, stream);
}

extern "C" pq_status pq_calib_gpu_pass(pq_calib_gpu *g, int layer, const pq_calib_gpu_hooks *hooks) {
    PQ_ASSERT(g->loaded_layer == layer);
    const size_t win = window_elems(&g->c, g->len);
    hook_ctx hc = {hooks};
    pq_block_cuda_hooks bh = {on_input, &hc};
    pq_status s = PQ_OK;
    for (int w = 0; w < g->n && s == PQ_OK; w++) {
        float *x = g->d_X + (size_t)w * win;
        if (hooks) { // measure on a copy: X stays the block's input
            cudaError_t e = cudaMemcpyAsync(g->d_xw, x, win * sizeof(float), cudaMemcpyDeviceToDevice, g->stream);
            if (e != cudaSuccess) {
                (void)cudaGetLastError();
                s = PQ_FAIL(PQ_ERR_CUDA, "copying calibration window %d on the device: %s", w, cudaGetErrorString(e));
                break;
            }
            x = g->d_xw;
        }
        s = pq_block_forward_cuda(&g->c, &g->layer, layer, x, g->len, 0, NULL, g->d_kc, g->d_vc, &g->s, g->ctx,
                                  g->stream, hooks ? &bh : NULL);
    }
    cudaError_t e = cudaStreamSynchronize(g->stream); // even after a failure, so nothing is left running
    if (s == PQ_OK && e != cudaSuccess) {
        (void)cudaGetLastError();
        s = PQ_FAIL(PQ_ERR_CUDA, "block %d on the GPU: cudaStreamSynchronize: %s", layer, cudaGetErrorString(e));
    }
    return s;
}

extern "C" pq_status pq_calib_gpu_fetch(pq_calib_gpu *g, const uint16_t *d_x, int T, int cols, const float **x) {
    const size_t n = (size_t)T * cols;
    if (!g->h16 || !g->h32) { // both again after a failed half
        const size_t staged = pq_calib_gpu_host_bytes(&g->c, g->len) / (sizeof(uint16_t) + sizeof(float));
        free(g->h16);
        free(g->h32);
        g->h16 = (uint16_t *)malloc(staged * sizeof(uint16_t));
        g->h32 = (float *)malloc(staged * sizeof(float));
        PQ_FAIL_IF(!g->h16 || !g->h32, PQ_ERR_NOMEM, "out of memory for the GPU calibration's staging buffers");
    }
    PQ_CUDA_TRY(cudaMemcpyAsync(g->h16, d_x, n * sizeof(uint16_t), cudaMemcpyDeviceToHost, g->stream));
    PQ_CUDA_TRY(cudaStreamSynchronize(g->stream));
    for (size_t i = 0; i < n; i++) // exact widening
        g->h32[i] = g->dt == PQ_ACT_BF16 ? pq_bf16_to_f32(g->h16[i]) : pq_fp16_to_f32(g->h16[i]);
    *x = g->h32;
    return PQ_OK;
}

static __global__ void first_nonfinite(const float *x, size_t n, unsigned long long *bad) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (!isfinite(x[i])) atomicMin(bad, (unsigned long long)i); // the smallest index: the same whatever the order
}

extern "C" pq_status pq_calib_gpu_first_nonfinite(pq_calib_gpu *g, long long *index) {
    const size_t n = (size_t)g->n * window_elems(&g->c, g->len);
    unsigned long long bad = ~0ull;
    PQ_CUDA_TRY(cudaMemcpyAsync(g->d_bad, &bad, sizeof bad, cudaMemcpyHostToDevice, g->stream));
    first_nonfinite<<<pq_cuda_blocks(n), PQ_CUDA_THREADS, 0, g->stream>>>(g->d_X, n, g->d_bad);
    PQ_CUDA_LAUNCHED("first_nonfinite");
    PQ_CUDA_TRY(cudaMemcpyAsync(&bad, g->d_bad, sizeof bad, cudaMemcpyDeviceToHost, g->stream));
    PQ_CUDA_TRY(cudaStreamSynchronize(g->stream));
    *index = bad == ~0ull ? -1 : (long long)bad;
    return PQ_OK;
}

extern "C" size_t pq_calib_gpu_peak_bytes(const pq_calib_gpu *g) { return g ? g->peak : 0; }
