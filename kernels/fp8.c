#include "fp8.h"

#include <math.h>

#include "common/half.h"
#include "kernels/cpu.h"

uint8_t pq_fp8_e4m3_encode(float x) {
    uint32_t u = pq_f32_bits(x), sign = (u >> 24) & 0x80, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint8_t)(sign | 0x7f);       // NaN
    if (a >= 0x43e00000u) return (uint8_t)(sign | 0x7e);      // >= 448 (and Inf): saturate
    if (a < 0x3c800000u) {                                    // below 2^-6: subnormal codes m * 2^-9
        if (a < 0x3a800000u) return (uint8_t)sign;            // <= 2^-10 rounds to 0 (the tie goes to even 0)
        uint32_t e = a >> 23, man = (a & 0x7fffff) | 0x800000;
        uint32_t shift = 141 - e;                             // man * 2^(e-150) in units of 2^-9
        uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint8_t)(sign | q);                           // q == 8 is the smallest normal, 2^-6
    }
    // normal: rebias the exponent (127 -> 7) and round the mantissa to 3 bits;
    // a carry moves into the exponent, and a < 448 keeps the result <= 0x7e
    uint32_t v = a - (120u << 23);
    v += 0x7ffff + ((v >> 20) & 1);
    return (uint8_t)(sign | (v >> 20));
}

float pq_fp8_e4m3_decode(uint8_t b) {
    int e = (b >> 3) & 15, m = b & 7;
    float v = e == 15 && m == 7 ? NAN : e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
    return b & 0x80 ? -v : v;
}

static float fp8_scale(const pq_fp8_weight *w, int r) { return w->scales[w->per_channel ? r : 0]; }

void pq_fp8_rows_ref(const pq_fp8_weight *w, int r0, int n, float *out) {
    for (int r = 0; r < n; r++) {
        float s = fp8_scale(w, r0 + r);
        const uint8_t *q = w->q + (size_t)(r0 + r) * w->cols;
        for (int c = 0; c < w->cols; c++) out[(size_t)r * w->cols + c] = s * pq_fp8_e4m3_decode(q[c]);
    }
}

void pq_fp8_gemv_ref(const pq_fp8_weight *w, int r0, int n, const float *x, int T, float *y, int ldy) {
    for (int t = 0; t < T; t++)
        for (int r = r0; r < r0 + n; r++) {
            float s = fp8_scale(w, r);
            const uint8_t *q = w->q + (size_t)r * w->cols;
            double acc = 0;
            for (int c = 0; c < w->cols; c++)
                acc += (double)(s * pq_fp8_e4m3_decode(q[c])) * x[(size_t)t * w->cols + c];
            y[(size_t)t * ldy + r] = (float)acc;
        }
}

void pq_fp8_rows_cpu(const pq_fp8_weight *w, int r0, int n, float *out) {
    if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_fp8_rows_avx2(w, r0, n, out);
    else pq_fp8_rows_ref(w, r0, n, out);
}

void pq_fp8_gemv_cpu(const pq_fp8_weight *w, int r0, int n, const float *x, int T, float *y, int ldy) {
    if (pq_cpu_isa() >= PQ_ISA_AVX512) pq_fp8_gemv_avx512(w, r0, n, x, T, y, ldy);
    else if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_fp8_gemv_avx2(w, r0, n, x, T, y, ldy);
    else pq_fp8_gemv_ref(w, r0, n, x, T, y, ldy);
}

size_t pq_fp8_stored_bytes(const pq_fp8_weight *w) {
    return (size_t)w->rows * w->cols + (w->per_channel ? (size_t)w->rows : 1) * 2;
}
