// W8A8 on the GPU (kernels/quant_cuda.h): the per-token activation
// quantizer and the epilogue around cuBLASLt's INT8 / FP8 GEMM
// (kernels/linear_cuda.cu). Both follow kernels/w8a8.h operation for
// operation: divisions are __fdiv_rn, products __fmul_rn (never contracted
// into an FMA), rounding to int8 is nearest-even after the clamp, E4M3
// encoding is pq_fp8_e4m3_encode's integer code, so the codes and scales
// equal the _ref's byte for byte on the same (FP16- or BF16-rounded)
// activations.
#include "kernels/cuda_act.cuh"

extern "C" {
#include "kernels/w8a8.h"
}
#include "kernels/quant_cuda.h"

namespace {

constexpr int ACTQ_THREADS = 256;

// pq_fp8_e4m3_encode (kernels/fp8.c), the same integer operations.
__device__ __forceinline__ uint8_t e4m3_encode(float x) {
    const uint32_t u = __float_as_uint(x), sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint8_t)(sign | 0x7fu);  // NaN
    if (a >= 0x43e00000u) return (uint8_t)(sign | 0x7eu); // >= 448 (and Inf): saturate
    if (a < 0x3c800000u) {                                // below 2^-6: subnormal codes m * 2^-9
        if (a < 0x3a800000u) return (uint8_t)sign;        // <= 2^-10 rounds to 0
        const uint32_t e = a >> 23, man = (a & 0x7fffffu) | 0x800000u, shift = 141u - e;
        uint32_t q = man >> shift;
        const uint32_t rem = man & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint8_t)(sign | q);
    }
    uint32_t v = a - (120u << 23);
    v += 0x7ffffu + ((v >> 20) & 1u);
    return (uint8_t)(sign | (v >> 20));
}

// sat8 of kernels/w8a8.c: NaN -> 0, clamp, then round to nearest even.
__device__ __forceinline__ int8_t sat8(float v) {
    if (v != v) return 0;
    v = v < -128.0f ? -128.0f : v > 127.0f ? 127.0f : v;
    return (int8_t)__float2int_rn(v);
}

// One block per token t < T_pad: amax over the row (as float bits: an
// integer max orders |x|, and bits >= 0x7f800000 are an Inf or a NaN), the
// scale, then the codes.
template <class A>
__global__ void __launch_bounds__(ACTQ_THREADS) actq(pq_actq act, const A *x, int T, int cols, int ld, uint8_t *q,
                                                      float *scale) {
    const int t = blockIdx.x;
    uint8_t *qt = q + (size_t)t * ld;
    if (t >= T) { // padding token
        for (int c = threadIdx.x; c < ld; c += blockDim.x) qt[c] = 0;
        if (threadIdx.x == 0) scale[t] = 0.0f;
        return;
    }
    const A *xt = x + (size_t)t * cols;
    uint32_t m = 0;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = max(m, __float_as_uint(Act<A>::to_f(xt[c])) & 0x7fffffffu);
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    __shared__ uint32_t wmax[ACTQ_THREADS / 32];
    if ((threadIdx.x & 31) == 0) wmax[threadIdx.x >> 5] = m;
    __syncthreads();
    m = 0;
    for (int w = 0; w < ACTQ_THREADS / 32; w++) m = max(m, wmax[w]);
    const bool bad = m >= 0x7f800000u;
    const float amax = __uint_as_float(m), st = act.static_scale;
    const bool is_static = st > 0.0f;
    float s, mul = 0.0f; // the scale, and the multiplier of the multiplying forms
    if (act.type == PQ_ACTQ_INT8) {
        mul = __fdiv_rn(127.0f, amax);
        s = is_static ? st : __fdiv_rn(amax, 127.0f);
    } else {
        s = __fdiv_rn(amax, 448.0f);
        if (s < PQ_FP8_MIN_SCALE) s = PQ_FP8_MIN_SCALE;
        if (is_static) mul = __fdiv_rn(1.0f, st), s = st;
    }
    for (int c = threadIdx.x; c < ld; c += blockDim.x) {
        uint8_t code = 0;
        if (c < cols && !bad) {
            const float v = Act<A>::to_f(xt[c]);
            if (act.type == PQ_ACTQ_INT8) code = (uint8_t)sat8(is_static ? __fdiv_rn(v, st) : __fmul_rn(v, mul));
            else code = e4m3_encode(is_static ? __fmul_rn(v, mul) : __fdiv_rn(v, s));
        }
        qt[c] = code;
    }
    if (threadIdx.x == 0) scale[t] = bad ? __int_as_float(0x7fc00000) : s;
}

// y[t][r] = sx[t] * (sw[r] * (float)acc[t][r]) (+ bias[r]), as w8a8.c's scale_out.
template <bool INT> __global__ void epilogue(const void *acc, int ldacc, const float *sx, const float *sw,
                                             int per_channel, const float *bias, int T, int rows, float *y) {
    const size_t n = (size_t)T * rows;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int t = (int)(i / rows), r = (int)(i % rows);
        const size_t k = (size_t)t * ldacc + r;
        const float a = INT ? (float)((const int32_t *)acc)[k] : ((const float *)acc)[k];
        float v = __fmul_rn(sx[t], __fmul_rn(sw[per_channel ? r : 0], a));
        if (bias) v = __fadd_rn(v, bias[r]);
        y[i] = v;
    }
}

} // namespace

pq_status pq_actq_cuda(const pq_actq *act, pq_act_dtype dt, const uint16_t *d_x, int T, int cols, int ld, int T_pad,
                       uint8_t *d_q, float *d_scale, void *stream) {
    PQ_FAIL_IF(act->type == PQ_ACTQ_NONE || ld < cols || T_pad < T || T < 0, PQ_ERR_ARG,
               "activation quantization %d of [%d x %d] into [%d x %d]", (int)act->type, T, cols, T_pad, ld);
    if (T_pad == 0) return PQ_OK;
    PQ_ACT_DISPATCH(dt, actq<A><<<(unsigned)T_pad, ACTQ_THREADS, 0, (cudaStream_t)stream>>>(*act, (const A *)d_x, T,
                                                                                            cols, ld, d_q, d_scale));
    PQ_CUDA_LAUNCHED("actq");
    return PQ_OK;
}

pq_status pq_w8a8_epilogue_cuda(int is_int, const void *d_acc, int ldacc, const float *d_sx, const float *d_sw,
                                int per_channel, const float *d_bias, int T, int rows, float *d_y, void *stream) {
    const size_t n = (size_t)T * rows;
    if (n == 0) return PQ_OK;
    if (is_int)
        epilogue<true><<<pq_cuda_blocks(n), PQ_CUDA_THREADS, 0, (cudaStream_t)stream>>>(d_acc, ldacc, d_sx, d_sw,
                                                                                        per_channel, d_bias, T, rows, d_y);
    else
        epilogue<false><<<pq_cuda_blocks(n), PQ_CUDA_THREADS, 0, (cudaStream_t)stream>>>(d_acc, ldacc, d_sx, d_sw,
                                                                                         per_channel, d_bias, T, rows, d_y);
    PQ_CUDA_LAUNCHED("w8a8 epilogue");
    return PQ_OK;
}
