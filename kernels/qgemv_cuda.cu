// Fused dequantizing GEMVs on the GPU (kernels/quant_cuda.h): the tiled
// tensor-core GEMV of 1..32 tokens, the generic GEMV of the rows layout, the
// column gather of x.
//
// The tiled GEMV. Block: 4 warps, 64 rows (warp w: tile 4 blockIdx.x + w of
// kernels/linear_cuda.h's layout), the stages [s0, s1) of a row's split-K
// slice blockIdx.y. Per stage (256 codes of a row at 4 bits, 128 at 8) the
// block copies into a ring of STAGES shared-memory buffers, by cp.async,
// STAGES - 1 stages ahead of the one it multiplies:
//   W  the 4 tiles' 512 words (8 KB), as stored;
//   X  the stage's columns of x for tokens 0..8 NT - 1 (zero past T and
//      past cols), rows padded by 64 bytes so that the 8 tokens a warp
//      reads at once fall in different banks;
//   S, Z  the scales and zero points of the stage's groups (grouped QPACK).
// Lane (g = lane / 4, q = lane % 4) of warp w reads, per chunk c of the
// stage, one 16-byte vector of row g and one of row g + 8 (words k = 0..3),
// turns word k into exact 16-bit values q - zero in registers (the
// magic-number tricks below) and multiplies them with x of the same columns
// of token 8 nt + g (B's column g) on the tensor cores (mma.sync m16n8k16,
// f32 accumulation): a lane's k slots {2q, 2q + 1, 2q + 8, 2q + 9} carry
// the columns of its own word, in the pairs the tricks produce, and B
// carries x of the same columns as it lies in memory. At each k the four
// lanes of a row hold four consecutive words, one group block (32 codes at 4
// bits, 16 at 8): for a grouped weight each block is summed alone (products
// exact, f32 sum) and added times its f32 group scale; per-row scales (one
// group, INT8, FP8) multiply the f32 sum at the end. Two accumulator sets
// alternate between the k steps of per-row formats (shorter dependent
// chains). Without split-K the block writes y; with it, its partial sums,
// and the last slice to arrive (a counter per row block) adds the slices'
// partials in slice order (deterministic; the counter is reset for the
// next launch).
//
// Why the tensor cores for a GEMV: a 4-bit weight is 0.5 byte, and at
// H200's ~4.8 TB/s an SM must retire ~37 codes per clock; the FP32 pipes
// would need ~3 instructions per code to decode and multiply, about the
// whole issue budget. Here a code costs ~1 instruction (lop3 + sub per
// pair) and the multiply-adds are nearly free.
//
// Not measured on a GPU yet (docs/PERFORMANCE.md): the shared-memory reads
// of x grow with the token count (16 bytes per lane, k step and 8 tokens),
// so at T = 17..32 they, not HBM, may bound the kernel; ncu in
// tests/gpu_check.sh says which.
#include "kernels/cuda_act.cuh"

#include <cuda_fp8.h>

#include "kernels/quant_cuda.h"

namespace {

enum Fmt { Q4, Q8, I8, F8 };

constexpr int WARPS = 4;                          // warps per block, one tile of 16 rows each
constexpr int BLOCK_ROWS = WARPS * PQ_TILE_ROWS;  // 64
constexpr int THREADS = WARPS * 32;
constexpr int GEN_ROWS = 8;                       // generic kernel: one warp per row, 8 rows per block
constexpr int XPAD = 32;                          // halves of padding per staged token row (64 bytes)
constexpr int TARGET_BLOCKS_PER_SM = 4;           // split-K aims at this many blocks per SM

template <Fmt F> struct Info {
    static constexpr int CODES = F == Q4 ? 8 : 4;                       // codes per word
    static constexpr int SC = PQ_TILE_STAGE_WORDS * CODES;              // codes per stage and row
    static constexpr int BLOCK = 4 * CODES;                             // codes per group block (one k step)
    static constexpr int GPS = SC / BLOCK;                              // most groups in one stage
};

template <int NT> struct Geo {
    static constexpr int STAGES = NT == 1 ? 4 : 3;
};

struct GemvArgs {
    const uint32_t *w;          // the tiled words
    const void *scales;         // grouped / one-group QPACK: tiled [tiles][ngroups][16]; I8 / F8: [rows] or [1] f32
    const uint8_t *zeros;       // tiled [tiles][ngroups][16] or NULL
    int scales_f16, per_channel;
    int rows, cols, ntiles, nst; // shape, 16-row tiles, stages per row
    int bits, group, ngroups;   // QPACK: symmetric zero 2^(bits-1); group in codes (grouped only)
    int gshift;                 // log2(group) when a group is shorter than a stage (then a power of two)
    const uint16_t *x;          // [T][ldx] 16-bit, rows 16-byte aligned (ldx a multiple of 8)
    int ldx, T;
    int per_split, splits;      // stages per slice, slices
    const float *bias;
    float *y;                   // [T][rows]
    float *partial;             // [splits][T][rows] (splits > 1)
    int *counters;              // [gridDim.x] (splits > 1)
};

__device__ __forceinline__ uint32_t bcast(uint32_t half_bits) { return half_bits * 0x10001u; }

template <class T2> __device__ __forceinline__ T2 as2(uint32_t u) {
    T2 h;
    memcpy(&h, &u, 4);
    return h;
}

// ---- dequantization: a word -> exact (q - zero) pairs of the activation type ----------------------

// What turns a word's codes into q - zero: per format and type, the
// constants of the row's zero point (see dequant).
struct Zc {
    uint32_t lo, hi;
    float f;
};

template <Fmt F, class A> __device__ __forceinline__ Zc zconst(uint32_t z) {
    Zc k = {0, 0, 0.0f};
    if constexpr (F == Q4) {
        if constexpr (std::is_same<A, __half>::value) {
            k.lo = bcast(0x6400u + z);       // 1024 + z
            k.hi = bcast(0xd400u + 16u * z); // -(64 + z)
        } else {
            k.lo = bcast(0x4300u + z);       // 128 + z (bf16: an ulp of 1 below 256)
        }
    } else if constexpr (F == Q8 || F == I8) {
        if constexpr (std::is_same<A, __half>::value) k.lo = bcast(0x6400u + z); // 1024 + z
        else k.f = 8388608.0f + (float)z;                                         // 2^23 + z
    }
    return k;
}

// Code pairs of word w as A pairs (q - zero), exact: 4 bits -> 4 pairs (c0,
// c1), (c2, c3), (c4, c5), (c6, c7) (the nibble order of the tiled layout);
// 8 bits -> 2 pairs (c0, c1), (c2, c3).
template <Fmt F, class A> __device__ __forceinline__ void dequant(uint32_t w, const Zc &k, uint32_t h[4]) {
    typedef typename Act<A>::T2 T2;
    if constexpr (F == Q4 && std::is_same<A, __half>::value) {
        // 0x6400 | n is the half 1024 + n; a nibble left in bits 4..7 gives
        // 1024 + 16 n, which times 1/16 is 64 + n: all exact
        const uint32_t MAGIC = 0x64006400u, LO = 0x000f000fu, HI = 0x00f000f0u;
        const __half2 sixteenth = as2<__half2>(0x2c002c00u);
        const uint32_t t = w >> 8;
        h[0] = pq_pack2(__hsub2(as2<__half2>((w & LO) | MAGIC), as2<__half2>(k.lo)));
        h[1] = pq_pack2(__hfma2(as2<__half2>((w & HI) | MAGIC), sixteenth, as2<__half2>(k.hi)));
        h[2] = pq_pack2(__hsub2(as2<__half2>((t & LO) | MAGIC), as2<__half2>(k.lo)));
        h[3] = pq_pack2(__hfma2(as2<__half2>((t & HI) | MAGIC), sixteenth, as2<__half2>(k.hi)));
    } else if constexpr (F == Q4) {
        // 0x4300 | n is the bfloat16 128 + n for n < 128
        const uint32_t MAGIC = 0x43004300u, LO = 0x000f000fu;
#pragma unroll
        for (int i = 0; i < 4; i++)
            h[i] = pq_pack2(__hsub2(as2<T2>(((w >> (4 * i)) & LO) | MAGIC), as2<T2>(k.lo)));
    } else if constexpr ((F == Q8 || F == I8) && std::is_same<A, __half>::value) {
        if constexpr (F == I8) w ^= 0x80808080u; // signed codes made unsigned: q + 128 (zero 128)
        h[0] = pq_pack2(__hsub2(as2<__half2>(__byte_perm(w, 0x64646464u, 0x5140)), as2<__half2>(k.lo)));
        h[1] = pq_pack2(__hsub2(as2<__half2>(__byte_perm(w, 0x64646464u, 0x5342)), as2<__half2>(k.lo)));
    } else if constexpr (F == Q8 || F == I8) {
        // 8-bit codes do not fit bfloat16's 8 significant bits above 256:
        // through f32 (0x4b0000nn is 2^23 + n), then exact to bfloat16
        // (|q - zero| <= 255)
        if constexpr (F == I8) w ^= 0x80808080u;
        float f[4];
#pragma unroll
        for (int i = 0; i < 4; i++) f[i] = __uint_as_float(__byte_perm(w, 0x4b000000u, 0x7540 + i)) - k.f;
        h[0] = pq_pack2(__floats2bfloat162_rn(f[0], f[1]));
        h[1] = pq_pack2(__floats2bfloat162_rn(f[2], f[3]));
    } else { // F8: E4M3 -> FP16 is exact, and so is FP16 -> f32 -> bfloat16 for these values
        __half2_raw r0 = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w & 0xffffu), __NV_E4M3);
        __half2_raw r1 = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w >> 16), __NV_E4M3);
        const uint32_t u0 = (uint32_t)r0.x | (uint32_t)r0.y << 16, u1 = (uint32_t)r1.x | (uint32_t)r1.y << 16;
        if constexpr (std::is_same<A, __half>::value) {
            h[0] = u0, h[1] = u1;
        } else {
            h[0] = pq_pack2(__float22bfloat162_rn(__half22float2(as2<__half2>(u0))));
            h[1] = pq_pack2(__float22bfloat162_rn(__half22float2(as2<__half2>(u1))));
        }
    }
}

__device__ __forceinline__ uint32_t word_of(const uint4 &v, int k) {
    return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

__device__ __forceinline__ float scale_at(const void *s, int f16, size_t i) {
    return f16 ? __half2float(((const __half *)s)[i]) : ((const float *)s)[i];
}

// ---- the tiled GEMV ----------------------------------------------------------------------------

template <Fmt F, int NT> struct Smem {
    static constexpr int XS = Info<F>::SC + XPAD;                        // halves per staged token row
    static constexpr int W_BYTES = WARPS * PQ_TILE_WORDS * 4;            // 8 KB
    static constexpr int X_BYTES = NT * 8 * XS * 2;
    static constexpr int S_BYTES = WARPS * Info<F>::GPS * 16 * 4;        // f32 worst case
    static constexpr int Z_BYTES = WARPS * Info<F>::GPS * 16;
    static constexpr int STAGE = W_BYTES + X_BYTES + S_BYTES + Z_BYTES;  // a multiple of 16
    static constexpr int TOTAL = Geo<NT>::STAGES * STAGE;
};

// The cp.async copies of stage st into buffer buf (a ring slot), if st < s1,
// then one commit (empty past s1, so that every thread commits the same
// number of groups).
template <Fmt F, int NT, bool GROUPED>
__device__ __forceinline__ void load_stage(const GemvArgs &a, unsigned char *buf, int st, int s1) {
    typedef Smem<F, NT> M;
    constexpr int SC = Info<F>::SC;
    const int tid = threadIdx.x, rt0 = blockIdx.x * WARPS;
    if (st < s1) {
        // W: 4 tiles x 2 KB
        uint32_t *sw = (uint32_t *)buf;
#pragma unroll
        for (int j = 0; j < WARPS * PQ_TILE_WORDS / 4 / THREADS; j++) {
            const int i = tid + j * THREADS, tile = i / (PQ_TILE_WORDS / 4), v = i % (PQ_TILE_WORDS / 4);
            const int rt = rt0 + tile;
            const uint32_t *src = a.w + ((size_t)(rt < a.ntiles ? rt : 0) * a.nst + st) * PQ_TILE_WORDS + v * 4;
            pq_cp_async16(sw + tile * PQ_TILE_WORDS + v * 4, src, rt < a.ntiles ? 16 : 0);
        }
        // X: tokens 0..8 NT - 1, SC columns from st * SC
        uint16_t *sx = (uint16_t *)(buf + M::W_BYTES);
        constexpr int PER_ROW = SC / 8; // 16-byte copies per token row
        for (int i = tid; i < NT * 8 * PER_ROW; i += THREADS) {
            const int t = i / PER_ROW, c8 = i % PER_ROW, col = st * SC + c8 * 8;
            int bytes = 0;
            const uint16_t *src = a.x;
            if (t < a.T && col < a.cols) {
                bytes = a.cols - col >= 8 ? 16 : 2 * (a.cols - col);
                src = a.x + (size_t)t * a.ldx + col;
            }
            pq_cp_async16(sx + t * M::XS + c8 * 8, src, bytes);
        }
        if constexpr (GROUPED) {
            // the stage's groups: GPS of them when a group is shorter than
            // a stage, else the one group the stage lies in
            const int gps = a.group < SC ? SC / a.group : 1, g0 = st * SC / a.group;
            const int sb = a.scales_f16 ? 2 : 4, per_group = 16 * sb / 16; // 16-byte copies per group and tile
            unsigned char *ss = buf + M::W_BYTES + M::X_BYTES;
            for (int i = tid; i < WARPS * gps * per_group; i += THREADS) {
                const int tile = i / (gps * per_group), r = i % (gps * per_group), gl = r / per_group,
                          part = r % per_group;
                const int rt = rt0 + tile, gi = g0 + gl;
                const bool ok = rt < a.ntiles && gi < a.ngroups;
                const unsigned char *src = (const unsigned char *)a.scales;
                if (ok) src += (((size_t)rt * a.ngroups + gi) * 16) * sb + part * 16;
                pq_cp_async16(ss + ((tile * Info<F>::GPS + gl) * 16) * sb + part * 16, src, ok ? 16 : 0);
            }
            if (a.zeros) {
                unsigned char *sz = buf + M::W_BYTES + M::X_BYTES + M::S_BYTES;
                for (int i = tid; i < WARPS * gps; i += THREADS) {
                    const int tile = i / gps, gl = i % gps, rt = rt0 + tile, gi = g0 + gl;
                    const bool ok = rt < a.ntiles && gi < a.ngroups;
                    const uint8_t *src = ok ? a.zeros + ((size_t)rt * a.ngroups + gi) * 16 : a.zeros;
                    pq_cp_async16(sz + (tile * Info<F>::GPS + gl) * 16, src, ok ? 16 : 0);
                }
            }
        }
    }
    pq_cp_async_commit();
}

template <Fmt F, class A, int NT, bool GROUPED>
__global__ void __launch_bounds__(THREADS) gemv_tiled(GemvArgs a) {
    typedef Smem<F, NT> M;
    typedef Info<F> I;
    constexpr int STAGES = Geo<NT>::STAGES;
    extern __shared__ __align__(16) unsigned char smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int rt = blockIdx.x * WARPS + warp;
    const int s0 = blockIdx.y * a.per_split, s1 = min(s0 + a.per_split, a.nst);
    const bool active = rt < a.ntiles;
    const int row_a = rt * PQ_TILE_ROWS + g, row_b = row_a + 8;
    const uint32_t zsym = a.bits ? 1u << (a.bits - 1) : 0u;

    float acc[2][NT][4];
#pragma unroll
    for (int s = 0; s < 2; s++)
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[s][n][i] = 0.0f;
    // symmetric zero points, INT8's 128, or a one-group weight's zero points
    Zc kza = zconst<F, A>(F == I8 ? 128u : zsym), kzb = kza;
    if constexpr (!GROUPED && (F == Q4 || F == Q8))
        if (a.zeros && active) kza = zconst<F, A>(a.zeros[(size_t)rt * 16 + g]), kzb = zconst<F, A>(a.zeros[(size_t)rt * 16 + g + 8]);

#pragma unroll
    for (int i = 0; i < STAGES - 1; i++) load_stage<F, NT, GROUPED>(a, smem + i * M::STAGE, s0 + i, s1);

    for (int st = s0; st < s1; st++) {
        pq_cp_async_wait<STAGES - 2>(); // this thread's copies of stage st have landed
        __syncthreads();                // everyone's have, and the slot refilled next is free
        load_stage<F, NT, GROUPED>(a, smem + ((st - s0 + STAGES - 1) % STAGES) * M::STAGE, st + STAGES - 1, s1);
        if (!active) continue;
        const unsigned char *buf = smem + ((st - s0) % STAGES) * M::STAGE;
        const uint32_t *sw = (const uint32_t *)buf + warp * PQ_TILE_WORDS;
        const uint16_t *sx = (const uint16_t *)(buf + M::W_BYTES);
        const unsigned char *ss = buf + M::W_BYTES + M::X_BYTES;
        const uint8_t *sz = buf + M::W_BYTES + M::X_BYTES + M::S_BYTES;
#pragma unroll
        for (int c = 0; c < 2; c++) {
            const uint4 va = *(const uint4 *)(sw + ((c * 2 + 0) * 32 + lane) * 4);
            const uint4 vb = *(const uint4 *)(sw + ((c * 2 + 1) * 32 + lane) * 4);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const int col = (c * 16 + 4 * k) * I::CODES; // the group block's first column in the stage
                Zc za = kza, zb = kzb;
                float sa = 0.0f, sb = 0.0f;
                if constexpr (GROUPED) {
                    const int gl = a.group < I::SC ? col >> a.gshift : 0;
                    const int base = (warp * I::GPS + gl) * 16;
                    sa = a.scales_f16 ? __half2float(((const __half *)ss)[base + g]) : ((const float *)ss)[base + g];
                    sb = a.scales_f16 ? __half2float(((const __half *)ss)[base + g + 8])
                                      : ((const float *)ss)[base + g + 8];
                    if (a.zeros) {
                        za = zconst<F, A>(sz[base + g]);
                        zb = zconst<F, A>(sz[base + g + 8]);
                    }
                }
                uint32_t ha[4], hb[4];
                dequant<F, A>(word_of(va, k), za, ha);
                dequant<F, A>(word_of(vb, k), zb, hb);
                float tmp[NT][4];
#pragma unroll
                for (int n = 0; n < NT; n++) {
                    float *d = GROUPED ? tmp[n] : acc[k & 1][n];
                    if constexpr (GROUPED) d[0] = d[1] = d[2] = d[3] = 0.0f;
                    const uint16_t *xr = sx + (n * 8 + g) * M::XS + col + q * I::CODES;
                    if constexpr (I::CODES == 8) {
                        const uint4 xv = *(const uint4 *)xr;
                        pq_mma<A>(d, ha[0], hb[0], ha[1], hb[1], xv.x, xv.y);
                        pq_mma<A>(d, ha[2], hb[2], ha[3], hb[3], xv.z, xv.w);
                    } else {
                        const uint2 xv = *(const uint2 *)xr;
                        pq_mma<A>(d, ha[0], hb[0], ha[1], hb[1], xv.x, xv.y);
                    }
                }
                if constexpr (GROUPED) {
#pragma unroll
                    for (int n = 0; n < NT; n++) {
                        acc[0][n][0] += sa * tmp[n][0];
                        acc[0][n][1] += sa * tmp[n][1];
                        acc[0][n][2] += sb * tmp[n][2];
                        acc[0][n][3] += sb * tmp[n][3];
                    }
                }
            }
        }
    }
    pq_cp_async_wait<0>(); // nothing may still write shared memory when the block leaves

    // the row scales of per-row formats
    float ra = 1.0f, rb = 1.0f;
    if constexpr (!GROUPED) {
        if (active) {
            if constexpr (F == Q4 || F == Q8) { // one group: tiled [tiles][1][16]
                ra = scale_at(a.scales, a.scales_f16, (size_t)rt * 16 + g);
                rb = scale_at(a.scales, a.scales_f16, (size_t)rt * 16 + g + 8);
            } else {
                const float *s = (const float *)a.scales;
                ra = a.per_channel ? (row_a < a.rows ? s[row_a] : 0.0f) : s[0];
                rb = a.per_channel ? (row_b < a.rows ? s[row_b] : 0.0f) : s[0];
            }
        }
    }
    // acc[.][n]: (row g, tokens 8n + 2q, 8n + 2q + 1), (row g + 8, the same tokens)
    if (active) {
#pragma unroll
        for (int n = 0; n < NT; n++) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int row = i < 2 ? row_a : row_b, tok = n * 8 + 2 * q + (i & 1);
                if (row >= a.rows || tok >= a.T) continue;
                float v = GROUPED ? acc[0][n][i] : (acc[0][n][i] + acc[1][n][i]) * (i < 2 ? ra : rb);
                if (a.splits == 1) {
                    a.y[(size_t)tok * a.rows + row] = a.bias ? v + a.bias[row] : v;
                } else {
                    a.partial[((size_t)blockIdx.y * a.T + tok) * a.rows + row] = v;
                }
            }
        }
    }
    if (a.splits == 1) return;
    // split-K: the last slice of this row block to arrive adds the partials
    __shared__ int last;
    __threadfence(); // this thread's partials are visible before the arrival is counted
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&a.counters[blockIdx.x], 1) == a.splits - 1;
    __syncthreads();
    if (!last) return;
    __threadfence(); // and the other slices' partials are read after it
    const int r0 = blockIdx.x * BLOCK_ROWS;
    for (int e = threadIdx.x; e < BLOCK_ROWS * a.T; e += THREADS) {
        const int tok = e / BLOCK_ROWS, row = r0 + e % BLOCK_ROWS;
        if (row >= a.rows) continue;
        float v = 0.0f;
        for (int s = 0; s < a.splits; s++) v += __ldcg(a.partial + ((size_t)s * a.T + tok) * a.rows + row);
        a.y[(size_t)tok * a.rows + row] = a.bias ? v + a.bias[row] : v;
    }
    if (threadIdx.x == 0) a.counters[blockIdx.x] = 0;
}

// The split of a row's nst stages into slices: enough blocks for
// TARGET_BLOCKS_PER_SM per SM, each slice at least one stage, at most
// PQ_CUDA_GEMV_MAX_SPLITS. per: stages per slice.
void split_of(int row_blocks, int nst, int sms, int *splits, int *per) {
    int want = (TARGET_BLOCKS_PER_SM * (sms > 0 ? sms : 1) + row_blocks - 1) / row_blocks;
    if (want > PQ_CUDA_GEMV_MAX_SPLITS) want = PQ_CUDA_GEMV_MAX_SPLITS;
    if (want > nst) want = nst;
    if (want < 1) want = 1;
    *per = (nst + want - 1) / want;
    *splits = (nst + *per - 1) / *per; // no empty slice
}

int tiles_of(int rows) { return (rows + PQ_TILE_ROWS - 1) / PQ_TILE_ROWS; }
int row_blocks_of(int rows) { return (tiles_of(rows) + WARPS - 1) / WARPS; }
int nt_of(int T) { return T <= 8 ? 1 : T <= 16 ? 2 : 4; }

template <Fmt F, class A, int NT, bool GROUPED> pq_status launch(const GemvArgs &a, dim3 grid, cudaStream_t st) {
    auto k = gemv_tiled<F, A, NT, GROUPED>;
    constexpr int bytes = Smem<F, NT>::TOTAL;
    static bool attr_set = false; // the same value from every thread: a benign race
    if (!attr_set) {
        PQ_CUDA_TRY(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
        attr_set = true;
    }
    k<<<grid, THREADS, bytes, st>>>(a);
    PQ_CUDA_LAUNCHED("gemv_tiled");
    return PQ_OK;
}

template <Fmt F, class A, bool GROUPED> pq_status launch_nt(const GemvArgs &a, dim3 grid, cudaStream_t st) {
    switch (nt_of(a.T)) {
    case 1: return launch<F, A, 1, GROUPED>(a, grid, st);
    case 2: return launch<F, A, 2, GROUPED>(a, grid, st);
    default: return launch<F, A, 4, GROUPED>(a, grid, st);
    }
}

// ---- the generic GEMV (rows layout) ------------------------------------------------------------

template <class A> __global__ void __launch_bounds__(GEN_ROWS * 32) gemv_generic(pq_qpack_dev qp, int rows, int cols,
                                                                                  const A *x, int T,
                                                                                  const float *bias, float *y) {
    const int row = blockIdx.x * GEN_ROWS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return; // whole warps leave; nothing below synchronizes the block
    const int per = 32 / qp.bits, words = (cols + per - 1) / per;
    const uint32_t mask = (1u << qp.bits) - 1u;
    const int one_group = qp.group >= cols;
    const uint32_t *wr = qp.packed + (size_t)row * qp.ldw;
    float acc[PQ_CUDA_GEMV_MAX_T];
#pragma unroll
    for (int t = 0; t < PQ_CUDA_GEMV_MAX_T; t++) acc[t] = 0.0f;
    for (int j = lane; j < words; j += 32) {
        const uint32_t word = __ldg(wr + j);
        for (int i = 0; i < per; i++) {
            const int c = j * per + i;
            if (c >= cols) break;
            const int gi = qp.gidx ? __ldg(qp.gidx + c) : one_group ? 0 : c / qp.group;
            const size_t si = (size_t)row * qp.ngroups + gi;
            const int z = qp.zeros ? (int)__ldg(qp.zeros + si) : 1 << (qp.bits - 1);
            const float wv = scale_at(qp.scales, qp.scales_f16, si) * (float)((int)((word >> (i * qp.bits)) & mask) - z);
#pragma unroll
            for (int t = 0; t < PQ_CUDA_GEMV_MAX_T; t++)
                if (t < T) acc[t] += wv * Act<A>::to_f(x[(size_t)t * cols + c]);
        }
    }
#pragma unroll
    for (int t = 0; t < PQ_CUDA_GEMV_MAX_T; t++) {
        if (t >= T) break; // the same for the whole warp
        float v = acc[t];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) y[(size_t)t * rows + row] = v + (bias ? bias[row] : 0.0f);
    }
}

// ---- column gather ----------------------------------------------------------------------------------

__global__ void gather_cols(const uint16_t *x, int T, int cols, int ld_in, const int32_t *perm, int ld_out,
                            uint16_t *out) {
    const size_t n = (size_t)T * ld_out;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        const int t = (int)(e / ld_out), j = (int)(e % ld_out);
        out[e] = j < cols ? x[(size_t)t * ld_in + (perm ? perm[j] : j)] : (uint16_t)0;
    }
}

} // namespace

int pq_qlinear_gemv_counters(const pq_linear_cuda *L) { return row_blocks_of(L->rows); }

// The stages per row of a tiled weight (0: not tiled).
static int tiled_nst(const pq_linear_cuda *L) {
    if (L->fmt == PQ_W_QPACK) return L->qp.tiled ? L->qp.nst : 0;
    if (L->fmt == PQ_W_INT8 || L->fmt == PQ_W_FP8) return L->qb.tiled ? L->qb.nst : 0;
    return 0;
}

size_t pq_qlinear_gemv_ws_bytes(const pq_linear_cuda *L, int T, int sms) {
    const int nst = tiled_nst(L);
    if (!nst || T < 1) return 0;
    int splits, per;
    split_of(row_blocks_of(L->rows), nst, sms, &splits, &per);
    return splits > 1 ? (size_t)splits * T * L->rows * sizeof(float) : 0;
}

pq_status pq_qlinear_gemv_cuda(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y,
                               const pq_cuda_launch *lc) {
    PQ_FAIL_IF(T < 1 || T > PQ_CUDA_GEMV_MAX_T, PQ_ERR_ARG, "GEMV of %d tokens (1..%d)", T, PQ_CUDA_GEMV_MAX_T);
    PQ_FAIL_IF(L->act.type != PQ_ACTQ_NONE, PQ_ERR_ARG, "weight-only GEMV of a W8A8 linear");
    const int nst = tiled_nst(L);
    PQ_FAIL_IF(!nst, PQ_ERR_ARG, "tiled GEMV of a weight that is not tiled");
    PQ_FAIL_IF((uintptr_t)d_x % 16, PQ_ERR_ARG, "tiled GEMV: x must be 16-byte aligned");
    GemvArgs a;
    memset(&a, 0, sizeof a);
    a.rows = L->rows, a.cols = L->cols, a.ntiles = tiles_of(L->rows), a.nst = nst;
    a.x = d_x, a.ldx = (L->cols + 7) / 8 * 8, a.T = T;
    a.bias = L->d_bias, a.y = d_y;
    const int row_blocks = row_blocks_of(L->rows);
    split_of(row_blocks, nst, lc->sms, &a.splits, &a.per_split);
    if (a.splits > 1) {
        PQ_FAIL_IF(lc->ws_bytes < (size_t)a.splits * T * L->rows * sizeof(float) || lc->n_counters < row_blocks,
                   PQ_ERR_ARG, "tiled GEMV [%d x %d], %d tokens: workspace of %zu bytes and %d counters is too small",
                   L->rows, L->cols, T, lc->ws_bytes, lc->n_counters);
        a.partial = (float *)lc->d_ws, a.counters = lc->d_counters;
    }
    const dim3 grid((unsigned)row_blocks, (unsigned)a.splits);
    const cudaStream_t st = (cudaStream_t)lc->stream;
    pq_status s = PQ_ERR_ARG;
    if (L->fmt == PQ_W_QPACK) {
        const pq_qpack_dev *qp = &L->qp;
        a.w = qp->packed, a.scales = qp->scales, a.zeros = qp->zeros, a.scales_f16 = qp->scales_f16;
        a.bits = qp->bits, a.group = qp->group, a.ngroups = qp->ngroups;
        while ((1 << a.gshift) < a.group) a.gshift++;
        const bool grouped = qp->ngroups > 1;
        if (qp->bits == 4)
            PQ_ACT_DISPATCH(L->act_dtype, s = grouped ? launch_nt<Q4, A, true>(a, grid, st) : launch_nt<Q4, A, false>(a, grid, st));
        else
            PQ_ACT_DISPATCH(L->act_dtype, s = grouped ? launch_nt<Q8, A, true>(a, grid, st) : launch_nt<Q8, A, false>(a, grid, st));
        return s;
    }
    a.w = (const uint32_t *)L->qb.q, a.scales = L->qb.scales, a.per_channel = L->qb.per_channel;
    if (L->fmt == PQ_W_INT8) PQ_ACT_DISPATCH(L->act_dtype, s = (launch_nt<I8, A, false>(a, grid, st)));
    else PQ_ACT_DISPATCH(L->act_dtype, s = (launch_nt<F8, A, false>(a, grid, st)));
    return s;
}

pq_status pq_qpack_gemv_generic_cuda(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y,
                                     void *stream) {
    PQ_FAIL_IF(L->fmt != PQ_W_QPACK || L->qp.tiled, PQ_ERR_ARG, "generic GEMV of a weight that is not in the rows layout");
    PQ_FAIL_IF(T < 1 || T > PQ_CUDA_GEMV_MAX_T, PQ_ERR_ARG, "GEMV of %d tokens (1..%d)", T, PQ_CUDA_GEMV_MAX_T);
    const unsigned blocks = (unsigned)((L->rows + GEN_ROWS - 1) / GEN_ROWS);
    PQ_ACT_DISPATCH(L->act_dtype, (gemv_generic<A><<<blocks, GEN_ROWS * 32, 0, (cudaStream_t)stream>>>(
                                      L->qp, L->rows, L->cols, (const A *)d_x, T, L->d_bias, d_y)));
    PQ_CUDA_LAUNCHED("gemv_generic");
    return PQ_OK;
}

pq_status pq_gather_cols_cuda(const uint16_t *d_x, int T, int cols, int ld_in, const int32_t *d_perm, int ld_out,
                              uint16_t *d_out, void *stream) {
    PQ_FAIL_IF(T < 0 || cols < 0 || ld_out < cols || ld_in < cols, PQ_ERR_ARG, "gather of [%d x %d] into ld %d", T,
               cols, ld_out);
    const size_t n = (size_t)T * ld_out;
    if (n == 0) return PQ_OK;
    gather_cols<<<pq_cuda_blocks(n), PQ_CUDA_THREADS, 0, (cudaStream_t)stream>>>(d_x, T, cols, ld_in, d_perm, ld_out,
                                                                                 d_out);
    PQ_CUDA_LAUNCHED("gather_cols");
    return PQ_OK;
}
