// eval/backend.h — what eval/engine.c needs from a backend (internal).
#ifndef PQ_BACKEND_H
#define PQ_BACKEND_H

#include <stdint.h>

#include "eval/engine.h"

typedef struct pq_backend pq_backend;
struct pq_backend {
    char desc[128];
    pq_status (*forward)(pq_backend *b, const int32_t *tokens, int T, int pos0);
    // rows row0..row0+n of the last forward call (eval/engine.c checks the range)
    pq_status (*logits)(pq_backend *b, int row0, int n, float *logits);
    // the loss of those rows (targets checked: < vocab; < 0 not scored: 0)
    pq_status (*nll)(pq_backend *b, int row0, int n, const int32_t *targets, double *nll);
    void (*free)(pq_backend *b);
};

pq_status pq_backend_cpu_create(const pq_model *m, int max_ctx, int nthreads, pq_backend **out);

// graphs: capture a decode step (one token) into a CUDA graph and replay it.
pq_status pq_backend_cuda_create(const pq_model *m, int max_ctx, int graphs, pq_backend **out);

#endif
