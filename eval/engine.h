// eval/engine.h — the Llama-family forward pass: prefill over a window and
// incremental decode with a KV cache, on the CPU or (when built with CUDA
// and a device exists) the GPU.
//
// Usage: pq_engine_forward(e, tokens, T, pos0) runs T new tokens at
// positions pos0..pos0+T-1 (pos0 = 0 starts a new sequence; pos0 > 0
// continues the one in the cache). Then pq_engine_logits reads the logits of
// any rows of that call.
#ifndef PQ_ENGINE_H
#define PQ_ENGINE_H

#include <stdint.h>

#include "common/threads.h"
#include "eval/model.h"
#include "kernels/cuda_host.h"

typedef struct {
    int max_ctx;       // longest sequence (KV cache length); 0 = min(2048, max_position_embeddings)
    int nthreads;      // CPU threads; 0 = all cores
    pq_device device;  // AUTO: the GPU when one is present
    int no_graphs;     // CUDA: run decode steps without a CUDA graph (tests compare the two)
} pq_engine_params;

pq_engine_params pq_engine_default_params(void);

typedef struct pq_engine pq_engine;

// Builds an engine over m (borrowed; must outlive the engine). max_ctx larger
// than the model's max_position_embeddings is refused (PQ_ERR_ARG);
// --device cuda without a GPU fails with PQ_ERR_NO_DEVICE. --device auto
// falls back to the CPU when the CUDA backend refuses the model
// (PQ_ERR_FORMAT / PQ_ERR_NUMERIC: an unsupported shape or format).
pq_status pq_engine_create(const pq_model *m, const pq_engine_params *p, pq_engine **out);
void pq_engine_free(pq_engine *e); // NULL-safe

// "cpu (avx512, 2 threads, OpenBLAS SkylakeX)" / "cuda (NVIDIA H200)"; with
// --device auto on a GPU that cannot run the model, the CPU's description
// then "; GPU not used: " and the reason.
const char *pq_engine_describe(const pq_engine *e);
pq_device pq_engine_device(const pq_engine *e);
int pq_engine_max_ctx(const pq_engine *e); // positions the KV cache holds
int pq_engine_vocab(const pq_engine *e);   // logits per row

// Runs tokens[0..T) at positions pos0..; T >= 1, pos0 + T <= max_ctx, ids < vocab.
pq_status pq_engine_forward(pq_engine *e, const int32_t *tokens, int T, int pos0);

// logits[i][vocab] for rows row0..row0+n-1 of the last forward call; rows
// outside it (or after a forward call that failed in the backend) are
// PQ_ERR_ARG, for every backend.
pq_status pq_engine_logits(pq_engine *e, int row0, int n, float *logits);

// The loss of rows row0..row0+n-1 of the last forward call: nll[i] =
// logsumexp(logits of row row0 + i) - its logit at targets[i]
// (kernels/loss.h), 0 where targets[i] < 0 (not scored). Rows as for
// pq_engine_logits; a target >= vocab is PQ_ERR_ARG. On the GPU the logits
// are computed and reduced on the device: only n floats come back. A
// non-finite logit gives a non-finite nll.
pq_status pq_engine_nll(pq_engine *e, int row0, int n, const int32_t *targets, double *nll);

#endif
