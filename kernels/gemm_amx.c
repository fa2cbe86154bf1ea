// The BF16 GEMM of kernels/gemm.h on AMX tiles: the activations and the
// weight rows rounded to BF16 and packed (the layout gemm.h gives), then
// the shared 2 x 2 tile loop (kernels/amx.h) with TDPBF16PS, 32 columns per
// step, its f32 sums stored as they are.
#include <immintrin.h>
#include <string.h>

#include "kernels/amx.h"
#include "kernels/gemm.h"

int pq_gemm_amx_ld(int K) { return (K + 31) / 32 * 32; }

size_t pq_gemm_amx_w_values(int n, int K) { return (size_t)(n + 31) / 32 * 32 * pq_gemm_amx_ld(K); }

// BF16 bits of 16 floats, rounded to nearest even, NaN kept quiet: the
// bits of pq_f32_to_bf16 (common/half.h).
static inline __m256i bf16x16(__m512 v) {
    __m512i u = _mm512_castps_si512(v);
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd));
    r = _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), u, _mm512_set1_epi32(0x400000));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}

// Columns c..c+31 of a row of K floats as 32 BF16 values in order (zeros
// past K): read as 16 int32, the column pairs (c + 2j, c + 2j + 1).
static inline __m512i bf16x32(const float *row, int c, int K) {
    int left = K - c;
    __mmask16 m0 = left >= 16 ? 0xffff : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
    __mmask16 m1 = left >= 32 ? 0xffff : left > 16 ? (__mmask16)((1u << (left - 16)) - 1) : 0;
    __m256i lo = bf16x16(_mm512_maskz_loadu_ps(m0, row + c)), hi = bf16x16(_mm512_maskz_loadu_ps(m1, row + c + 16));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

void pq_gemm_amx_pack_w(const float *rows, int r0, int n, int K, uint16_t *wp) {
    int ld = pq_gemm_amx_ld(K);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < ld; c += 32) pq_amx_put_pairs(wp, ld, r0 + i, c, bf16x32(rows + (size_t)i * K, c, K));
}

void pq_gemm_amx_pad_w(int n, int K, uint16_t *wp) {
    int ld = pq_gemm_amx_ld(K), end = (n + 31) / 32 * 32;
    for (int r = n; r < end; r++)
        for (int c = 0; c < ld; c += 32) pq_amx_put_pairs(wp, ld, r, c, _mm512_setzero_si512());
}

void pq_gemm_amx_pack_x(const float *x, int K, int t0, int nt, uint16_t *xb) {
    int ld = pq_gemm_amx_ld(K);
    for (int t = t0; t < t0 + nt; t++)
        for (int c = 0; c < ld; c += 32) _mm512_storeu_si512(xb + (size_t)t * ld + c, bf16x32(x + (size_t)t * K, c, K));
}

typedef struct {
    float *y;
    int ldy;
} f32_out;

static void store16(const void *ctx, int t, int r, __mmask16 m, const void *sums) {
    const f32_out *o = ctx;
    _mm512_mask_storeu_ps(o->y + (size_t)t * o->ldy + r, m, _mm512_loadu_ps(sums));
}

void pq_gemm_amx(const uint16_t *xb, int T, int K, const uint16_t *wp, int r0, int n, float *y, int ldy) {
    int ld = pq_gemm_amx_ld(K);
    f32_out o = {y, ldy};
    pq_amx_tile_blocks((const uint8_t *)xb, (size_t)ld * 2, T, (const uint8_t *)(wp + (size_t)r0 * ld), (size_t)ld * 32,
                       r0, n, ld / 32, 1, store16, &o);
}
