// kernels/loss.h — the loss a perplexity scores: the negative log-likelihood
// of a target token under one row of logits (the log-softmax over the
// vocabulary at the target). The CUDA version (pq_nll_cuda,
// kernels/ops_cuda.h) computes it where the logits are, so they never leave
// the GPU.
#ifndef PQ_LOSS_H
#define PQ_LOSS_H

// logsumexp(logits[0..vocab)) - logits[target], in double after the f32
// maximum is subtracted: the specification. NaN or Inf in the row gives a
// non-finite result.
double pq_nll_ref(const float *logits, int vocab, int target);
// The same with the exps in f32 vectors (kernels/loss_avx2.c, loss_avx512.c):
// within 1e-5 of the _ref (tests/test_kernels.c says why).
double pq_nll_cpu(const float *logits, int vocab, int target);
double pq_nll_avx2(const float *logits, int vocab, int target);
double pq_nll_avx512(const float *logits, int vocab, int target);

#endif
