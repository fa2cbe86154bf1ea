// kernels/int8.h — 8-bit integer weights with a per-output-channel scale
// (the compressed-tensors int-quantized layout of w8a8):
//   w[r][c] = scale[r] * (float)q[r][c]             (one fp32 multiply)
// The optimized rows are bit-exact with the _ref; the optimized GEMVs sum
// sum_c q x_c in fp32 and multiply by the row's scale once at the end:
// relative L2 ~1e-6 against the double _ref (tests: 1e-5). The ISA
// versions live in kernels/fp8_avx2.c and fp8_avx512.c, whose 8-bit GEMV
// serves both formats.
#ifndef PQ_INT8_H
#define PQ_INT8_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int rows, cols;
    const int8_t *q;         // [rows][cols]; borrowed
    const float *scales;     // [rows]; borrowed
} pq_int8_weight;

// Rows as f32 (bit-exact _cpu) and fused GEMV (T <= PQ_GEMV_MAX_T), as in kernels/qpack.h.
void pq_int8_rows_ref(const pq_int8_weight *w, int r0, int n, float *out);
void pq_int8_rows_cpu(const pq_int8_weight *w, int r0, int n, float *out);
void pq_int8_gemv_ref(const pq_int8_weight *w, int r0, int n, const float *x, int T, float *y, int ldy);
void pq_int8_gemv_cpu(const pq_int8_weight *w, int r0, int n, const float *x, int T, float *y, int ldy);

// ISA versions (kernels/fp8_avx2.c, fp8_avx512.c); use the _cpu entry points instead.
void pq_int8_rows_avx2(const pq_int8_weight *w, int r0, int n, float *out);
void pq_int8_gemv_avx2(const pq_int8_weight *w, int r0, int n, const float *x, int T, float *y, int ldy);
void pq_int8_gemv_avx512(const pq_int8_weight *w, int r0, int n, const float *x, int T, float *y, int ldy);

// Bytes as stored: the codes plus the scales at 2 bytes each.
size_t pq_int8_stored_bytes(const pq_int8_weight *w);

#endif
