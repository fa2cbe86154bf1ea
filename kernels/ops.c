#include "ops.h"

#include <math.h>

#include "kernels/cpu.h"

void pq_rmsnorm_ref(const float *x, const float *w, int T, int n, float eps, float *y) {
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * n;
        float *yt = y + (size_t)t * n;
        double ss = 0;
        for (int i = 0; i < n; i++) ss += (double)xt[i] * xt[i];
        float inv = (float)(1.0 / sqrt(ss / n + eps));
        for (int i = 0; i < n; i++) yt[i] = w[i] * (xt[i] * inv);
    }
}

void pq_rope_inv_freq(const pq_rope_params *p, int head_dim, double *inv_freq) {
    const double two_pi = 6.283185307179586;
    for (int i = 0; i < head_dim / 2; i++) {
        double f = pow((double)p->theta, -2.0 * i / head_dim);
        if (p->llama3) {
            double low_wavelen = p->orig_max_pos / p->low_freq_factor;
            double high_wavelen = p->orig_max_pos / p->high_freq_factor;
            double wavelen = two_pi / f;
            if (wavelen > low_wavelen) {
                f = f / p->factor;
            } else if (wavelen >= high_wavelen) {
                double smooth = (p->orig_max_pos / wavelen - p->low_freq_factor) /
                                (p->high_freq_factor - p->low_freq_factor);
                f = (1 - smooth) * f / p->factor + smooth * f;
            }
        }
        inv_freq[i] = f;
    }
}

void pq_rope_table(const double *inv_freq, int head_dim, int pos0, int T, float *cs, float *sn) {
    int half = head_dim / 2;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            double a = (double)(pos0 + t) * inv_freq[i];
            cs[(size_t)t * half + i] = (float)cos(a);
            sn[(size_t)t * half + i] = (float)sin(a);
        }
}

void pq_rope_apply_ref(float *x, int T, int stride, int n_heads, int head_dim, const float *cs,
                       const float *sn) {
    int half = head_dim / 2;
    for (int t = 0; t < T; t++) {
        const float *c = cs + (size_t)t * half, *s = sn + (size_t)t * half;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)t * stride + (size_t)h * head_dim;
            for (int i = 0; i < half; i++) {
                float a = v[i], b = v[i + half];
                v[i] = a * c[i] - b * s[i];
                v[i + half] = b * c[i] + a * s[i];
            }
        }
    }
}

void pq_swiglu_ref(float *gate, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

void pq_swiglu_cpu(float *gate, const float *up, size_t n) {
    if (pq_cpu_isa() >= PQ_ISA_AVX512) pq_swiglu_avx512(gate, up, n);
    else if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_swiglu_avx2(gate, up, n);
    else pq_swiglu_ref(gate, up, n);
}

void pq_add_ref(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

long long pq_scan_finite_ref(const float *x, size_t n, float *amax) {
    float m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) return (long long)i;
        m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
    }
    if (amax) *amax = m;
    return -1;
}

void pq_abs_stats_ref(const float *x, int T, int cols, int c0, int c1, double *sum, float *max) {
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * cols;
        for (int c = c0; c < c1; c++) {
            float a = fabsf(xr[c]);
            sum[c] += a;
            if (a > max[c]) max[c] = a;
        }
    }
}

// ---- dispatch -------------------------------------------------------------

void pq_rmsnorm_cpu(const float *x, const float *w, int T, int n, float eps, float *y) {
    if (pq_cpu_isa() >= PQ_ISA_AVX512) pq_rmsnorm_avx512(x, w, T, n, eps, y);
    else if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_rmsnorm_avx2(x, w, T, n, eps, y);
    else pq_rmsnorm_ref(x, w, T, n, eps, y);
}

void pq_rope_apply_cpu(float *x, int T, int stride, int n_heads, int head_dim, const float *cs, const float *sn) {
    if (pq_cpu_isa() >= PQ_ISA_AVX512) pq_rope_apply_avx512(x, T, stride, n_heads, head_dim, cs, sn);
    else if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_rope_apply_avx2(x, T, stride, n_heads, head_dim, cs, sn);
    else pq_rope_apply_ref(x, T, stride, n_heads, head_dim, cs, sn);
}

void pq_add_cpu(float *y, const float *x, size_t n) {
    if (pq_cpu_isa() >= PQ_ISA_AVX512) pq_add_avx512(y, x, n);
    else if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_add_avx2(y, x, n);
    else pq_add_ref(y, x, n);
}

long long pq_scan_finite_cpu(const float *x, size_t n, float *amax) {
    return pq_cpu_isa() >= PQ_ISA_AVX2 ? pq_scan_finite_avx2(x, n, amax) : pq_scan_finite_ref(x, n, amax);
}

void pq_abs_stats_cpu(const float *x, int T, int cols, int c0, int c1, double *sum, float *max) {
    if (pq_cpu_isa() >= PQ_ISA_AVX512) pq_abs_stats_avx512(x, T, cols, c0, c1, sum, max);
    else if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_abs_stats_avx2(x, T, cols, c0, c1, sum, max);
    else pq_abs_stats_ref(x, T, cols, c0, c1, sum, max);
}
