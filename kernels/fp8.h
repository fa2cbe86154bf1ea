// kernels/fp8.h — FP8 E4M3 ("float8_e4m3fn") weights with a per-tensor or
// per-output-channel scale (the compressed-tensors float-quantized layout).
// The 8-bit integer weights are kernels/int8.h; their ISA versions share
// this format's 8-bit GEMV (kernels/fp8_avx2.c, fp8_avx512.c).
//
// E4M3: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; 0x7f /
// 0xff are NaN; largest finite 448; subnormals down to 2^-9. Encoding rounds
// to nearest, ties to even, and saturates to +-448 (Inf too); NaN encodes as
// 0x7f with its sign.
//   w[r][c] = scale[r or 0] * decode(q[r][c])      (one fp32 multiply)
// The optimized rows are bit-exact with the _ref; the optimized GEMVs sum
// sum_c decode(q) x_c in fp32 and multiply by the row's scale
// once at the end: relative L2 ~1e-6 against the double _ref (tests: 1e-5).
// A NaN code in a row makes that row's GEMV output NaN, as in the _ref.
#ifndef PQ_FP8_H
#define PQ_FP8_H

#include <stddef.h>
#include <stdint.h>

uint8_t pq_fp8_e4m3_encode(float x);
float pq_fp8_e4m3_decode(uint8_t b);  // exact; -0.0 for 0x80, NaN for 0x7f / 0xff

typedef struct {
    int rows, cols;
    const uint8_t *q;        // [rows][cols] E4M3 bytes; borrowed
    const float *scales;     // [rows] (per channel) or [1] (per tensor); borrowed
    int per_channel;
} pq_fp8_weight;

// Rows as f32 (bit-exact _cpu) and fused GEMV (T <= PQ_GEMV_MAX_T), as in kernels/qpack.h.
void pq_fp8_rows_ref(const pq_fp8_weight *w, int r0, int n, float *out);
void pq_fp8_rows_cpu(const pq_fp8_weight *w, int r0, int n, float *out);
void pq_fp8_gemv_ref(const pq_fp8_weight *w, int r0, int n, const float *x, int T, float *y, int ldy);
void pq_fp8_gemv_cpu(const pq_fp8_weight *w, int r0, int n, const float *x, int T, float *y, int ldy);

// ISA versions (kernels/fp8_avx2.c, fp8_avx512.c); use the _cpu entry points instead.
void pq_fp8_rows_avx2(const pq_fp8_weight *w, int r0, int n, float *out);
void pq_fp8_gemv_avx2(const pq_fp8_weight *w, int r0, int n, const float *x, int T, float *y, int ldy);
void pq_fp8_gemv_avx512(const pq_fp8_weight *w, int r0, int n, const float *x, int T, float *y, int ldy);

// Bytes as stored: the codes plus the scales at 2 bytes each.
size_t pq_fp8_stored_bytes(const pq_fp8_weight *w);

#endif
