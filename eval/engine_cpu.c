// The CPU backend: FP32 activations, weights read in their stored format
// through kernels/linear.h, one pool of threads for everything.
#include <string.h>

#include "common/half.h"
#include "common/sys.h"
#include "eval/backend.h"
#include "eval/block_cpu.h"
#include "kernels/blas.h"
#include "kernels/cpu.h"
#include "kernels/loss.h"
#include "kernels/ops.h"

typedef struct {
    pq_backend base;
    const pq_model *m;
    int max_ctx;
    pq_pool *pool;
    pq_block_scratch s;
    float *x;              // [max_ctx][hidden] residual stream of the last call, final-normed
    float *kcache, *vcache; // [n_layers][max_ctx][kv_dim]
    double *inv_freq;
    float *nll_logits;     // [NLL_ROWS][vocab] once the loss was asked for, else NULL
} cpu_backend;

static void embed_rows(const pq_model *m, const int32_t *tokens, int T, float *x) {
    for (int t = 0; t < T; t++) pq_linear_rows(&m->embed, tokens[t], 1, x + (size_t)t * m->cfg.hidden);
}

static pq_status cpu_forward(pq_backend *b, const int32_t *tokens, int T, int pos0) {
    cpu_backend *cb = (cpu_backend *)b;
    const pq_model *m = cb->m;
    const pq_config *c = &m->cfg;
    size_t kvd = (size_t)c->n_kv_heads * c->head_dim;
    embed_rows(m, tokens, T, cb->x);
    pq_block_rope_prepare(&cb->s, cb->inv_freq, c->head_dim, pos0, T);
    for (int l = 0; l < c->n_layers; l++) {
        float *kc = cb->kcache + (size_t)l * cb->max_ctx * kvd, *vc = cb->vcache + (size_t)l * cb->max_ctx * kvd;
        pq_block_forward_cpu(c, &m->layers[l], l, cb->x, T, pos0, kc, vc, &cb->s, cb->pool, NULL);
    }
    pq_rmsnorm_cpu(cb->x, m->final_norm, T, c->hidden, c->rms_eps, cb->x);
    return PQ_OK;
}

static pq_status cpu_logits(pq_backend *b, int row0, int n, float *logits) {
    cpu_backend *cb = (cpu_backend *)b;
    const pq_model *m = cb->m;
    pq_linear_forward(&m->lm_head, cb->x + (size_t)row0 * m->cfg.hidden, n, logits, cb->s.lin_ws, cb->pool);
    return PQ_OK;
}

// Rows of logits per chunk of the loss (NLL_ROWS x vocab floats, kept for the
// next call): the head's panels are packed once per chunk, so a chunk holds
// all the scored rows of a 512-token window.
#define NLL_ROWS 256

typedef struct {
    const float *logits;
    int vocab;
    const int32_t *targets;
    double *nll;
} nll_job;

static void nll_row(void *ctx, int r, int tid) {
    nll_job *j = ctx;
    j->nll[r] = j->targets[r] < 0 ? 0.0 : pq_nll_cpu(j->logits + (size_t)r * j->vocab, j->vocab, j->targets[r]);
}

static pq_status cpu_nll(pq_backend *b, int row0, int n, const int32_t *targets, double *nll) {
    cpu_backend *cb = (cpu_backend *)b;
    const int V = cb->m->cfg.vocab;
    if (!cb->nll_logits) cb->nll_logits = pq_alloc((size_t)NLL_ROWS * V * sizeof(float));
    PQ_FAIL_IF(!cb->nll_logits, PQ_ERR_NOMEM, "out of memory for %d rows of logits", NLL_ROWS);
    for (int r0 = 0; r0 < n; r0 += NLL_ROWS) {
        int rows = n - r0 < NLL_ROWS ? n - r0 : NLL_ROWS;
        cpu_logits(b, row0 + r0, rows, cb->nll_logits);
        nll_job j = {cb->nll_logits, V, targets + r0, nll + r0};
        pq_pool_for(cb->pool, rows, nll_row, &j);
    }
    return PQ_OK;
}

static void cpu_free(pq_backend *b) {
    cpu_backend *cb = (cpu_backend *)b;
    pq_block_scratch_free(&cb->s);
    pq_free(cb->x);
    pq_free(cb->kcache);
    pq_free(cb->vcache);
    pq_free(cb->nll_logits);
    free(cb->inv_freq);
    pq_pool_free(cb->pool);
    free(cb);
}

pq_status pq_backend_cpu_create(const pq_model *m, int max_ctx, int nthreads, pq_backend **out) {
    *out = NULL;
    PQ_TRY(pq_blas_init());
    const pq_config *c = &m->cfg;
    cpu_backend *cb = calloc(1, sizeof *cb);
    PQ_FAIL_IF(!cb, PQ_ERR_NOMEM, "out of memory");
    cb->base.forward = cpu_forward;
    cb->base.logits = cpu_logits;
    cb->base.nll = cpu_nll;
    cb->base.free = cpu_free;
    cb->m = m;
    cb->max_ctx = max_ctx;
    pq_status s;
    PQ_TRY_GOTO(s, pq_pool_create(nthreads, &cb->pool));
    int nt = pq_pool_size(cb->pool);
    PQ_TRY_GOTO(s, pq_block_scratch_init(&cb->s, c, max_ctx, max_ctx, nt, m->layers, c->n_layers, &m->lm_head));
    size_t kv = (size_t)c->n_layers * max_ctx * c->n_kv_heads * c->head_dim * sizeof(float);
    cb->x = pq_alloc((size_t)max_ctx * c->hidden * sizeof(float));
    cb->kcache = pq_calloc(kv);
    cb->vcache = pq_calloc(kv);
    cb->inv_freq = malloc((size_t)(c->head_dim / 2) * sizeof(double));
    PQ_CHECK_GOTO(!cb->x || !cb->kcache || !cb->vcache || !cb->inv_freq, s, PQ_ERR_NOMEM,
                  "out of memory for a KV cache of %d positions (%.1f MiB)", max_ctx, 2.0 * kv / 1048576.0);
    pq_rope_params rp = {c->rope_theta, c->rope_llama3, c->rope_factor, c->rope_low_freq_factor,
                         c->rope_high_freq_factor, c->rope_orig_max_pos};
    pq_rope_inv_freq(&rp, c->head_dim, cb->inv_freq);
    snprintf(cb->base.desc, sizeof cb->base.desc, "cpu (%s%s, %d threads, OpenBLAS %s)", pq_isa_name(pq_cpu_isa()),
             pq_cpu_amx() ? "+amx" : "", nt, pq_blas_core());
    *out = &cb->base;
    return PQ_OK;
done:
    cpu_free(&cb->base);
    return s;
}
