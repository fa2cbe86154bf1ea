// tests/test_rotate.c — quant/hadamard.h (orthogonal, Hadamard where one
// exists, deterministic per seed) and quant/rotate.h (the rotated fixture
// is the same function: logits and PPL).
#include "tests/test.h"

#include "common/sys.h"
#include "eval/engine.h"
#include "eval/ppl.h"
#include "formats/fileio.h"
#include "formats/tokenizer/tokenizer.h"
#include "quant/hadamard.h"
#include "quant/rotate.h"

// max |Q Q^T - I| and, for a Hadamard Q, max | |q_ij| - 1/sqrt(n) |.
static void check_order(int n, int want_hadamard) {
    pq_rot r;
    uint64_t seed = pq_test_u64();
    if (pq_rot_make(n, seed, &r) != PQ_OK) {
        PQ_CHECK(0, "pq_rot_make(%d): %s", n, pq_last_error());
        return;
    }
    double *q = malloc((size_t)n * n * sizeof *q), *ws = malloc(2 * (size_t)n * sizeof *ws);
    for (size_t i = 0; i < (size_t)n * n; i++) q[i] = NAN; // poisoned: pq_rot_matrix writes every element
    pq_rot_matrix(&r, q, ws);
    double orth = 0, flat = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double d = 0;
            for (int k = 0; k < n; k++) d += q[(size_t)i * n + k] * q[(size_t)j * n + k];
            d -= i == j;
            orth = fabs(d) > orth || isnan(d) ? fabs(d) : orth;
            double e = fabs(fabs(q[(size_t)i * n + j]) - 1 / sqrt((double)n));
            flat = e > flat || isnan(e) ? e : flat;
        }
    char desc[256];
    pq_rot_describe(&r, desc, sizeof desc);
    // double arithmetic over at most a few thousand terms: 1e-12 is ~1e4 ulps of slack
    PQ_CHECK(orth < 1e-12, "rotation %s: Q Q^T = I (max deviation %.2e)", desc, orth);
    PQ_CHECK(pq_rot_is_hadamard(&r) == want_hadamard && (!want_hadamard || flat < 1e-12),
             "rotation %d: %s (every entry +-1/sqrt(n): max deviation %.2e)", n,
             want_hadamard ? "a Hadamard matrix" : "a random orthogonal factor", flat);
    // per seed: the same matrix again, another with the next seed
    pq_rot r2, r3;
    double *q2 = malloc((size_t)n * n * sizeof *q2);
    PQ_ASSERT(pq_rot_make(n, seed, &r2) == PQ_OK && pq_rot_make(n, seed + 1, &r3) == PQ_OK);
    pq_rot_matrix(&r2, q2, ws);
    int same = memcmp(q, q2, (size_t)n * n * sizeof *q) == 0;
    pq_rot_matrix(&r3, q2, ws);
    int differs = n < 32 || // 2^-n: two seeds may draw the same signs
                   memcmp(q, q2, (size_t)n * n * sizeof *q) != 0;
    PQ_CHECK(same && differs, "rotation %d: the same seed gives the same matrix, seed + 1 another", n);
    pq_rot_free(&r), pq_rot_free(&r2), pq_rot_free(&r3);
    free(q), free(q2), free(ws);
}

static void test_hadamard(void) {
    // Sylvester, Paley I (12, 20, 44), Paley II (28, 36), products (576 = SmolLM2's hidden, 960, 1536)
    const int had[] = {1, 2, 8, 12, 20, 28, 36, 44, 64, 576, 960, 1536};
    for (size_t i = 0; i < sizeof had / sizeof had[0]; i++) check_order(had[i], 1);
    // no Hadamard matrix of these orders is constructed: a random orthogonal part (172 = 4 x 43: the fixture's
    // intermediate size)
    const int rnd[] = {3, 43, 172};
    for (size_t i = 0; i < sizeof rnd / sizeof rnd[0]; i++) check_order(rnd[i], 0);
    pq_rot r;
    char desc[256];
    PQ_ASSERT(pq_rot_make(576, 0, &r) == PQ_OK);
    pq_rot_describe(&r, desc, sizeof desc);
    PQ_CHECK(strcmp(desc, "576 = 12 (Paley I, q 11) x 12 (Paley I, q 11) x 4 (Sylvester)") == 0,
             "576 is built as 12 x 12 x 4: %s", desc);
    pq_rot_free(&r);
    PQ_CHECK(pq_rot_make(0, 0, &r) == PQ_ERR_ARG, "order 0 is refused");
}

// Logits of `tokens` (T of them) through m.
static float *logits_of(const pq_model *m, const int32_t *tokens, int T) {
    pq_engine_params ep = pq_engine_default_params();
    ep.device = PQ_DEVICE_CPU, ep.nthreads = 2, ep.max_ctx = T;
    pq_engine *e;
    PQ_ASSERT(pq_engine_create(m, &ep, &e) == PQ_OK);
    float *out = malloc((size_t)T * m->cfg.vocab * sizeof *out);
    PQ_ASSERT(pq_engine_forward(e, tokens, T, 0) == PQ_OK && pq_engine_logits(e, 0, T, out) == PQ_OK);
    pq_engine_free(e);
    return out;
}

static double ppl_of(const pq_model *m, const int32_t *ids, size_t n, int bos) {
    pq_engine_params ep = pq_engine_default_params();
    ep.device = PQ_DEVICE_CPU, ep.nthreads = 2, ep.max_ctx = 256;
    pq_engine *e;
    PQ_ASSERT(pq_engine_create(m, &ep, &e) == PQ_OK);
    pq_ppl_params pp = {.protocol = PQ_PPL_GPTQ, .ctx = 256, .bos = 1, .bos_id = bos, .max_windows = 20};
    pq_ppl_result r;
    PQ_ASSERT(pq_ppl_run(e, NULL, NULL, m->cfg.vocab, ids, n, &pp, NULL, NULL, NULL, &r) == PQ_OK);
    pq_engine_free(e);
    return r.ppl;
}

static void test_rotated_fixture(void) {
    const char *dir = pq_test_path("fixtures/stories260K");
    pq_model *m;
    if (pq_model_open(dir, &m) != PQ_OK) {
        pq_test_skip("rotated fixture: %s", pq_last_error());
        return;
    }
    pq_pool *pool;
    PQ_ASSERT(pq_pool_create(2, &pool) == PQ_OK);
    const int T = 96;
    int32_t tokens[96];
    tokens[0] = m->cfg.bos_id;
    for (int i = 1; i < T; i++) tokens[i] = (int32_t)(pq_test_u64() % (uint64_t)m->cfg.vocab);
    float *want = logits_of(m, tokens, T);
    size_t nl = (size_t)T * m->cfg.vocab;
    for (int f32 = 1; f32 >= 0; f32--) {
        pq_rotate_params p = {.seed = pq_test_u64(), .f32 = f32, .pool = pool};
        pq_rotate_info info;
        pq_model *r;
        if (pq_rotate_model(m, &p, &r, &info) != PQ_OK) {
            PQ_CHECK(0, "pq_rotate_model: %s", pq_last_error());
            continue;
        }
        int ones = 1;
        for (int l = 0; l < r->cfg.n_layers; l++)
            for (int i = 0; i < r->cfg.hidden; i++) ones &= r->layers[l].attn_norm[i] == 1 && r->layers[l].mlp_norm[i] == 1;
        for (int i = 0; i < r->cfg.hidden; i++) ones &= r->final_norm[i] == 1;
        PQ_CHECK(ones && info.untied && !r->cfg.tie_embeddings && pq_st_find(r->st, "lm_head.weight") &&
                     info.hadamard && strstr(r->config_json, "\"tie_word_embeddings\": false"),
                 "rotated fixture: norms 1, lm_head untied (config.json says so), Hadamard rotations (%s; %s)",
                 info.hidden, info.head);
        float *got = logits_of(r, tokens, T);
        double rel = pq_rel_l2(got, want, nl);
        // f32 storage: the rotation in double, rounded once to f32 (2^-24) and run through 5 blocks of f32
        // arithmetic: 1e-5 relative is ~100x that. f16 storage: every weight rounded to 11 bits (2^-12
        // relative, randomly signed), the logits' relative L2 change is of that order: 2e-3.
        PQ_CHECK(rel < (f32 ? 1e-5 : 2e-3), "rotated fixture (%s storage): logits equal the source's (rel L2 %.2e)",
                 f32 ? "f32" : "f16", rel);
        free(got);
        if (!f32) { // the PPL of 20 windows of tinystories: the 1e-4 relative
            char *text;
            size_t len, n;
            int32_t *ids;
            pq_tokenizer *tok;
            PQ_ASSERT(pq_file_read(pq_test_path("data/tinystories_val_prefix.txt"), 1 << 24, &text, &len) == PQ_OK);
            PQ_ASSERT(pq_tok_load(dir, &tok) == PQ_OK && pq_tok_encode(tok, text, len, 0, &ids, &n) == PQ_OK);
            double a = ppl_of(m, ids, n, pq_tok_bos(tok)), b = ppl_of(r, ids, n, pq_tok_bos(tok));
            PQ_CHECK(fabs(b / a - 1) < 1e-4, "rotated fixture in f16: PPL %.6f vs %.6f (rel %.1e < 1e-4)", b, a,
                     fabs(b / a - 1));
            free(ids), free(text);
            pq_tok_free(tok);
        }
        pq_model_free(r);
    }
    free(want);
    pq_pool_free(pool);
    pq_model_free(m);
}

int main(void) {
    pq_test_seed();
    test_hadamard();
    test_rotated_fixture();
    return pq_test_done();
}
