// tests/oracles/dump_logits.c — pq's logits of one token sequence, for the
// oracles that compare them with transformers' (llmc_rtn.py):
//   dump_logits MODEL IDS OUT
// IDS holds int32 token ids (raw little-endian), OUT receives f32 logits
// [T][vocab] from pq's CPU engine. Exit 1 with one line on any failure. Built
// and run by tests/oracles/test_llmcompressor_rtn.sh (needs the torch venv), not by
// make test.
#include <stdio.h>
#include <stdlib.h>

#include "eval/engine.h"

int main(int argc, char **argv) {
    if (argc != 4) return fprintf(stderr, "usage: dump_logits MODEL IDS OUT\n"), 2;
    FILE *f = fopen(argv[2], "rb");
    int32_t tok[4096];
    int T = f ? (int)fread(tok, sizeof tok[0], sizeof tok / sizeof tok[0], f) : 0;
    if (f) fclose(f);
    if (T < 1) return fprintf(stderr, "%s: no token ids\n", argv[2]), 1;
    pq_model *m = NULL;
    pq_engine *e = NULL;
    pq_engine_params p = pq_engine_default_params();
    p.device = PQ_DEVICE_CPU;
    p.max_ctx = T;
    float *out = NULL;
    int rc = 1;
    if (pq_model_open(argv[1], &m) == PQ_OK && pq_engine_create(m, &p, &e) == PQ_OK &&
        (out = malloc(sizeof(float) * (size_t)T * (size_t)m->cfg.vocab)) &&
        pq_engine_forward(e, tok, T, 0) == PQ_OK && pq_engine_logits(e, 0, T, out) == PQ_OK) {
        FILE *o = fopen(argv[3], "wb");
        rc = !o || fwrite(out, sizeof(float), (size_t)T * (size_t)m->cfg.vocab, o) != (size_t)T * m->cfg.vocab;
        if (o && fclose(o) != 0) rc = 1;
        if (rc) fprintf(stderr, "%s: cannot write\n", argv[3]);
    } else {
        fprintf(stderr, "%s: %s\n", argv[1], pq_last_error());
    }
    free(out);
    pq_engine_free(e);
    pq_model_free(m);
    return rc;
}
