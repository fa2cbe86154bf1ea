// kernels/w8a8.h — W8A8 linears on the CPU: the activations are quantized
// to 8 bits before the product (INT8 x INT8 with exact integer sums, or
// FP8 E4M3 x FP8 E4M3 emulated with exact products and FP32 sums), as vLLM
// runs compressed-tensors' int-quantized (w8a8) and float-quantized
// (fp8-dynamic) checkpoints.
//
// Activation quantization, per token t (row of x), vLLM's kernels
// (csrc/quantization/compressed_tensors/int8_quant_kernels.cu,
// csrc/quantization/fp8/common.cu):
//   amax   = max_c |x[t][c]|
//   INT8 dynamic  scale = amax / 127,  q = sat8(rne(x * (127 / amax)))
//   INT8 static   scale = s,           q = sat8(rne(x / s))
//   FP8  dynamic  scale = max(amax / 448, 1 / (448 * 512)),  q = e4m3(x / scale)
//   FP8  static   scale = s,           q = e4m3(x * (1 / s))
// rne rounds to nearest, ties to even; sat8 clamps to [-128, 127] and maps a
// NaN (0 * Inf when amax = 0 or tiny) to 0, like PTX cvt.rni.sat.s8.f32;
// e4m3 is pq_fp8_e4m3_encode (RNE, saturating to +-448). A row of zeros has
// scale 0 (INT8) or the floor 1/(448*512) (FP8) and all codes 0.
// Non-finite input: a token holding a NaN or an Inf gets scale NaN and all
// codes 0, so its outputs are NaN. (vLLM's fmaxf skips a NaN and codes it
// 0, silently; pq would rather show the broken activation.)
//
// Products, for output row r (weight scale sw[r]) and token t:
//   INT8  acc = sum_c qx[t][c] * qw[r][c]           exact in int32
//   FP8   acc = fp32 sum of decode(qx) * decode(qw)  (each product exact)
//   y[t][r] = sx[t] * (sw[r] * (float)acc) (+ bias[r])
// in that order, as vLLM's CUTLASS epilogue (ScaledEpilogue: Compute0 =
// scale_b * acc, Compute1 = scale_a * that); the bias is a separate add
// here (CUTLASS fuses it into one fma, a last-bit difference) so that every
// version, vectorized or not, rounds the same way.
//
// INT8 exactness: |qx| <= 128 and |qw| <= 128, so |acc| <= 16384 * cols,
// which fits int32 for cols <= PQ_W8A8_MAX_COLS = 131071 (dynamic
// activations never reach -128: 127 * 128 * cols). Every kernel is exact;
// the optimized ones equal the _ref bit for bit, int32 sums and floats.
//
// FP8: an E4M3 value is an integer multiple of 2^-9 below 2^9, so a product
// is a multiple of 2^-18 below 2^18 with at most 8 significant bits: exact in
// fp32. The _ref sums them in double, which is exact (every partial sum is a
// multiple of 2^-18 below 2^35 for cols <= PQ_W8A8_MAX_COLS, within double's
// 53 bits) and so independent of order; the optimized version sums in fp32
// (OpenBLAS sgemm / the FP8 GEMV), as cuBLASLt's FP8 GEMM does
// (CUBLAS_COMPUTE_32F; Hopper's tensor cores keep fewer accumulator bits
// unless partial sums are promoted). Its error is that of any fp32 sum:
// |got - exact| <= cols * 2^-24 * sum_c |products| (plus the epilogue's
// roundings), the tolerance the tests use.
#ifndef PQ_W8A8_H
#define PQ_W8A8_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/fp8.h"
#include "kernels/int8.h"

#define PQ_W8A8_MAX_COLS 131071
#define PQ_FP8_MIN_SCALE (1.0f / (448.0f * 512.0f))

// Quantized activations of T tokens. ld = cols rounded up to 64; the
// codes past cols are 0 (INT8) so kernels may read whole 64-byte vectors.
typedef struct {
    int T, cols, ld;
    int8_t *q;      // [T][ld] INT8 codes, or E4M3 bytes for FP8
    float *scale;   // [T] per-token scale (the static scale when static; NaN: non-finite token)
    int32_t *sum;   // [T] sum_c q[t][c] (INT8; the VNNI kernels' offset correction)
} pq_w8a8_act;

// Bytes for the quantized activations of T tokens of `cols` columns, and a
// view of them laid out in mem (64-byte aligned, that many bytes).
size_t pq_w8a8_act_bytes(int T, int cols);
pq_w8a8_act pq_w8a8_act_view(void *mem, int T, int cols);

// sat8 of the spec, shared by every version: rne and saturate to int8,
// NaN -> 0 (PTX cvt.rni.sat.s8.f32). The clamp comes first so the rounding
// never sees a value out of range.
static inline int8_t pq_sat8(float v) {
    if (v != v) return 0;
    v = v < -128.0f ? -128.0f : v > 127.0f ? 127.0f : v;
    return (int8_t)nearbyintf(v);
}

// Token t of a holds a non-finite element: scale NaN, codes 0 (every version).
static inline void pq_w8a8_bad_token(pq_w8a8_act *a, int t) {
    memset(a->q + (size_t)t * a->ld, 0, (size_t)a->ld);
    a->scale[t] = NAN;
    a->sum[t] = 0;
}

// Quantizes x[T][cols] into a (made by pq_w8a8_act_view for T, cols);
// static_scale > 0: that static per-tensor scale, 0: dynamic per token.
// The _cpu version equals the _ref byte for byte (codes, scales, sums).
void pq_actq_int8_ref(const float *x, int T, int cols, float static_scale, pq_w8a8_act *a);
void pq_actq_int8_cpu(const float *x, int T, int cols, float static_scale, pq_w8a8_act *a);
void pq_actq_fp8_ref(const float *x, int T, int cols, float static_scale, pq_w8a8_act *a);
void pq_actq_fp8_cpu(const float *x, int T, int cols, float static_scale, pq_w8a8_act *a);

// Where the product goes: y[t * ldy + r] = the scaled output (+ bias[r]),
// or, when acc is set instead (tests), acc[t * ldy + r] = the raw int32 sum.
typedef struct {
    float *y;
    int32_t *acc;
    int ldy;
    const float *bias;   // [rows] or NULL
} pq_w8a8_out;

// INT8 x INT8, rows r0..r0+n of w for all a->T tokens (any T; T <=
// PQ_GEMV_MAX_T streams the weight rows as stored, larger T packs them
// into scratch, PQ_W8A8_PACK_ROWS rows at a time). scratch:
// pq_w8a8_gemm_scratch_bytes(n, cols) bytes, 64-byte aligned (the _ref and
// AVX2 versions need none). cols <= PQ_W8A8_MAX_COLS.
#define PQ_W8A8_PACK_ROWS 32
void pq_w8a8_gemm_ref(const pq_int8_weight *w, int r0, int n, const pq_w8a8_act *a, const pq_w8a8_out *o);
void pq_w8a8_gemm_cpu(const pq_int8_weight *w, int r0, int n, const pq_w8a8_act *a, const pq_w8a8_out *o,
                      void *scratch);
size_t pq_w8a8_gemm_scratch_bytes(int n, int cols);

// FP8 x FP8, rows r0..r0+n. The _cpu version takes the activations decoded
// by pq_w8a8_fp8_decode_cpu (xd: pq_w8a8_fp8_decoded_bytes(T, cols)) and, for
// T > PQ_GEMV_MAX_T, a scratch of pq_w8a8_fp8_scratch_bytes(n, cols) for the
// weight rows decoded. No acc output. It runs the FP8 GEMV for a few
// tokens; for more, AMX BF16 tiles where pq_cpu_amx() (E4M3 values are BF16
// values: exact products, fp32 tile sums; kernels/w8a8_amx.c), else decoded
// f32 rows and sgemm.
void pq_w8a8_fp8_ref(const pq_fp8_weight *w, int r0, int n, const pq_w8a8_act *a, const pq_w8a8_out *o);
void pq_w8a8_fp8_cpu(const pq_fp8_weight *w, int r0, int n, const pq_w8a8_act *a, const void *xd,
                     const pq_w8a8_out *o, void *scratch);
size_t pq_w8a8_fp8_decoded_bytes(int T, int cols);
size_t pq_w8a8_fp8_scratch_bytes(int n, int cols);
// Tokens t0..t0+nt of a decoded (exactly) into their rows of xd, laid out for
// all a->T tokens as pq_w8a8_fp8_cpu reads them: f32 [T][cols], or BF16
// [T][cols rounded up to 32] for the AMX GEMM.
void pq_w8a8_fp8_decode_cpu(const pq_w8a8_act *a, int t0, int nt, void *xd);
// BF16 of an E4M3 code (exact): the specification of the AMX decoding.
uint16_t pq_fp8_e4m3_bf16(uint8_t b);

// ISA versions (kernels/w8a8_avx2.c, w8a8_avx512.c, w8a8_amx.c); use the _cpu entry
// points instead (tests call them directly).
void pq_actq_int8_avx2(const float *x, int T, int cols, float static_scale, pq_w8a8_act *a);
void pq_actq_fp8_avx2(const float *x, int T, int cols, float static_scale, pq_w8a8_act *a);
void pq_w8a8_gemm_avx2(const pq_int8_weight *w, int r0, int n, const pq_w8a8_act *a, const pq_w8a8_out *o);
void pq_actq_int8_avx512(const float *x, int T, int cols, float static_scale, pq_w8a8_act *a);
void pq_actq_fp8_avx512(const float *x, int T, int cols, float static_scale, pq_w8a8_act *a);
void pq_w8a8_gemm_avx512(const pq_int8_weight *w, int r0, int n, const pq_w8a8_act *a, const pq_w8a8_out *o,
                         void *scratch);
// The AVX-512 GEMM's packing, shared with the AMX one: rows r0..r0+n (zero
// rows to a whole number of PQ_W8A8_PACK_ROWS) into p (64-byte aligned), row
// i of group g, columns 4j..4j+3 at byte (g * kq + j) * 64 + 4 i, each byte
// XOR offset (0x80: the VNNI kernel's unsigned weights; 0: as stored); kq >=
// ceil(cols / 4), columns past cols are weight 0.
void pq_w8a8_pack_avx512(const pq_int8_weight *w, int r0, int n, int kq, uint8_t offset, uint8_t *p);
// AMX tiles (kernels/w8a8_amx.c), where pq_cpu_amx(): the GEMMs only (any
// T, chosen by _cpu for T > PQ_GEMV_MAX_T). INT8: the _ref's bits. FP8: xb
// from pq_w8a8_fp8_decode_amx (BF16 rows, cols rounded up to 32).
void pq_w8a8_gemm_amx(const pq_int8_weight *w, int r0, int n, const pq_w8a8_act *a, const pq_w8a8_out *o,
                      void *scratch);
void pq_w8a8_fp8_decode_amx(const pq_w8a8_act *a, int t0, int nt, uint16_t *xb);
void pq_w8a8_fp8_amx(const pq_fp8_weight *w, int r0, int n, const pq_w8a8_act *a, const uint16_t *xb,
                     const pq_w8a8_out *o, void *scratch);

#endif
