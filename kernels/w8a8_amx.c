// AMX versions of kernels/w8a8.h's GEMMs (more than PQ_GEMV_MAX_T tokens).
//
// INT8. TDPBSSD multiplies signed bytes by signed bytes, four products
// summed into each int32 of a 16 x 16 tile, so the sums are the _ref's exact
// ones, with no offset to remove. The activation codes are already a token
// tile's layout (rows a->ld apart, zeros past cols up to a multiple of 64);
// the weight rows are packed into scratch by the VNNI kernel's packing
// (without its offset) in groups of 16, each [ld / 4 column quads][16
// rows][4] (the quads TDPBSSD reads, zeros past cols and past the last row),
// and a block of 32 tokens x 32 rows keeps four sum tiles: per 64 columns
// two token tiles and two weight tiles feed four TDPBSSD.
//
// FP8. Every E4M3 value is a BF16 value (4 significant bits, exponents
// within BF16's), so the codes are decoded to BF16 exactly, every product of
// two is exact in f32, and TDPBF16PS sums them in f32 tiles: the products of
// the _ref, summed as kernels/w8a8.h allows. The activations are decoded once
// per chunk of tokens into BF16 rows (ld = cols rounded up to 32); the weight
// rows into scratch in groups of 16, each [ld / 2 column pairs][16 rows][2];
// the same 2 x 2 blocks, 32 columns per step.
#include <immintrin.h>
#include <string.h>

#include "kernels/amx.h"
#include "kernels/w8a8.h"

// The epilogue of kernels/w8a8.h: y = sx * (sw * sum) (+ bias), for 16
// sums of token t and rows r..r+15 (m: the real ones).
typedef struct {
    const pq_w8a8_act *a;
    const pq_w8a8_out *o;
    const float *scales; // sw: [rows], or [1] when !per_channel
    int per_channel;
} epilogue;

static void scale16(const epilogue *c, int t, int r, __mmask16 m, __m512 sum) {
    __m512 sw = c->per_channel ? _mm512_maskz_loadu_ps(m, c->scales + r) : _mm512_set1_ps(c->scales[0]);
    __m512 y = _mm512_mul_ps(_mm512_set1_ps(c->a->scale[t]), _mm512_mul_ps(sw, sum));
    if (c->o->bias) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(m, c->o->bias + r));
    _mm512_mask_storeu_ps(c->o->y + (size_t)t * c->o->ldy + r, m, y);
}

// INT8: the raw int32 sums when the caller asks for them (o->acc).
static void store16_int8(const void *ctx, int t, int r, __mmask16 m, const void *sums) {
    const epilogue *c = ctx;
    __m512i s = _mm512_loadu_si512(sums);
    if (c->o->acc) _mm512_mask_storeu_epi32(c->o->acc + (size_t)t * c->o->ldy + r, m, s);
    else scale16(c, t, r, m, _mm512_cvtepi32_ps(s));
}

static void store16_fp8(const void *ctx, int t, int r, __mmask16 m, const void *sums) {
    scale16(ctx, t, r, m, _mm512_loadu_ps(sums));
}

void pq_w8a8_gemm_amx(const pq_int8_weight *w, int r0, int n, const pq_w8a8_act *a, const pq_w8a8_out *o,
                      void *scratch) {
    pq_w8a8_pack_avx512(w, r0, n, a->ld / 4, 0, scratch); // the bytes as stored: TDPBSSD is signed x signed
    epilogue c = {a, o, w->scales, 1};
    pq_amx_tile_blocks((const uint8_t *)a->q, (size_t)a->ld, a->T, scratch, (size_t)a->ld * 16, r0, n, a->ld / 64, 0,
                       store16_int8, &c);
}

// ---- FP8 -------------------------------------------------------------------

// The BF16 bits of 32 E4M3 codes (pq_fp8_e4m3_bf16, 16-bit lanes): a normal
// code's exponent and mantissa move up into BF16's fields (the exponent bias
// from 7 to 127), a subnormal one (m * 2^-9) comes from a table, NaN stays NaN.
static inline __m512i decode32(__m256i codes) {
    // (the table's 16-bit entries in pairs, low half first: 0, 0x3b00, 0x3b80, ... 0x3c60)
    const __m512i subnormal =
        _mm512_setr_epi32(0x3b000000, 0x3bc03b80, 0x3c203c00, 0x3c603c40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512i v = _mm512_cvtepu8_epi16(codes), mag = _mm512_and_si512(v, _mm512_set1_epi16(0x7f));
    __m512i bits = _mm512_add_epi16(_mm512_slli_epi16(mag, 4), _mm512_set1_epi16(0x3c00));
    bits = _mm512_mask_permutexvar_epi16(bits, _mm512_cmplt_epu16_mask(mag, _mm512_set1_epi16(8)), mag, subnormal);
    bits = _mm512_mask_mov_epi16(bits, _mm512_cmpeq_epi16_mask(mag, _mm512_set1_epi16(0x7f)),
                                 _mm512_set1_epi16(0x7fc0));
    return _mm512_or_si512(bits, _mm512_slli_epi16(_mm512_and_si512(v, _mm512_set1_epi16(0x80)), 8));
}

// Columns c..c+31 of a row of codes (zeros past cols).
static inline __m256i codes32(const uint8_t *row, int c, int cols) {
    int left = cols - c;
    __mmask32 m = left >= 32 ? 0xffffffffu : (__mmask32)((1u << left) - 1);
    return _mm256_maskz_loadu_epi8(m, row + c);
}

void pq_w8a8_fp8_decode_amx(const pq_w8a8_act *a, int t0, int nt, uint16_t *xb) {
    int ld = (a->cols + 31) / 32 * 32;
    for (int t = t0; t < t0 + nt; t++)
        for (int c = 0; c < ld; c += 32)
            _mm512_storeu_si512(xb + (size_t)t * ld + c,
                                decode32(codes32((const uint8_t *)a->q + (size_t)t * a->ld, c, a->cols)));
}

// Rows r0..r0+n (zero rows to a whole number of 32) into p, in the pair
// layout (pq_amx_put_pairs).
static void pack_fp8(const pq_fp8_weight *w, int r0, int n, int ld, uint16_t *p) {
    int rows = (n + 31) / 32 * 32;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < ld; c += 32)
            pq_amx_put_pairs(p, ld, r, c,
                             r < n ? decode32(codes32(w->q + (size_t)(r0 + r) * w->cols, c, w->cols))
                                   : _mm512_setzero_si512());
}

void pq_w8a8_fp8_amx(const pq_fp8_weight *w, int r0, int n, const pq_w8a8_act *a, const uint16_t *xb,
                     const pq_w8a8_out *o, void *scratch) {
    const int ld = (w->cols + 31) / 32 * 32;
    pack_fp8(w, r0, n, ld, scratch);
    epilogue c = {a, o, w->scales, w->per_channel};
    pq_amx_tile_blocks((const uint8_t *)xb, (size_t)ld * 2, a->T, scratch, (size_t)ld * 32, r0, n, ld / 32, 1,
                       store16_fp8, &c);
}
