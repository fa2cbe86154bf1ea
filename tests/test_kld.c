// eval/kld: the per-token KL divergence against a plain long-double
// softmax, and the summary statistics (mean, median, percentiles, top-1,
// PPL ratio and its error) against plain formulas on the same tokens.
#include "eval/kld.h"
#include "tests/test.h"

#define V 1000
#define N 1001

static uint64_t rng = 88172645463325252ull;
static double unif(void) { // xorshift64, [0, 1)
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

// log-softmax of x into lp, plainly
static void log_softmax_ref(const float *x, long double *lp) {
    long double s = 0;
    for (int i = 0; i < V; i++) s += expl((long double)x[i]);
    for (int i = 0; i < V; i++) lp[i] = (long double)x[i] - logl(s);
}

static double kld_ref(const float *b, const float *q) {
    long double lb[V], lq[V], s = 0;
    log_softmax_ref(b, lb);
    log_softmax_ref(q, lq);
    for (int i = 0; i < V; i++) s += expl(lb[i]) * (lb[i] - lq[i]);
    return (double)s;
}

static int argmax(const float *x) {
    int a = 0;
    for (int i = 1; i < V; i++)
        if (x[i] > x[a]) a = i;
    return a;
}

static int cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static void check_token(void) {
    static float b[V], q[V];
    double worst = 0;
    int same_ok = 1;
    for (int t = 0; t < 20; t++) {
        double noise = t < 10 ? 0.05 : 2.0;
        for (int i = 0; i < V; i++) b[i] = (float)(6 * unif() - 3), q[i] = b[i] + (float)(noise * (unif() - 0.5));
        double k, nb, nq;
        int same;
        if (pq_kld_token(b, q, V, t, &k, &same, &nb, &nq) != PQ_OK) {
            PQ_CHECK(0, "pq_kld_token runs");
            return;
        }
        double want = kld_ref(b, q), e = fabs(k - want) / want;
        worst = e > worst ? e : worst;
        long double lb[V], lq[V];
        log_softmax_ref(b, lb);
        log_softmax_ref(q, lq);
        same_ok &= same == (argmax(b) == argmax(q)) && fabs(nb + (double)lb[t]) < 1e-9 && fabs(nq + (double)lq[t]) < 1e-9;
    }
    PQ_CHECK(worst < 1e-7, "per-token KLD matches a long-double softmax on 20 random pairs (worst rel %.2e)", worst);
    PQ_CHECK(same_ok, "top-1 agreement and both NLLs match the plain ones");
    for (int i = 0; i < V; i++) q[i] = b[i] + 7.5f; // a constant shift is the same distribution
    double k, nb, nq;
    int same;
    PQ_CHECK(pq_kld_token(b, b, V, 3, &k, &same, &nb, &nq) == PQ_OK && k == 0 && same && nb == nq,
             "a distribution against itself: KLD 0, same top-1, equal NLLs");
    PQ_CHECK(pq_kld_token(b, q, V, 3, &k, &same, &nb, &nq) == PQ_OK && k < 1e-12 && same,
             "logits shifted by a constant: KLD %.2e", k);
    q[17] = NAN;
    PQ_CHECK(pq_kld_token(b, q, V, 3, &k, &same, &nb, &nq) == PQ_ERR_NUMERIC, "a NaN logit is PQ_ERR_NUMERIC");
    PQ_CHECK(pq_kld_token(b, b, V, V, &k, &same, &nb, &nq) == PQ_ERR_ARG, "a target outside the vocabulary refused");
}

static void check_summary(void) {
    static float b[V], q[V];
    static double kl[N], nlb[N], nlq[N];
    pq_kld_acc a = {0};
    long long same = 0;
    for (int t = 0; t < N; t++) {
        double noise = 0.1 + 3 * unif() * unif();
        for (int i = 0; i < V; i++) b[i] = (float)(4 * unif() - 2), q[i] = b[i] + (float)(noise * (unif() - 0.5));
        int tgt = (int)(unif() * V);
        if (pq_kld_add(&a, b, q, V, tgt) != PQ_OK) {
            PQ_CHECK(0, "pq_kld_add runs");
            pq_kld_free(&a);
            return;
        }
        long double lb[V], lq[V];
        log_softmax_ref(b, lb);
        log_softmax_ref(q, lq);
        kl[t] = kld_ref(b, q), nlb[t] = -(double)lb[tgt], nlq[t] = -(double)lq[tgt];
        same += argmax(b) == argmax(q);
    }
    pq_kld_result r;
    PQ_CHECK(pq_kld_summarize(&a, &r) == PQ_OK && r.n == N, "summarize %d tokens", N);
    // plain: mean and sample sd; sorted copy; the llama.cpp-style covariance
    double m = 0, v = 0, mb = 0, mq = 0, vb = 0, vq = 0, cov = 0;
    for (int t = 0; t < N; t++) m += kl[t], mb += nlb[t], mq += nlq[t];
    m /= N, mb /= N, mq /= N;
    for (int t = 0; t < N; t++) {
        v += (kl[t] - m) * (kl[t] - m);
        vb += (nlb[t] - mb) * (nlb[t] - mb), vq += (nlq[t] - mq) * (nlq[t] - mq), cov += (nlb[t] - mb) * (nlq[t] - mq);
    }
    double sd_mean = sqrt(v / (N - 1) / N), lr_err = sqrt((vb + vq - 2 * cov) / (N - 1) / N);
    qsort(kl, N, sizeof *kl, cmp);
    // 0.999, 0.99 and 0.9 times N - 1 = 1000 round to whole indices; the
    // interpolation between values is checked in check_percentile
    double p999 = kl[999], p99 = kl[990], p90 = kl[900];
    double top = (double)same / N;
#define NEAR(x, y) (fabs((x) - (y)) <= 1e-7 * fabs(y) + 1e-12)
    PQ_CHECK(NEAR(r.mean, m) && NEAR(r.mean_err, sd_mean), "KLD mean %.6f +/- %.6f (plain %.6f +/- %.6f)", r.mean,
             r.mean_err, m, sd_mean);
    PQ_CHECK(NEAR(r.median, kl[500]) && NEAR(r.max, kl[N - 1]) && NEAR(r.min, kl[0]),
             "median, max and min are the sorted values' (%.6f, %.6f, %.6f)", r.median, r.max, r.min);
    PQ_CHECK(NEAR(r.p90, p90) && NEAR(r.p99, p99) && NEAR(r.p999, p999), "p90 %.6f, p99 %.6f, p99.9 %.6f", r.p90,
             r.p99, r.p999);
    PQ_CHECK(r.top1 == top && NEAR(r.top1_err, sqrt(top * (1 - top) / (N - 1))), "top-1 agreement %.4f +/- %.4f",
             r.top1, r.top1_err);
    PQ_CHECK(NEAR(r.ln_ratio, mq - mb) && NEAR(r.ln_ratio_err, lr_err) && NEAR(r.ratio, exp(mq - mb)) &&
                 NEAR(r.ratio_err, exp(mq - mb) * lr_err) && NEAR(r.ppl, exp(mq)) && NEAR(r.ppl_base, exp(mb)),
             "ln PPL ratio %.6f +/- %.6f = the covariance formula's; ratio %.6f +/- %.6f", r.ln_ratio, r.ln_ratio_err,
             r.ratio, r.ratio_err);
    pq_kld_free(&a);
    PQ_CHECK(a.kld == NULL && a.n == 0 && pq_kld_summarize(&a, &r) == PQ_ERR_ARG, "no tokens: PQ_ERR_ARG");
}

static void check_percentile(void) {
    double v[11];
    for (int i = 0; i < 11; i++) v[i] = i;
    PQ_CHECK(pq_kld_percentile(v, 11, 0.999) == 0.999 * 10 && pq_kld_percentile(v, 11, 0) == 0 &&
                 pq_kld_percentile(v, 11, 1) == 10 && pq_kld_percentile(v, 1, 0.5) == 0,
             "percentiles interpolate linearly at fraction x (n - 1)");
    pq_kld_acc a = {0};
    float x[2] = {0, 1}, y[2] = {1, 0};
    int ok = pq_kld_add(&a, x, x, 2, 0) == PQ_OK && pq_kld_add(&a, x, y, 2, 0) == PQ_OK;
    pq_kld_result r;
    ok = ok && pq_kld_summarize(&a, &r) == PQ_OK;
    double k1 = (1 - 1 / (1 + exp(-1.0))) * -1 + 1 / (1 + exp(-1.0)) * 1; // sum P (log P - log Q): logits swapped
    PQ_CHECK(ok && NEAR(r.median, 0.5 * k1) && r.top1 == 0.5, "even count: the median is the middle pair's mean");
    pq_kld_free(&a);
}

int main(void) {
    check_token();
    check_summary();
    check_percentile();
    return pq_test_done();
}
