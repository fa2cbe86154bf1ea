#include "qpack.h"

#include <math.h>
#include <string.h>

#include "kernels/cpu.h"

void pq_qpack_rows_ref(const pq_qpack *w, int r0, int n, float *out) {
    for (int r = 0; r < n; r++)
        for (int c = 0; c < w->cols; c++) out[(size_t)r * w->cols + c] = pq_qpack_value(w, r0 + r, c);
}

void pq_qpack_gemv_ref(const pq_qpack *w, int r0, int n, const float *x, int T, float *y, int ldy) {
    for (int t = 0; t < T; t++)
        for (int r = r0; r < r0 + n; r++) {
            double acc = 0;
            for (int c = 0; c < w->cols; c++) acc += (double)pq_qpack_value(w, r, c) * x[(size_t)t * w->cols + c];
            y[(size_t)t * ldy + r] = (float)acc;
        }
}

int pq_qpack_gemv_aligned(const pq_qpack *w, int lanes) {
    if (w->g_idx) return 0;
    if (w->group >= w->cols) return 1;
    int per = pq_qpack_per_word(w->bits);
    if (w->group % per) return 0;
    int wpg = w->group / per; // words per group
    return wpg % lanes == 0 || lanes % wpg == 0;
}

size_t pq_qpack_gemv_prepare_bytes(const pq_qpack *w, int T) {
    // nb*L*P <= cols columns: x and the group indices; nb*L <= cols/P sums per token; the group sums in double
    size_t cols = (size_t)w->cols;
    return ((size_t)T * (cols + cols / pq_qpack_per_word(w->bits) + 2 * pq_qpack_ngroups(w->cols, w->group)) + cols) *
           sizeof(float);
}

void pq_qpack_gemv_prepare(const pq_qpack *w, const float *x, int T, int lanes, float *xp) {
    int per = pq_qpack_per_word(w->bits), nb = w->cols / per / lanes, ng = pq_qpack_ngroups(w->cols, w->group);
    int aligned = pq_qpack_gemv_aligned(w, lanes);
    size_t blk = (size_t)(per + 1) * lanes; // floats per block and token
    int32_t *gi = (int32_t *)(xp + (size_t)nb * T * blk);
    double *X = (double *)(gi + (size_t)nb * per * lanes); // (8-byte aligned: nb*per*lanes is even)
    float scale[32];
    for (int i = 0; i < per; i++)
        scale[i] = i == per - 1 && per * w->bits == 32 ? 1.0f : ldexpf(1.0f, -w->bits * i);
    if (!aligned) memset(X, 0, (size_t)T * ng * sizeof *X);
    for (int b = 0; b < nb; b++)
        for (int t = 0; t < T; t++) {
            float *o = xp + ((size_t)b * T + t) * blk;
            int c0 = b * lanes * per;
            const float *xb = x + (size_t)t * w->cols + c0;
            for (int j = 0; j < lanes; j++) {
                float s = 0;
                for (int i = 0; i < per; i++) {
                    float v = xb[j * per + i];
                    o[i * lanes + j] = v * scale[i];
                    s += v;
                    if (aligned) continue;
                    int g = pq_qpack_group_of(w, c0 + j * per + i);
                    if (t == 0) gi[((size_t)b * per + i) * lanes + j] = g;
                    X[(size_t)t * ng + g] += v;
                }
                o[per * lanes + j] = s;
            }
        }
}

// Lanes of the GEMV this CPU runs; 0 for the _ref.
static int cpu_lanes(void) {
    pq_isa isa = pq_cpu_isa();
    return isa == PQ_ISA_AVX512 ? 16 : isa == PQ_ISA_AVX2 ? 8 : 0;
}

void pq_qpack_gemv_prepare_cpu(const pq_qpack *w, const float *x, int T, float *xp) {
    int lanes = cpu_lanes();
    if (lanes) pq_qpack_gemv_prepare(w, x, T, lanes, xp);
}

void pq_qpack_rows_cpu(const pq_qpack *w, int r0, int n, float *out) {
    if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_qpack_rows_avx2(w, r0, n, out);
    else pq_qpack_rows_ref(w, r0, n, out);
}

void pq_qpack_gemv_cpu(const pq_qpack *w, int r0, int n, const float *x, int T, const float *xp, float *y,
                       int ldy) {
    int lanes = cpu_lanes();
    if (lanes == 16) pq_qpack_gemv_avx512(w, r0, n, x, T, xp, y, ldy);
    else if (lanes == 8) pq_qpack_gemv_avx2(w, r0, n, x, T, xp, y, ldy);
    else pq_qpack_gemv_ref(w, r0, n, x, T, y, ldy);
}

size_t pq_qpack_stored_bytes(const pq_qpack *w) {
    size_t ng = (size_t)w->rows * pq_qpack_ngroups(w->cols, w->group);
    return (size_t)w->rows * pq_qpack_words_per_row(w->cols, w->bits) * 4 + ng * 2 + (w->zeros ? ng : 0) +
           (w->g_idx ? (size_t)w->cols * 4 : 0);
}
