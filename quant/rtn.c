#include "quant/rtn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu.h"
#include "kernels/fp8.h"
#include "kernels/ops.h"
#include "quant/ggml_grid.h"

#define CHUNK_ROWS 16
#define CODES 256 // codes of a group computed at a time
#define FP8_MAX 448.0

typedef struct {
    const float *w;
    const pq_scheme *s;
    pq_dtype sdt;
    pq_qtensor *q;
    float tensor_scale;  // PQ_W_FP8 per tensor
    double *err2;        // [chunks] sum of (w - w')^2
    double *norm2;       // [chunks] sum of w^2
    int *bad;            // [chunks] 1 + the first row whose scale overflowed, or 0
} job;

// torch.finfo(dtype).eps: what compressed-tensors puts in place of a zero scale
static float dtype_eps(pq_dtype dt) {
    return dt == PQ_DT_F16 ? 0x1p-10f : dt == PQ_DT_BF16 ? 0x1p-7f : 0x1p-23f;
}

float pq_rtn_stored_scale(double s, pq_dtype dt) {
    float f = pq_round_to_dtype((float)s, dt);
    if (f == 0) f = dtype_eps(dt);
    return isfinite(f) ? f : 0;
}

static float clampf(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

// One operation's f32 result rounded to dt: the operation in dt (rtn.h).
static float rd(float x, pq_dtype dt) { return pq_round_to_dtype(x, dt); }

// The minmax scale and zero point of the range [lo, hi] (lo <= 0 <= hi), in dt.
static int range_params(float lo, float hi, int bits, int sym, pq_dtype dt, float *scale, float *zero) {
    float qmin = (float)-(1 << (bits - 1)), qmax = (float)((1 << (bits - 1)) - 1);
    lo = rd(lo, dt), hi = rd(hi, dt);
    float levels = (float)((1 << bits) - 1); // exact in F16 and BF16 for bits <= 8, as is levels / 2
    float raw = sym ? rd(fmaxf(-lo, hi) / (levels / 2), dt) : rd(rd(hi - lo, dt) / levels, dt);
    float sc = raw == 0 ? dtype_eps(dt) : raw;
    if (!isfinite(sc)) return 0;
    *scale = sc;
    if (sym)
        *zero = 0;
    else if (raw == 0) // compressed-tensors divides by the scale before replacing a 0: lo / 0
        *zero = lo == 0 ? 0 : qmax;
    else
        *zero = rintf(clampf(rd(qmin - rd(lo / raw, dt), dt), qmin, qmax));
    return 1;
}

float pq_rtn_code_dtype(float w, float scale, float zero, int bits, pq_dtype dt) {
    float x = rd(w / scale, dt);
    if (zero != 0) x = rd(x + zero, dt);
    return rintf(clampf(x, (float)-(1 << (bits - 1)), (float)((1 << (bits - 1)) - 1)));
}

void pq_rtn_codes_ref(const float *w, int n, float scale, float zero, int bits, pq_dtype dt, float *codes) {
    for (int i = 0; i < n; i++) codes[i] = pq_rtn_code_dtype(rd(w[i], dt), scale, zero, bits, dt);
}

void pq_rtn_codes_cpu(const float *w, int n, float scale, float zero, int bits, pq_dtype dt, float *codes) {
    if (pq_cpu_isa() >= PQ_ISA_AVX2 && (dt == PQ_DT_F16 || dt == PQ_DT_F32))
        pq_rtn_codes_avx2(w, n, scale, zero, bits, dt, codes);
    else
        pq_rtn_codes_ref(w, n, scale, zero, bits, dt, codes);
}

float pq_rtn_code(float w, float scale, float zero, int bits) {
    return pq_rtn_code_dtype(w, scale, zero, bits, PQ_DT_F32);
}

double pq_rtn_group_lp_error(const float *w, int n, int bits, float scale, float zero) {
    double e = 0;
    for (int c = 0; c < n; c++) {
        float d = fabsf(w[c] - scale * (pq_rtn_code(w[c], scale, zero, bits) - zero));
        if (d > 0) e += powf(d, (float)PQ_MSE_NORM);
    }
    return e;
}

int pq_rtn_group_params(const float *w, int n, int bits, int sym, pq_observer observer, pq_dtype scale_dtype,
                        float *scale, float *zero) {
    float lo = 0, hi = 0;
    for (int c = 0; c < n; c++) lo = w[c] < lo ? w[c] : lo, hi = w[c] > hi ? w[c] : hi;
    if (!range_params(lo, hi, bits, sym, scale_dtype, scale, zero)) return 0;
    if (observer != PQ_OBSERVER_MSE) return 1;
    double best = pq_rtn_group_lp_error(w, n, bits, *scale, *zero);
    for (int i = 1; i < PQ_MSE_STEPS; i++) {
        double p = 1.0 - (double)i / PQ_MSE_GRID;
        float sc, z;
        if (!range_params((float)(p * lo), (float)(p * hi), bits, sym, scale_dtype, &sc, &z)) continue;
        double e = pq_rtn_group_lp_error(w, n, bits, sc, z);
        if (e < best) best = e, *scale = sc, *zero = z;
    }
    return 1;
}

// One group [c0, c1) of row r of an integer format: writes codes (QPACK
// packed or INT8), the scale and zero; accumulates the error. 0 on overflow.
static int quant_int_group(job *j, int r, int c0, int c1, int g, double *e2) {
    pq_qtensor *q = j->q;
    const float *w = j->w + (size_t)r * q->cols;
    float sc, z; // the group's min and max rounded to sdt are those of its weights rounded to sdt
    if (!pq_rtn_group_params(w + c0, c1 - c0, j->s->bits, j->s->sym, j->s->observer, j->sdt, &sc, &z)) return 0;
    int ng = pq_qtensor_ngroups(q);
    q->scales[(size_t)r * ng + g] = sc;
    if (q->zeros) q->zeros[(size_t)r * ng + g] = (uint8_t)((int)z + (1 << (j->s->bits - 1)));
    float codes[CODES];
    for (int c = c0; c < c1; c += CODES) {
        int n = c1 - c < CODES ? c1 - c : CODES;
        pq_rtn_codes_cpu(w + c, n, sc, z, j->s->bits, j->sdt, codes);
        pq_qtensor_set_codes(q, r, c, n, codes);
        for (int i = 0; i < n; i++) {
            double d = (double)w[c + i] - (double)(sc * (codes[i] - z)); // the spec: one fp32 multiply of s by (q - z)
            *e2 += d * d;
        }
    }
    return 1;
}

// The FP8 scale of weights whose largest magnitude is amax: (amax / 448) in dt
// (amax rounded to dt first; the double division rounded to f32, then to dt,
// is the division in dt), 0 if it overflows dt.
static float fp8_scale(float amax, pq_dtype dt) { return pq_rtn_stored_scale(rd(amax, dt) / FP8_MAX, dt); }

// Row r of FP8: per-channel scale from the row (or the tensor's), codes.
static int quant_fp8_row(job *j, int r, double *e2) {
    pq_qtensor *q = j->q;
    const float *w = j->w + (size_t)r * q->cols;
    float sc = j->tensor_scale;
    if (!q->per_tensor) {
        float amax = 0;
        for (int c = 0; c < q->cols; c++) amax = fabsf(w[c]) > amax ? fabsf(w[c]) : amax;
        sc = fp8_scale(amax, j->sdt);
        if (sc == 0) return 0;
        q->scales[r] = sc;
    }
    uint8_t *out = q->f8 + (size_t)r * q->cols;
    for (int c = 0; c < q->cols; c++) {
        out[c] = pq_fp8_e4m3_encode(rd(rd(w[c], j->sdt) / sc, j->sdt)); // saturating: the clamp to +-448
        double d = (double)w[c] - (double)(sc * pq_fp8_e4m3_decode(out[c]));
        *e2 += d * d;
    }
    return 1;
}

static void chunk_fn(void *ctx, int i, int tid) {
    job *j = ctx;
    pq_qtensor *q = j->q;
    int r1 = (i + 1) * CHUNK_ROWS < q->rows ? (i + 1) * CHUNK_ROWS : q->rows;
    double e2 = 0, n2 = 0;
    for (int r = i * CHUNK_ROWS; r < r1; r++) {
        const float *w = j->w + (size_t)r * q->cols;
        for (int c = 0; c < q->cols; c++) n2 += (double)w[c] * w[c];
        int ok = 1;
        if (q->fmt == PQ_W_FP8) {
            ok = quant_fp8_row(j, r, &e2);
        } else {
            int len = q->fmt == PQ_W_QPACK ? q->group : q->cols;
            for (int g = 0, c0 = 0; ok && c0 < q->cols; g++, c0 += len)
                ok = quant_int_group(j, r, c0, c0 + len < q->cols ? c0 + len : q->cols, g, &e2);
        }
        if (!ok) { j->bad[i] = r + 1; break; }
    }
    j->err2[i] = e2;
    j->norm2[i] = n2;
}

pq_status pq_rtn_quantize(const float *w, const pq_scheme *s, const char *name, pq_pool *pool, pq_qtensor *q,
                          double *rel_err) {
    int rows = q->rows, cols = q->cols;
    pq_dtype sdt = q->scale_dtype;
    PQ_FAIL_IF(rows <= 0 || cols <= 0, PQ_ERR_ARG, "%s: bad shape [%d, %d]", name, rows, cols);
    PQ_FAIL_IF(q->is_ggml != (pq_scheme_ggml_type(s) >= 0), PQ_ERR_ARG,
               "%s: the output tensor was not made for this scheme (pq_qtensor_init)", name);
    if (q->is_ggml) return pq_ggml_rtn_quantize(w, name, pool, q, rel_err); // a GGUF scheme: ggml's own RTN
    PQ_FAIL_IF(s->bits < 2 || s->bits > 8 || (s->is_float && s->bits != 8), PQ_ERR_ARG, "%s: %d-bit %s weights",
               name, s->bits, s->is_float ? "float" : "integer");
    int qpack_ok = q->bits == s->bits && q->packed && (q->zeros == NULL) == (s->sym != 0);
    int fp8_ok = q->per_tensor == (s->group == PQ_GROUP_TENSOR);
    PQ_FAIL_IF(q->fmt != pq_scheme_wformat(s) || !q->scales || (q->fmt == PQ_W_QPACK && !qpack_ok) ||
                   (q->fmt == PQ_W_FP8 && !fp8_ok),
               PQ_ERR_ARG, "%s: the output tensor was not made for this scheme (pq_qtensor_init)", name);
    PQ_FAIL_IF(sdt != PQ_DT_F16 && sdt != PQ_DT_BF16 && sdt != PQ_DT_F32, PQ_ERR_ARG,
               "%s: scales cannot be stored as %s", name, pq_dtype_name(sdt));
    float amax;
    long long bad = pq_scan_finite_cpu(w, (size_t)rows * cols, &amax);
    PQ_FAIL_IF(bad >= 0, PQ_ERR_NUMERIC, "%s: weight [%lld, %lld] is %s", name, bad / cols, bad % cols,
               isnan(w[bad]) ? "NaN" : "Inf");
    int nchunks = (rows + CHUNK_ROWS - 1) / CHUNK_ROWS;
    job j = {w, s, sdt, q, 0, calloc((size_t)nchunks, sizeof(double)), calloc((size_t)nchunks, sizeof(double)),
             calloc((size_t)nchunks, sizeof(int))};
    pq_status st = PQ_OK;
    PQ_CHECK_GOTO(!j.err2 || !j.norm2 || !j.bad, st, PQ_ERR_NOMEM, "%s: out of memory", name);
    if (q->per_tensor) {
        j.tensor_scale = q->scales[0] = fp8_scale(amax, sdt);
        PQ_CHECK_GOTO(j.tensor_scale == 0, st, PQ_ERR_NUMERIC, "%s: the scale %g overflows %s", name,
                      amax / FP8_MAX, pq_dtype_name(sdt));
    }
    pq_pool_for(pool, nchunks, chunk_fn, &j);
    double e2 = 0, n2 = 0;
    for (int i = 0; i < nchunks; i++) {
        PQ_CHECK_GOTO(j.bad[i], st, PQ_ERR_NUMERIC, "%s: row %d: a scale overflows %s", name, j.bad[i] - 1,
                      pq_dtype_name(sdt));
        e2 += j.err2[i];
        n2 += j.norm2[i];
    }
    if (rel_err) *rel_err = n2 > 0 ? e2 / n2 : 0;
done:
    free(j.err2);
    free(j.norm2);
    free(j.bad);
    return st;
}
