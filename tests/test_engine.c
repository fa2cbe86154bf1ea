// The CPU engine against the fixture goldens (an independent implementation:
// llama2.c run.c in fp32), prefill vs incremental decode, and bad models.
#include <jansson.h>

#include "common/sys.h"
#include "eval/engine.h"
#include "formats/tokenizer/tokenizer.h"
#include "tests/test.h"

static void check_golden_logits(pq_model *m, pq_engine *e) {
    pq_st *g;
    if (pq_st_open(pq_test_path("fixtures/stories260K/golden/golden.safetensors"), &g) != PQ_OK) {
        PQ_CHECK(0, "golden.safetensors opens (%s)", pq_last_error());
        return;
    }
    for (int k = 0; k < 4; k++) {
        char name[64];
        snprintf(name, sizeof name, "prompt%d.tokens", k);
        const pq_tensor *tt = pq_st_find(g, name);
        snprintf(name, sizeof name, "prompt%d.logits", k);
        const pq_tensor *lt = pq_st_find(g, name);
        if (!tt || !lt) { PQ_CHECK(0, "golden prompt%d present", k); continue; }
        int T = (int)tt->shape[0];
        int32_t *tok = malloc((size_t)T * 4);
        float *want = malloc(lt->nbytes), *got = malloc(lt->nbytes);
        memcpy(tok, tt->data, (size_t)T * 4);
        memcpy(want, lt->data, lt->nbytes);
        pq_test_poison(got, (size_t)T * m->cfg.vocab);
        pq_status s = pq_engine_forward(e, tok, T, 0);
        if (s == PQ_OK) s = pq_engine_logits(e, 0, T, got);
        double err = pq_rel_l2(got, want, (size_t)T * m->cfg.vocab);
        // run.c accumulates in fp32 in another order; the brief asks < 1e-4
        PQ_CHECK(s == PQ_OK && err < 1e-4, "prompt%d (%d tokens) logits rel L2 %.2e vs golden", k, T, err);
        free(tok); free(want); free(got);
    }
    pq_st_close(g);
}

// Prefill of n tokens, then the same sequence fed as a prefill of 3 and one
// token at a time through the KV cache: identical logits up to fp32 order.
static void check_decode(pq_model *m, pq_engine *e) {
    int n = 40, V = m->cfg.vocab;
    int32_t tok[40];
    for (int i = 0; i < n; i++) tok[i] = (int32_t)(pq_test_u64() % (uint64_t)V);
    float *full = malloc((size_t)n * V * 4), *inc = malloc((size_t)n * V * 4);
    pq_test_poison(inc, (size_t)n * V);
    pq_status s = pq_engine_forward(e, tok, n, 0);
    if (s == PQ_OK) s = pq_engine_logits(e, 0, n, full);
    if (s == PQ_OK) s = pq_engine_forward(e, tok, 3, 0);
    if (s == PQ_OK) s = pq_engine_logits(e, 0, 3, inc);
    for (int i = 3; i < n && s == PQ_OK; i++) {
        s = pq_engine_forward(e, tok + i, 1, i);
        if (s == PQ_OK) s = pq_engine_logits(e, 0, 1, inc + (size_t)i * V);
    }
    double err = pq_rel_l2(inc, full, (size_t)n * V);
    PQ_CHECK(s == PQ_OK && err < 1e-5, "decode with KV cache == prefill (rel L2 %.2e)", err);
    free(full); free(inc);
}

static void check_bad_calls(pq_model *m, pq_engine *e) {
    int32_t tok[2] = {1, 99999};
    float *logits = malloc((size_t)3 * m->cfg.vocab * sizeof(float));
    pq_status s = pq_engine_forward(e, tok, 1, 0);
    PQ_CHECK(s == PQ_OK && pq_engine_logits(e, 0, 2, logits) == PQ_ERR_ARG && strstr(pq_last_error(), "[0, 2)") &&
                 pq_engine_logits(e, -1, 1, logits) == PQ_ERR_ARG && pq_engine_logits(e, 0, 1, logits) == PQ_OK,
             "logits rows past the last forward call's 1 refused, its row read (%s)", pq_last_error());
    s = pq_engine_forward(e, tok, 2, 0);
    PQ_CHECK(s == PQ_ERR_ARG && strstr(pq_last_error(), "99999"), "out-of-vocabulary id refused (%s)", pq_last_error());
    free(logits);
    s = pq_engine_forward(e, tok, 1, 100000);
    PQ_CHECK(s == PQ_ERR_ARG, "position past the context refused (%s)", pq_last_error());
    pq_engine_params p = pq_engine_default_params();
    p.max_ctx = 4096;
    pq_engine *e2;
    s = pq_engine_create(m, &p, &e2);
    PQ_CHECK(s == PQ_ERR_ARG && strstr(pq_last_error(), "max_position_embeddings"),
             "context beyond max_position_embeddings refused (%s)", pq_last_error());
}

int main(void) {
    pq_test_seed();
    pq_model *m;
    pq_status s = pq_model_open(pq_test_path("fixtures/stories260K"), &m);
    PQ_CHECK(s == PQ_OK, "fixture model opens (%s)", pq_last_error());
    if (s != PQ_OK) return pq_test_done();
    pq_engine_params p = pq_engine_default_params();
    p.device = PQ_DEVICE_CPU;
    pq_engine *e;
    s = pq_engine_create(m, &p, &e);
    PQ_CHECK(s == PQ_OK, "engine %s (%s)", s == PQ_OK ? pq_engine_describe(e) : "", pq_last_error());
    if (s == PQ_OK) {
        check_golden_logits(m, e);
        check_decode(m, e);
        check_bad_calls(m, e);
    }
    pq_engine_free(e);
    pq_model_free(m);
    return pq_test_done();
}
