// tests/lib/model_random.h — models with random weights for tests and
// benchmarks (test-only: built into build/libpq_test.a, not libpq).
#ifndef PQ_TEST_MODEL_RANDOM_H
#define PQ_TEST_MODEL_RANDOM_H

#include "eval/model.h"

// A model with the given shapes and random weights (normal, std 0.02; norms
// 1.0), all linears in `dt`, built in memory for benchmarks and tests.
// Deterministic for a seed. Free with pq_model_free.
pq_status pq_model_random(const pq_config *cfg, pq_dense_type dt, uint64_t seed, pq_model **out);

#endif
