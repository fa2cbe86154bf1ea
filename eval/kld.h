// eval/kld.h — how far a model's next-token distributions are from a base
// model's on the same tokens: the statistics llama.cpp's llama-perplexity
// --kl-divergence reports, computed exactly from both models' logits (no
// stored, 16-bit-compressed base log-probabilities).
//
// Per scored token t, with P the base's softmax and Q the model's:
//   KLD(t)  = sum_i P_i (log P_i - log Q_i)            (nats, in double)
//   top-1   = argmax P == argmax Q (first index on ties)
//   nll, nll_base = -log Q[target], -log P[target]
// Over the n tokens:
//   KLD mean and its standard error sd / sqrt(n); median (the mean of the two
//   middle values when n is even), percentiles by linear interpolation
//   between sorted values at fraction * (n - 1); max
//   top-1 agreement p = same / n, its error sqrt(p (1 - p) / (n - 1))
//   ln(PPL(Q) / PPL(base)) = mean(nll - nll_base), its error the standard
//   error of that difference (llama.cpp's sqrt(u^2 + u_base^2 - 2 cov));
//   PPL ratio = exp(that), its error ratio * the log ratio's error.
// The accumulator keeps one double per token (the percentiles need them all):
// 8 bytes x tokens scored, not the logits.
#ifndef PQ_KLD_H
#define PQ_KLD_H

#include <stddef.h>

#include "common/status.h"

typedef struct {
    double *kld;          // [n] per-token KLD, in order of addition (sorted by pq_kld_summarize)
    size_t n, cap;
    long long same_top;
    double sum_d, sum_d2; // d = nll - nll_base
    double sum_nll, sum_nll_base;
} pq_kld_acc;

typedef struct {
    long long n;
    double mean, mean_err, median, p90, p99, p999, max, min;
    double top1, top1_err;       // fractions in [0, 1]
    double ppl, ppl_base;        // exp(mean nll), exp(mean nll_base) over these tokens
    double ln_ratio, ln_ratio_err;
    double ratio, ratio_err;     // PPL(Q) / PPL(base)
} pq_kld_result;

// One token's figures from the base's and the model's logits over vocab
// entries (finite): kld, whether the top-1 tokens agree, both NLLs of
// target. Non-finite logits are PQ_ERR_NUMERIC.
pq_status pq_kld_token(const float *base, const float *logits, int vocab, int target, double *kld, int *same_top,
                       double *nll_base, double *nll);

// Adds one token (pq_kld_token) to a (zero-initialized).
pq_status pq_kld_add(pq_kld_acc *a, const float *base, const float *logits, int vocab, int target);

// The linearly interpolated percentile of sorted v[0..n) at fraction f in
// [0, 1]: v[i] + (v[i+1] - v[i]) * frac for i + frac = f * (n - 1).
double pq_kld_percentile(const double *sorted, size_t n, double f);

// The statistics above over everything added (at least one token, else
// PQ_ERR_ARG). Sorts a->kld.
pq_status pq_kld_summarize(pq_kld_acc *a, pq_kld_result *out);

void pq_kld_free(pq_kld_acc *a); // NULL-safe; a is zeroed

#endif
