// eval/sample.h — choosing the next token from a row of logits: greedy, or
// sampling with temperature, top-k and top-p (nucleus), from a seeded RNG.
//
// Candidates are ordered by logit, highest first, ties by the lower id (a
// total order, so equal logits never make a run depend on anything but the
// seed). temp 0 is greedy: the first candidate. Otherwise, in the order of
// Hugging Face's generate(): probabilities p = softmax(logits / temp) in
// double; top-k keeps the first k candidates; top-p then keeps the shortest
// prefix of the rest whose mass (renormalized over what top-k kept) reaches
// top_p (at least one candidate); one uniform draw u in [0, 1) picks the
// candidate where the running sum of the kept masses first exceeds u times
// their total. With neither top-k nor top-p the walk goes over all ids in
// id order (no sort needed; still deterministic).
#ifndef PQ_SAMPLE_H
#define PQ_SAMPLE_H

#include <stdint.h>

#include "common/status.h"

// splitmix64: a portable 64-bit generator, the same stream on every machine.
typedef struct { uint64_t s; } pq_rng;
void pq_rng_seed(pq_rng *r, uint64_t seed);
uint64_t pq_rng_next(pq_rng *r);
double pq_rng_uniform(pq_rng *r); // [0, 1) with 53 random bits

typedef struct {
    double temp;    // 0: greedy
    int top_k;      // 0: off
    double top_p;   // 1: off; in (0, 1]
    uint64_t seed;
} pq_sample_params;

pq_sample_params pq_sample_default_params(void); // greedy; top_k 40, top_p 0.95, seed 0 when temp > 0

typedef struct pq_sampler pq_sampler;

// temp < 0 or not finite, top_k < 0, top_p outside (0, 1] (or NaN) are
// PQ_ERR_ARG naming the flag.
pq_status pq_sample_check(const pq_sample_params *p);

// A sampler for rows of `vocab` logits: pq_sample_check's errors, and
// vocab < 1 is PQ_ERR_ARG.
pq_status pq_sampler_create(const pq_sample_params *p, int vocab, pq_sampler **out);
void pq_sampler_free(pq_sampler *s); // NULL-safe

// The next id from logits[vocab]. A NaN or +Inf logit, or no finite one, is
// PQ_ERR_NUMERIC naming the id. Allocates nothing.
pq_status pq_sampler_pick(pq_sampler *s, const float *logits, int32_t *id);

#endif
