// tests/quant_model.h — test and benchmark helpers: a random model with
// SmolLM2-135M's shapes, and a model's linears replaced in memory by their
// RTN-quantized versions (what `pq quantize --method rtn` would write).
#ifndef PQ_TEST_QUANT_MODEL_H
#define PQ_TEST_QUANT_MODEL_H

#include <stdlib.h>

#include "eval/model.h"
#include "quant/rtn.h"

// SmolLM2-135M: hidden 576, intermediate 1536, 9 heads / 3 KV heads of 64,
// vocabulary 49152, tied embeddings; `layers` of its 30.
static inline pq_config pq_test_smollm2_config(int layers) {
    pq_config c = {0};
    c.arch = PQ_ARCH_LLAMA;
    snprintf(c.arch_name, sizeof c.arch_name, "LlamaForCausalLM");
    c.hidden = 576; c.intermediate = 1536; c.n_layers = layers; c.n_heads = 9; c.n_kv_heads = 3;
    c.head_dim = 64; c.vocab = 49152; c.max_pos = 8192; c.rms_eps = 1e-5f; c.rope_theta = 100000.0f;
    c.tie_embeddings = 1; c.bos_id = 1; c.eos_id = 2;
    return c;
}

// Quantizes every decoder linear of m with scheme s (F16 scales) in place;
// the codes live in *q (n_layers * PQ_NLINEAR tensors, free with
// pq_test_free_quantized after the model is no longer used).
static inline pq_status pq_test_quantize_model(pq_model *m, const pq_scheme *s, pq_qtensor **q) {
    int n = m->cfg.n_layers * PQ_NLINEAR;
    *q = calloc((size_t)n, sizeof **q);
    PQ_FAIL_IF(!*q, PQ_ERR_NOMEM, "out of memory");
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int i = 0; i < PQ_NLINEAR; i++) {
            pq_linear *L = &m->layers[l].lin[i];
            float *w = malloc((size_t)L->rows * L->cols * sizeof(float));
            PQ_FAIL_IF(!w, PQ_ERR_NOMEM, "out of memory");
            pq_linear_rows(L, 0, L->rows, w);
            pq_qtensor *qt = &(*q)[l * PQ_NLINEAR + i];
            pq_status st = pq_qtensor_init(qt, s, L->rows, L->cols, PQ_DT_F16);
            if (st == PQ_OK) st = pq_rtn_quantize(w, s, pq_linear_slot_name(i), NULL, qt, NULL);
            free(w);
            PQ_TRY(st);
            const float *bias = L->bias;
            *L = pq_qtensor_linear(&(*q)[l * PQ_NLINEAR + i]);
            L->bias = bias;
        }
    return PQ_OK;
}

static inline void pq_test_free_quantized(pq_qtensor *q, int n) {
    for (int i = 0; q && i < n; i++) pq_qtensor_free(&q[i]);
    free(q);
}

#endif
