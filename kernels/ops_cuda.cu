// CUDA versions of the elementwise and normalization ops (kernels/ops.h is
// the specification): embedding gather, RMSNorm, RoPE tables and rotation,
// SwiGLU, residual add, bias add, f32 -> 16-bit, the KV-cache store, and
// the loss (kernels/loss.h).
#include "kernels/cuda_act.cuh"

#include "kernels/ops_cuda.h"

// ---- embedding gather ------------------------------------------------------

// x[t][i] = table[tokens[t]][i]; one thread per output element.
template <class A>
__global__ void embed_kernel(const A *__restrict__ table, const int32_t *__restrict__ tokens, int n, size_t total,
                             float *__restrict__ x) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        size_t t = e / (size_t)n, i = e % (size_t)n;
        x[e] = Act<A>::to_f(table[(size_t)tokens[t] * n + i]);
    }
}

pq_status pq_embed_cuda(pq_act_dtype dt, const uint16_t *d_table, const int32_t *d_tokens, int T, int n, float *d_x,
                        void *stream) {
    size_t total = (size_t)T * (size_t)n;
    if (T <= 0 || n <= 0) return PQ_OK;
    PQ_ACT_DISPATCH(dt, embed_kernel<A><<<pq_cuda_blocks(total), PQ_CUDA_THREADS, 0, (cudaStream_t)stream>>>(
                            (const A *)d_table, d_tokens, n, total, d_x));
    PQ_CUDA_LAUNCHED("embed_kernel");
    return PQ_OK;
}

// ---- block reductions ------------------------------------------------------------

#define NORM_THREADS 256

// Sum of v over the block (blockDim.x == NORM_THREADS); every thread gets it.
// A fixed tree: the same inputs give the same bits.
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

// ---- RMSNorm -----------------------------------------------------------------

// One block per row t: y[t] = A(w * (x[t] * inv)), inv = 1/sqrt(mean(x[t]^2) + eps).
template <class A>
__global__ void __launch_bounds__(NORM_THREADS)
rmsnorm_kernel(const float *__restrict__ x, const float *__restrict__ w, int n, float eps, A *__restrict__ y) {
    const float *xt = x + (size_t)blockIdx.x * n;
    A *yt = y + (size_t)blockIdx.x * n;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += NORM_THREADS) ss += xt[i] * xt[i];
    ss = block_sum(ss);
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = threadIdx.x; i < n; i += NORM_THREADS) yt[i] = Act<A>::from_f(w[i] * (xt[i] * inv));
}

pq_status pq_rmsnorm_cuda(pq_act_dtype dt, const float *d_x, const float *d_w, int T, int n, float eps, uint16_t *d_y,
                          void *stream) {
    if (T <= 0 || n <= 0) return PQ_OK;
    PQ_ACT_DISPATCH(dt, rmsnorm_kernel<A><<<(unsigned)T, NORM_THREADS, 0, (cudaStream_t)stream>>>(d_x, d_w, n, eps,
                                                                                               (A *)d_y));
    PQ_CUDA_LAUNCHED("rmsnorm_kernel");
    return PQ_OK;
}

// ---- RoPE --------------------------------------------------------------------

// cs[t][i] = cos((pos0+t) * inv_freq[i]), sn likewise, computed in double.
static __global__ void rope_table_kernel(const double *__restrict__ inv_freq, int half, int pos0,
                                         const int32_t *__restrict__ d_pos, size_t total, float *__restrict__ cs,
                                         float *__restrict__ sn) {
    if (d_pos) pos0 = *d_pos;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        int t = (int)(e / (size_t)half), i = (int)(e % (size_t)half);
        double a = (double)(pos0 + t) * inv_freq[i];
        double c, s;
        sincos(a, &s, &c);
        cs[e] = (float)c;
        sn[e] = (float)s;
    }
}

pq_status pq_rope_table_cuda(const double *d_inv_freq, int head_dim, int pos0, const int32_t *d_pos, int T,
                             float *d_cs, float *d_sn, void *stream) {
    int half = head_dim / 2;
    size_t total = (size_t)T * (size_t)half;
    if (T <= 0 || half <= 0) return PQ_OK;
    PQ_FAIL_IF(d_pos && T != 1, PQ_ERR_ARG, "RoPE table of %d tokens at a device position", T);
    rope_table_kernel<<<pq_cuda_blocks(total), PQ_CUDA_THREADS, 0, (cudaStream_t)stream>>>(d_inv_freq, half, pos0,
                                                                                           d_pos, total, d_cs, d_sn);
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

// ---- SwiGLU, adds, conversion, the KV store ----------------------------------------

template <class A>
__global__ void swiglu_kernel(const float *__restrict__ gate, const float *__restrict__ up, size_t n,
                              A *__restrict__ out) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        float g = gate[e];
        out[e] = Act<A>::from_f(g / (1.0f + expf(-g)) * up[e]);
    }
}

pq_status pq_swiglu_cuda(pq_act_dtype dt, const float *d_gate, const float *d_up, size_t n, uint16_t *d_out,
                         void *stream) {
    if (n == 0) return PQ_OK;
    PQ_ACT_DISPATCH(dt, swiglu_kernel<A><<<pq_cuda_blocks(n), PQ_CUDA_THREADS, 0, (cudaStream_t)stream>>>(
                            d_gate, d_up, n, (A *)d_out));
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

template <class A> __global__ void to_act_kernel(const float *__restrict__ x, size_t n, A *__restrict__ y) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x)
        y[e] = Act<A>::from_f(x[e]);
}

pq_status pq_f32_to_act_cuda(pq_act_dtype dt, const float *d_x, size_t n, uint16_t *d_y, void *stream) {
    if (n == 0) return PQ_OK;
    PQ_ACT_DISPATCH(dt, to_act_kernel<A><<<pq_cuda_blocks(n), PQ_CUDA_THREADS, 0, (cudaStream_t)stream>>>(d_x, n,
                                                                                                       (A *)d_y));
    PQ_CUDA_LAUNCHED("to_act_kernel");
    return PQ_OK;
}

template <class A>
__global__ void kv_store_kernel(const float *__restrict__ k, const float *__restrict__ v, size_t n, int kvd, int pos0,
                                const int32_t *__restrict__ d_pos, A *__restrict__ kc, A *__restrict__ vc) {
    const size_t off = (size_t)(d_pos ? *d_pos : pos0) * kvd;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        kc[off + e] = Act<A>::from_f(k[e]);
        vc[off + e] = Act<A>::from_f(v[e]);
    }
}

pq_status pq_kv_store_cuda(pq_act_dtype dt, const float *d_k, const float *d_v, int T, int kvd, int pos0,
                           const int32_t *d_pos, uint16_t *d_kcache, uint16_t *d_vcache, void *stream) {
    const size_t n = (size_t)T * kvd;
    if (n == 0) return PQ_OK;
    PQ_FAIL_IF(d_pos && T != 1, PQ_ERR_ARG, "KV store of %d tokens at a device position", T);
    PQ_ACT_DISPATCH(dt, kv_store_kernel<A><<<pq_cuda_blocks(n), PQ_CUDA_THREADS, 0, (cudaStream_t)stream>>>(
                            d_k, d_v, n, kvd, pos0, d_pos, (A *)d_kcache, (A *)d_vcache));
    PQ_CUDA_LAUNCHED("kv_store_kernel");
    return PQ_OK;
}

// ---- the loss -----------------------------------------------------------------------

#define NLL_THREADS 512

// (m, s) stands for s e^m: the sum of e^x over the values seen, with m the
// largest of them (-inf and 0 for none). Merging two is exact up to the
// rounding of one exp and one multiply-add.
struct Lse {
    float m, s;
};
__device__ __forceinline__ Lse lse_merge(Lse a, Lse b) {
    if (a.m < b.m) {
        Lse t = a;
        a = b;
        b = t;
    }
    if (b.m == -INFINITY) return a; // also both empty: (-inf, 0)
    return Lse{a.m, a.s + b.s * expf(b.m - a.m)};
}

// One block per row. A NaN anywhere makes the result NaN (the comparisons
// fail and the sums carry it); +Inf gives NaN through Inf - Inf.
static __global__ void __launch_bounds__(NLL_THREADS)
nll_kernel(const float *__restrict__ logits, int vocab, const int32_t *__restrict__ targets, float *__restrict__ nll) {
    const int row = blockIdx.x, tgt = targets[row];
    if (tgt < 0) { // not scored (the same for the whole block)
        if (threadIdx.x == 0) nll[row] = 0.0f;
        return;
    }
    const float *x = logits + (size_t)row * vocab;
    Lse a = {-INFINITY, 0.0f};
    bool nan = false;
    for (int i = threadIdx.x; i < vocab; i += NLL_THREADS) {
        const float v = x[i];
        nan |= v != v;
        if (v > a.m) {
            a.s = a.s * expf(a.m - v) + 1.0f; // a.m = -inf: 0 * 0 + 1
            a.m = v;
        } else {
            a.s += expf(v - a.m);
        }
    }
    if (nan) a.s = NAN;
    // the warps, then the warps' results, in a fixed order
    for (int o = 16; o > 0; o /= 2) {
        Lse b = {__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)};
        a = lse_merge(a, b);
    }
    __shared__ Lse part[NLL_THREADS / 32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) part[warp] = a;
    __syncthreads();
    if (warp == 0) {
        a = lane < NLL_THREADS / 32 ? part[lane] : Lse{-INFINITY, 0.0f};
        for (int o = 16; o > 0; o /= 2) {
            Lse b = {__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)};
            a = lse_merge(a, b);
        }
        if (lane == 0) nll[row] = logf(a.s) + a.m - x[tgt];
    }
}

pq_status pq_nll_cuda(const float *d_logits, int n, int vocab, const int32_t *d_targets, float *d_nll, void *stream) {
    if (n <= 0) return PQ_OK;
    PQ_FAIL_IF(vocab < 1, PQ_ERR_ARG, "loss over a vocabulary of %d", vocab);
    nll_kernel<<<(unsigned)n, NLL_THREADS, 0, (cudaStream_t)stream>>>(d_logits, vocab, d_targets, d_nll);
    PQ_CUDA_LAUNCHED("nll_kernel");
    return PQ_OK;
}
