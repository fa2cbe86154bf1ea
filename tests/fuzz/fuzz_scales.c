// libFuzzer target: the scales file reader (quant/scales.h) on arbitrary
// bytes: opened from memory, checked against a model of the fixture's
// shapes (5 blocks, hidden 64, intermediate 172, 8 heads over 4 kv heads,
// F16), every block read for every method and for a weight-only and a
// static-activation scheme. What it accepts must be finite, positive
// scales of the right lengths (the reader's promise); a refusal must say why.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quant/scales.h"

#define LAYERS 5

static pq_model *model(void) {
    static pq_model m;
    static pq_layer layers[LAYERS];
    if (m.layers) return &m;
    m.cfg = (pq_config){.hidden = 64, .intermediate = 172, .n_layers = LAYERS, .n_heads = 8, .n_kv_heads = 4,
                        .head_dim = 8, .vocab = 512, .max_pos = 512};
    strcpy(m.cfg.arch_name, "LlamaForCausalLM");
    const int rows[PQ_NLINEAR] = {64, 32, 32, 64, 172, 172, 64}, cols[PQ_NLINEAR] = {64, 64, 64, 64, 64, 64, 172};
    for (int l = 0; l < LAYERS; l++)
        for (int k = 0; k < PQ_NLINEAR; k++)
            layers[l].lin[k] = (pq_linear){.fmt = PQ_W_DENSE, .rows = rows[k], .cols = cols[k],
                                           .dense_type = PQ_DENSE_F16};
    m.layers = layers;
    return &m;
}

static void check_block(const pq_block_scales *sc, const pq_model *m) {
    for (int g = 0; g < PQ_NGROUPS; g++) {
        int n = pq_input_group_cols(&m->cfg, g);
        for (int j = 0; sc->scale[g] && j < n; j++)
            if (!(isfinite(sc->scale[g][j]) && sc->scale[g][j] > 0)) abort();
        if (sc->act_scale[g] < 0 || !isfinite(sc->act_scale[g])) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pq_scales_file *f;
    if (pq_scales_open_buffer(data, size, "fuzz.safetensors", &f) != PQ_OK) {
        if (pq_last_error()[0] == '\0') abort();
        return 0;
    }
    const pq_model *m = model();
    (void)pq_scales_meta_get(f, "pq.method");
    char sha[65];
    memset(sha, 'a', 64), sha[64] = '\0';
    static const char *const schemes[2] = {"w4a16", "w8a8"};
    for (int s = 0; s < 2; s++) {
        pq_scheme sch;
        if (pq_scheme_make(schemes[s], s ? PQ_GROUP_DEFAULT : 32, PQ_SYM_DEFAULT, &sch) != PQ_OK) abort();
        if (s) pq_scheme_static_act(&sch);
        (void)pq_scales_check(f, m, sha, &sch);
        for (int k = PQ_SMOOTH_NONE; k <= PQ_SMOOTH_SQ; k++)
            for (int l = 0; l < LAYERS; l++) {
                pq_block_scales sc;
                if (pq_scales_read_block(f, m, (pq_smooth_kind)k, &sch, l, &sc) == PQ_OK) check_block(&sc, m);
                else if (pq_last_error()[0] == '\0') abort();
            }
    }
    pq_scales_close(f);
    return 0;
}
