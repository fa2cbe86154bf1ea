// Causal grouped-query attention on the GPU, prefill (kernels/attention.h is
// the specification; pq_attention_ref computes it in double): FlashAttention-2
// on the tensor cores, and pq_attention_cuda, which picks it or the decode
// kernel (kernels/attention_decode_cuda.cu).
//
// Rows: the query rows of kv head kh are (token t, head kh * group + j) for
// j < group, numbered r = t * group + j, so that one K/V tile in shared
// memory serves every query head of the GQA group. A block of 4 warps owns
// 64 consecutive rows (a warp 16: one m16 tile) and walks the keys its
// rows can see, [first key of its first token, position of its last], in
// tiles of BN keys, double-buffered in shared memory by cp.async (the next
// tile loads while this one is multiplied). Per tile and warp:
//   S = Q K^T      mma.sync m16n8k16 (Q and K 16-bit, f32 accumulation);
//                  Q was scaled by log2(e)/sqrt(hd) on its way into shared
//                  memory, so S is in log2 units
//   mask           keys outside [first_key(p), p] of a row's position p: -inf
//   online softmax per row (each thread holds rows g and g + 8 of its warp's
//                  tile; the row maximum over the 4 lanes of a row by
//                  shuffles): m' = max(m, max S); O *= 2^(m - m'); l = l
//                  2^(m - m') + sum 2^(S - m'); P = 2^(S - m')
//   O += P V       P rounded to 16 bits in registers (the accumulator layout
//                  of S is the A-operand layout of the next mma), V through
//                  ldmatrix.trans
// At the end O / l is rounded to the activation type. Warps skip the tiles
// that none of their rows can see; blocks are launched last rows first
// (they have the most keys). No atomics: the result does not depend on
// scheduling.
//
// Not measured on a GPU yet (docs/PERFORMANCE.md): tests/gpu_check.sh runs
// ncu on it and the benchmark compares it with a plain FP16 GEMM of the
// same FLOPs (target >= 50% at ctx 2048).
#include "kernels/cuda_act.cuh"

#include "kernels/ops_cuda.h"

namespace {

constexpr int FA_WARPS = 4;
constexpr int FA_THREADS = FA_WARPS * 32;
constexpr int FA_BM = FA_WARPS * 16; // query rows per block
constexpr float LOG2E = 1.4426950408889634f;

template <class A> struct FaArgs {
    const float *q;
    const A *k, *v;
    A *out;
    int T, pos0, rows, group, hd, window, qdim, kvdim;
    float qscale; // log2(e) / sqrt(hd)
    int vec;      // K/V rows may be copied in 16-byte pieces (hd a multiple of 8)
};

// Keys per tile: 64, or 32 at head_dim 256 (registers).
template <int HD> struct FaGeo {
    static constexpr int BN = HD >= 256 ? 32 : 64;
    static constexpr int LD = HD + 8; // row stride in shared memory (16 bytes of padding: conflict-free ldmatrix)
    static constexpr int Q_ELEMS = FA_BM * LD;
    static constexpr int KV_ELEMS = BN * LD;
    static constexpr int BYTES = (Q_ELEMS + 4 * KV_ELEMS) * 2; // Q, K[2], V[2]
};

__device__ __forceinline__ int first_key(int window, int p) {
    return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
}

// Tile [kb, kb + BN) of K and V into buffers ks, vs: cp.async when the rows
// allow 16-byte pieces, else plain loads; keys at or past n_valid and
// dimensions past hd are zeros (a NaN there would survive a zero weight).
template <class A, int HD>
__device__ __forceinline__ void load_kv(const FaArgs<A> &a, const A *kbase, const A *vbase, int kb, int n_valid,
                                        A *ks, A *vs) {
    typedef FaGeo<HD> G;
    constexpr int PIECES = HD / 8;
    for (int e = threadIdx.x; e < G::BN * PIECES; e += FA_THREADS) {
        const int j = e / PIECES, d0 = (e % PIECES) * 8, key = kb + j;
        const bool ok = key < n_valid && d0 < a.hd;
        const size_t off = (size_t)key * a.kvdim + d0;
        if (a.vec) {
            pq_cp_async16(ks + j * G::LD + d0, ok ? (const void *)(kbase + off) : (const void *)kbase, ok ? 16 : 0);
            pq_cp_async16(vs + j * G::LD + d0, ok ? (const void *)(vbase + off) : (const void *)vbase, ok ? 16 : 0);
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const bool in = ok && d0 + i < a.hd;
                ks[j * G::LD + d0 + i] = in ? kbase[off + i] : Act<A>::from_f(0.0f);
                vs[j * G::LD + d0 + i] = in ? vbase[off + i] : Act<A>::from_f(0.0f);
            }
        }
    }
}

template <class A, int HD> __global__ void __launch_bounds__(FA_THREADS) fa2_prefill(FaArgs<A> a) {
    typedef FaGeo<HD> G;
    constexpr int BN = G::BN, LD = G::LD, NS = BN / 8, ND = HD / 8;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    A *qs = (A *)smem_raw, *kbuf = qs + G::Q_ELEMS, *vbuf = kbuf + 2 * G::KV_ELEMS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q4 = lane & 3;
    const int bx = gridDim.x - 1 - blockIdx.x, kh = blockIdx.y; // last rows first
    const int r0 = bx * FA_BM, r_last = min(r0 + FA_BM, a.rows) - 1;
    const A *kbase = a.k + (size_t)kh * a.hd, *vbase = a.v + (size_t)kh * a.hd;
    const int n_valid = a.pos0 + a.T; // cache rows written

    // Q, scaled, into shared memory (rows past the last, dims past hd: 0)
    for (int e = threadIdx.x; e < FA_BM * HD; e += FA_THREADS) {
        const int i = e / HD, d = e % HD, r = r0 + i;
        float v = 0.0f;
        if (r < a.rows && d < a.hd) {
            const int t = r / a.group, h = kh * a.group + r % a.group;
            v = a.q[(size_t)t * a.qdim + (size_t)h * a.hd + d] * a.qscale;
        }
        qs[i * LD + d] = Act<A>::from_f(v);
    }

    // this thread's two rows and their visible keys
    const int ra = r0 + warp * 16 + g, rb = ra + 8;
    const int pa = ra < a.rows ? a.pos0 + ra / a.group : -1, pb = rb < a.rows ? a.pos0 + rb / a.group : -1;
    const int la = first_key(a.window, pa), lb = first_key(a.window, pb);
    // the warp's and the block's key ranges
    const int w_first = min(r0 + warp * 16, a.rows - 1), w_last = min(r0 + warp * 16 + 15, a.rows - 1);
    const int w_lo = first_key(a.window, a.pos0 + w_first / a.group), w_hi = a.pos0 + w_last / a.group;
    const int b_lo = first_key(a.window, a.pos0 + r0 / a.group), b_hi = a.pos0 + r_last / a.group;
    const int kt0 = b_lo / BN * BN, ntiles = (b_hi - kt0) / BN + 1;

    float o[ND][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int d = 0; d < ND; d++) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;

    load_kv<A, HD>(a, kbase, vbase, kt0, n_valid, kbuf, vbuf);
    pq_cp_async_commit();
    for (int j = 0; j < ntiles; j++) {
        const int kb = kt0 + j * BN, buf = j & 1;
        if (j + 1 < ntiles) { // the next tile into the other buffer (last read in tile j - 1)
            load_kv<A, HD>(a, kbase, vbase, kb + BN, n_valid, kbuf + (buf ^ 1) * G::KV_ELEMS,
                           vbuf + (buf ^ 1) * G::KV_ELEMS);
            pq_cp_async_commit();
            pq_cp_async_wait<1>();
        } else {
            pq_cp_async_wait<0>();
        }
        __syncthreads(); // tile j (and Q) visible to every warp
        if (r0 + warp * 16 < a.rows && kb <= w_hi && kb + BN - 1 >= w_lo) {
            const A *ks = kbuf + buf * G::KV_ELEMS, *vs = vbuf + buf * G::KV_ELEMS;
            // S = Q K^T
            float s[NS][4];
#pragma unroll
            for (int n = 0; n < NS; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < HD / 16; kk++) {
                uint32_t qa[4];
                pq_ldmatrix_x4(qa, qs + (warp * 16 + (lane & 7) + 8 * ((lane >> 3) & 1)) * LD + kk * 16 + 8 * (lane >> 4));
#pragma unroll
                for (int np = 0; np < BN / 16; np++) {
                    uint32_t kf[4];
                    pq_ldmatrix_x4(kf, ks + (np * 16 + (lane & 7) + 8 * (lane >> 4)) * LD + kk * 16 + 8 * ((lane >> 3) & 1));
                    pq_mma<A>(s[2 * np], qa[0], qa[1], qa[2], qa[3], kf[0], kf[1]);
                    pq_mma<A>(s[2 * np + 1], qa[0], qa[1], qa[2], qa[3], kf[2], kf[3]);
                }
            }
            // mask, row maxima
            float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int n = 0; n < NS; n++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int key = kb + n * 8 + 2 * q4 + (i & 1), hi = i >> 1;
                    const bool vis = hi ? key >= lb && key <= pb : key >= la && key <= pa;
                    s[n][i] = vis ? s[n][i] : -INFINITY;
                    mx[hi] = fmaxf(mx[hi], s[n][i]);
                }
            float alpha[2], mu[2];
#pragma unroll
            for (int hi = 0; hi < 2; hi++) {
                mx[hi] = fmaxf(mx[hi], __shfl_xor_sync(0xffffffffu, mx[hi], 1));
                mx[hi] = fmaxf(mx[hi], __shfl_xor_sync(0xffffffffu, mx[hi], 2));
                const float mn = fmaxf(m[hi], mx[hi]);
                mu[hi] = mn == -INFINITY ? 0.0f : mn; // nothing visible yet: every weight is 0
                alpha[hi] = exp2f(m[hi] - mu[hi]);
                m[hi] = mn;
                l[hi] *= alpha[hi];
            }
#pragma unroll
            for (int n = 0; n < NS; n++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    s[n][i] = exp2f(s[n][i] - mu[i >> 1]);
                    l[i >> 1] += s[n][i];
                }
#pragma unroll
            for (int d = 0; d < ND; d++) {
                o[d][0] *= alpha[0], o[d][1] *= alpha[0];
                o[d][2] *= alpha[1], o[d][3] *= alpha[1];
            }
            // O += P V
#pragma unroll
            for (int kc = 0; kc < BN / 16; kc++) {
                const uint32_t p0 = pq_pack2(Act<A>::from_f2(s[2 * kc][0], s[2 * kc][1]));
                const uint32_t p1 = pq_pack2(Act<A>::from_f2(s[2 * kc][2], s[2 * kc][3]));
                const uint32_t p2 = pq_pack2(Act<A>::from_f2(s[2 * kc + 1][0], s[2 * kc + 1][1]));
                const uint32_t p3 = pq_pack2(Act<A>::from_f2(s[2 * kc + 1][2], s[2 * kc + 1][3]));
#pragma unroll
                for (int dp = 0; dp < HD / 16; dp++) {
                    uint32_t vf[4];
                    pq_ldmatrix_x4_trans(vf, vs + (kc * 16 + (lane & 7) + 8 * ((lane >> 3) & 1)) * LD + dp * 16 + 8 * (lane >> 4));
                    pq_mma<A>(o[2 * dp], p0, p1, p2, p3, vf[0], vf[1]);
                    pq_mma<A>(o[2 * dp + 1], p0, p1, p2, p3, vf[2], vf[3]);
                }
            }
        }
        __syncthreads(); // every warp is done with buffer `buf` before it is refilled
    }

    // l over the 4 lanes of a row, then out = O / l
#pragma unroll
    for (int hi = 0; hi < 2; hi++) {
        l[hi] += __shfl_xor_sync(0xffffffffu, l[hi], 1);
        l[hi] += __shfl_xor_sync(0xffffffffu, l[hi], 2);
    }
#pragma unroll
    for (int hi = 0; hi < 2; hi++) {
        const int r = hi ? rb : ra;
        if (r >= a.rows || !(l[hi] > 0.0f)) continue; // l >= 1 for a real row: key p itself is visible
        const int t = r / a.group, h = kh * a.group + r % a.group;
        A *orow = a.out + (size_t)t * a.qdim + (size_t)h * a.hd;
        const float inv = 1.0f / l[hi];
#pragma unroll
        for (int d = 0; d < ND; d++) {
            const int dim = d * 8 + 2 * q4;
            if (dim < a.hd) // hd is even: dim + 1 < hd too
                *(typename Act<A>::T2 *)(orow + dim) = Act<A>::from_f2(o[d][2 * hi] * inv, o[d][2 * hi + 1] * inv);
        }
    }
}

template <class A, int HD> pq_status launch_fa2(const FaArgs<A> &a, int n_kv, cudaStream_t st) {
    auto k = fa2_prefill<A, HD>;
    constexpr int bytes = FaGeo<HD>::BYTES;
    static bool attr_set = false; // the same value from every thread: a benign race
    if (!attr_set) {
        PQ_CUDA_TRY(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
        attr_set = true;
    }
    const dim3 grid((unsigned)((a.rows + FA_BM - 1) / FA_BM), (unsigned)n_kv);
    k<<<grid, FA_THREADS, bytes, st>>>(a);
    PQ_CUDA_LAUNCHED("fa2_prefill");
    return PQ_OK;
}

template <class A>
pq_status prefill(const pq_attn_shape *s, const float *d_q, const uint16_t *d_k, const uint16_t *d_v, int T, int pos0,
                  uint16_t *d_out, cudaStream_t st) {
    FaArgs<A> a;
    a.q = d_q, a.k = (const A *)d_k, a.v = (const A *)d_v, a.out = (A *)d_out;
    a.T = T, a.pos0 = pos0, a.group = s->n_heads / s->n_kv, a.rows = T * a.group, a.hd = s->head_dim;
    a.window = s->window, a.qdim = s->n_heads * s->head_dim, a.kvdim = s->n_kv * s->head_dim;
    a.qscale = (float)(LOG2E / sqrt((double)s->head_dim));
    a.vec = s->head_dim % 8 == 0 && (uintptr_t)d_k % 16 == 0 && (uintptr_t)d_v % 16 == 0;
    const int hd = s->head_dim;
    if (hd <= 32) return launch_fa2<A, 32>(a, s->n_kv, st);
    if (hd <= 64) return launch_fa2<A, 64>(a, s->n_kv, st);
    if (hd <= 128) return launch_fa2<A, 128>(a, s->n_kv, st);
    return launch_fa2<A, 256>(a, s->n_kv, st);
}

} // namespace

static pq_status check_shape(const pq_attn_shape *s, int T, int pos0) {
    const int hd = s->head_dim;
    PQ_FAIL_IF(hd < 2 || hd % 2 || hd > PQ_ATTN_CUDA_MAX_HD, PQ_ERR_ARG,
               "head_dim %d is not supported by the CUDA attention kernel (even, at most %d)", hd,
               PQ_ATTN_CUDA_MAX_HD);
    PQ_FAIL_IF(s->n_heads < 1 || s->n_kv < 1 || s->n_heads % s->n_kv || s->n_kv > 65535, PQ_ERR_ARG,
               "attention with %d query heads over %d key/value heads is not supported", s->n_heads, s->n_kv);
    PQ_FAIL_IF(T < 0 || pos0 < 0, PQ_ERR_ARG, "attention over %d tokens at position %d", T, pos0);
    return PQ_OK;
}

pq_status pq_attention_prefill_cuda(const pq_attn_shape *s, pq_act_dtype dt, const float *d_q, const uint16_t *d_k,
                                    const uint16_t *d_v, int T, int pos0, uint16_t *d_out, void *stream) {
    PQ_TRY(check_shape(s, T, pos0));
    if (T == 0) return PQ_OK;
    pq_status st = PQ_OK;
    PQ_ACT_DISPATCH(dt, st = prefill<A>(s, d_q, d_k, d_v, T, pos0, d_out, (cudaStream_t)stream));
    return st;
}

pq_status pq_attention_cuda(const pq_attn_shape *s, pq_act_dtype dt, const float *d_q, const uint16_t *d_k,
                            const uint16_t *d_v, int T, int pos0, const int32_t *d_pos, int n_ctx, uint16_t *d_out,
                            void *d_ws, void *stream) {
    PQ_TRY(check_shape(s, T, pos0));
    PQ_FAIL_IF(d_pos && T != 1, PQ_ERR_ARG, "attention of %d tokens at a device position", T);
    PQ_FAIL_IF(!d_pos && pos0 + T > n_ctx, PQ_ERR_ARG, "attention over %d tokens at position %d in a cache of %d", T,
               pos0, n_ctx);
    if (T == 1) return pq_attention_decode_cuda(s, dt, d_q, d_k, d_v, pos0, d_pos, n_ctx, d_out, d_ws, stream);
    return pq_attention_prefill_cuda(s, dt, d_q, d_k, d_v, T, pos0, d_out, stream);
}
