// kernels/cuda_act.cuh — the two 16-bit activation types of the CUDA engine
// (pq_act_dtype, kernels/linear_cuda.h) seen from device code: conversions,
// the tensor-core instruction of each, cp.async and ldmatrix (CUDA C++ only).
//
// A model stored in BF16 runs with BF16 activations (the inputs of matrix
// products, the KV cache): BF16 has FP32's exponent range, so values FP16
// cannot hold (above 65504) stay finite, as they do on the CPU engine (f32).
// Other models run FP16 (11 significant bits against BF16's 8). The residual
// stream and every matrix-product output stay f32 in both.
#ifndef PQ_CUDA_ACT_CUH
#define PQ_CUDA_ACT_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda_util.cuh"
#include "kernels/linear_cuda.h"

// Per type: the 16-bit type, its pair, conversions (round to nearest even),
// the PTX type name of mma.sync.
template <class A> struct Act;
template <> struct Act<__half> {
    typedef __half2 T2;
    static __device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
    static __device__ __forceinline__ __half from_f(float v) { return __float2half_rn(v); }
    static __device__ __forceinline__ T2 from_f2(float a, float b) { return __floats2half2_rn(a, b); }
};
template <> struct Act<__nv_bfloat16> {
    typedef __nv_bfloat162 T2;
    static __device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
    static __device__ __forceinline__ __nv_bfloat16 from_f(float v) { return __float2bfloat16_rn(v); }
    static __device__ __forceinline__ T2 from_f2(float a, float b) { return __floats2bfloat162_rn(a, b); }
};

// Runs the statement(s) after dt with A bound to the device type of `dt`
// (host code).
#define PQ_ACT_DISPATCH(dt, ...)               \
    do {                                       \
        if ((dt) == PQ_ACT_BF16) {             \
            typedef __nv_bfloat16 A;           \
            __VA_ARGS__;                       \
        } else {                               \
            typedef __half A;                  \
            __VA_ARGS__;                       \
        }                                      \
    } while (0)

__device__ __forceinline__ uint32_t pq_pack2(const __half2 &h) {
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
}
__device__ __forceinline__ uint32_t pq_pack2(const __nv_bfloat162 &h) {
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
}

// d += a b for one m16n8k16 tile with f32 accumulation: A 16x16 (row major,
// 4 registers of pairs), B 16x8 (column major, 2 registers), D 16x8 f32.
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with
// g = lane / 4 and q = lane % 4:
//   a0: row g,     k 2q, 2q+1     a1: row g+8, k 2q, 2q+1
//   a2: row g,     k 2q+8, 2q+9   a3: row g+8, k 2q+8, 2q+9
//   b0: k 2q, 2q+1, column g      b1: k 2q+8, 2q+9, column g
//   d0, d1: row g, columns 2q, 2q+1     d2, d3: row g+8, columns 2q, 2q+1
template <class A> __device__ __forceinline__ void pq_mma(float d[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                                          uint32_t a3, uint32_t b0, uint32_t b1);
template <> __device__ __forceinline__ void pq_mma<__half>(float d[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                                           uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
template <> __device__ __forceinline__ void pq_mma<__nv_bfloat16>(float d[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                                                  uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// ---- asynchronous copies (sm_80+) ------------------------------------------------

__device__ __forceinline__ uint32_t pq_smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

// 16 bytes global -> shared, the first src_bytes (0..16) read, the rest
// zero-filled; L1 bypassed (.cg). Both addresses 16-byte aligned.
__device__ __forceinline__ void pq_cp_async16(void *smem, const void *gmem, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(pq_smem_addr(smem)), "l"(gmem),
                 "r"(src_bytes));
}
__device__ __forceinline__ void pq_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N> __device__ __forceinline__ void pq_cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// ldmatrix: four 8x8 16-bit matrices from shared memory; lane l gives the
// address of row l % 8 of matrix l / 8. Without .trans lane l receives, of
// matrix i, row l / 4, columns 2(l % 4), 2(l % 4) + 1 in register i; with
// .trans, column l / 4, rows 2(l % 4), 2(l % 4) + 1.
__device__ __forceinline__ void pq_ldmatrix_x4(uint32_t r[4], const void *smem) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(pq_smem_addr(smem)));
}
__device__ __forceinline__ void pq_ldmatrix_x4_trans(uint32_t r[4], const void *smem) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(pq_smem_addr(smem)));
}

#endif
