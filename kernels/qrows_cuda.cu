// Dequantized FP16 rows of quantized weights on the GPU (kernels/quant_cuda.h):
// the panels of the GEMM path. Each value is the specification's f32 value
// (kernels/qpack.h, kernels/fp8.h: one f32 multiply of the scale by the exact
// code), rounded to FP16 to nearest even; the tests compare them with
// pq_linear_rows_ref bit for bit. The multiply is __fmul_rn, never
// contracted.
#include "kernels/cuda_util.cuh"

#include <cuda_fp8.h>

#include "kernels/quant_cuda.h"

namespace {

struct RowsArgs {
    pq_qpack_dev qp;            // QPACK: the weight's layout (kernels/linear_cuda.h)
    pq_bytes_dev qb;            // INT8 / FP8: the weight's layout
    int cols, r0, n;            // the weight's columns; rows r0..r0+n
    __half *out;                // [n][cols]
};

template <class S> __device__ __forceinline__ float ld_scale(const void *s, size_t i);
template <> __device__ __forceinline__ float ld_scale<float>(const void *s, size_t i) {
    return __ldg((const float *)s + i);
}
template <> __device__ __forceinline__ float ld_scale<__half>(const void *s, size_t i) {
    return __half2float(__ldg((const __half *)s + i));
}

// Stores v[0..N) at out[c0..]: one vector store when the whole word lies in
// the row and the row length keeps vectors aligned, else element by element.
template <int N> __device__ __forceinline__ void store_row(__half *out, int c0, int cols, const float *v) {
    if ((N == 8 || N == 4) && cols % N == 0) { // c0 + N <= cols: c0 is a multiple of N below cols
        __half2 h[N / 2];
#pragma unroll
        for (int i = 0; i < N / 2; i++) h[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
        if constexpr (N == 8) *(uint4 *)(out + c0) = *(const uint4 *)h;
        else if constexpr (N == 4) *(uint2 *)(out + c0) = *(const uint2 *)h;
        return;
    }
#pragma unroll
    for (int i = 0; i < N; i++)
        if (c0 + i < cols) out[c0 + i] = __float2half_rn(v[i]);
}

// One thread per (row, packed word) of the panel.
template <int BITS, class S> __global__ void qpack_rows(RowsArgs a) {
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
            v[k] = __fmul_rn(ld_scale<S>(q.scales, si), (float)((int)((w >> (k * BITS)) & MASK) - z));
        }
        store_row<PER>(a.out + (size_t)r * a.cols, c0, a.cols, v);
    }
}

// One thread per (row, 4 bytes) of an INT8 / FP8 panel.
template <bool FP8> __global__ void byte_rows(RowsArgs a) {
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
        store_row<4>(a.out + (size_t)r * a.cols, 4 * j, a.cols, v);
    }
}

template <int BITS> pq_status launch_qpack(const pq_linear_cuda *L, const RowsArgs &a, unsigned blocks, cudaStream_t st) {
    if (L->qp.scales_f16) qpack_rows<BITS, __half><<<blocks, PQ_CUDA_THREADS, 0, st>>>(a);
    else qpack_rows<BITS, float><<<blocks, PQ_CUDA_THREADS, 0, st>>>(a);
    PQ_CUDA_LAUNCHED("qpack_rows");
    return PQ_OK;
}

} // namespace

pq_status pq_qlinear_rows_cuda(const pq_linear_cuda *L, int r0, int n, uint16_t *d_out, void *stream) {
    PQ_FAIL_IF(r0 < 0 || n < 0 || r0 + n > L->rows, PQ_ERR_ARG, "rows [%d, %d) of %d", r0, r0 + n, L->rows);
    if (n == 0) return PQ_OK;
    RowsArgs a;
    memset(&a, 0, sizeof a);
    a.qp = L->qp, a.qb = L->qb;
    a.cols = L->cols, a.r0 = r0, a.n = n, a.out = (__half *)d_out;
    cudaStream_t st = (cudaStream_t)stream;
    switch (L->fmt) {
    case PQ_W_QPACK: {
        const int per = 32 / L->qp.bits;
        const unsigned blocks = pq_cuda_blocks((size_t)n * ((L->cols + per - 1) / per));
        switch (L->qp.bits) {
        case 2: return launch_qpack<2>(L, a, blocks, st);
        case 3: return launch_qpack<3>(L, a, blocks, st);
        case 4: return launch_qpack<4>(L, a, blocks, st);
        case 5: return launch_qpack<5>(L, a, blocks, st);
        case 6: return launch_qpack<6>(L, a, blocks, st);
        case 7: return launch_qpack<7>(L, a, blocks, st);
        case 8: return launch_qpack<8>(L, a, blocks, st);
        }
        return PQ_FAIL(PQ_ERR_FORMAT, "packed weight of %d bits", L->qp.bits);
    }
    case PQ_W_INT8:
    case PQ_W_FP8: {
        const unsigned blocks = pq_cuda_blocks((size_t)n * ((L->cols + 3) / 4));
        if (L->fmt == PQ_W_FP8) byte_rows<true><<<blocks, PQ_CUDA_THREADS, 0, st>>>(a);
        else byte_rows<false><<<blocks, PQ_CUDA_THREADS, 0, st>>>(a);
        PQ_CUDA_LAUNCHED("byte_rows");
        return PQ_OK;
    }
    case PQ_W_DENSE: break;
    }
    return PQ_FAIL(PQ_ERR_ARG, "dequantized rows of weight format %d", (int)L->fmt);
}
