#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sys.h"
#include "eval/backend.h"

struct pq_engine {
    const pq_model *m;
    pq_backend *b;
    pq_device device;
    int max_ctx;
    int last_T;       // rows of the last forward call that succeeded (0: none)
    char desc[512];   // the backend's description (+ why --device auto did not use the GPU)
};

pq_engine_params pq_engine_default_params(void) {
    return (pq_engine_params){.max_ctx = 0, .nthreads = 0, .device = PQ_DEVICE_AUTO, .no_graphs = 0};
}

pq_status pq_engine_create(const pq_model *m, const pq_engine_params *p, pq_engine **out) {
    *out = NULL;
    int max_ctx = p->max_ctx > 0 ? p->max_ctx : m->cfg.max_pos < 2048 ? m->cfg.max_pos : 2048;
    PQ_FAIL_IF(max_ctx > m->cfg.max_pos, PQ_ERR_ARG,
               "%s: context %d exceeds the model's max_position_embeddings %d", m->dir, max_ctx, m->cfg.max_pos);
    pq_device dev;
    PQ_TRY(pq_device_resolve(p->device, &dev));
    pq_engine *e = calloc(1, sizeof *e);
    PQ_FAIL_IF(!e, PQ_ERR_NOMEM, "out of memory");
    e->m = m;
    e->device = dev;
    e->max_ctx = max_ctx;
    char why[300] = "";
    pq_status s = dev == PQ_DEVICE_CUDA ? pq_backend_cuda_create(m, max_ctx, !p->no_graphs, &e->b)
                                        : pq_backend_cpu_create(m, max_ctx, p->nthreads, &e->b);
    // --device auto: a model the CUDA backend cannot run (a format or shape it
    // does not support, a weight FP16 cannot hold) runs on the CPU instead
    if (s != PQ_OK && p->device == PQ_DEVICE_AUTO && dev == PQ_DEVICE_CUDA &&
        (s == PQ_ERR_FORMAT || s == PQ_ERR_NUMERIC)) {
        snprintf(why, sizeof why, "%s", pq_last_error());
        e->device = PQ_DEVICE_CPU;
        s = pq_backend_cpu_create(m, max_ctx, p->nthreads, &e->b);
    }
    if (s != PQ_OK) { free(e); return s; }
    if (why[0]) snprintf(e->desc, sizeof e->desc, "%s; GPU not used: %s", e->b->desc, why);
    else snprintf(e->desc, sizeof e->desc, "%s", e->b->desc);
    *out = e;
    return PQ_OK;
}

void pq_engine_free(pq_engine *e) {
    if (!e) return;
    if (e->b) e->b->free(e->b);
    free(e);
}

const char *pq_engine_describe(const pq_engine *e) { return e->desc; }
pq_device pq_engine_device(const pq_engine *e) { return e->device; }
int pq_engine_max_ctx(const pq_engine *e) { return e->max_ctx; }
int pq_engine_vocab(const pq_engine *e) { return e->m->cfg.vocab; }

pq_status pq_engine_forward(pq_engine *e, const int32_t *tokens, int T, int pos0) {
    PQ_FAIL_IF(T < 1 || pos0 < 0 || pos0 + T > e->max_ctx, PQ_ERR_ARG,
               "forward of %d tokens at position %d does not fit the context of %d", T, pos0, e->max_ctx);
    for (int t = 0; t < T; t++)
        PQ_FAIL_IF(tokens[t] < 0 || tokens[t] >= e->m->cfg.vocab, PQ_ERR_ARG,
                   "token id %d at index %d is outside the vocabulary of %d", tokens[t], t, e->m->cfg.vocab);
    e->last_T = 0; // no valid rows until this call has finished
    PQ_TRY(e->b->forward(e->b, tokens, T, pos0));
    e->last_T = T;
    return PQ_OK;
}

pq_status pq_engine_logits(pq_engine *e, int row0, int n, float *logits) {
    PQ_FAIL_IF(row0 < 0 || n < 0 || row0 > e->last_T - n, PQ_ERR_ARG,
               "logits rows [%d, %d) outside the last forward call's %d rows", row0, row0 + n, e->last_T);
    return e->b->logits(e->b, row0, n, logits);
}

pq_status pq_engine_nll(pq_engine *e, int row0, int n, const int32_t *targets, double *nll) {
    const int V = e->m->cfg.vocab;
    PQ_FAIL_IF(row0 < 0 || n < 0 || row0 > e->last_T - n, PQ_ERR_ARG,
               "loss rows [%d, %d) outside the last forward call's %d rows", row0, row0 + n, e->last_T);
    for (int i = 0; i < n; i++)
        PQ_FAIL_IF(targets[i] >= V, PQ_ERR_ARG, "token id %d outside the vocabulary of %d", targets[i], V);
    return e->b->nll(e->b, row0, n, targets, nll);
}
