// tests/lib/model_random.c — random-weight models for tests and benchmarks:
// the shapes of a real checkpoint without a file (see model_random.h).
#include <math.h>
#include <string.h>

#include "common/half.h"
#include "common/sys.h"
#include "tests/lib/model_random.h"

static uint64_t next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return *s = x;
}

// approximately normal(0, std): sum of 4 uniforms, variance-matched
static float randn(uint64_t *s, float std) {
    uint64_t r = next(s);
    float u = 0;
    for (int i = 0; i < 4; i++) u += (float)((r >> (16 * i)) & 0xffff) / 65536.0f;
    return (u - 2.0f) * std * 1.7320508f;
}

static void fill(void *w, pq_dense_type dt, size_t n, uint64_t *seed) {
    for (size_t i = 0; i < n; i++) {
        float v = randn(seed, 0.02f);
        if (dt == PQ_DENSE_F32) ((float *)w)[i] = v;
        else if (dt == PQ_DENSE_F16) ((uint16_t *)w)[i] = pq_f32_to_fp16(v);
        else ((uint16_t *)w)[i] = pq_f32_to_bf16(v);
    }
}

static float *ones(int n) {
    float *v = pq_alloc((size_t)n * sizeof(float));
    for (int i = 0; v && i < n; i++) v[i] = 1.0f;
    return v;
}

pq_status pq_model_random(const pq_config *cfg, pq_dense_type dt, uint64_t seed, pq_model **out) {
    *out = NULL;
    const pq_config *c = cfg;
    size_t es = dt == PQ_DENSE_F32 ? 4 : 2;
    int q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    const int rows[PQ_NLINEAR] = {q, kv, kv, c->hidden, c->intermediate, c->intermediate, c->hidden};
    const int cols[PQ_NLINEAR] = {c->hidden, c->hidden, c->hidden, q, c->hidden, c->hidden, c->intermediate};
    size_t per_layer = 0;
    for (int s = 0; s < PQ_NLINEAR; s++) per_layer += (size_t)rows[s] * cols[s];
    size_t emb = (size_t)c->vocab * c->hidden;
    size_t total = emb * (c->tie_embeddings ? 1 : 2) + per_layer * c->n_layers;
    pq_model *m = calloc(1, sizeof *m);
    PQ_FAIL_IF(!m, PQ_ERR_NOMEM, "out of memory");
    snprintf(m->dir, sizeof m->dir, "(random %s model)", c->arch_name);
    m->cfg = *c;
    m->owned_weights = pq_alloc(total * es);
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    m->final_norm = ones(c->hidden);
    if (!m->owned_weights || !m->layers || !m->final_norm) {
        pq_model_free(m);
        return PQ_FAIL(PQ_ERR_NOMEM, "out of memory for a random model of %zu weights", total);
    }
    seed = seed * 2654435761u + 0x9e3779b97f4a7c15ull;
    char *p = m->owned_weights;
    fill(p, dt, total, &seed);
    m->embed = (pq_linear){.fmt = PQ_W_DENSE, .rows = c->vocab, .cols = c->hidden, .dense_type = dt, .w = p};
    m->lm_head = m->embed;
    p += emb * es;
    if (!c->tie_embeddings) {
        m->lm_head.w = p;
        p += emb * es;
    }
    for (int l = 0; l < c->n_layers; l++) {
        pq_layer *L = &m->layers[l];
        for (int s = 0; s < PQ_NLINEAR; s++) {
            L->lin[s] = (pq_linear){.fmt = PQ_W_DENSE, .rows = rows[s], .cols = cols[s], .dense_type = dt, .w = p};
            p += (size_t)rows[s] * cols[s] * es;
        }
        L->attn_norm = ones(c->hidden);
        L->mlp_norm = ones(c->hidden);
        if (!L->attn_norm || !L->mlp_norm) {
            pq_model_free(m);
            return PQ_FAIL(PQ_ERR_NOMEM, "out of memory");
        }
    }
    m->weight_bytes = total * es;
    *out = m;
    return PQ_OK;
}
