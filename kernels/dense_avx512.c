// AVX-512 GEMV of kernels/dense.h: 16 weights per step widened with
// vcvtph2ps (F16) or a shift (BF16), independent accumulator chains (one
// token: four rows at a time, two chains each; more tokens: one row at a
// time, four chains per token), and a software prefetch far enough ahead to
// keep several rows of a bandwidth-bound stream in flight.
#include <immintrin.h>

#include "kernels/dense.h"
#include "kernels/linear.h"
#include "kernels/simd.h"


static inline __m512 load16(pq_dense_type dt, const void *w, size_t i) {
    switch (dt) {
    case PQ_DENSE_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i)));
    case PQ_DENSE_BF16:
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i))), 16));
    case PQ_DENSE_F32: break;
    }
    return _mm512_loadu_ps((const float *)w + i);
}

// One token (decode): rows four at a time, two accumulators each (eight
// independent FMA chains), each 32 columns of x loaded once for four rows.
// Returns the first row it left (fewer than four remain).
PQ_INLINE int gemv1_rows4(pq_dense_type dt, const void *w, int cols, int r0, int n, const float *x, float *y) {
    const size_t es = dt == PQ_DENSE_F32 ? 4 : 2;
    int r = r0;
    for (; r + 4 <= r0 + n; r += 4) {
        size_t w0 = (size_t)r * cols;
        __m512 a[4], b[4];
        for (int i = 0; i < 4; i++) a[i] = b[i] = _mm512_setzero_ps();
        int c = 0;
        for (; c + 32 <= cols; c += 32) {
            __m512 x0 = _mm512_loadu_ps(x + c), x1 = _mm512_loadu_ps(x + c + 16);
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                size_t at = w0 + (size_t)i * cols + c;
                pq_prefetch_stream((const char *)w + at * es);
                if (es == 4) pq_prefetch_stream((const char *)w + at * es + 64);
                a[i] = _mm512_fmadd_ps(load16(dt, w, at), x0, a[i]);
                b[i] = _mm512_fmadd_ps(load16(dt, w, at + 16), x1, b[i]);
            }
        }
        for (; c + 16 <= cols; c += 16) {
            __m512 x0 = _mm512_loadu_ps(x + c);
            for (int i = 0; i < 4; i++) a[i] = _mm512_fmadd_ps(load16(dt, w, w0 + (size_t)i * cols + c), x0, a[i]);
        }
        for (int i = 0; i < 4; i++) {
            float s = _mm512_reduce_add_ps(_mm512_add_ps(a[i], b[i]));
            for (int k = c; k < cols; k++) s += pq_dense_at(dt, w, w0 + (size_t)i * cols + k) * x[k];
            y[r + i] = s;
        }
    }
    return r;
}

void pq_dense_gemv_avx512(pq_dense_type dt, const void *w, int cols, int r0, int n, const float *x, int T,
                          float *y, int ldy) {
    if (T == 1) { // one instance per type, so that load16's switch folds away
        int r = dt == PQ_DENSE_F16    ? gemv1_rows4(PQ_DENSE_F16, w, cols, r0, n, x, y)
                : dt == PQ_DENSE_BF16 ? gemv1_rows4(PQ_DENSE_BF16, w, cols, r0, n, x, y)
                                      : gemv1_rows4(PQ_DENSE_F32, w, cols, r0, n, x, y);
        n -= r - r0;
        r0 = r;
    }
    size_t es = dt == PQ_DENSE_F32 ? 4 : 2;
    for (int r = r0; r < r0 + n; r++) {
        size_t row = (size_t)r * cols;
        const char *bytes = (const char *)w + row * es;
        __m512 acc[PQ_GEMV_MAX_T][4];
        for (int t = 0; t < T; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = _mm512_setzero_ps();
        int c = 0;
        for (; c + 64 <= cols; c += 64) {
            pq_prefetch_stream(bytes + (size_t)c * es);
            pq_prefetch_stream(bytes + (size_t)c * es + 64);
            if (es == 4) {
                pq_prefetch_stream(bytes + (size_t)c * es + 128);
                pq_prefetch_stream(bytes + (size_t)c * es + 192);
            }
            __m512 w0 = load16(dt, w, row + c), w1 = load16(dt, w, row + c + 16), w2 = load16(dt, w, row + c + 32),
                   w3 = load16(dt, w, row + c + 48);
            for (int t = 0; t < T; t++) {
                const float *xt = x + (size_t)t * cols + c;
                acc[t][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xt), acc[t][0]);
                acc[t][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xt + 16), acc[t][1]);
                acc[t][2] = _mm512_fmadd_ps(w2, _mm512_loadu_ps(xt + 32), acc[t][2]);
                acc[t][3] = _mm512_fmadd_ps(w3, _mm512_loadu_ps(xt + 48), acc[t][3]);
            }
        }
        for (; c + 16 <= cols; c += 16) {
            __m512 w0 = load16(dt, w, row + c);
            for (int t = 0; t < T; t++) acc[t][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + (size_t)t * cols + c), acc[t][0]);
        }
        for (int t = 0; t < T; t++) {
            float s = _mm512_reduce_add_ps(
                _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]), _mm512_add_ps(acc[t][2], acc[t][3])));
            for (int k = c; k < cols; k++) s += pq_dense_at(dt, w, row + k) * x[(size_t)t * cols + k];
            y[(size_t)t * ldy + r] = s;
        }
    }
}
