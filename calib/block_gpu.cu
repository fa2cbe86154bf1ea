// calib/block_gpu.cu — calibration block passes on the GPU (calib/block_gpu.h).
#include "kernels/cuda_util.cuh"

extern "C" {
#include "calib/block_gpu.h"
#include "kernels/cuda_host.h"
#include "kernels/dense.h"
}
#include "eval/block_cuda.h"
#include "kernels/ops_cuda.h"

struct pq_calib_gpu {
    pq_config c;
    int len;
    cudaStream_t stream;
    pq_cuda_ctx *ctx;            // created for the loaded block's workspace
    size_t ctx_ws;
    pq_block_cuda_layer layer;   // the loaded block
    int loaded;
    pq_block_cuda_scratch s;     // len tokens, RoPE tables of positions 0..len-1
    float *d_x;                  // f32 [len][hidden]
    uint16_t *d_kc, *d_vc;       // FP16 [len][kvd]
    uint16_t *h16;               // host staging of a hooked input, [len][widest]
    float *h32;                  //   and its f32 copy
    const pq_block_hooks *hooks; // of the current forward
    size_t peak;
};

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
    cudaFree(g->d_x);
    cudaFree(g->d_kc);
    cudaFree(g->d_vc);
    pq_cuda_ctx_free(g->ctx);
    if (g->stream) cudaStreamDestroy(g->stream);
    free(g->h16);
    free(g->h32);
    free(g);
}

static pq_status create(pq_calib_gpu *g) {
    const pq_config *c = &g->c;
    size_t T = (size_t)g->len, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t staged = pq_calib_gpu_host_bytes(c, g->len) / (sizeof(uint16_t) + sizeof(float)); // elements
    PQ_FAIL_IF(c->head_dim < 2 || c->head_dim % 2 || c->head_dim > PQ_ATTN_CUDA_MAX_HD, PQ_ERR_FORMAT,
               "calibration on the GPU: head_dim %d is not supported (even, at most %d)", c->head_dim,
               PQ_ATTN_CUDA_MAX_HD);
    PQ_CUDA_TRY(cudaStreamCreate(&g->stream));
    PQ_TRY(pq_block_cuda_scratch_init(&g->s, c, g->len));
    PQ_TRY(pq_cuda_malloc_named((void **)&g->d_x, T * c->hidden * sizeof(float), "a calibration window"));
    PQ_TRY(pq_cuda_malloc_named((void **)&g->d_kc, T * kvd * sizeof(uint16_t), "a window's keys"));
    PQ_TRY(pq_cuda_malloc_named((void **)&g->d_vc, T * kvd * sizeof(uint16_t), "a window's values"));
    g->h16 = (uint16_t *)malloc(staged * sizeof(uint16_t));
    g->h32 = (float *)malloc(staged * sizeof(float));
    PQ_FAIL_IF(!g->h16 || !g->h32, PQ_ERR_NOMEM, "out of memory for the GPU calibration's staging buffers");
    PQ_TRY(pq_block_cuda_rope_prepare(&g->s, c, 0, g->len, g->stream));
    PQ_CUDA_TRY(cudaStreamSynchronize(g->stream));
    note_memory(g);
    return PQ_OK;
}

extern "C" pq_status pq_calib_gpu_create(const pq_config *c, int len, pq_calib_gpu **out) {
    *out = NULL;
    pq_device dev;
    PQ_TRY(pq_device_resolve(PQ_DEVICE_CUDA, &dev));
    PQ_FAIL_IF(len < 1, PQ_ERR_ARG, "calibration on the GPU: windows of %d tokens", len);
    pq_calib_gpu *g = (pq_calib_gpu *)calloc(1, sizeof *g);
    PQ_FAIL_IF(!g, PQ_ERR_NOMEM, "out of memory");
    g->c = *c;
    g->len = len;
    pq_status s = create(g);
    if (s != PQ_OK) {
        pq_calib_gpu_free(g);
        return s;
    }
    *out = g;
    return PQ_OK;
}

extern "C" pq_status pq_calib_gpu_load(pq_calib_gpu *g, const pq_layer *L, int layer) {
    PQ_CUDA_TRY(cudaStreamSynchronize(g->stream)); // the previous block's work is done before it is freed
    pq_block_cuda_layer_free(&g->layer);
    g->loaded = 0;
    PQ_TRY(pq_block_cuda_layer_upload(&g->c, L, layer, &g->layer));
    size_t ws = pq_block_cuda_layer_workspace_bytes(&g->layer, g->len);
    if (!g->ctx || ws > g->ctx_ws) {
        pq_cuda_ctx_free(g->ctx);
        g->ctx = NULL;
        pq_status s = pq_cuda_ctx_create(g->stream, ws, &g->ctx);
        if (s != PQ_OK) {
            pq_block_cuda_layer_free(&g->layer);
            return s;
        }
        g->ctx_ws = ws;
    }
    g->loaded = 1;
    note_memory(g);
    return PQ_OK;
}

// The block's hook: the FP16 input copied to the host, widened, handed on.
static pq_status on_input(void *ud, int layer, pq_linear_slot slot, const uint16_t *d_x, int T, int cols,
                          void *stream) {
    pq_calib_gpu *g = (pq_calib_gpu *)ud;
    size_t n = (size_t)T * cols;
    PQ_CUDA_TRY(cudaMemcpyAsync(g->h16, d_x, n * sizeof(uint16_t), cudaMemcpyDeviceToHost, (cudaStream_t)stream));
    PQ_CUDA_TRY(cudaStreamSynchronize((cudaStream_t)stream));
    pq_dense_rows_cpu(PQ_DENSE_F16, g->h16, cols, 0, T, g->h32); // exact, like pq_fp16_to_f32
    g->hooks->linear_input(g->hooks->ud, layer, slot, g->h32, T, cols);
    return PQ_OK;
}

extern "C" pq_status pq_calib_gpu_forward(pq_calib_gpu *g, int layer, const float *x, float *y,
                                          const pq_block_hooks *hooks) {
    PQ_ASSERT(g->loaded);
    size_t bytes = (size_t)g->len * g->c.hidden * sizeof(float);
    PQ_CUDA_TRY(cudaMemcpyAsync(g->d_x, x, bytes, cudaMemcpyHostToDevice, g->stream));
    g->hooks = hooks;
    pq_block_cuda_hooks h = {on_input, g};
    pq_status s = pq_block_forward_cuda(&g->c, &g->layer, layer, g->d_x, g->len, 0, g->d_kc, g->d_vc, &g->s, g->ctx,
                                        g->stream, hooks && hooks->linear_input ? &h : NULL);
    if (s == PQ_OK && y) {
        cudaError_t e = cudaMemcpyAsync(y, g->d_x, bytes, cudaMemcpyDeviceToHost, g->stream);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            s = PQ_FAIL(PQ_ERR_CUDA, "cudaMemcpyAsync of block %d's output: %s", layer, cudaGetErrorString(e));
        }
    }
    cudaError_t e = cudaStreamSynchronize(g->stream); // even after a failure, so nothing is left running
    if (s == PQ_OK && e != cudaSuccess) {
        (void)cudaGetLastError();
        s = PQ_FAIL(PQ_ERR_CUDA, "block %d on the GPU: cudaStreamSynchronize: %s", layer, cudaGetErrorString(e));
    }
    return s;
}

extern "C" size_t pq_calib_gpu_peak_bytes(const pq_calib_gpu *g) { return g ? g->peak : 0; }
