// Perplexity against the fixture goldens (ppl.json: llama2.c run.c, fp32):
// the golden protocol (gptq with BOS, C = 256) on the whole TinyStories
// prefix and on bytes [0, 200000) of wiki.test.raw, window by window; then
// the llamacpp protocol's window construction on a small stream.
#include <jansson.h>

#include "common/sys.h"
#include "eval/ppl.h"
#include "formats/fileio.h"
#include "formats/tokenizer/tokenizer.h"
#include "tests/test.h"

static int same4(double a, double b) { return fabs(a - b) <= 5e-5 * fabs(b); } // 4 significant digits

static void check_dataset(pq_engine *e, const pq_tokenizer *tok, json_t *ds, const pq_st *golden) {
    const char *name = json_string_value(json_object_get(ds, "name"));
    const char *file = json_string_value(json_object_get(ds, "file"));
    json_t *range = json_object_get(ds, "byte_range");
    size_t b0 = (size_t)json_integer_value(json_array_get(range, 0)), b1 = (size_t)json_integer_value(json_array_get(range, 1));
    char rel[256];
    snprintf(rel, sizeof rel, "data/%s", file);
    char *text;
    size_t len;
    if (pq_file_read(pq_test_path(rel), (size_t)1 << 30, &text, &len) != PQ_OK || b1 > len) {
        PQ_CHECK(0, "%s: read %s (%s)", name, rel, pq_last_error());
        return;
    }
    int32_t *ids;
    size_t n;
    pq_status s = pq_tok_encode(tok, text + b0, b1 - b0, 0, &ids, &n);
    free(text);
    PQ_CHECK(s == PQ_OK && n == (size_t)json_integer_value(json_object_get(ds, "n_tokens")),
             "%s: %zu tokens (golden %lld)", name, n, (long long)json_integer_value(json_object_get(ds, "n_tokens")));
    if (s != PQ_OK) return;
    pq_ppl_params p = {PQ_PPL_GPTQ, 256, 1, pq_tok_bos(tok), 0};
    int nw = pq_ppl_window_count(n, &p);
    double *wnll = malloc((size_t)nw * sizeof(double));
    pq_ppl_result r;
    s = pq_ppl_run(e, NULL, NULL, 512, ids, n, &p, NULL, NULL, wnll, &r);
    PQ_CHECK(s == PQ_OK, "%s: ppl runs (%s)", name, pq_last_error());
    double want_ppl = json_number_value(json_object_get(ds, "ppl"));
    double want_nll = json_number_value(json_object_get(ds, "total_nll"));
    PQ_CHECK(r.n_windows == json_integer_value(json_object_get(ds, "n_windows")) &&
                 r.n_scored == json_integer_value(json_object_get(ds, "n_scored_tokens")),
             "%s: %d windows, %lld scored tokens", name, r.n_windows, r.n_scored);
    PQ_CHECK(same4(r.ppl, want_ppl) && same4(r.nll_total, want_nll), "%s: PPL %.6f (golden %.6f), NLL %.3f (golden %.3f)",
             name, r.ppl, want_ppl, r.nll_total, want_nll);
    char tname[128];
    snprintf(tname, sizeof tname, "%s.window_nll", name);
    const pq_tensor *gw = pq_st_find(golden, tname);
    double worst = 0;
    if (gw && gw->numel == nw) {
        for (int w = 0; w < nw; w++) {
            double g;
            memcpy(&g, (const char *)gw->data + (size_t)w * 8, 8);
            double d = fabs(wnll[w] - g);
            worst = d > worst ? d : worst;
        }
    }
    // golden's own numpy cross-check differs from run.c by up to 2.3e-4 per window
    PQ_CHECK(gw && gw->numel == nw && worst < 1e-3, "%s: every window's NLL within 1e-3 of golden (worst %.2e)", name,
             worst);
    free(wnll);
    free(ids);
}

// The llamacpp protocol on a short stream: window contents and scored positions.
static void check_llamacpp_windows(pq_engine *e) {
    int32_t ids[100];
    for (int i = 0; i < 100; i++) ids[i] = 3 + i;
    pq_ppl_params p = {PQ_PPL_LLAMACPP, 32, 1, 1, 0};
    PQ_CHECK(pq_ppl_window_count(100, &p) == 3, "llamacpp: (1 BOS + 100) / 32 = 3 windows");
    pq_ppl_result r;
    pq_status s = pq_ppl_run(e, NULL, NULL, 512, ids, 100, &p, NULL, NULL, NULL, &r);
    PQ_CHECK(s == PQ_OK && r.n_scored == 3 * 15, "llamacpp: scores ctx/2 - 1 = 15 tokens per window (%lld)", r.n_scored);
    pq_ppl_params g = {PQ_PPL_GPTQ, 32, 0, 1, 2};
    s = pq_ppl_run(e, NULL, NULL, 512, ids, 100, &g, NULL, NULL, NULL, &r);
    PQ_CHECK(s == PQ_OK && r.n_windows == 2 && r.n_scored == 2 * 31, "gptq without BOS, max 2 windows: 62 tokens scored");
    s = pq_ppl_run(e, NULL, NULL, 512, ids, 20, &g, NULL, NULL, NULL, &r);
    PQ_CHECK(s == PQ_ERR_ARG && strstr(pq_last_error(), "fewer than one window"), "text shorter than a window refused (%s)",
             pq_last_error());
}

int main(void) {
    char *json;
    size_t len;
    pq_model *m = NULL;
    pq_tokenizer *tok = NULL;
    pq_engine *e = NULL;
    pq_st *golden = NULL;
    if (pq_file_read(pq_test_path("fixtures/stories260K/golden/ppl.json"), 1 << 20, &json, &len) != PQ_OK ||
        pq_model_open(pq_test_path("fixtures/stories260K"), &m) != PQ_OK ||
        pq_tok_load(pq_test_path("fixtures/stories260K"), &tok) != PQ_OK ||
        pq_st_open(pq_test_path("fixtures/stories260K/golden/ppl_tokens.safetensors"), &golden) != PQ_OK) {
        PQ_CHECK(0, "fixture loads (%s)", pq_last_error());
        return pq_test_done();
    }
    pq_engine_params ep = pq_engine_default_params();
    ep.device = PQ_DEVICE_CPU;
    ep.max_ctx = 256;
    PQ_CHECK(pq_engine_create(m, &ep, &e) == PQ_OK, "engine (%s)", pq_last_error());
    json_t *root = json_loads(json, 0, NULL);
    json_t *sets = json_object_get(root, "datasets");
    for (size_t i = 0; e && i < json_array_size(sets); i++) check_dataset(e, tok, json_array_get(sets, i), golden);
    if (e) check_llamacpp_windows(e);
    json_decref(root);
    free(json);
    pq_st_close(golden);
    pq_engine_free(e);
    pq_tok_free(tok);
    pq_model_free(m);
    return pq_test_done();
}
