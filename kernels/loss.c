// The negative log-likelihood of a target under a row of logits (kernels/loss.h).
#include "kernels/loss.h"

#include <math.h>

#include "kernels/cpu.h"

double pq_nll_ref(const float *logits, int vocab, int target) {
    float mx = logits[0];
    for (int i = 1; i < vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int i = 0; i < vocab; i++) sum += exp((double)logits[i] - mx);
    return log(sum) + mx - logits[target];
}

double pq_nll_cpu(const float *logits, int vocab, int target) {
    if (pq_cpu_isa() >= PQ_ISA_AVX512) return pq_nll_avx512(logits, vocab, target);
    if (pq_cpu_isa() >= PQ_ISA_AVX2) return pq_nll_avx2(logits, vocab, target);
    return pq_nll_ref(logits, vocab, target);
}
