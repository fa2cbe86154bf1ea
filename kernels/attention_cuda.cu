// Causal grouped-query attention on the GPU (kernels/attention.h is the
// specification; pq_attention_ref computes it in double).
//
// A simple kernel, correctness first. One thread block per (block of
// ATT_WARPS consecutive queries, query head); one warp per query. The block
// walks the keys its queries can see in tiles of ATT_KT keys: the tile of K
// and V (FP16) is staged in shared memory once and used by all its warps.
// Within a tile lane j scores key j (a dot product over head_dim in f32),
// then the warp folds the tile into an online softmax (running max m, sum l,
// f32 accumulators acc[d] owned by lane d % 32):
//   m' = max(m, max_j s_j);  l = l e^(m-m') + sum_j e^(s_j-m');
//   acc = acc e^(m-m') + sum_j e^(s_j-m') v_j
// and at the end out = acc / l, rounded to FP16.
// Keys outside a query's range [first_key(p), p] score -inf (weight 0).
#include "kernels/cuda_util.cuh"

#include "kernels/ops_cuda.h"

#define ATT_WARPS 8                        // queries per block
#define ATT_THREADS (ATT_WARPS * 32)
#define ATT_KT 32                          // keys per tile: one per lane
#define ATT_NR (PQ_ATTN_CUDA_MAX_HD / 32)  // output dims per lane

// First key position a query at position p may see (sliding window w > 0).
static __device__ __forceinline__ int first_key(int window, int p) {
    return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
}

static __device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Dynamic shared memory: sq f32 [ATT_WARPS][hd] (each warp's query), then the
// K and V tiles FP16 [ATT_KT][hd + 2] (rows padded by one 4-byte word so that
// lanes reading the same column of different rows hit different banks).
static size_t smem_bytes(int hd) {
    return (size_t)ATT_WARPS * hd * sizeof(float) + 2 * (size_t)ATT_KT * (hd + 2) * sizeof(__half);
}

static __global__ void __launch_bounds__(ATT_THREADS)
attention_kernel(const float *__restrict__ q, const __half *__restrict__ k, const __half *__restrict__ v,
                 __half *__restrict__ out, int T, int pos0, int n_heads, int n_kv, int hd, int window, float scale) {
    extern __shared__ float smem[];
    const int ks = hd + 2; // row stride of the K/V tiles, in halves
    float *sq = smem;
    __half *sk = (__half *)(sq + ATT_WARPS * hd);
    __half *sv = sk + ATT_KT * ks;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int h = blockIdx.y, kh = h / (n_heads / n_kv);
    const size_t qdim = (size_t)n_heads * hd, kvdim = (size_t)n_kv * hd;
    const int t0 = blockIdx.x * ATT_WARPS;        // first query of the block (< T)
    const int t_end = min(t0 + ATT_WARPS, T);     // one past the last query of the block
    const int t = t0 + warp;                      // this warp's query
    const bool active = t < T;                    // warps past T only help load tiles
    const int p = pos0 + t;                       // its position
    const int lo = first_key(window, p);          // its visible keys: [lo, p]
    const int blk_lo = first_key(window, pos0 + t0), blk_hi = pos0 + t_end - 1; // keys of the block

    if (active)
        for (int i = lane; i < hd; i += 32) sq[warp * hd + i] = q[(size_t)t * qdim + (size_t)h * hd + i];

    float m = -INFINITY, l = 0.0f, acc[ATT_NR];
#pragma unroll
    for (int r = 0; r < ATT_NR; r++) acc[r] = 0.0f;

    // The loop bounds are the same for the whole block: every thread reaches
    // both barriers the same number of times.
    for (int kt0 = blk_lo; kt0 <= blk_hi; kt0 += ATT_KT) {
        const int nk = min(ATT_KT, blk_hi - kt0 + 1); // keys in this tile
        __syncthreads(); // the previous tile is consumed (and sq is written)
        for (int e = threadIdx.x; e < ATT_KT * hd; e += ATT_THREADS) {
            int j = e / hd, i = e % hd;
            __half kx = __float2half(0.0f), vx = __float2half(0.0f);
            if (j < nk) {
                size_t off = (size_t)(kt0 + j) * kvdim + (size_t)kh * hd + i;
                kx = k[off];
                vx = v[off];
            }
            sk[j * ks + i] = kx;
            sv[j * ks + i] = vx;
        }
        __syncthreads();
        if (!active) continue;

        const int key = kt0 + lane;
        const bool visible = lane < nk && key >= lo && key <= p;
        float s = -INFINITY;
        if (visible) {
            const float *qw = sq + warp * hd;
            const __half *kr = sk + lane * ks;
            float d = 0.0f;
            for (int i = 0; i < hd; i++) d += qw[i] * __half2float(kr[i]);
            s = d * scale;
        }
        const float mt = warp_max(s);
        if (mt == -INFINITY) continue; // no key of this tile is visible to this query (warp-uniform)
        const float mn = fmaxf(m, mt);
        const float corr = expf(m - mn); // m = -inf before the first visible key: 0
        const float pj = visible ? expf(s - mn) : 0.0f;
        l = l * corr + warp_sum(pj);
#pragma unroll
        for (int r = 0; r < ATT_NR; r++) acc[r] *= corr;
        for (int j = 0; j < nk; j++) {
            const float w = __shfl_sync(0xffffffffu, pj, j);
            const __half *vr = sv + j * ks;
#pragma unroll
            for (int r = 0; r < ATT_NR; r++) {
                int d = lane + 32 * r;
                if (d < hd) acc[r] += w * __half2float(vr[d]);
            }
        }
        m = mn;
    }

    // l >= 1: key p itself is visible, and the tile holding the maximum added e^0.
    if (active) {
        __half *o = out + (size_t)t * qdim + (size_t)h * hd;
#pragma unroll
        for (int r = 0; r < ATT_NR; r++) {
            int d = lane + 32 * r;
            if (d < hd) o[d] = __float2half_rn(acc[r] / l);
        }
    }
}

pq_status pq_attention_cuda(const pq_attn_shape *s, const float *d_q, const uint16_t *d_k, const uint16_t *d_v,
                            int T, int pos0, uint16_t *d_out, void *stream) {
    int hd = s->head_dim;
    PQ_FAIL_IF(hd < 2 || hd % 2 || hd > PQ_ATTN_CUDA_MAX_HD, PQ_ERR_ARG,
               "head_dim %d is not supported by the CUDA attention kernel (even, at most %d)", hd,
               PQ_ATTN_CUDA_MAX_HD);
    PQ_FAIL_IF(s->n_heads < 1 || s->n_kv < 1 || s->n_heads % s->n_kv || s->n_heads > 65535, PQ_ERR_ARG,
               "attention with %d query heads over %d key/value heads is not supported", s->n_heads, s->n_kv);
    PQ_FAIL_IF(T < 0 || pos0 < 0, PQ_ERR_ARG, "attention over %d tokens at position %d", T, pos0);
    if (T == 0) return PQ_OK;
    dim3 grid((unsigned)((T + ATT_WARPS - 1) / ATT_WARPS), (unsigned)s->n_heads);
    float scale = (float)(1.0 / sqrt((double)hd));
    attention_kernel<<<grid, ATT_THREADS, smem_bytes(hd), (cudaStream_t)stream>>>(
        d_q, (const __half *)d_k, (const __half *)d_v, (__half *)d_out, T, pos0, s->n_heads, s->n_kv, hd,
        s->window, scale);
    PQ_CUDA_LAUNCHED("attention_kernel");
    return PQ_OK;
}
