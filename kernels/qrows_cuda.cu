// Dequantized rows of quantized weights on the GPU (kernels/quant_cuda.h):
// the panels of the GEMM path, from either device layout; and the upload's
// rearrangement of codes into the tiled layout (kernels/linear_cuda.h).
//
// Each panel value is the specification's f32 value (kernels/qpack.h,
// kernels/fp8.h: one f32 multiply of the scale by the exact code), rounded
// to the activation type to nearest even; the tests compare them with
// pq_linear_rows_ref bit for bit. The multiply is __fmul_rn, never
// contracted.
#include "kernels/cuda_act.cuh"

#include <cuda_fp8.h>

#include "kernels/quant_cuda.h"

namespace {

struct RowsArgs {
    pq_qpack_dev qp;            // QPACK: the weight's layout (kernels/linear_cuda.h)
    pq_bytes_dev qb;            // INT8 / FP8: the weight's layout
    int cols, r0, n;            // the weight's columns; rows r0..r0+n
    void *out;                  // [n][cols] of the activation type
};

__device__ __forceinline__ float ld_scale(const void *s, int f16, size_t i) {
    return f16 ? __half2float(__ldg((const __half *)s + i)) : __ldg((const float *)s + i);
}

// Stores v[0..N) at out[c0..]: one vector store when the whole word lies in
// the row and the row length keeps vectors aligned, else element by element.
template <class A, int N> __device__ __forceinline__ void store_row(A *out, int c0, int cols, const float *v) {
    typedef typename Act<A>::T2 T2;
    if ((N == 8 || N == 4) && cols % N == 0) { // c0 + N <= cols: c0 is a multiple of N below cols
        T2 h[N / 2];
#pragma unroll
        for (int i = 0; i < N / 2; i++) h[i] = Act<A>::from_f2(v[2 * i], v[2 * i + 1]);
        if constexpr (N == 8) *(uint4 *)(out + c0) = *(const uint4 *)h;
        else if constexpr (N == 4) *(uint2 *)(out + c0) = *(const uint2 *)h;
        return;
    }
#pragma unroll
    for (int i = 0; i < N; i++)
        if (c0 + i < cols) out[c0 + i] = Act<A>::from_f(v[i]);
}

// ---- the rows layout ------------------------------------------------------------------------------

// One thread per (row, packed word) of the panel.
template <class A, int BITS> __global__ void qpack_rows(RowsArgs a) {
    constexpr int PER = 32 / BITS;
    constexpr uint32_t MASK = (1u << BITS) - 1u;
    const int words = (a.cols + PER - 1) / PER;
    const size_t total = (size_t)a.n * words;
    const pq_qpack_dev &q = a.qp;
    const int one_group = q.group >= a.cols;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / words), j = (int)(i % words), row = a.r0 + r, c0 = j * PER;
        const uint32_t w = __ldg(q.packed + (size_t)row * q.ldw + j);
        float v[PER];
#pragma unroll
        for (int k = 0; k < PER; k++) {
            const int c = c0 + k < a.cols ? c0 + k : a.cols - 1; // past the row: computed, not stored
            const int g = q.gidx ? __ldg(q.gidx + c) : one_group ? 0 : c / q.group;
            const size_t si = (size_t)row * q.ngroups + g;
            const int z = q.zeros ? (int)__ldg(q.zeros + si) : 1 << (BITS - 1);
            v[k] = __fmul_rn(ld_scale(q.scales, q.scales_f16, si), (float)((int)((w >> (k * BITS)) & MASK) - z));
        }
        store_row<A, PER>((A *)a.out + (size_t)r * a.cols, c0, a.cols, v);
    }
}

// ---- the tiled layout -------------------------------------------------------------------------------

// Code i (< per) of a tiled word (pq_tile_code_pos).
template <int BITS> __device__ __forceinline__ uint32_t tiled_code(uint32_t w, int i) {
    return (w >> (BITS * pq_tile_code_pos(BITS, i))) & ((1u << BITS) - 1u);
}

// One thread per (row, word) of a tiled weight's panel. QPACK: group scale
// and zero point from the tiled arrays; INT8 / FP8: the row's scale.
template <class A, int BITS, int FMT> __global__ void tiled_rows(RowsArgs a) {
    constexpr int PER = 32 / BITS;
    const int words = (a.cols + PER - 1) / PER;
    const size_t total = (size_t)a.n * words;
    const int nst = FMT == PQ_W_QPACK ? a.qp.nst : a.qb.nst;
    const uint32_t *tw = FMT == PQ_W_QPACK ? a.qp.packed : (const uint32_t *)a.qb.q;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / words), j = (int)(i % words), row = a.r0 + r, c0 = j * PER;
        const uint32_t w = __ldg(tw + pq_tile_word(row, j, nst));
        float v[PER];
        if constexpr (FMT == PQ_W_QPACK) {
            const pq_qpack_dev &q = a.qp;
            const int one_group = q.group >= a.cols, rt = row / PQ_TILE_ROWS, rr = row % PQ_TILE_ROWS;
#pragma unroll
            for (int k = 0; k < PER; k++) {
                const int c = c0 + k < a.cols ? c0 + k : a.cols - 1;
                const int g = one_group ? 0 : c / q.group;
                const size_t si = ((size_t)rt * q.ngroups + g) * 16 + rr;
                const int z = q.zeros ? (int)__ldg(q.zeros + si) : 1 << (BITS - 1);
                v[k] = __fmul_rn(ld_scale(q.scales, q.scales_f16, si), (float)((int)tiled_code<BITS>(w, k) - z));
            }
        } else {
            const float s = __ldg(a.qb.scales + (a.qb.per_channel ? row : 0));
#pragma unroll
            for (int k = 0; k < PER; k++) {
                const uint32_t b = tiled_code<8>(w, k);
                float code;
                if constexpr (FMT == PQ_W_FP8)
                    code = __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b, __NV_E4M3)));
                else
                    code = (float)(int8_t)b;
                v[k] = __fmul_rn(s, code);
            }
        }
        store_row<A, PER>((A *)a.out + (size_t)r * a.cols, c0, a.cols, v);
    }
}

// ---- INT8 / FP8 row major (W8A8 weights) ------------------------------------------------------------

// One thread per (row, 4 bytes) of an INT8 / FP8 panel.
template <class A, bool FP8> __global__ void byte_rows(RowsArgs a) {
    const int words = (a.cols + 3) / 4;
    const size_t total = (size_t)a.n * words;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / words), j = (int)(i % words), row = a.r0 + r;
        const uint32_t w = __ldg((const uint32_t *)(a.qb.q + (size_t)row * a.qb.ldq) + j); // rows are 64-byte aligned
        const float s = __ldg(a.qb.scales + (a.qb.per_channel ? row : 0));
        float v[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const uint32_t b = (w >> (8 * k)) & 0xffu;
            float code;
            if constexpr (FP8) code = __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b, __NV_E4M3)));
            else code = (float)(int8_t)b;
            v[k] = __fmul_rn(s, code);
        }
        store_row<A, 4>((A *)a.out + (size_t)r * a.cols, 4 * j, a.cols, v);
    }
}

// ---- rearranging codes into tiles (upload) -----------------------------------------------------------

// Code (r, c) of the source rows: byte c of the row at 8 bits, nibble c % 2
// of byte c / 2 at 4 (packed words are little-endian).
template <int BITS> __device__ __forceinline__ uint32_t src_code(const uint8_t *src, size_t stride, int r, int c) {
    const uint8_t b = src[(size_t)r * stride + (BITS == 8 ? c : c / 2)];
    return BITS == 8 ? b : (b >> (4 * (c & 1))) & 0xfu;
}

// One thread per word of the tiles of rows r0..r0+n (rounded up to whole
// tiles): rows past rows_end and columns past cols get code 0.
template <int BITS>
__global__ void qtile(const uint8_t *src, size_t stride, int r0, int rows_end, int cols, const int32_t *perm, int nst,
                      uint32_t *out) {
    constexpr int PER = 32 / BITS;
    const int tile0 = r0 / PQ_TILE_ROWS, tiles = (rows_end - r0 + PQ_TILE_ROWS - 1) / PQ_TILE_ROWS;
    const size_t total = (size_t)tiles * nst * PQ_TILE_WORDS;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        // e is the word's offset from tile0's first word: invert the layout formula
        const size_t tile_st = e / PQ_TILE_WORDS;
        const int off = (int)(e % PQ_TILE_WORDS), rt = tile0 + (int)(tile_st / nst), st = (int)(tile_st % nst);
        const int k = off % 4, lane = (off / 4) % 32, ch = off / 128, c = ch / 2, h = ch % 2;
        const int g = lane / 4, q = lane % 4;
        const int row = rt * PQ_TILE_ROWS + g + 8 * h, w = st * PQ_TILE_STAGE_WORDS + c * 16 + 4 * k + q;
        uint32_t word = 0;
        if (row < rows_end) {
#pragma unroll
            for (int i = 0; i < PER; i++) {
                const int col = w * PER + i;
                if (col >= cols) break;
                const uint32_t code = src_code<BITS>(src, stride, row - r0, perm ? perm[col] : col);
                word |= code << (pq_tile_code_pos(BITS, i) * BITS);
            }
        }
        out[(size_t)tile0 * nst * PQ_TILE_WORDS + e] = word;
    }
}

template <class A, int BITS> pq_status launch_qpack(const RowsArgs &a, unsigned blocks, cudaStream_t st) {
    if (a.qp.tiled) tiled_rows<A, BITS, PQ_W_QPACK><<<blocks, PQ_CUDA_THREADS, 0, st>>>(a);
    else qpack_rows<A, BITS><<<blocks, PQ_CUDA_THREADS, 0, st>>>(a);
    PQ_CUDA_LAUNCHED("qpack rows");
    return PQ_OK;
}

template <class A> pq_status rows_of(const pq_linear_cuda *L, const RowsArgs &a, cudaStream_t st) {
    const int n = a.n;
    switch (L->fmt) {
    case PQ_W_QPACK: {
        const int per = 32 / L->qp.bits;
        const unsigned blocks = pq_cuda_blocks((size_t)n * ((L->cols + per - 1) / per));
        switch (L->qp.bits) {
        case 2: return launch_qpack<A, 2>(a, blocks, st);
        case 3: return launch_qpack<A, 3>(a, blocks, st);
        case 4: return launch_qpack<A, 4>(a, blocks, st);
        case 5: return launch_qpack<A, 5>(a, blocks, st);
        case 6: return launch_qpack<A, 6>(a, blocks, st);
        case 7: return launch_qpack<A, 7>(a, blocks, st);
        case 8: return launch_qpack<A, 8>(a, blocks, st);
        }
        return PQ_FAIL(PQ_ERR_FORMAT, "packed weight of %d bits", L->qp.bits);
    }
    case PQ_W_INT8:
    case PQ_W_FP8: {
        const unsigned blocks = pq_cuda_blocks((size_t)n * ((L->cols + 3) / 4));
        const bool fp8 = L->fmt == PQ_W_FP8;
        if (L->qb.tiled && fp8) tiled_rows<A, 8, PQ_W_FP8><<<blocks, PQ_CUDA_THREADS, 0, st>>>(a);
        else if (L->qb.tiled) tiled_rows<A, 8, PQ_W_INT8><<<blocks, PQ_CUDA_THREADS, 0, st>>>(a);
        else if (fp8) byte_rows<A, true><<<blocks, PQ_CUDA_THREADS, 0, st>>>(a);
        else byte_rows<A, false><<<blocks, PQ_CUDA_THREADS, 0, st>>>(a);
        PQ_CUDA_LAUNCHED("byte rows");
        return PQ_OK;
    }
    case PQ_W_DENSE: break;
    }
    return PQ_FAIL(PQ_ERR_ARG, "dequantized rows of weight format %d", (int)L->fmt);
}

} // namespace

pq_status pq_qlinear_rows_cuda(const pq_linear_cuda *L, int r0, int n, uint16_t *d_out, void *stream) {
    PQ_FAIL_IF(r0 < 0 || n < 0 || r0 + n > L->rows, PQ_ERR_ARG, "rows [%d, %d) of %d", r0, r0 + n, L->rows);
    if (n == 0) return PQ_OK;
    RowsArgs a;
    memset(&a, 0, sizeof a);
    a.qp = L->qp, a.qb = L->qb;
    a.cols = L->cols, a.r0 = r0, a.n = n, a.out = d_out;
    pq_status s = PQ_OK;
    PQ_ACT_DISPATCH(L->act_dtype, s = rows_of<A>(L, a, (cudaStream_t)stream));
    return s;
}

pq_status pq_qtile_cuda(const uint8_t *d_src, size_t src_stride, int r0, int n, int cols, int bits,
                        const int32_t *d_perm, int nst, uint32_t *d_out, void *stream) {
    PQ_FAIL_IF((bits != 4 && bits != 8) || r0 % PQ_TILE_ROWS || n < 0 || cols < 1 || nst < 1 ||
                   (size_t)nst * PQ_TILE_STAGE_WORDS * (32 / bits) < (size_t)cols,
               PQ_ERR_ARG, "tiling %d rows from %d of %d columns at %d bits into %d stages", n, r0, cols, bits, nst);
    if (n == 0) return PQ_OK;
    const size_t words = (size_t)((n + PQ_TILE_ROWS - 1) / PQ_TILE_ROWS) * nst * PQ_TILE_WORDS;
    if (bits == 4)
        qtile<4><<<pq_cuda_blocks(words), PQ_CUDA_THREADS, 0, (cudaStream_t)stream>>>(d_src, src_stride, r0, r0 + n,
                                                                                    cols, d_perm, nst, d_out);
    else
        qtile<8><<<pq_cuda_blocks(words), PQ_CUDA_THREADS, 0, (cudaStream_t)stream>>>(d_src, src_stride, r0, r0 + n,
                                                                                    cols, d_perm, nst, d_out);
    PQ_CUDA_LAUNCHED("qtile");
    return PQ_OK;
}
