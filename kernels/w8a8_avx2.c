// AVX2 versions of kernels/w8a8.h.
//
// INT8 x INT8 without VNNI: vpmaddubsw saturates (a pair of u8 x s8
// products reaches 2 * 255 * 128), and the sign-transfer trick breaks on a
// -128 code (static activations and int8 weights may hold one), so codes
// are sign-extended to 16 bits and vpmaddwd sums pairs of products into
// int32 (exact: |pair| <= 2 * 128 * 128). Weight rows are read as stored
// (no packing); a tile of 2 rows by up to 4 tokens shares each load, 16
// columns per step, and sums its lanes at the end.
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/w8a8.h"
#include "kernels/simd.h"

#define RT 2 // rows per tile
#define TT 4 // tokens per tile

// ---- activation quantization -------------------------------------------

void pq_actq_int8_avx2(const float *x, int T, int cols, float static_scale, pq_w8a8_act *a) {
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * cols;
        int8_t *q = a->q + (size_t)t * a->ld;
        uint32_t m = pq_amax_bits_avx2(xt, (size_t)cols);
        if (m >= 0x7f800000u) { pq_w8a8_bad_token(a, t); continue; }
        float amax;
        memcpy(&amax, &m, 4);
        float inv1 = 127.0f / amax;
        const __m256 inv = _mm256_set1_ps(inv1), s = _mm256_set1_ps(static_scale);
        const __m256 lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
        __m256i sum = _mm256_setzero_si256();
        int c = 0;
        for (; c + 8 <= cols; c += 8) {
            __m256 v = _mm256_loadu_ps(xt + c);
            v = static_scale > 0 ? _mm256_div_ps(v, s) : _mm256_mul_ps(v, inv);
            v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q)); // NaN (0 * Inf) -> 0
            __m256i i = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, lo), hi)); // rne (MXCSR default)
            sum = _mm256_add_epi32(sum, i);
            __m128i h = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
            _mm_storel_epi64((__m128i *)(q + c), _mm_packs_epi16(h, h));
        }
        int32_t lanes[8], total = 0;
        _mm256_storeu_si256((__m256i *)lanes, sum);
        for (int i = 0; i < 8; i++) total += lanes[i];
        for (; c < cols; c++) {
            q[c] = pq_sat8(static_scale > 0 ? xt[c] / static_scale : xt[c] * inv1);
            total += q[c];
        }
        memset(q + cols, 0, (size_t)(a->ld - cols));
        a->scale[t] = static_scale > 0 ? static_scale : amax / 127.0f;
        a->sum[t] = total;
    }
}

// pq_fp8_e4m3_encode of 8 finite (or infinite) floats, as int32 lanes (the
// algorithm of kernels/w8a8_avx512.c; a <= 0x7fffffff compares as signed).
PQ_INLINE __m256i e4m3(__m256 v) {
    __m256i u = _mm256_castps_si256(v), a = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i sign = _mm256_and_si256(_mm256_srli_epi32(u, 24), _mm256_set1_epi32(0x80));
    __m256i t = _mm256_sub_epi32(a, _mm256_set1_epi32(120 << 23));
    t = _mm256_add_epi32(t, _mm256_add_epi32(_mm256_set1_epi32(0x7ffff), _mm256_and_si256(_mm256_srli_epi32(t, 20),
                                                                                        _mm256_set1_epi32(1))));
    __m256i code = _mm256_srli_epi32(t, 20);
    __m256i sub = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_castsi256_ps(a), _mm256_set1_ps(512.0f)));
    code = _mm256_blendv_epi8(code, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(0x3c800000), a));
    code = _mm256_blendv_epi8(code, _mm256_set1_epi32(0x7e), _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x43dfffff)));
    return _mm256_or_si256(code, sign);
}

void pq_actq_fp8_avx2(const float *x, int T, int cols, float static_scale, pq_w8a8_act *a) {
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * cols;
        uint8_t *q = (uint8_t *)a->q + (size_t)t * a->ld;
        uint32_t m = pq_amax_bits_avx2(xt, (size_t)cols);
        if (m >= 0x7f800000u) { pq_w8a8_bad_token(a, t); continue; }
        float amax;
        memcpy(&amax, &m, 4);
        float s = amax / 448.0f, inv1 = static_scale > 0 ? 1.0f / static_scale : 0;
        if (s < PQ_FP8_MIN_SCALE) s = PQ_FP8_MIN_SCALE;
        const __m256 sv = _mm256_set1_ps(s), inv = _mm256_set1_ps(inv1);
        int c = 0;
        for (; c + 8 <= cols; c += 8) {
            __m256 v = _mm256_loadu_ps(xt + c);
            v = static_scale > 0 ? _mm256_mul_ps(v, inv) : _mm256_div_ps(v, sv);
            __m256i i = e4m3(v);
            __m128i h = _mm_packus_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
            _mm_storel_epi64((__m128i *)(q + c), _mm_packus_epi16(h, h));
        }
        for (; c < cols; c++) q[c] = pq_fp8_e4m3_encode(static_scale > 0 ? xt[c] * inv1 : xt[c] / s);
        memset(q + cols, 0, (size_t)(a->ld - cols));
        a->scale[t] = static_scale > 0 ? static_scale : s;
        a->sum[t] = 0;
    }
}

// ---- INT8 x INT8 -------------------------------------------------------

// 16 codes at p sign-extended to int16; the weight row's last columns
// through a zero-padded copy (activation rows are padded already).
PQ_INLINE __m256i widen(const int8_t *p) { return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p)); }
PQ_INLINE __m256i widen_tail(const int8_t *p, int n) {
    int8_t buf[16] = {0};
    memcpy(buf, p, (size_t)n);
    return widen(buf);
}

// Rows r..r+R by tokens t0..t0+N (R, N constants after inlining).
PQ_INLINE void tile(const pq_int8_weight *w, int r, const pq_w8a8_act *a, int t0, const pq_w8a8_out *o, int R, int N) {
    const int cols = w->cols;
    const int8_t *wr[RT], *xr[TT];
    for (int i = 0; i < R; i++) wr[i] = w->q + (size_t)(r + i) * cols;
    for (int t = 0; t < N; t++) xr[t] = a->q + (size_t)(t0 + t) * a->ld;
    __m256i acc[TT][RT];
    #pragma GCC unroll 4
    for (int t = 0; t < N; t++)
        #pragma GCC unroll 2
        for (int i = 0; i < R; i++) acc[t][i] = _mm256_setzero_si256();
    for (int c = 0; c < cols; c += 16) {
        __m256i wv[RT];
        #pragma GCC unroll 2
        for (int i = 0; i < R; i++) wv[i] = c + 16 <= cols ? widen(wr[i] + c) : widen_tail(wr[i] + c, cols - c);
        #pragma GCC unroll 4
        for (int t = 0; t < N; t++) {
            __m256i xv = widen(xr[t] + c);
            #pragma GCC unroll 2
            for (int i = 0; i < R; i++) acc[t][i] = _mm256_add_epi32(acc[t][i], _mm256_madd_epi16(wv[i], xv));
        }
    }
    #pragma GCC unroll 4
    for (int t = 0; t < N; t++)
        #pragma GCC unroll 2
        for (int i = 0; i < R; i++) {
            int32_t s = pq_hsum_epi32(acc[t][i]);
            size_t at = (size_t)(t0 + t) * o->ldy + r + i;
            if (o->acc) o->acc[at] = s;
            else {
                float y = a->scale[t0 + t] * (w->scales[r + i] * (float)s);
                o->y[at] = o->bias ? y + o->bias[r + i] : y;
            }
        }
}

// One instance per (rows, tokens) so the loops unroll.
static void tile_any(const pq_int8_weight *w, int r, int R, const pq_w8a8_act *a, int t0, int N,
                     const pq_w8a8_out *o) {
    switch ((R - 1) * TT + N - 1) {
    case 0: tile(w, r, a, t0, o, 1, 1); return;
    case 1: tile(w, r, a, t0, o, 1, 2); return;
    case 2: tile(w, r, a, t0, o, 1, 3); return;
    case 3: tile(w, r, a, t0, o, 1, 4); return;
    case 4: tile(w, r, a, t0, o, 2, 1); return;
    case 5: tile(w, r, a, t0, o, 2, 2); return;
    case 6: tile(w, r, a, t0, o, 2, 3); return;
    default: tile(w, r, a, t0, o, 2, 4); return;
    }
}

void pq_w8a8_gemm_avx2(const pq_int8_weight *w, int r0, int n, const pq_w8a8_act *a, const pq_w8a8_out *o) {
    for (int t0 = 0; t0 < a->T; t0 += TT) {
        int nt = a->T - t0 < TT ? a->T - t0 : TT;
        for (int r = r0; r < r0 + n; r += RT) tile_any(w, r, r0 + n - r < RT ? r0 + n - r : RT, a, t0, nt, o);
    }
}
