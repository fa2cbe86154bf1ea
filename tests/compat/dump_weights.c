// tests/compat/dump_weights.c — writes every decoder-layer linear (and
// lm_head) of a model as pq's engine sees it: pq_linear_rows, f32, into
// DIR/<module>.f32 (raw little-endian [rows][cols]). Used by
// check_compressed_tensors.py to compare pq's dequantized weights with what
// compressed-tensors decompresses from the same checkpoint. Not part of
// make test (it needs torch); tests/compat/run.sh builds and runs it.
#include <stdio.h>
#include <stdlib.h>

#include "common/sys.h"
#include "eval/model.h"

static int dump(const pq_linear *L, const char *dir, const char *module) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s.f32", dir, module);
    float *w = pq_alloc((size_t)L->rows * L->cols * sizeof(float));
    FILE *f = fopen(path, "wb");
    if (!w || !f) return fprintf(stderr, "%s: cannot write\n", path), 1;
    pq_linear_rows(L, 0, L->rows, w);
    fwrite(w, sizeof(float), (size_t)L->rows * L->cols, f);
    fclose(f);
    pq_free(w);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) return fprintf(stderr, "usage: dump_weights MODEL OUTDIR\n"), 2;
    pq_model *m;
    if (pq_model_open(argv[1], &m) != PQ_OK) return fprintf(stderr, "%s\n", pq_last_error()), 1;
    int rc = 0;
    char module[256];
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int s = 0; s < PQ_NLINEAR; s++) {
            snprintf(module, sizeof module, "model.layers.%d.%s", l, pq_linear_slot_name((pq_linear_slot)s));
            rc |= dump(&m->layers[l].lin[s], argv[2], module);
        }
    if (!m->cfg.tie_embeddings) rc |= dump(&m->lm_head, argv[2], "lm_head");
    pq_model_free(m);
    return rc;
}
