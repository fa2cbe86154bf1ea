// AVX-512 (VNNI) versions of kernels/w8a8.h.
//
// vpdpbusd multiplies unsigned by signed bytes (4 products summed into each
// int32 lane, wrapping, never saturating). The weights take the unsigned
// side with a +128 offset (w ^ 0x80 = w + 128 in [0, 255]), the activation
// codes the signed side, and the offset is removed per token at the end:
//   sum_c (w + 128) a = sum_c w a + 128 * sum_c a    (a->sum holds sum_c a)
// All of it is int32 arithmetic modulo 2^32, and the true result fits in
// int32 (kernels/w8a8.h), so the result is exact even where the offset sum
// itself would wrap.
//
// GEMV (T <= PQ_GEMV_MAX_T): each weight row streams once as stored, 64
// columns per vpdpbusd per token. GEMM: rows are packed into scratch in the
// VNNI order, 16 rows x 4 columns per 64 bytes (byte 4i + b of block (g, j)
// is w[16g + i][4j + b] + 128), and a tile of NR x 16 rows by MT tokens
// keeps NR * MT accumulators in registers: per 4 columns, NR weight loads,
// MT broadcasts of 4 activation bytes, NR * MT vpdpbusd.
#include <immintrin.h>
#include <string.h>

#include "kernels/linear.h"
#include "kernels/w8a8.h"
#include "kernels/simd.h"

#define NR 2   // 16-row groups per tile (NR * 16 == PQ_W8A8_PACK_ROWS)
#define MT 8   // tokens per tile (8 and NR 2: 16 accumulators; 12 ran 5% slower, 14 spills)

_Static_assert(NR * 16 == PQ_W8A8_PACK_ROWS, "the packed panel is padded to whole tiles");

// ---- activation quantization -------------------------------------------

PQ_INLINE __mmask16 tail16(int left) { return left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1); }

static uint32_t amax_bits(const float *x, int cols) {
    __m512i m = _mm512_setzero_si512();
    const __m512i abs = _mm512_set1_epi32(0x7fffffff);
    for (int c = 0; c < cols; c += 16)
        m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_maskz_loadu_epi32(tail16(cols - c), x + c), abs));
    return (uint32_t)_mm512_reduce_max_epu32(m);
}

void pq_actq_int8_avx512(const float *x, int T, int cols, float static_scale, pq_w8a8_act *a) {
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * cols;
        int8_t *q = a->q + (size_t)t * a->ld;
        uint32_t m = amax_bits(xt, cols);
        if (m >= 0x7f800000u) { pq_w8a8_bad_token(a, t); continue; }
        float amax;
        memcpy(&amax, &m, 4);
        const __m512 inv = _mm512_set1_ps(127.0f / amax), s = _mm512_set1_ps(static_scale);
        const __m512 lo = _mm512_set1_ps(-128.0f), hi = _mm512_set1_ps(127.0f);
        __m512i sum = _mm512_setzero_si512();
        for (int c = 0; c < cols; c += 16) {
            __mmask16 k = tail16(cols - c);
            __m512 v = _mm512_maskz_loadu_ps(k, xt + c);
            v = static_scale > 0 ? _mm512_div_ps(v, s) : _mm512_mul_ps(v, inv);
            v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v); // NaN (0 * Inf) -> 0
            __m512i i = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(v, lo), hi)); // rne (MXCSR default)
            sum = _mm512_add_epi32(sum, i);
            _mm_mask_storeu_epi8(q + c, k, _mm512_cvtepi32_epi8(i));
        }
        memset(q + cols, 0, (size_t)(a->ld - cols));
        a->scale[t] = static_scale > 0 ? static_scale : amax / 127.0f;
        a->sum[t] = _mm512_reduce_add_epi32(sum);
    }
}

// pq_fp8_e4m3_encode of 16 finite (or infinite) floats, as int32 lanes:
// normal results by the same integer rounding, subnormal ones (|v| < 2^-6)
// as rne(|v| * 2^9) (exact scaling; 8 is the smallest normal, code 0x08).
PQ_INLINE __m512i e4m3(__m512 v) {
    __m512i u = _mm512_castps_si512(v), a = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    __m512i sign = _mm512_and_si512(_mm512_srli_epi32(u, 24), _mm512_set1_epi32(0x80));
    __m512i t = _mm512_sub_epi32(a, _mm512_set1_epi32(120 << 23));
    t = _mm512_add_epi32(t, _mm512_add_epi32(_mm512_set1_epi32(0x7ffff), _mm512_and_si512(_mm512_srli_epi32(t, 20),
                                                                                        _mm512_set1_epi32(1))));
    __m512i code = _mm512_srli_epi32(t, 20);
    __m512i sub = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(512.0f)));
    code = _mm512_mask_mov_epi32(code, _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32(0x3c800000)), sub);
    code = _mm512_mask_mov_epi32(code, _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32(0x43e00000)),
                                 _mm512_set1_epi32(0x7e));
    return _mm512_or_si512(code, sign);
}

void pq_actq_fp8_avx512(const float *x, int T, int cols, float static_scale, pq_w8a8_act *a) {
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * cols;
        int8_t *q = a->q + (size_t)t * a->ld;
        uint32_t m = amax_bits(xt, cols);
        if (m >= 0x7f800000u) { pq_w8a8_bad_token(a, t); continue; }
        float amax;
        memcpy(&amax, &m, 4);
        float s = amax / 448.0f;
        if (s < PQ_FP8_MIN_SCALE) s = PQ_FP8_MIN_SCALE;
        const __m512 sv = _mm512_set1_ps(s), inv = _mm512_set1_ps(static_scale > 0 ? 1.0f / static_scale : 0);
        for (int c = 0; c < cols; c += 16) {
            __mmask16 k = tail16(cols - c);
            __m512 v = _mm512_maskz_loadu_ps(k, xt + c);
            v = static_scale > 0 ? _mm512_mul_ps(v, inv) : _mm512_div_ps(v, sv);
            _mm_mask_storeu_epi8(q + c, k, _mm512_cvtepi32_epi8(e4m3(v)));
        }
        memset(q + cols, 0, (size_t)(a->ld - cols));
        a->scale[t] = static_scale > 0 ? static_scale : s;
        a->sum[t] = 0;
    }
}

// ---- INT8 x INT8 -------------------------------------------------------

// The 16 results of rows r..r+16 (mask k) for token t, offset removed.
PQ_INLINE void store16(const pq_w8a8_act *a, const pq_w8a8_out *o, const float *wscale, int t, int r, __mmask16 k,
                    __m512i acc) {
    acc = _mm512_sub_epi32(acc, _mm512_set1_epi32((int32_t)(128u * (uint32_t)a->sum[t])));
    if (o->acc) { _mm512_mask_storeu_epi32(o->acc + (size_t)t * o->ldy + r, k, acc); return; }
    __m512 y = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, wscale + r), _mm512_cvtepi32_ps(acc));
    y = _mm512_mul_ps(_mm512_set1_ps(a->scale[t]), y);
    if (o->bias) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(k, o->bias + r));
    _mm512_mask_storeu_ps(o->y + (size_t)t * o->ldy + r, k, y);
}

// Rows r0..r0+n, one row at a time, T tokens (a constant after inlining).
PQ_INLINE void gemv(const pq_int8_weight *w, int r0, int n, const pq_w8a8_act *a, const pq_w8a8_out *o, int T) {
    const int cols = w->cols;
    const __m512i x80 = _mm512_set1_epi8((char)0x80);
    const __mmask64 tail = cols % 64 ? ((__mmask64)1 << (cols % 64)) - 1 : 0;
    for (int r = r0; r < r0 + n; r++) {
        const int8_t *q = w->q + (size_t)r * cols;
        __m512i acc[PQ_GEMV_MAX_T];
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_si512();
        int c = 0;
        for (; c + 64 <= cols; c += 64) {
            pq_prefetch_stream(q + c);
            __m512i wu = _mm512_xor_si512(_mm512_loadu_si512(q + c), x80);
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++)
                acc[t] = _mm512_dpbusd_epi32(acc[t], wu, _mm512_load_si512(a->q + (size_t)t * a->ld + c));
        }
        if (tail) { // masked-off weights read as 0 (+128) against activation pads of 0
            __m512i wu = _mm512_xor_si512(_mm512_maskz_loadu_epi8(tail, q + c), x80);
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++)
                acc[t] = _mm512_dpbusd_epi32(acc[t], wu, _mm512_load_si512(a->q + (size_t)t * a->ld + c));
        }
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            int32_t s = (int32_t)((uint32_t)_mm512_reduce_add_epi32(acc[t]) - 128u * (uint32_t)a->sum[t]);
            if (o->acc) o->acc[(size_t)t * o->ldy + r] = s;
            else {
                float y = a->scale[t] * (w->scales[r] * (float)s);
                o->y[(size_t)t * o->ldy + r] = o->bias ? y + o->bias[r] : y;
            }
        }
    }
}

void pq_w8a8_pack_avx512(const pq_int8_weight *w, int r0, int n, int kq, uint8_t offset, uint8_t *p) {
    const int cols = w->cols, full = cols / 4, ng = (n + PQ_W8A8_PACK_ROWS - 1) / PQ_W8A8_PACK_ROWS * NR;
    const __m512i x80 = _mm512_set1_epi8((char)offset);
    const __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           _mm512_set1_epi32(cols));
    for (int g = 0; g < ng; g++) {
        int left = n - 16 * g;
        __mmask16 k = tail16(left < 0 ? 0 : left);
        const int8_t *base = w->q + (size_t)(r0 + 16 * g) * cols;
        uint8_t *pg = p + (size_t)g * kq * 64;
        for (int j = 0; j < full; j++) {
            __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, idx, base + 4 * j, 1);
            _mm512_store_si512(pg + (size_t)j * 64, _mm512_xor_si512(v, x80));
        }
        for (int j = full; j < kq; j++)
            for (int i = 0; i < 16; i++)
                for (int b = 0; b < 4; b++) {
                    int c = 4 * j + b;
                    int8_t v = i < left && c < cols ? base[(size_t)i * cols + c] : 0;
                    pg[(size_t)j * 64 + 4 * i + b] = (uint8_t)v ^ offset;
                }
    }
}

// One tile: NR groups of 16 packed rows at pg (groups kq * 64 bytes apart)
// by MT tokens whose rows start at x (ld apart; rows past the last token
// repeat it and are not stored).
PQ_INLINE void tile(const uint8_t *pg, int kq, const int8_t *x, size_t ld, int last, __m512i acc[MT][NR]) {
    const int8_t *xr[MT];
    #pragma GCC unroll 16
    for (int t = 0; t < MT; t++) xr[t] = x + (size_t)(t < last ? t : last) * ld;
    #pragma GCC unroll 16
    for (int t = 0; t < MT; t++)
        #pragma GCC unroll 4
        for (int i = 0; i < NR; i++) acc[t][i] = _mm512_setzero_si512();
    for (int j = 0; j < kq; j++) {
        __m512i wv[NR];
        #pragma GCC unroll 4
        for (int i = 0; i < NR; i++) wv[i] = _mm512_load_si512(pg + ((size_t)i * kq + j) * 64);
        #pragma GCC unroll 16
        for (int t = 0; t < MT; t++) {
            int32_t v;
            memcpy(&v, xr[t] + 4 * j, 4);
            __m512i b = _mm512_set1_epi32(v);
            #pragma GCC unroll 4
            for (int i = 0; i < NR; i++) acc[t][i] = _mm512_dpbusd_epi32(acc[t][i], wv[i], b);
        }
    }
}

static void gemm(const pq_int8_weight *w, int r0, int n, const pq_w8a8_act *a, const pq_w8a8_out *o, uint8_t *p) {
    const int kq = (w->cols + 3) / 4, ng = (n + PQ_W8A8_PACK_ROWS - 1) / PQ_W8A8_PACK_ROWS * NR;
    pq_w8a8_pack_avx512(w, r0, n, kq, 0x80, p);
    for (int t0 = 0; t0 < a->T; t0 += MT) {
        int nt = a->T - t0 < MT ? a->T - t0 : MT;
        for (int g = 0; g < ng; g += NR) {
            __m512i acc[MT][NR];
            tile(p + (size_t)g * kq * 64, kq, a->q + (size_t)t0 * a->ld, (size_t)a->ld, nt - 1, acc);
            #pragma GCC unroll 16
            for (int t = 0; t < MT; t++) // (unrolled with constant indices, so acc stays in registers)
                #pragma GCC unroll 4
                for (int i = 0; i < NR; i++) {
                    int left = n - 16 * (g + i);
                    if (t < nt && left > 0) store16(a, o, w->scales, t0 + t, r0 + 16 * (g + i), tail16(left), acc[t][i]);
                }
        }
    }
}

void pq_w8a8_gemm_avx512(const pq_int8_weight *w, int r0, int n, const pq_w8a8_act *a, const pq_w8a8_out *o,
                         void *scratch) {
    if (a->T > PQ_GEMV_MAX_T) {
        gemm(w, r0, n, a, o, scratch);
        return;
    }
#define GEMV(t) gemv(w, r0, n, a, o, t)
    PQ_GEMV_T_SWITCH(a->T, GEMV);
#undef GEMV
}
