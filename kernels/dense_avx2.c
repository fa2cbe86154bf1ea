// AVX2 + FMA + F16C versions of kernels/dense.h.
#include <immintrin.h>
#include <string.h>

#include "kernels/dense.h"
#include "kernels/linear.h"
#include "kernels/simd.h"

void pq_dense_rows_avx2(pq_dense_type dt, const void *w, int cols, int r0, int n, float *out) {
    if (dt == PQ_DENSE_F32) {
        memcpy(out, (const float *)w + (size_t)r0 * cols, (size_t)n * cols * sizeof(float));
        return;
    }
    size_t base = (size_t)r0 * cols, total = (size_t)n * cols, i = 0;
    for (; i + 8 <= total; i += 8) _mm256_storeu_ps(out + i, pq_dense_load8(dt, w, base + i));
    for (; i < total; i++) out[i] = pq_dense_at(dt, w, base + i);
}

// One token (decode): rows four at a time, two accumulators each, so that
// eight independent FMA chains hide the FMA latency and each 8 columns of x
// are loaded once for four rows. (One row at a time with two chains was
// bound by the FMA latency: ~8 GB/s of F16 weights even from L2.) Returns
// the first row it left (fewer than four remain).
PQ_INLINE int gemv1_rows4(pq_dense_type dt, const void *w, int cols, int r0, int n, const float *x, float *y) {
    const size_t es = dt == PQ_DENSE_F32 ? 4 : 2;
    int r = r0;
    for (; r + 4 <= r0 + n; r += 4) {
        size_t w0 = (size_t)r * cols, w1 = w0 + cols, w2 = w1 + cols, w3 = w2 + cols;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        int c = 0;
        for (; c + 16 <= cols; c += 16) {
            if (es == 4 || c % 32 == 0) { // a line of each row per 64 bytes read
                pq_prefetch_stream((const char *)w + (w0 + c) * es);
                pq_prefetch_stream((const char *)w + (w1 + c) * es);
                pq_prefetch_stream((const char *)w + (w2 + c) * es);
                pq_prefetch_stream((const char *)w + (w3 + c) * es);
            }
            __m256 x0 = _mm256_loadu_ps(x + c), x1 = _mm256_loadu_ps(x + c + 8);
            a0 = _mm256_fmadd_ps(pq_dense_load8(dt, w, w0 + c), x0, a0);
            b0 = _mm256_fmadd_ps(pq_dense_load8(dt, w, w0 + c + 8), x1, b0);
            a1 = _mm256_fmadd_ps(pq_dense_load8(dt, w, w1 + c), x0, a1);
            b1 = _mm256_fmadd_ps(pq_dense_load8(dt, w, w1 + c + 8), x1, b1);
            a2 = _mm256_fmadd_ps(pq_dense_load8(dt, w, w2 + c), x0, a2);
            b2 = _mm256_fmadd_ps(pq_dense_load8(dt, w, w2 + c + 8), x1, b2);
            a3 = _mm256_fmadd_ps(pq_dense_load8(dt, w, w3 + c), x0, a3);
            b3 = _mm256_fmadd_ps(pq_dense_load8(dt, w, w3 + c + 8), x1, b3);
        }
        if (c + 8 <= cols) {
            __m256 x0 = _mm256_loadu_ps(x + c);
            a0 = _mm256_fmadd_ps(pq_dense_load8(dt, w, w0 + c), x0, a0);
            a1 = _mm256_fmadd_ps(pq_dense_load8(dt, w, w1 + c), x0, a1);
            a2 = _mm256_fmadd_ps(pq_dense_load8(dt, w, w2 + c), x0, a2);
            a3 = _mm256_fmadd_ps(pq_dense_load8(dt, w, w3 + c), x0, a3);
            c += 8;
        }
        float s[4] = {pq_hsum_ps(_mm256_add_ps(a0, b0)), pq_hsum_ps(_mm256_add_ps(a1, b1)),
                      pq_hsum_ps(_mm256_add_ps(a2, b2)), pq_hsum_ps(_mm256_add_ps(a3, b3))};
        for (int i = 0; i < 4; i++) {
            for (int k = c; k < cols; k++) s[i] += pq_dense_at(dt, w, w0 + (size_t)i * cols + k) * x[k];
            y[r + i] = s[i];
        }
    }
    return r;
}

// y[t][r] for t < T (T <= 4): each weight row is read once for all tokens.
void pq_dense_gemv_avx2(pq_dense_type dt, const void *w, int cols, int r0, int n, const float *x, int T,
                        float *y, int ldy) {
    if (T == 1) { // one instance per type, so that load8's switch folds away
        int r = dt == PQ_DENSE_F16    ? gemv1_rows4(PQ_DENSE_F16, w, cols, r0, n, x, y)
                : dt == PQ_DENSE_BF16 ? gemv1_rows4(PQ_DENSE_BF16, w, cols, r0, n, x, y)
                                      : gemv1_rows4(PQ_DENSE_F32, w, cols, r0, n, x, y);
        n -= r - r0;
        r0 = r;
    }
    for (int r = r0; r < r0 + n; r++) {
        size_t row = (size_t)r * cols;
        __m256 acc[PQ_GEMV_MAX_T][2];
        for (int t = 0; t < T; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
        int c = 0;
        for (; c + 16 <= cols; c += 16) {
            __m256 w0 = pq_dense_load8(dt, w, row + c), w1 = pq_dense_load8(dt, w, row + c + 8);
            for (int t = 0; t < T; t++) {
                const float *xt = x + (size_t)t * cols + c;
                acc[t][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xt), acc[t][0]);
                acc[t][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xt + 8), acc[t][1]);
            }
        }
        for (int t = 0; t < T; t++) {
            float s = pq_hsum_ps(_mm256_add_ps(acc[t][0], acc[t][1]));
            for (int k = c; k < cols; k++) s += pq_dense_at(dt, w, row + k) * x[(size_t)t * cols + k];
            y[(size_t)t * ldy + r] = s;
        }
    }
}
