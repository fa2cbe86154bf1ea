// CUDA versions of the elementwise and normalization ops (kernels/ops.h is
// the specification): embedding gather, RMSNorm, RoPE tables and rotation,
// SwiGLU, residual add, bias add, f32 -> FP16.
#include "kernels/cuda_util.cuh"

#include "kernels/ops_cuda.h"

// ---- embedding gather ------------------------------------------------------

// x[t][i] = table[tokens[t]][i]; one thread per output element.
static __global__ void embed_kernel(const __half *__restrict__ table, const int32_t *__restrict__ tokens, int n,
                             size_t total, float *__restrict__ x) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        size_t t = e / (size_t)n, i = e % (size_t)n;
        x[e] = __half2float(table[(size_t)tokens[t] * n + i]);
    }
}

pq_status pq_embed_cuda(const uint16_t *d_table, const int32_t *d_tokens, int T, int n, float *d_x, void *stream) {
    size_t total = (size_t)T * (size_t)n;
    if (T <= 0 || n <= 0) return PQ_OK;
    embed_kernel<<<pq_cuda_blocks(total), PQ_CUDA_THREADS, 0, (cudaStream_t)stream>>>(
        (const __half *)d_table, d_tokens, n, total, d_x);
    PQ_CUDA_LAUNCHED("embed_kernel");
    return PQ_OK;
}

// ---- RMSNorm -----------------------------------------------------------------

#define NORM_THREADS 256

// Sum of v over the block (blockDim.x == NORM_THREADS); every thread gets it.
static __device__ float block_sum(float v) {
    __shared__ float part[NORM_THREADS / 32];
    __shared__ float total;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < NORM_THREADS / 32 ? part[lane] : 0.0f;
        for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) total = v;
    }
    __syncthreads();
    return total;
}

// One block per row t: y[t] = FP16(w * (x[t] * inv)), inv = 1/sqrt(mean(x[t]^2) + eps).
static __global__ void __launch_bounds__(NORM_THREADS)
rmsnorm_kernel(const float *__restrict__ x, const float *__restrict__ w, int n, float eps, __half *__restrict__ y) {
    const float *xt = x + (size_t)blockIdx.x * n;
    __half *yt = y + (size_t)blockIdx.x * n;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += NORM_THREADS) ss += xt[i] * xt[i];
    ss = block_sum(ss);
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = threadIdx.x; i < n; i += NORM_THREADS) yt[i] = __float2half_rn(w[i] * (xt[i] * inv));
}

pq_status pq_rmsnorm_cuda(const float *d_x, const float *d_w, int T, int n, float eps, uint16_t *d_y,
                          void *stream) {
    if (T <= 0 || n <= 0) return PQ_OK;
    rmsnorm_kernel<<<(unsigned)T, NORM_THREADS, 0, (cudaStream_t)stream>>>(d_x, d_w, n, eps, (__half *)d_y);
    PQ_CUDA_LAUNCHED("rmsnorm_kernel");
    return PQ_OK;
}

// ---- RoPE --------------------------------------------------------------------

// cs[t][i] = cos((pos0+t) * inv_freq[i]), sn likewise, computed in double.
static __global__ void rope_table_kernel(const double *__restrict__ inv_freq, int half, int pos0, size_t total,
                                  float *__restrict__ cs, float *__restrict__ sn) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        int t = (int)(e / (size_t)half), i = (int)(e % (size_t)half);
        double a = (double)(pos0 + t) * inv_freq[i];
        double c, s;
        sincos(a, &s, &c);
        cs[e] = (float)c;
        sn[e] = (float)s;
    }
}

pq_status pq_rope_table_cuda(const double *d_inv_freq, int head_dim, int pos0, int T, float *d_cs, float *d_sn,
                             void *stream) {
    int half = head_dim / 2;
    size_t total = (size_t)T * (size_t)half;
    if (T <= 0 || half <= 0) return PQ_OK;
    rope_table_kernel<<<pq_cuda_blocks(total), PQ_CUDA_THREADS, 0, (cudaStream_t)stream>>>(d_inv_freq, half, pos0,
                                                                                           total, d_cs, d_sn);
    PQ_CUDA_LAUNCHED("rope_table_kernel");
    return PQ_OK;
}

// One thread per rotated pair (t, h, i < half): (x[i], x[i+half]) of head h
// of row t. Explicit _rn operations: no FMA contraction, as in the reference.
static __global__ void rope_apply_kernel(float *__restrict__ x, int stride, int n_heads, int head_dim, size_t total,
                                  const float *__restrict__ cs, const float *__restrict__ sn) {
    int half = head_dim / 2;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(e % (size_t)half);
        size_t th = e / (size_t)half;
        int h = (int)(th % (size_t)n_heads);
        size_t t = th / (size_t)n_heads;
        float *v = x + t * (size_t)stride + (size_t)h * head_dim;
        float c = cs[t * half + i], s = sn[t * half + i];
        float a = v[i], b = v[i + half];
        v[i] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
        v[i + half] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
    }
}

pq_status pq_rope_apply_cuda(float *d_x, int T, int stride, int n_heads, int head_dim, const float *d_cs,
                             const float *d_sn, void *stream) {
    size_t total = (size_t)T * (size_t)n_heads * (size_t)(head_dim / 2);
    if (total == 0) return PQ_OK;
    rope_apply_kernel<<<pq_cuda_blocks(total), PQ_CUDA_THREADS, 0, (cudaStream_t)stream>>>(d_x, stride, n_heads,
                                                                                           head_dim, total, d_cs, d_sn);
    PQ_CUDA_LAUNCHED("rope_apply_kernel");
    return PQ_OK;
}

// ---- SwiGLU, adds, conversion ---------------------------------------------------

static __global__ void swiglu_kernel(const float *__restrict__ gate, const float *__restrict__ up, size_t n,
                              __half *__restrict__ out) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        float g = gate[e];
        out[e] = __float2half_rn(g / (1.0f + expf(-g)) * up[e]);
    }
}

pq_status pq_swiglu_cuda(const float *d_gate, const float *d_up, size_t n, uint16_t *d_out, void *stream) {
    if (n == 0) return PQ_OK;
    swiglu_kernel<<<pq_cuda_blocks(n), PQ_CUDA_THREADS, 0, (cudaStream_t)stream>>>(d_gate, d_up, n,
                                                                                   (__half *)d_out);
    PQ_CUDA_LAUNCHED("swiglu_kernel");
    return PQ_OK;
}

static __global__ void add_kernel(float *__restrict__ y, const float *__restrict__ x, size_t n) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x)
        y[e] += x[e];
}

pq_status pq_add_cuda(float *d_y, const float *d_x, size_t n, void *stream) {
    if (n == 0) return PQ_OK;
    add_kernel<<<pq_cuda_blocks(n), PQ_CUDA_THREADS, 0, (cudaStream_t)stream>>>(d_y, d_x, n);
    PQ_CUDA_LAUNCHED("add_kernel");
    return PQ_OK;
}

static __global__ void add_bias_kernel(float *__restrict__ y, const float *__restrict__ b, int n, size_t total) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x)
        y[e] += b[e % (size_t)n];
}

pq_status pq_add_bias_cuda(float *d_y, const float *d_b, int T, int n, void *stream) {
    size_t total = (size_t)T * (size_t)n;
    if (T <= 0 || n <= 0) return PQ_OK;
    add_bias_kernel<<<pq_cuda_blocks(total), PQ_CUDA_THREADS, 0, (cudaStream_t)stream>>>(d_y, d_b, n, total);
    PQ_CUDA_LAUNCHED("add_bias_kernel");
    return PQ_OK;
}

static __global__ void f32_to_f16_kernel(const float *__restrict__ x, size_t n, __half *__restrict__ y) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x)
        y[e] = __float2half_rn(x[e]);
}

pq_status pq_f32_to_f16_cuda(const float *d_x, size_t n, uint16_t *d_y, void *stream) {
    if (n == 0) return PQ_OK;
    f32_to_f16_kernel<<<pq_cuda_blocks(n), PQ_CUDA_THREADS, 0, (cudaStream_t)stream>>>(d_x, n, (__half *)d_y);
    PQ_CUDA_LAUNCHED("f32_to_f16_kernel");
    return PQ_OK;
}
