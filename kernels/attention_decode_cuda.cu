// Attention of one new token over the KV cache on the GPU (a decode step):
// split-KV, as flash-decoding does (kernels/attention.h is the
// specification; pq_attention_ref computes it in double).
//
// The visible keys [first_key(p), p] are cut into `splits` equal slices;
// block (slice, kv head) reads its slice of K and V once for every query
// head of the GQA group (up to 8 at a time). Its 4 warps take interleaved
// 32-key tiles: lane j scores key j of the tile against each head's query
// (f32 dot product; the queries, scaled by 1/sqrt(hd), in shared memory),
// the warp folds the tile into an online softmax per head (running maximum
// m, sum l, f32 accumulators of the value rows, lane d holding dimensions
// d, d + 32, ...). The warps' states are merged in warp order into the
// slice's (m, l, o) in the workspace, and a second kernel merges the slices
// in slice order into the output, rounded to the activation type. Nothing
// depends on scheduling: no atomics.
//
// The split count depends on the cache capacity and the head counts only,
// so the launch is the same at every position: with the position read from
// the device (d_pos), one CUDA graph replays every decode step.
#include "kernels/cuda_act.cuh"

#include "kernels/ops_cuda.h"

namespace {

constexpr int DEC_WARPS = 4;
constexpr int DEC_THREADS = DEC_WARPS * 32;
constexpr int GMAX = 8;            // query heads per pass over the slice
constexpr int TARGET_BLOCKS = 264; // ~2 per SM of an H100 / H200
constexpr int MAX_SPLITS = 64;
constexpr int MIN_SLICE = 64;      // keys per slice at the cache's capacity, at least

template <class A> struct DecArgs {
    const float *q;
    const A *k, *v;
    int pos0;
    const int32_t *d_pos;
    int hd, group, window, qdim, kvdim, splits;
    float scale;                 // 1 / sqrt(hd)
    float *part;                 // [n_heads][splits][hd + 2]: o[hd], m, l
};

__device__ __forceinline__ int first_key(int window, int p) {
    return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Dot product of the query qv (f32, shared memory) with key row kr (hd elements).
template <class A> __device__ __forceinline__ float dot_row(const float *qv, const A *kr, int hd, bool vec) {
    float d = 0.0f;
    if (vec) { // hd a multiple of 8, rows 16-byte aligned
        for (int i = 0; i < hd; i += 8) {
            const uint4 u = __ldg((const uint4 *)(kr + i));
            const typename Act<A>::T2 *p = (const typename Act<A>::T2 *)&u;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                d += qv[i + 2 * k] * Act<A>::to_f(p[k].x);
                d += qv[i + 2 * k + 1] * Act<A>::to_f(p[k].y);
            }
        }
    } else {
        for (int i = 0; i < hd; i++) d += qv[i] * Act<A>::to_f(kr[i]);
    }
    return d;
}

// DPL: dimensions per lane (head_dim rounded up to 32 DPL).
template <class A, int DPL> __global__ void __launch_bounds__(DEC_THREADS) decode_split(DecArgs<A> a) {
    constexpr int HDP = 32 * DPL;
    __shared__ float qs[GMAX][HDP];
    __shared__ float wm[DEC_WARPS][GMAX], wl[DEC_WARPS][GMAX], wo[DEC_WARPS][GMAX][HDP];
    const int sp = blockIdx.x, kh = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int p = a.d_pos ? *a.d_pos : a.pos0, lo = first_key(a.window, p);
    const int chunk = (p - lo + 1 + a.splits - 1) / a.splits, c0 = lo + sp * chunk, c1 = min(c0 + chunk, p + 1);
    const A *kb = a.k + (size_t)kh * a.hd, *vb = a.v + (size_t)kh * a.hd;
    const bool vec = a.hd % 8 == 0 && (uintptr_t)a.k % 16 == 0 && a.kvdim % 8 == 0;

    for (int h0 = 0; h0 < a.group; h0 += GMAX) {
        const int gn = min(GMAX, a.group - h0);
        __syncthreads(); // the previous pass is done with qs and the warp states
        for (int e = threadIdx.x; e < GMAX * HDP; e += DEC_THREADS) {
            const int hh = e / HDP, d = e % HDP;
            qs[hh][d] = hh < gn && d < a.hd ? a.q[(size_t)(kh * a.group + h0 + hh) * a.hd + d] * a.scale : 0.0f;
        }
        __syncthreads();
        float m[GMAX], l[GMAX], acc[GMAX][DPL];
#pragma unroll
        for (int hh = 0; hh < GMAX; hh++) {
            m[hh] = -INFINITY, l[hh] = 0.0f;
#pragma unroll
            for (int r = 0; r < DPL; r++) acc[hh][r] = 0.0f;
        }
        for (int t0 = c0 + warp * 32; t0 < c1; t0 += DEC_WARPS * 32) {
            const int key = t0 + lane, nk = min(32, c1 - t0);
            float pj[GMAX];
#pragma unroll
            for (int hh = 0; hh < GMAX; hh++) {
                if (hh >= gn) break; // the same for the whole warp
                const float s = lane < nk ? dot_row<A>(qs[hh], kb + (size_t)key * a.kvdim, a.hd, vec) : -INFINITY;
                const float mt = warp_max(s), mn = fmaxf(m[hh], mt); // mt is finite: key t0 is visible
                const float corr = expf(m[hh] - mn);                  // m = -inf before the first tile: 0
                pj[hh] = lane < nk ? expf(s - mn) : 0.0f;
                l[hh] = l[hh] * corr + warp_sum(pj[hh]);
#pragma unroll
                for (int r = 0; r < DPL; r++) acc[hh][r] *= corr;
                m[hh] = mn;
            }
            for (int j = 0; j < nk; j++) {
                float vr[DPL];
#pragma unroll
                for (int r = 0; r < DPL; r++) {
                    const int d = lane + 32 * r;
                    vr[r] = d < a.hd ? Act<A>::to_f(vb[(size_t)(t0 + j) * a.kvdim + d]) : 0.0f;
                }
#pragma unroll
                for (int hh = 0; hh < GMAX; hh++) {
                    if (hh >= gn) break;
                    const float w = __shfl_sync(0xffffffffu, pj[hh], j);
#pragma unroll
                    for (int r = 0; r < DPL; r++) acc[hh][r] += w * vr[r];
                }
            }
        }
        for (int hh = 0; hh < gn; hh++) {
            if (lane == 0) wm[warp][hh] = m[hh], wl[warp][hh] = l[hh];
#pragma unroll
            for (int r = 0; r < DPL; r++) wo[warp][hh][lane + 32 * r] = acc[hh][r];
        }
        __syncthreads();
        // the warps' states, merged in warp order, into the slice's partial
        for (int e = threadIdx.x; e < gn * (HDP + 2); e += DEC_THREADS) {
            const int hh = e / (HDP + 2), d = e % (HDP + 2);
            float M = -INFINITY;
            for (int w = 0; w < DEC_WARPS; w++) M = fmaxf(M, wm[w][hh]);
            float v = 0.0f;
            for (int w = 0; w < DEC_WARPS; w++) {
                const float f = wm[w][hh] == -INFINITY ? 0.0f : expf(wm[w][hh] - M);
                v += f * (d < HDP ? wo[w][hh][d] : d == HDP + 1 ? wl[w][hh] : 0.0f);
            }
            if (d == HDP) v = M;
            if (d < a.hd || d >= HDP) {
                const int slot = d < HDP ? d : a.hd + (d - HDP); // o[hd], then m, l
                a.part[((size_t)(kh * a.group + h0 + hh) * a.splits + sp) * (a.hd + 2) + slot] = v;
            }
        }
    }
}

// out[h][d] from the slices' partials, merged in slice order.
template <class A> __global__ void decode_merge(const float *part, int splits, int hd, A *out) {
    const int h = blockIdx.x;
    const float *ph = part + (size_t)h * splits * (hd + 2);
    float M = -INFINITY;
    for (int s = 0; s < splits; s++) M = fmaxf(M, ph[(size_t)s * (hd + 2) + hd]);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float o = 0.0f, l = 0.0f;
        for (int s = 0; s < splits; s++) {
            const float *ps = ph + (size_t)s * (hd + 2), ms = ps[hd];
            const float f = ms == -INFINITY ? 0.0f : expf(ms - M); // an empty slice adds nothing
            o += f * ps[d];
            l += f * ps[hd + 1];
        }
        out[(size_t)h * hd + d] = Act<A>::from_f(o / l);
    }
}

int splits_of(const pq_attn_shape *s, int n_ctx) {
    int sp = (TARGET_BLOCKS + s->n_kv - 1) / s->n_kv;
    const int by_len = (n_ctx + MIN_SLICE - 1) / MIN_SLICE;
    if (sp > by_len) sp = by_len;
    if (sp > MAX_SPLITS) sp = MAX_SPLITS;
    return sp < 1 ? 1 : sp;
}

template <class A, int DPL> pq_status launch(const DecArgs<A> &a, int n_heads, int n_kv, cudaStream_t st) {
    decode_split<A, DPL><<<dim3((unsigned)a.splits, (unsigned)n_kv), DEC_THREADS, 0, st>>>(a);
    PQ_CUDA_LAUNCHED("decode_split");
    return PQ_OK;
}

template <class A>
pq_status decode(const pq_attn_shape *s, const float *d_q, const uint16_t *d_k, const uint16_t *d_v, int pos0,
                 const int32_t *d_pos, int n_ctx, uint16_t *d_out, void *d_ws, cudaStream_t st) {
    DecArgs<A> a;
    a.q = d_q, a.k = (const A *)d_k, a.v = (const A *)d_v, a.pos0 = pos0, a.d_pos = d_pos;
    a.hd = s->head_dim, a.group = s->n_heads / s->n_kv, a.window = s->window;
    a.qdim = s->n_heads * s->head_dim, a.kvdim = s->n_kv * s->head_dim, a.splits = splits_of(s, n_ctx);
    a.scale = (float)(1.0 / sqrt((double)s->head_dim));
    a.part = (float *)d_ws;
    const int hd = s->head_dim;
    pq_status r = hd <= 32    ? launch<A, 1>(a, s->n_heads, s->n_kv, st)
                  : hd <= 64  ? launch<A, 2>(a, s->n_heads, s->n_kv, st)
                  : hd <= 128 ? launch<A, 4>(a, s->n_heads, s->n_kv, st)
                              : launch<A, 8>(a, s->n_heads, s->n_kv, st);
    PQ_TRY(r);
    decode_merge<A><<<(unsigned)s->n_heads, 128, 0, st>>>(a.part, a.splits, hd, (A *)d_out);
    PQ_CUDA_LAUNCHED("decode_merge");
    return PQ_OK;
}

} // namespace

size_t pq_attention_cuda_ws_bytes(const pq_attn_shape *s, int n_ctx) {
    return (size_t)s->n_heads * splits_of(s, n_ctx > 0 ? n_ctx : 1) * (s->head_dim + 2) * sizeof(float);
}

pq_status pq_attention_decode_cuda(const pq_attn_shape *s, pq_act_dtype dt, const float *d_q, const uint16_t *d_k,
                                   const uint16_t *d_v, int pos0, const int32_t *d_pos, int n_ctx, uint16_t *d_out,
                                   void *d_ws, void *stream) {
    PQ_FAIL_IF(s->head_dim < 2 || s->head_dim % 2 || s->head_dim > PQ_ATTN_CUDA_MAX_HD || s->n_kv < 1 ||
                   s->n_heads % s->n_kv || n_ctx < 1 || (!d_pos && (pos0 < 0 || pos0 >= n_ctx)),
               PQ_ERR_ARG, "decode attention: head_dim %d, %d/%d heads, position %d of %d", s->head_dim, s->n_heads,
               s->n_kv, pos0, n_ctx);
    PQ_FAIL_IF(!d_ws, PQ_ERR_ARG, "decode attention without its workspace");
    pq_status st = PQ_OK;
    PQ_ACT_DISPATCH(dt, st = decode<A>(s, d_q, d_k, d_v, pos0, d_pos, n_ctx, d_out, d_ws, (cudaStream_t)stream));
    return st;
}
