#include "w8a8.h"

#include <math.h>
#include <string.h>

#include "common/half.h"
#include "common/status.h"
#include "kernels/blas.h"
#include "kernels/cpu.h"
#include "kernels/linear.h"

static size_t up64(size_t n) { return (n + 63) / 64 * 64; }

size_t pq_w8a8_act_bytes(int T, int cols) {
    return up64((size_t)T * up64((size_t)cols)) + 2 * up64((size_t)T * 4);
}

pq_w8a8_act pq_w8a8_act_view(void *mem, int T, int cols) {
    pq_w8a8_act a = {T, cols, (int)up64((size_t)cols), mem, NULL, NULL};
    char *p = (char *)mem + up64((size_t)T * a.ld);
    a.scale = (float *)p;
    a.sum = (int32_t *)(p + up64((size_t)T * 4));
    return a;
}

// max_c |x[c]| as float bits: an integer max orders non-negative floats, and
// anything >= 0x7f800000 is an Inf or a NaN.
static uint32_t amax_bits(const float *x, int cols) {
    uint32_t m = 0;
    for (int c = 0; c < cols; c++) {
        uint32_t u = pq_f32_bits(x[c]) & 0x7fffffffu;
        if (u > m) m = u;
    }
    return m;
}

void pq_actq_int8_ref(const float *x, int T, int cols, float static_scale, pq_w8a8_act *a) {
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * cols;
        int8_t *q = a->q + (size_t)t * a->ld;
        uint32_t m = amax_bits(xt, cols);
        if (m >= 0x7f800000u) { pq_w8a8_bad_token(a, t); continue; }
        float amax = pq_f32_from_bits(m), inv = 127.0f / amax;
        int32_t sum = 0;
        for (int c = 0; c < cols; c++) {
            q[c] = pq_sat8(static_scale > 0 ? xt[c] / static_scale : xt[c] * inv);
            sum += q[c];
        }
        memset(q + cols, 0, (size_t)(a->ld - cols));
        a->scale[t] = static_scale > 0 ? static_scale : amax / 127.0f;
        a->sum[t] = sum;
    }
}

void pq_actq_fp8_ref(const float *x, int T, int cols, float static_scale, pq_w8a8_act *a) {
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * cols;
        uint8_t *q = (uint8_t *)a->q + (size_t)t * a->ld;
        uint32_t m = amax_bits(xt, cols);
        if (m >= 0x7f800000u) { pq_w8a8_bad_token(a, t); continue; }
        float s = pq_f32_from_bits(m) / 448.0f, inv = static_scale > 0 ? 1.0f / static_scale : 0;
        if (s < PQ_FP8_MIN_SCALE) s = PQ_FP8_MIN_SCALE;
        for (int c = 0; c < cols; c++) q[c] = pq_fp8_e4m3_encode(static_scale > 0 ? xt[c] * inv : xt[c] / s);
        memset(q + cols, 0, (size_t)(a->ld - cols));
        a->scale[t] = static_scale > 0 ? static_scale : s;
        a->sum[t] = 0;
    }
}

void pq_actq_int8_cpu(const float *x, int T, int cols, float static_scale, pq_w8a8_act *a) {
    if (pq_cpu_isa() >= PQ_ISA_AVX512) pq_actq_int8_avx512(x, T, cols, static_scale, a);
    else if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_actq_int8_avx2(x, T, cols, static_scale, a);
    else pq_actq_int8_ref(x, T, cols, static_scale, a);
}

void pq_actq_fp8_cpu(const float *x, int T, int cols, float static_scale, pq_w8a8_act *a) {
    if (pq_cpu_isa() >= PQ_ISA_AVX512) pq_actq_fp8_avx512(x, T, cols, static_scale, a);
    else if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_actq_fp8_avx2(x, T, cols, static_scale, a);
    else pq_actq_fp8_ref(x, T, cols, static_scale, a);
}

// ---- products ----------------------------------------------------------

static inline float scale_out(float sx, float sw, float acc, const pq_w8a8_out *o, int r) {
    float y = sx * (sw * acc);
    return o->bias ? y + o->bias[r] : y;
}

void pq_w8a8_gemm_ref(const pq_int8_weight *w, int r0, int n, const pq_w8a8_act *a, const pq_w8a8_out *o) {
    PQ_ASSERT(a->cols == w->cols && w->cols <= PQ_W8A8_MAX_COLS);
    for (int t = 0; t < a->T; t++)
        for (int r = r0; r < r0 + n; r++) {
            const int8_t *q = a->q + (size_t)t * a->ld, *wr = w->q + (size_t)r * w->cols;
            int32_t acc = 0;
            for (int c = 0; c < w->cols; c++) acc += (int32_t)q[c] * wr[c];
            if (o->acc) o->acc[(size_t)t * o->ldy + r] = acc;
            else o->y[(size_t)t * o->ldy + r] = scale_out(a->scale[t], w->scales[r], (float)acc, o, r);
        }
}

size_t pq_w8a8_gemm_scratch_bytes(int n, int cols) {
    return (size_t)(n + PQ_W8A8_PACK_ROWS - 1) / PQ_W8A8_PACK_ROWS * PQ_W8A8_PACK_ROWS * up64((size_t)cols);
}

void pq_w8a8_gemm_cpu(const pq_int8_weight *w, int r0, int n, const pq_w8a8_act *a, const pq_w8a8_out *o,
                      void *scratch) {
    if (a->T > PQ_GEMV_MAX_T && pq_cpu_amx()) pq_w8a8_gemm_amx(w, r0, n, a, o, scratch);
    else if (pq_cpu_isa() >= PQ_ISA_AVX512) pq_w8a8_gemm_avx512(w, r0, n, a, o, scratch);
    else if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_w8a8_gemm_avx2(w, r0, n, a, o);
    else pq_w8a8_gemm_ref(w, r0, n, a, o);
}

static float fp8_wscale(const pq_fp8_weight *w, int r) { return w->scales[w->per_channel ? r : 0]; }

void pq_w8a8_fp8_ref(const pq_fp8_weight *w, int r0, int n, const pq_w8a8_act *a, const pq_w8a8_out *o) {
    PQ_ASSERT(a->cols == w->cols && w->cols <= PQ_W8A8_MAX_COLS);
    float value[256]; // pq_fp8_e4m3_decode of every code, once
    for (int b = 0; b < 256; b++) value[b] = pq_fp8_e4m3_decode((uint8_t)b);
    for (int t = 0; t < a->T; t++)
        for (int r = r0; r < r0 + n; r++) {
            const uint8_t *q = (const uint8_t *)a->q + (size_t)t * a->ld, *wr = w->q + (size_t)r * w->cols;
            double acc = 0; // exact: see the header
            for (int c = 0; c < w->cols; c++) acc += (double)value[q[c]] * value[wr[c]];
            o->y[(size_t)t * o->ldy + r] = scale_out(a->scale[t], fp8_wscale(w, r), (float)acc, o, r);
        }
}

uint16_t pq_fp8_e4m3_bf16(uint8_t b) {
    float v = pq_fp8_e4m3_decode(b);
    uint32_t u;
    memcpy(&u, &v, 4);
    return (uint16_t)(u >> 16); // exact: at most 4 significant bits
}

// The AMX GEMM's decoded activations and weight rows: BF16, cols rounded up to 32.
static int amx_fp8(const pq_w8a8_act *a) { return a->T > PQ_GEMV_MAX_T && pq_cpu_amx(); }
static size_t up32(size_t n) { return (n + 31) / 32 * 32; }

size_t pq_w8a8_fp8_decoded_bytes(int T, int cols) {
    size_t f32 = (size_t)T * cols * sizeof(float), bf16 = (size_t)T * up32((size_t)cols) * 2;
    return f32 > bf16 ? f32 : bf16;
}

size_t pq_w8a8_fp8_scratch_bytes(int n, int cols) {
    size_t f32 = (size_t)n * cols * sizeof(float), bf16 = (size_t)(n + 31) / 32 * 32 * up32((size_t)cols) * 2;
    return f32 > bf16 ? f32 : bf16;
}

void pq_w8a8_fp8_decode_cpu(const pq_w8a8_act *a, int t0, int nt, void *xd) {
    if (amx_fp8(a)) {
        pq_w8a8_fp8_decode_amx(a, t0, nt, xd);
        return;
    }
    static const float one = 1.0f;
    for (int t = t0; t < t0 + nt; t++) {
        pq_fp8_weight row = {1, a->cols, (const uint8_t *)a->q + (size_t)t * a->ld, &one, 0};
        pq_fp8_rows_cpu(&row, 0, 1, (float *)xd + (size_t)t * a->cols);
    }
}

// The fp32 sums come from the FP8 weight kernels run with a unit scale
// (decode(q) exactly): the GEMV for a few tokens, else decoded rows and
// sgemm; then the epilogue in place. Or all of it on AMX tiles.
void pq_w8a8_fp8_cpu(const pq_fp8_weight *w, int r0, int n, const pq_w8a8_act *a, const void *xd,
                     const pq_w8a8_out *o, void *scratch) {
    if (amx_fp8(a)) {
        pq_w8a8_fp8_amx(w, r0, n, a, xd, o, scratch);
        return;
    }
    static const float one = 1.0f;
    pq_fp8_weight unit = *w;
    unit.scales = &one;
    unit.per_channel = 0;
    if (a->T <= PQ_GEMV_MAX_T) {
        pq_fp8_gemv_cpu(&unit, r0, n, xd, a->T, o->y, o->ldy);
    } else {
        pq_fp8_rows_cpu(&unit, r0, n, scratch);
        pq_sgemm_nt(a->T, n, w->cols, 1.0f, xd, w->cols, scratch, w->cols, 0.0f, o->y + r0, o->ldy);
    }
    for (int t = 0; t < a->T; t++) {
        float *yt = o->y + (size_t)t * o->ldy, sx = a->scale[t];
        for (int r = r0; r < r0 + n; r++) yt[r] = scale_out(sx, fp8_wscale(w, r), yt[r], o, r);
    }
}
