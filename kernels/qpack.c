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
    // nb*L*P <= cols columns (fixed point: 128 floats per block of 16 words, the last one perhaps short): x and
    // the group indices; nb*L <= cols/P sums per token; the group sums in double
    size_t cols = (size_t)w->cols, xcols = cols + 127;
    return ((size_t)T * (xcols + cols / pq_qpack_per_word(w->bits) + 2 * pq_qpack_ngroups(w->cols, w->group)) + cols) *
           sizeof(float);
}

int pq_qpack_gemv_fixed(const pq_qpack *w, int lanes) {
    return lanes == 16 && w->bits == 4 && pq_qpack_gemv_aligned(w, lanes);
}

// The fixed-point exponent of a word whose largest |x| is m (finite): the
// smallest k >= -126 with m <= 8355711 * 2^k. (m < 2^-104: m * 2^126 < 2^22.)
static int fixed_exp(float m) {
    if (m < 0x1p-104f) return -126;
    int k = ilogbf(m) - 22; // m * 2^-k in [2^22, 2^23)
    return k + (m > ldexpf(8355711.0f, k));
}

// The fixed-point layout of qpack.h; the words of a short last block past
// the row's whole words are x = 0.
static void prepare_fixed(const pq_qpack *w, const float *x, int T, float *xp) {
    const int nw = w->cols / 8;
    for (int b = 0; b < pq_qpack_fixed_blocks(w); b++)
        for (int t = 0; t < T; t++) {
            float *o = xp + ((size_t)b * T + t) * 128;
            int8_t *d = (int8_t *)o;
            const float *xb = x + (size_t)t * w->cols + b * 128;
            for (int j = 0; j < 16; j++) {
                float xw[8] = {0};
                if (16 * b + j < nw) memcpy(xw, xb + 8 * j, sizeof xw);
                float m = 0;
                int finite = 1;
                for (int i = 0; i < 8; i++) {
                    finite &= isfinite(xw[i]);
                    m = fmaxf(m, fabsf(xw[i]));
                }
                int k = finite ? fixed_exp(m) : 0;
                int32_t sum = 0;
                for (int i = 0; i < 8; i++) {
                    int32_t v = finite ? (int32_t)lrintf(xw[i] * ldexpf(1.0f, -k)) : 0;
                    // v + 0x808080 is in [0, 2^24); its bytes less 128 are d2, d1, d0
                    uint32_t u = (uint32_t)(v + 0x808080) ^ 0x808080;
                    for (int l = 0; l < 3; l++) d[(2 * l + i % 2) * 64 + 4 * j + i / 2] = (int8_t)(u >> (16 - 8 * l));
                    sum += v;
                }
                o[96 + j] = finite ? ldexpf(1.0f, k) : NAN;
                ((int32_t *)o)[112 + j] = sum;
            }
        }
}

// X of the fixed-point layout from the blocks' S and V.
static void fixed_sums(const pq_qpack *w, int T, float *xp) {
    int nw = w->cols / 8, ng = pq_qpack_ngroups(w->cols, w->group);
    int wpg = w->group >= w->cols ? nw : w->group / 8; // words per group
    float *X = xp + (size_t)pq_qpack_fixed_blocks(w) * T * 128;
    for (int t = 0; t < T; t++) {
        int g = 0;
        for (int j = 0; j < nw; g++) {
            double sum = 0;
            for (int end = j + wpg < nw ? j + wpg : nw; j < end; j++) {
                const float *o = xp + ((size_t)(j / 16) * T + t) * 128;
                sum += (double)o[96 + j % 16] * ((const int32_t *)o)[112 + j % 16];
            }
            X[(size_t)t * ng + g] = (float)sum;
        }
        for (; g < ng; g++) X[(size_t)t * ng + g] = 0; // groups with no whole word
    }
}

void pq_qpack_gemv_prepare(const pq_qpack *w, const float *x, int T, int lanes, float *xp) {
    if (pq_qpack_gemv_fixed(w, lanes)) {
        prepare_fixed(w, x, T, xp);
        fixed_sums(w, T, xp);
        return;
    }
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
    if (pq_qpack_gemv_fixed(w, lanes)) {
        pq_qpack_gemv_prepare_avx512(w, x, T, xp);
        fixed_sums(w, T, xp);
    } else if (lanes) {
        pq_qpack_gemv_prepare(w, x, T, lanes, xp);
    }
}

void pq_qpack_rows_cpu(const pq_qpack *w, int r0, int n, float *out) {
    if (pq_cpu_isa() >= PQ_ISA_AVX512) pq_qpack_rows_avx512(w, r0, n, out);
    else if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_qpack_rows_avx2(w, r0, n, out);
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
