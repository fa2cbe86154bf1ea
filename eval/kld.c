// eval/kld.c — KL divergence statistics of a model against a base (see kld.h).
#include "eval/kld.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// max and argmax (first on ties) of logits; log of sum exp(x - max) in double.
static double log_sum_exp(const float *x, int n, float *mx, int *arg) {
    float m = x[0];
    int a = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > m) m = x[i], a = i;
    double s = 0;
    for (int i = 0; i < n; i++) s += exp((double)x[i] - m);
    *mx = m;
    *arg = a;
    return log(s);
}

pq_status pq_kld_token(const float *base, const float *logits, int vocab, int target, double *kld, int *same_top,
                       double *nll_base, double *nll) {
    PQ_FAIL_IF(vocab < 1 || target < 0 || target >= vocab, PQ_ERR_ARG, "target %d outside a vocabulary of %d", target,
               vocab);
    float mb, mq;
    int ab, aq;
    double lb = log_sum_exp(base, vocab, &mb, &ab), lq = log_sum_exp(logits, vocab, &mq, &aq);
    PQ_FAIL_IF(!isfinite(lb) || !isfinite(lq) || !isfinite(mb) || !isfinite(mq), PQ_ERR_NUMERIC, "non-finite logits");
    // log P_i = base_i - mb - lb; log Q_i = logits_i - mq - lq
    double s = 0, cb = mb + lb, cq = mq + lq;
    for (int i = 0; i < vocab; i++) {
        double lp = (double)base[i] - cb;
        s += exp(lp) * (lp - ((double)logits[i] - cq));
    }
    *kld = s > 0 ? s : 0; // exact KLD is >= 0; rounding can leave -1e-17
    *same_top = ab == aq;
    *nll_base = cb - base[target];
    *nll = cq - logits[target];
    return PQ_OK;
}

pq_status pq_kld_add(pq_kld_acc *a, const float *base, const float *logits, int vocab, int target) {
    double k, nb, nq;
    int same;
    PQ_TRY(pq_kld_token(base, logits, vocab, target, &k, &same, &nb, &nq));
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 4096;
        double *v = realloc(a->kld, cap * sizeof *v);
        PQ_FAIL_IF(!v, PQ_ERR_NOMEM, "out of memory for %zu KLD values", cap);
        a->kld = v, a->cap = cap;
    }
    a->kld[a->n++] = k;
    a->same_top += same;
    a->sum_d += nq - nb;
    a->sum_d2 += (nq - nb) * (nq - nb);
    a->sum_nll += nq;
    a->sum_nll_base += nb;
    return PQ_OK;
}

double pq_kld_percentile(const double *v, size_t n, double f) {
    if (f <= 0) return v[0];
    if (f >= 1) return v[n - 1];
    double p = f * (double)(n - 1);
    size_t i = (size_t)p;
    double fr = p - (double)i;
    return i + 1 < n ? v[i] + (v[i + 1] - v[i]) * fr : v[i];
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

// mean and standard error of the mean from a sum and a sum of squares
static void mean_err(double sum, double sum2, size_t n, double *mean, double *err) {
    *mean = sum / (double)n;
    double var = n > 1 ? (sum2 / (double)n - *mean * *mean) * (double)n / (double)(n - 1) : 0;
    *err = sqrt(var > 0 ? var : 0) / sqrt((double)n);
}

pq_status pq_kld_summarize(pq_kld_acc *a, pq_kld_result *out) {
    memset(out, 0, sizeof *out);
    PQ_FAIL_IF(a->n < 1, PQ_ERR_ARG, "no tokens scored");
    size_t n = a->n;
    double sum = 0, sum2 = 0;
    for (size_t i = 0; i < n; i++) sum += a->kld[i], sum2 += a->kld[i] * a->kld[i];
    qsort(a->kld, n, sizeof *a->kld, cmp_double);
    out->n = (long long)n;
    mean_err(sum, sum2, n, &out->mean, &out->mean_err);
    out->median = n % 2 ? a->kld[n / 2] : 0.5 * (a->kld[n / 2 - 1] + a->kld[n / 2]);
    out->p90 = pq_kld_percentile(a->kld, n, 0.90);
    out->p99 = pq_kld_percentile(a->kld, n, 0.99);
    out->p999 = pq_kld_percentile(a->kld, n, 0.999);
    out->min = a->kld[0];
    out->max = a->kld[n - 1];
    out->top1 = (double)a->same_top / (double)n;
    out->top1_err = n > 1 ? sqrt(out->top1 * (1 - out->top1) / (double)(n - 1)) : 0;
    out->ppl = exp(a->sum_nll / (double)n);
    out->ppl_base = exp(a->sum_nll_base / (double)n);
    mean_err(a->sum_d, a->sum_d2, n, &out->ln_ratio, &out->ln_ratio_err);
    out->ratio = exp(out->ln_ratio);
    out->ratio_err = out->ratio * out->ln_ratio_err;
    return PQ_OK;
}

void pq_kld_free(pq_kld_acc *a) {
    if (!a) return;
    free(a->kld);
    memset(a, 0, sizeof *a);
}
