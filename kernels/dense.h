// kernels/dense.h — dense weights stored as F32, F16 or BF16.
//
// W is row-major [rows, cols] (out_features x in_features, the Hugging Face
// nn.Linear layout). Two operations, each a _ref (spec) and a _cpu version:
//   rows -> f32   widen rows r0..r0+n of W into out[n][cols] (exact)
//   gemv          y[t][r] = sum_c W[r][c] * x[t][c] for t < T <= PQ_GEMV_MAX_T (kernels/linear.h)
// The widening is exact, so the _cpu version must equal the _ref bit for
// bit; the gemv sums in a different order (tolerance in the tests).
#ifndef PQ_DENSE_H
#define PQ_DENSE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/half.h"

typedef enum { PQ_DENSE_F32, PQ_DENSE_F16, PQ_DENSE_BF16 } pq_dense_type;

// Element i of w widened to f32 (exact), whatever w's alignment: the scalar
// read every version shares (the _ref's, and the vector versions' last columns).
static inline float pq_dense_at(pq_dense_type dt, const void *w, size_t i) {
    const unsigned char *p = (const unsigned char *)w;
    uint16_t h;
    float f;
    switch (dt) {
    case PQ_DENSE_F16: return memcpy(&h, p + 2 * i, 2), pq_fp16_to_f32(h);
    case PQ_DENSE_BF16: return memcpy(&h, p + 2 * i, 2), pq_bf16_to_f32(h);
    case PQ_DENSE_F32: break;
    }
    return memcpy(&f, p + 4 * i, 4), f;
}

void pq_dense_rows_ref(pq_dense_type dt, const void *w, int cols, int r0, int n, float *out);
void pq_dense_rows_cpu(pq_dense_type dt, const void *w, int cols, int r0, int n, float *out);

// Rows r0..r0+n of y are written: y[t*ldy + r] for t < T.
void pq_dense_gemv_ref(pq_dense_type dt, const void *w, int cols, int r0, int n, const float *x, int T,
                       float *y, int ldy);
void pq_dense_gemv_cpu(pq_dense_type dt, const void *w, int cols, int r0, int n, const float *x, int T,
                       float *y, int ldy);

// ISA versions (kernels/dense_avx2.c, dense_avx512.c); use the _cpu entry points instead.
void pq_dense_rows_avx2(pq_dense_type dt, const void *w, int cols, int r0, int n, float *out);
void pq_dense_gemv_avx2(pq_dense_type dt, const void *w, int cols, int r0, int n, const float *x, int T,
                        float *y, int ldy);
void pq_dense_gemv_avx512(pq_dense_type dt, const void *w, int cols, int r0, int n, const float *x, int T,
                          float *y, int ldy);

#endif
