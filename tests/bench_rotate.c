// Benchmark: quant/rotate.h's rotated model is the same function. Opens a
// model, rotates it in memory (the rotated tensors stored in each tensor's
// own dtype, as `pq quantize --rotate hadamard` quantizes them, and once
// more in f32), and scores the original and both rotations on the same
// windows of a text: the PPLs, their relative differences (issue 12 asks
// for 1e-4 in the FP16 storage) and the time the rotation took.
//   build/tests/bench_rotate [MODEL [TEXT [gptq|llamacpp [CTX [WINDOWS [SEED]]]]]]
// default: the fixture on tinystories_val_prefix.txt, gptq protocol with
// BOS at ctx 256 (the golden protocol), 200 windows, seed 0. E.g. SmolLM2:
//   build/tests/bench_rotate ~/.cache/pq/acc2/smollm2-f16 ../shared/data/wiki.test.raw llamacpp 512 20
#include "common/sys.h"
#include "eval/ppl.h"
#include "formats/fileio.h"
#include "formats/tokenizer/tokenizer.h"
#include "quant/rotate.h"
#include "tests/test.h"

static int fail(const char *what) {
    fprintf(stderr, "bench_rotate: %s: %s\n", what, pq_last_error());
    return 1;
}

static int score(const pq_model *m, const int32_t *ids, size_t n, const pq_ppl_params *pp, double *ppl) {
    pq_engine_params ep = pq_engine_default_params();
    ep.device = PQ_DEVICE_CPU, ep.max_ctx = pp->ctx;
    pq_engine *e;
    pq_ppl_result r;
    if (pq_engine_create(m, &ep, &e) != PQ_OK) return fail("engine");
    pq_status s = pq_ppl_run(e, NULL, NULL, m->cfg.vocab, ids, n, pp, NULL, NULL, NULL, &r);
    pq_engine_free(e);
    if (s != PQ_OK) return fail("ppl");
    *ppl = r.ppl;
    return 0;
}

int main(int argc, char **argv) {
    const char *model = argc > 1 ? argv[1] : pq_test_path("fixtures/stories260K");
    const char *text = argc > 2 ? argv[2] : pq_test_path("data/tinystories_val_prefix.txt");
    int llamacpp = argc > 3 && !strcmp(argv[3], "llamacpp");
    pq_ppl_params pp = {.protocol = llamacpp ? PQ_PPL_LLAMACPP : PQ_PPL_GPTQ, .ctx = argc > 4 ? atoi(argv[4]) : 256,
                        .max_windows = argc > 5 ? atoi(argv[5]) : 200};
    uint64_t seed = argc > 6 ? strtoull(argv[6], NULL, 10) : 0;
    pq_model *m;
    pq_tokenizer *tok;
    char *buf;
    size_t len, n;
    int32_t *ids;
    if (pq_model_open(model, &m) != PQ_OK) return fail(model);
    if (pq_tok_load(model, &tok) != PQ_OK) return fail("tokenizer");
    if (pq_file_read(text, (size_t)1 << 30, &buf, &len) != PQ_OK) return fail(text);
    if (pq_tok_encode(tok, buf, len, 0, &ids, &n) != PQ_OK) return fail("tokenize");
    pp.bos_id = pq_tok_bos(tok);
    pp.bos = llamacpp ? pp.bos_id >= 0 : 1;
    pq_pool *pool;
    if (pq_pool_create(0, &pool) != PQ_OK) return fail("pool");
    double base, ppl[2], secs[2];
    if (score(m, ids, n, &pp, &base)) return 1;
    char desc[2][480];
    for (int f32 = 0; f32 < 2; f32++) {
        pq_rotate_params p = {.seed = seed, .f32 = f32, .pool = pool};
        pq_rotate_info info;
        pq_model *r;
        double t0 = pq_now();
        if (pq_rotate_model(m, &p, &r, &info) != PQ_OK) return fail("rotate");
        secs[f32] = pq_now() - t0;
        snprintf(desc[f32], sizeof desc[f32], "%s; head %s%s", info.hidden, info.head,
                 info.untied ? "; lm_head untied" : "");
        if (score(r, ids, n, &pp, &ppl[f32])) return 1;
        pq_model_free(r);
    }
    printf("model %s, %s protocol ctx %d, %d windows, seed %llu\n", model, llamacpp ? "llamacpp" : "gptq", pp.ctx,
           pp.max_windows, (unsigned long long)seed);
    printf("rotation: %s\n", desc[0]);
    printf("original                PPL %.6f\n", base);
    printf("rotated, source dtype   PPL %.6f  rel %+.2e  (rotation %.2f s)\n", ppl[0], ppl[0] / base - 1, secs[0]);
    printf("rotated, f32            PPL %.6f  rel %+.2e  (rotation %.2f s)\n", ppl[1], ppl[1] / base - 1, secs[1]);
    free(ids), free(buf);
    pq_tok_free(tok);
    pq_pool_free(pool);
    pq_model_free(m);
    return 0;
}
