// Fused dequantizing GEMVs on the GPU (kernels/quant_cuda.h).
//
// The tensor-core GEMV, y[t][r] = sum_c W[r][c] x[t][c] for T <= 8 tokens:
// a block of 8 warps owns 16 consecutive rows (the m of one m16n8k16 tile);
// the 8 warps split the columns into contiguous ranges of 16-word chunks and
// add their partial sums in shared memory at the end (in a fixed order: no
// atomics). In the tile, lane (g = lane / 4, q = lane % 4) loads, per chunk,
// one 16-byte vector (words 4q..4q+3 of the chunk) of row g and one of row
// g + 8, four chunks before it uses any (8 x 16 bytes in flight per thread),
// so a block streams 16 contiguous rows and every 32-byte sector it touches
// is used whole. Each word is dequantized to FP16 pairs in registers; the
// k index of the tile is free to stand for any column as long as A (the
// weight) and B (x) agree, so a lane's k slots {2q, 2q+1, 2q+8, 2q+9} hold
// the codes of its own word in the order the bit tricks produce them, and B
// (token n = g) holds x of the same columns:
//   4 bits  pairs (c0,c4), (c1,c5) | (c2,c6), (c3,c7): two tiles per word,
//           x permuted to match with byte_perm;
//   8 bits  pairs (c0,c1) | (c2,c3): one tile per word, x as it lies.
// Codes become FP16 with the magic-number trick (0x6400 | q is 1024 + q),
// minus 1024 + zero, exactly; FP8 through cvt.rn.f16x2.e4m3x2 (exact). The
// tile accumulates in f32, and the products of FP16 values are exact.
//
// Why tensor cores for a GEMV: a 4-bit weight is 0.5 byte, and at H200's
// ~4.8 TB/s an SM must retire ~37 codes per clock; the FP32 pipes would
// need 3 instructions per code just to decode and multiply (mask, exact
// int->float, FMA), about the whole issue budget. Here a code costs ~1.6
// instructions (shift + lop3 + half2 sub/scale per pair) and the multiply
// is nearly free, which leaves room to stay memory-bound.
#include "kernels/cuda_util.cuh"

#include <cuda_fp8.h>

#include "kernels/quant_cuda.h"

namespace {

enum Fmt { Q4, Q8, I8, F8 };

constexpr int WARPS = 8;        // warps per block, each a range of the columns
constexpr int ROWS = 16;        // rows per block
constexpr int CHUNK = 16;       // words per row and chunk: 4 lanes x one 16-byte vector
constexpr int UNROLL = 4;       // chunks in flight per warp
constexpr int GEN_ROWS = 8;     // generic kernel: one warp per row, 8 rows per block

struct GemvArgs {
    pq_qpack_dev qp;            // QPACK: the weight's layout (kernels/linear_cuda.h)
    pq_bytes_dev qb;            // INT8 / FP8: the weight's layout
    const uint32_t *w;          // the words streamed: qp.packed, or qb.q's bytes seen as words
    int ldw, rows, cols, nchunks; // words per row of w (qp.ldw, qb.ldq / 4), shape, 16-word chunks per row
    const __half *x;            // [T][cols]
    int T, xvec;                // xvec: rows of x may be read as aligned vectors
    const float *bias;
    float *y;                   // [T][rows]
};

__device__ __forceinline__ __half2 h2(uint32_t u) {
    __half2 h;
    memcpy(&h, &u, 4);
    return h;
}
__device__ __forceinline__ uint32_t u32(__half2 h) {
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
}
__device__ __forceinline__ uint32_t bcast(uint32_t half_bits) { return half_bits * 0x10001u; }

// A streaming 16-byte load: read once, not kept in L1.
__device__ __forceinline__ uint4 ld_stream(const uint32_t *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

__device__ __forceinline__ uint32_t word_of(const uint4 &v, int k) {
    return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

// d += a b for one m16n8k16 tile: FP16 a (4 registers) and b (2), f32 d.
__device__ __forceinline__ void mma(float d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <class S> __device__ __forceinline__ float scale_f32(const void *s, size_t i);
template <> __device__ __forceinline__ float scale_f32<float>(const void *s, size_t i) {
    return __ldg((const float *)s + i);
}
template <> __device__ __forceinline__ float scale_f32<__half>(const void *s, size_t i) {
    return __half2float(__ldg((const __half *)s + i));
}
template <class S> __device__ __forceinline__ uint32_t scale_h2(const void *s, size_t i);
template <> __device__ __forceinline__ uint32_t scale_h2<float>(const void *s, size_t i) {
    return u32(__float2half2_rn(__ldg((const float *)s + i)));
}
template <> __device__ __forceinline__ uint32_t scale_h2<__half>(const void *s, size_t i) {
    return bcast(__ldg((const unsigned short *)s + i));
}

// What dequantizes the words of one 16-byte vector of one row: the zero
// point as FP16 pairs (1024 + z; 4 bits also -(64 + z) for the codes the
// mask leaves multiplied by 16) and, per group, the scale pair.
struct Konst {
    uint32_t zlo, zhi, s2;
};

template <Fmt F, bool GROUPED, class S>
__device__ __forceinline__ Konst konst(const GemvArgs &a, int row, int code0) {
    Konst k = {0, 0, 0};
    if constexpr (F == Q4 || F == Q8) {
        int gi = 0;
        if constexpr (GROUPED) gi = min(code0 / a.qp.group, a.qp.ngroups - 1); // padding columns: any group (x is 0)
        size_t i = (size_t)row * a.qp.ngroups + gi;
        uint32_t z = a.qp.zeros ? __ldg(a.qp.zeros + i) : 1u << (a.qp.bits - 1);
        k.zlo = bcast(0x6400u + z);                          // 1024 + z
        if constexpr (F == Q4) k.zhi = bcast(0xd400u + 16u * z); // -(64 + z)
        if constexpr (GROUPED) k.s2 = scale_h2<S>(a.qp.scales, i);
    } else if constexpr (F == I8) {
        k.zlo = bcast(0x6480u); // codes are made unsigned (q + 128): 1024 + 128
    }
    return k;
}

// One word -> its codes as FP16 pairs in the order of the file comment.
template <Fmt F, bool GROUPED>
__device__ __forceinline__ void dequant(uint32_t w, const Konst &k, uint32_t h[4]) {
    if constexpr (F == Q4) {
        const uint32_t MAGIC = 0x64006400u, LO = 0x000f000fu, HI = 0x00f000f0u;
        const __half2 sixteenth = h2(0x2c002c00u); // 1/16
        uint32_t t = w >> 8;
        __half2 v0 = __hsub2(h2((w & LO) | MAGIC), h2(k.zlo));                // (c0, c4) - z
        __half2 v1 = __hfma2(h2((w & HI) | MAGIC), sixteenth, h2(k.zhi));     // (c1, c5) - z
        __half2 v2 = __hsub2(h2((t & LO) | MAGIC), h2(k.zlo));                // (c2, c6) - z
        __half2 v3 = __hfma2(h2((t & HI) | MAGIC), sixteenth, h2(k.zhi));     // (c3, c7) - z
        if constexpr (GROUPED) {
            v0 = __hmul2(v0, h2(k.s2));
            v1 = __hmul2(v1, h2(k.s2));
            v2 = __hmul2(v2, h2(k.s2));
            v3 = __hmul2(v3, h2(k.s2));
        }
        h[0] = u32(v0), h[1] = u32(v1), h[2] = u32(v2), h[3] = u32(v3);
    } else if constexpr (F == Q8 || F == I8) {
        if constexpr (F == I8) w ^= 0x80808080u;
        __half2 v0 = __hsub2(h2(__byte_perm(w, 0x64646464u, 0x5140)), h2(k.zlo)); // (c0, c1) - z
        __half2 v1 = __hsub2(h2(__byte_perm(w, 0x64646464u, 0x5342)), h2(k.zlo)); // (c2, c3) - z
        if constexpr (GROUPED) {
            v0 = __hmul2(v0, h2(k.s2));
            v1 = __hmul2(v1, h2(k.s2));
        }
        h[0] = u32(v0), h[1] = u32(v1);
    } else {
        __half2_raw r0 = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w & 0xffffu), __NV_E4M3);
        __half2_raw r1 = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w >> 16), __NV_E4M3);
        h[0] = (uint32_t)r0.x | (uint32_t)r0.y << 16; // (c0, c1)
        h[1] = (uint32_t)r1.x | (uint32_t)r1.y << 16; // (c2, c3)
    }
}

// x of token g at the columns of word `word`, paired as dequant pairs the
// codes; 0 past cols and for g >= T (has_x false).
template <Fmt F>
__device__ __forceinline__ void x_pairs(const GemvArgs &a, const __half *xg, bool has_x, int word, uint32_t p[4]) {
    constexpr int CODES = F == Q4 ? 8 : 4;
    const int c0 = word * CODES;
    uint32_t r[CODES / 2];
    const bool any = has_x && c0 < a.cols;
    if (any && a.xvec) { // c0 + CODES <= cols: cols is a multiple of CODES
        if constexpr (CODES == 8) {
            uint4 v = __ldg((const uint4 *)(xg + c0));
            r[0] = v.x, r[1] = v.y, r[2] = v.z, r[3] = v.w;
        } else {
            uint2 v = __ldg((const uint2 *)(xg + c0));
            r[0] = v.x, r[1] = v.y;
        }
    } else {
        const unsigned short *xs = (const unsigned short *)xg;
#pragma unroll
        for (int i = 0; i < CODES / 2; i++) {
            uint32_t lo = any && c0 + 2 * i < a.cols ? __ldg(xs + c0 + 2 * i) : 0u;
            uint32_t hi = any && c0 + 2 * i + 1 < a.cols ? __ldg(xs + c0 + 2 * i + 1) : 0u;
            r[i] = lo | hi << 16;
        }
    }
    if constexpr (F == Q4) {
        p[0] = __byte_perm(r[0], r[2], 0x5410); // (x0, x4)
        p[1] = __byte_perm(r[0], r[2], 0x7632); // (x1, x5)
        p[2] = __byte_perm(r[1], r[3], 0x5410); // (x2, x6)
        p[3] = __byte_perm(r[1], r[3], 0x7632); // (x3, x7)
    } else {
        p[0] = r[0], p[1] = r[1];               // (x0, x1), (x2, x3)
    }
}

template <Fmt F, bool GROUPED, class S>
__device__ __forceinline__ float row_scale(const GemvArgs &a, int row) {
    if constexpr (F == Q4 || F == Q8) return scale_f32<S>(a.qp.scales, (size_t)row); // one group: ng == 1
    else return __ldg(a.qb.scales + (a.qb.per_channel ? row : 0));
}

template <Fmt F, bool GROUPED, class S>
__global__ void __launch_bounds__(WARPS * 32) gemv_tc(GemvArgs a) {
    constexpr int CODES = F == Q4 ? 8 : 4;
    constexpr int PAIRS = CODES / 2;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int r0 = blockIdx.x * ROWS;
    const int ra = min(r0 + g, a.rows - 1), rb = min(r0 + g + 8, a.rows - 1); // rows past the end: reread, not stored
    const uint32_t *wa = a.w + (size_t)ra * a.ldw, *wb = a.w + (size_t)rb * a.ldw;
    const int per = (a.nchunks + WARPS - 1) / WARPS, cb = warp * per, ce = min(cb + per, a.nchunks);
    const bool has_x = g < a.T;
    const __half *xg = a.x + (size_t)(has_x ? g : 0) * a.cols;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    Konst ka[UNROLL], kb[UNROLL];
    if constexpr (!GROUPED) {
        ka[0] = konst<F, GROUPED, S>(a, ra, 0);
        kb[0] = konst<F, GROUPED, S>(a, rb, 0);
    }
    for (int c = cb; c < ce; c += UNROLL) {
        uint4 va[UNROLL], vb[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int word0 = (c + u) * CHUNK + 4 * q;
            if (c + u < ce) {
                va[u] = ld_stream(wa + word0);
                vb[u] = ld_stream(wb + word0);
                if constexpr (GROUPED) {
                    ka[u] = konst<F, GROUPED, S>(a, ra, word0 * CODES);
                    kb[u] = konst<F, GROUPED, S>(a, rb, word0 * CODES);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            if (c + u >= ce) break; // the same for the whole warp
            const Konst &kau = GROUPED ? ka[u] : ka[0], &kbu = GROUPED ? kb[u] : kb[0];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                uint32_t xp[4], ha[4], hb[4];
                x_pairs<F>(a, xg, has_x, (c + u) * CHUNK + 4 * q + k, xp);
                dequant<F, GROUPED>(word_of(va[u], k), kau, ha);
                dequant<F, GROUPED>(word_of(vb[u], k), kbu, hb);
#pragma unroll
                for (int p = 0; p < PAIRS; p += 2) mma(acc, ha[p], hb[p], ha[p + 1], hb[p + 1], xp[p], xp[p + 1]);
            }
        }
    }
    // acc: (row g, token 2q), (row g, 2q + 1), (row g + 8, 2q), (row g + 8, 2q + 1)
    __shared__ float4 red[WARPS][32];
    red[warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    __syncthreads();
    if (threadIdx.x < 128) {
        const int l = threadIdx.x >> 2, i = threadIdx.x & 3;
        float s = 0.0f;
#pragma unroll
        for (int w = 0; w < WARPS; w++) s += ((const float *)&red[w][l])[i];
        const int row = r0 + (l >> 2) + (i >= 2 ? 8 : 0), tok = 2 * (l & 3) + (i & 1);
        if (row < a.rows && tok < a.T) {
            if constexpr (!GROUPED) s *= row_scale<F, GROUPED, S>(a, row);
            if (a.bias) s += a.bias[row];
            a.y[(size_t)tok * a.rows + row] = s;
        }
    }
}

// The generic GEMV: one warp per row, the specification's arithmetic.
template <class S>
__global__ void __launch_bounds__(GEN_ROWS * 32) gemv_generic(GemvArgs a) {
    const int row = blockIdx.x * GEN_ROWS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= a.rows) return; // whole warps leave; nothing below synchronizes the block
    const int per = 32 / a.qp.bits, words = (a.cols + per - 1) / per;
    const uint32_t mask = (1u << a.qp.bits) - 1u;
    const int one_group = a.qp.group >= a.cols;
    const int32_t *gidx = a.qp.gidx;
    const uint32_t *wr = a.w + (size_t)row * a.ldw;
    float acc[PQ_CUDA_GEMV_T];
#pragma unroll
    for (int t = 0; t < PQ_CUDA_GEMV_T; t++) acc[t] = 0.0f;
    for (int j = lane; j < words; j += 32) {
        const uint32_t word = __ldg(wr + j);
        for (int i = 0; i < per; i++) {
            const int c = j * per + i;
            if (c >= a.cols) break;
            const int gi = gidx ? __ldg(gidx + c) : one_group ? 0 : c / a.qp.group;
            const size_t si = (size_t)row * a.qp.ngroups + gi;
            const int z = a.qp.zeros ? (int)__ldg(a.qp.zeros + si) : 1 << (a.qp.bits - 1);
            const float wv = scale_f32<S>(a.qp.scales, si) * (float)((int)((word >> (i * a.qp.bits)) & mask) - z);
#pragma unroll
            for (int t = 0; t < PQ_CUDA_GEMV_T; t++)
                if (t < a.T) acc[t] += wv * __half2float(a.x[(size_t)t * a.cols + c]);
        }
    }
#pragma unroll
    for (int t = 0; t < PQ_CUDA_GEMV_T; t++) {
        float v = acc[t];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0 && t < a.T) a.y[(size_t)t * a.rows + row] = v + (a.bias ? a.bias[row] : 0.0f);
    }
}

GemvArgs args_of(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y) {
    GemvArgs a;
    memset(&a, 0, sizeof a);
    a.rows = L->rows, a.cols = L->cols;
    a.qp = L->qp, a.qb = L->qb;
    if (L->fmt == PQ_W_QPACK) a.w = L->qp.packed, a.ldw = L->qp.ldw;
    else a.w = (const uint32_t *)L->qb.q, a.ldw = L->qb.ldq / 4;
    a.nchunks = a.ldw / CHUNK;
    a.x = (const __half *)d_x, a.T = T;
    a.bias = L->d_bias, a.y = d_y;
    return a;
}

template <Fmt F, bool GROUPED, class S> pq_status launch_tc(const GemvArgs &a, cudaStream_t st) {
    gemv_tc<F, GROUPED, S><<<(unsigned)((a.rows + ROWS - 1) / ROWS), WARPS * 32, 0, st>>>(a);
    PQ_CUDA_LAUNCHED("gemv_tc");
    return PQ_OK;
}

template <Fmt F> pq_status launch_qpack(const pq_linear_cuda *L, const GemvArgs &a, cudaStream_t st) {
    if (L->qp.ngroups == 1)
        return L->qp.scales_f16 ? launch_tc<F, false, __half>(a, st) : launch_tc<F, false, float>(a, st);
    return L->qp.scales_f16 ? launch_tc<F, true, __half>(a, st) : launch_tc<F, true, float>(a, st);
}

// Whether the tensor-core GEMV takes this QPACK weight: 4 or 8 bits, no
// g_idx, and every 16-byte vector of a row in one group.
int qpack_tc_ok(const pq_linear_cuda *L) {
    const pq_qpack_dev *q = &L->qp;
    if ((q->bits != 4 && q->bits != 8) || q->gidx) return 0;
    return q->ngroups == 1 || q->group % (4 * (32 / q->bits)) == 0;
}

} // namespace

pq_status pq_qpack_gemv_generic_cuda(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y,
                                     void *stream) {
    PQ_FAIL_IF(L->fmt != PQ_W_QPACK, PQ_ERR_ARG, "generic GEMV of weight format %d", (int)L->fmt);
    PQ_FAIL_IF(T < 1 || T > PQ_CUDA_GEMV_T, PQ_ERR_ARG, "GEMV of %d tokens (1..%d)", T, PQ_CUDA_GEMV_T);
    GemvArgs a = args_of(L, d_x, T, d_y);
    unsigned blocks = (unsigned)((L->rows + GEN_ROWS - 1) / GEN_ROWS);
    if (L->qp.scales_f16) gemv_generic<__half><<<blocks, GEN_ROWS * 32, 0, (cudaStream_t)stream>>>(a);
    else gemv_generic<float><<<blocks, GEN_ROWS * 32, 0, (cudaStream_t)stream>>>(a);
    PQ_CUDA_LAUNCHED("gemv_generic");
    return PQ_OK;
}

pq_status pq_qlinear_gemv_cuda(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y, void *stream) {
    PQ_FAIL_IF(T < 1 || T > PQ_CUDA_GEMV_T, PQ_ERR_ARG, "GEMV of %d tokens (1..%d)", T, PQ_CUDA_GEMV_T);
    PQ_FAIL_IF(L->act.type != PQ_ACTQ_NONE, PQ_ERR_ARG, "weight-only GEMV of a W8A8 linear");
    cudaStream_t st = (cudaStream_t)stream;
    GemvArgs a = args_of(L, d_x, T, d_y);
    const int codes = L->fmt == PQ_W_QPACK && L->qp.bits == 4 ? 8 : 4; // columns per word
    a.xvec = L->cols % codes == 0 && (uintptr_t)d_x % (2 * codes) == 0;
    switch (L->fmt) {
    case PQ_W_QPACK:
        if (!qpack_tc_ok(L)) return pq_qpack_gemv_generic_cuda(L, d_x, T, d_y, stream);
        return L->qp.bits == 4 ? launch_qpack<Q4>(L, a, st) : launch_qpack<Q8>(L, a, st);
    case PQ_W_INT8: return launch_tc<I8, false, float>(a, st);
    case PQ_W_FP8: return launch_tc<F8, false, float>(a, st);
    case PQ_W_DENSE: break;
    }
    return PQ_FAIL(PQ_ERR_ARG, "GEMV of weight format %d", (int)L->fmt);
}
