// kernels/ggml_quant.c — ggml's round-to-nearest quantizers (see
// ggml_quant.h). Every search below evaluates its f32 expressions in the
// order ggml's does (the build has FMA contraction off), which is what makes
// the bytes equal; the comments name the ggml function each one matches.
#include "kernels/ggml_quant.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "common/half.h"
#include "common/status.h"

#define MAX_EPS 1e-15f // ggml's GROUP_MAX_EPS: a block whose largest magnitude is below it is all zero

// ggml's nearest_int: round half to even (rintf in the default rounding
// mode). Its inputs are bounded by the searches (|v| < 2^22).
static inline int nearest(float v) { return (int)rintf(v); }

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

static inline void put_half(uint8_t *p, float f) {
    uint16_t h = pq_f32_to_fp16(f);
    memcpy(p, &h, 2);
}

static inline float get_half(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return pq_fp16_to_f32(h);
}

int pq_ggml_can_quant(uint32_t t) {
    switch (t) {
    case PQ_GGML_Q4_0: case PQ_GGML_Q4_1: case PQ_GGML_Q5_0: case PQ_GGML_Q8_0: case PQ_GGML_Q4_K: case PQ_GGML_Q6_K:
        return 1;
    default:
        return 0;
    }
}

// ---- the searches of the K types ---------------------------------------------------

// make_qkx2_quants and make_qkx3_quants with weights (use_mad false): an
// asymmetric scale and min for x[n] with codes 0..nmax, the min clamped to
// <= 0, trying nstep + 1 scales around the range's by weighted least squares.
// Returns the scale; *neg_min receives -min; L the codes of the best try.
// ggml's two differ only in the all-zero test, max == min (qkx2) against
// max <= min (qkx3), which agree here: once min is clamped to <= 0, max < min
// cannot happen (and nstep >= 1 in every call, so qkx3's first try is not
// skipped either).
static float search_qkx(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, float rmin,
                         float rdelta, int nstep) {
    uint8_t aux[32];
    float lo = x[0], hi = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0) lo = 0;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *neg_min = -lo;
        return 0.f;
    }
    float iscale = nmax / (hi - lo), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)imax(0, imin(nmax, nearest(iscale * (x[i] - lo))));
        float diff = scale * L[i] + lo - x[i];
        best += w[i] * (diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(0, imin(nmax, nearest(iscale * (x[i] - lo))));
            aux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D, this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * aux[i] + this_min - x[i];
            err += w[i] * (diff * diff);
        }
        if (err < best) {
            memcpy(L, aux, (size_t)n);
            best = err;
            scale = this_scale;
            lo = this_min;
        }
    }
    *neg_min = -lo;
    return scale;
}

// make_qp_quants: one scale for n non-negative values x with codes 0..nmax
// (the 6-bit sub-block scales and mins of Q4_K with importance weights w).
// Returns the scale; L the codes.
static float search_qp(int n, int nmax, const float *x, uint8_t *L, const float *w) {
    float hi = 0;
    for (int i = 0; i < n; i++) hi = x[i] > hi ? x[i] : hi;
    if (hi < MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = nmax / hi;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)nearest(iscale * x[i]);
    float scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        float diff = x[i] - scale * L[i];
        best += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0) continue;
        float iscale_is = (0.1f * is + nmax) / hi, scale_is = 1 / iscale_is, mse = 0;
        for (int i = 0; i < n; i++) {
            int l = imin(nmax, nearest(iscale_is * x[i]));
            float diff = x[i] - scale_is * l;
            mse += w[i] * diff * diff;
        }
        if (mse < best) {
            best = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imin(nmax, nearest(iscale * x[i]));
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * l;
        suml2 += w[i] * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float slx = sumlx - w[i] * x[i] * L[i], sl2 = suml2 - w[i] * L[i] * L[i];
            if (!(slx > 0 && sl2 > 0)) continue;
            int nl = imin(nmax, nearest(x[i] * sl2 / slx));
            if (nl == L[i]) continue;
            slx += w[i] * x[i] * nl;
            sl2 += w[i] * nl * nl;
            if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (uint8_t)nl;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// make_qx_quants with rmse_type 1: a symmetric scale for x[n] with codes
// -nmax..nmax-1 (stored + nmax in L), weights qw or x^2, 19 candidate
// scales around -nmax / max. Returns the scale.
static float search_qx(int n, int nmax, const float *x, int8_t *L, const float *qw) {
    float mx = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), mx = x[i];
    if (amax < MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / mx, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(-nmax, imin(nmax - 1, nearest(iscale * x[i])));
        L[i] = (int8_t)(l + nmax);
        float w = qw ? qw[i] : x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / mx;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(-nmax, imin(nmax - 1, nearest(iscale * x[i])));
            float w = qw ? qw[i] : x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, nearest(iscale * x[i]))));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// ---- grids -----------------------------------------------------------------------

// Q4_0 / Q5_0: d = (the value of largest magnitude) / -half.
static void grid_sym(const float *x, int half, uint8_t *d_field, pq_ggml_grid *g) {
    float amax = 0, mx = 0;
    for (int j = 0; j < PQ_QK; j++)
        if (amax < fabsf(x[j])) amax = fabsf(x[j]), mx = x[j];
    g->d = mx / (float)-half;
    g->id = g->d ? 1.0f / g->d : 0.0f;
    put_half(d_field, g->d);
    g->dq = get_half(d_field);
}

static void grid_q4_1(const float *x, pq_block_q4_1 *b, pq_ggml_grid *g) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < PQ_QK; j++) lo = x[j] < lo ? x[j] : lo, hi = x[j] > hi ? x[j] : hi;
    g->d = (hi - lo) / 15;
    g->id = g->d ? 1.0f / g->d : 0.0f;
    g->m = lo;
    put_half((uint8_t *)&b->d, g->d);
    put_half((uint8_t *)&b->m, lo);
    g->dq = get_half((uint8_t *)&b->d);
    g->mq = get_half((uint8_t *)&b->m);
}

static void grid_q8_0(const float *x, pq_block_q8_0 *b, pq_ggml_grid *g) {
    float amax = 0;
    for (int j = 0; j < PQ_QK; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    g->d = amax / 127;
    g->id = g->d ? 1.0f / g->d : 0.0f;
    put_half((uint8_t *)&b->d, g->d);
    g->dq = get_half((uint8_t *)&b->d);
}

// The 12 scale bytes of Q4_K from 6-bit scales ls and mins lm.
static void pack_k4_scales(uint8_t *s, const uint8_t *ls, const uint8_t *lm) {
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            s[j] = ls[j];
            s[j + 4] = lm[j];
        } else {
            s[j + 4] = (uint8_t)((ls[j] & 0xF) | (lm[j] & 0xF) << 4);
            s[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            s[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

// quantize_row_q4_K_ref's search (weights NULL) or quantize_row_q4_K_impl's
// (importance weights qw).
static void grid_q4_k(const float *x, const float *qw, pq_block_q4_k *b, pq_ggml_grid *g) {
    float scales[8], mins[8], w[32], sw[8];
    uint8_t ls[8], lm[8];
    float d_all, m_all;
    if (!qw) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; j++) {
            const float *xs = x + 32 * j;
            float sum_x2 = 0;
            for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
            float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
            scales[j] = search_qkx(32, 15, xs, w, g->keep + 32 * j, &mins[j], -1.f, 0.1f, 20);
            max_scale = scales[j] > max_scale ? scales[j] : max_scale;
            max_min = mins[j] > max_min ? mins[j] : max_min;
        }
        float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f, inv_min = max_min > 0 ? 63.f / max_min : 0.f;
        for (int j = 0; j < 8; j++) {
            uint8_t a = (uint8_t)nearest(inv_scale * scales[j]), c = (uint8_t)nearest(inv_min * mins[j]);
            ls[j] = a < 63 ? a : 63;
            lm[j] = c < 63 ? c : 63;
        }
        d_all = max_scale / 63.f;
        m_all = max_min / 63.f;
    } else {
        float sum_x2 = 0;
        for (int l = 0; l < PQ_QK_K; l++) sum_x2 += x[l] * x[l];
        float sigma2 = 2 * sum_x2 / PQ_QK_K;
        for (int j = 0; j < 8; j++) {
            const float *xs = x + 32 * j, *q = qw + 32 * j;
            for (int l = 0; l < 32; l++) w[l] = q[l] * sqrtf(sigma2 + xs[l] * xs[l]);
            float sumw = 0;
            for (int l = 0; l < 32; l++) sumw += w[l];
            sw[j] = sumw;
            scales[j] = search_qkx(32, 15, xs, w, g->keep + 32 * j, &mins[j], -0.9f, 0.05f, 36);
        }
        d_all = search_qp(8, 63, scales, ls, sw);
        m_all = search_qp(8, 63, mins, lm, sw);
    }
    pack_k4_scales(b->scales, ls, lm);
    put_half((uint8_t *)&b->d, d_all);
    put_half((uint8_t *)&b->dmin, m_all);
    float dq = get_half((uint8_t *)&b->d), mq = get_half((uint8_t *)&b->dmin);
    for (int j = 0; j < 8; j++) g->sd[j] = dq * ls[j], g->sm[j] = mq * lm[j];
}

// quantize_row_q6_K_ref's search (weights x^2) or _impl's (qw).
static void grid_q6_k(const float *x, const float *qw, pq_block_q6_k *b, pq_ggml_grid *g) {
    float scales[16], max_scale = 0, max_abs = 0;
    int8_t L[16];
    for (int ib = 0; ib < 16; ib++) {
        scales[ib] = search_qx(16, 32, x + 16 * ib, L, qw ? qw + 16 * ib : NULL);
        for (int l = 0; l < 16; l++) g->keep[16 * ib + l] = (uint8_t)L[l];
        if (fabsf(scales[ib]) > max_abs) max_abs = fabsf(scales[ib]), max_scale = scales[ib];
    }
    if (max_abs < MAX_EPS) { // an all-zero block: d 0, every scale and code 0
        memset(g->keep, 0, sizeof g->keep);
        return;
    }
    float iscale = -128.f / max_scale;
    put_half((uint8_t *)&b->d, 1 / iscale);
    float dq = get_half((uint8_t *)&b->d);
    for (int ib = 0; ib < 16; ib++) {
        b->scales[ib] = (int8_t)imin(127, nearest(iscale * scales[ib]));
        g->sd[ib] = dq * b->scales[ib];
    }
}

void pq_ggml_grid_make(pq_ggml_type t, const float *x, const float *weights, void *blk, pq_ggml_grid *g) {
    const pq_ggml_type_info *info = pq_ggml_type_get(t);
    memset(blk, 0, (size_t)info->bytes);
    memset(g, 0, sizeof *g);
    g->type = t;
    switch (t) {
    case PQ_GGML_Q4_0: grid_sym(x, 8, (uint8_t *)&((pq_block_q4_0 *)blk)->d, g); return;
    case PQ_GGML_Q5_0: grid_sym(x, 16, (uint8_t *)&((pq_block_q5_0 *)blk)->d, g); return;
    case PQ_GGML_Q4_1: grid_q4_1(x, blk, g); return;
    case PQ_GGML_Q8_0: grid_q8_0(x, blk, g); return;
    case PQ_GGML_Q4_K: grid_q4_k(x, weights, blk, g); return;
    case PQ_GGML_Q6_K: grid_q6_k(x, weights, blk, g); return;
    default: PQ_ASSERT(!"pq_ggml_grid_make: a type without a quantizer");
    }
}

// trunc(v) clamped to [0, hi]: ggml's (int8_t)(v) then MIN(hi, .) for the
// v >= 0 its grids produce, and the grid's ends for values off it.
static inline int trunc_clamp(float v, int hi) { return v <= 0 ? 0 : v >= (float)hi ? hi : (int)v; }

int pq_ggml_grid_code(const pq_ggml_grid *g, int i, float x) {
    switch (g->type) {
    case PQ_GGML_Q4_0: return trunc_clamp(x * g->id + 8.5f, 15);
    case PQ_GGML_Q5_0: return trunc_clamp(x * g->id + 16.5f, 31);
    case PQ_GGML_Q4_1: return trunc_clamp((x - g->m) * g->id + 0.5f, 15);
    case PQ_GGML_Q8_0: {
        float r = roundf(x * g->id);
        return r < -128 ? -128 : r > 127 ? 127 : (int)r;
    }
    case PQ_GGML_Q4_K: {
        float d = g->sd[i / 32];
        if (!d) return g->keep[i];
        float v = (x + g->sm[i / 32]) / d;
        return v < 0 ? 0 : v > 15 ? 15 : nearest(v);
    }
    case PQ_GGML_Q6_K: {
        float d = g->sd[i / 16];
        if (!d) return g->keep[i];
        float v = x / d;
        return (v < -32 ? -32 : v > 31 ? 31 : nearest(v)) + 32;
    }
    default: PQ_ASSERT(!"pq_ggml_grid_code: a type without a quantizer");
    }
    return 0;
}

float pq_ggml_grid_value(const pq_ggml_grid *g, int i, int q) {
    switch (g->type) {
    case PQ_GGML_Q4_0: return (float)(q - 8) * g->dq;
    case PQ_GGML_Q5_0: return (float)(q - 16) * g->dq;
    case PQ_GGML_Q4_1: return (float)q * g->dq + g->mq;
    case PQ_GGML_Q8_0: return (float)q * g->dq;
    case PQ_GGML_Q4_K: return g->sd[i / 32] * (float)q - g->sm[i / 32];
    case PQ_GGML_Q6_K: return g->sd[i / 16] * (float)(q - 32);
    default: PQ_ASSERT(!"pq_ggml_grid_value: a type without a quantizer");
    }
    return 0;
}

void pq_ggml_block_set_code(pq_ggml_type t, void *blk, int i, int q) {
    int lo = i % 16, hi_half = (i / 16) % 2; // 32-value types: value j in byte j % 16, high nibble for j >= 16
    switch (t) {
    case PQ_GGML_Q4_0: ((pq_block_q4_0 *)blk)->qs[lo] |= (uint8_t)(q << (4 * hi_half)); return;
    case PQ_GGML_Q4_1: ((pq_block_q4_1 *)blk)->qs[lo] |= (uint8_t)(q << (4 * hi_half)); return;
    case PQ_GGML_Q5_0: {
        pq_block_q5_0 *b = blk;
        b->qs[lo] |= (uint8_t)((q & 0xF) << (4 * hi_half));
        b->qh[i / 8] |= (uint8_t)(((q >> 4) & 1) << (i % 8)); // bit i of the little-endian u32
        return;
    }
    case PQ_GGML_Q8_0: ((pq_block_q8_0 *)blk)->qs[i] = (int8_t)q; return;
    case PQ_GGML_Q4_K: // chunk of 64: low nibbles the first 32 values, high nibbles the next
        ((pq_block_q4_k *)blk)->qs[32 * (i / 64) + i % 32] |= (uint8_t)(q << (4 * ((i / 32) % 2)));
        return;
    case PQ_GGML_Q6_K: {
        pq_block_q6_k *b = blk;
        int half = i / 128, k = (i % 128) / 32, l = i % 32;
        b->ql[64 * half + l + 32 * (k & 1)] |= (uint8_t)((q & 0xF) << (k < 2 ? 0 : 4));
        b->qh[32 * half + l] |= (uint8_t)(((q >> 4) & 3) << (2 * k));
        return;
    }
    default: PQ_ASSERT(!"pq_ggml_block_set_code: a type without a quantizer");
    }
}

void pq_ggml_quant_ref(pq_ggml_type t, const float *x, void *dst, int64_t n, const float *imatrix) {
    const pq_ggml_type_info *info = pq_ggml_type_get(t);
    int k = t == PQ_GGML_Q4_K || t == PQ_GGML_Q6_K;
    pq_ggml_grid g;
    uint8_t *out = dst;
    for (int64_t b = 0; b < n / info->block; b++, x += info->block, out += info->bytes) {
        pq_ggml_grid_make(t, x, k && imatrix ? imatrix + b * info->block : NULL, out, &g);
        for (int i = 0; i < info->block; i++) pq_ggml_block_set_code(t, out, i, pq_ggml_grid_code(&g, i, x[i]));
    }
}
