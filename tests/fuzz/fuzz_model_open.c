// libFuzzer target: pq_model_open end to end. The input is config.json, a NUL
// byte, then model.safetensors; both are written to a scratch model
// directory. A model that opens runs 3 tokens forward on the CPU engine (one
// thread, a 4-token context) and gives 3 x vocab logits; every failure, at
// open or in the forward pass, must say why. Whatever the config claims,
// memory is bounded by the input: every tensor it implies must be in the file.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "eval/engine.h"
#include "tests/fuzz/fuzz_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    if (!nul) return 0;
    static char dir[512];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s", fuzz_path("model")); // fuzz_path's buffers rotate
        mkdir(dir, 0755);
    }
    fuzz_write("model/config.json", data, (size_t)(nul - data));
    fuzz_write("model/model.safetensors", nul + 1, size - (size_t)(nul - data) - 1);
    pq_model *m = NULL;
    if (pq_model_open(dir, &m) != PQ_OK) {
        if (m || pq_last_error()[0] == '\0') abort();
        return 0;
    }
    pq_engine_params p = pq_engine_default_params();
    p.device = PQ_DEVICE_CPU, p.nthreads = 1, p.max_ctx = m->cfg.max_pos < 4 ? m->cfg.max_pos : 4;
    pq_engine *e = NULL;
    int V = m->cfg.vocab, T = p.max_ctx < 3 ? p.max_ctx : 3;
    float *logits = malloc((size_t)T * V * sizeof(float));
    int32_t tok[3] = {0, 1 % V, 2 % V};
    pq_status s = pq_engine_create(m, &p, &e);
    if (s == PQ_OK) s = pq_engine_forward(e, tok, T, 0);
    if (s == PQ_OK) s = pq_engine_logits(e, 0, T, logits);
    if (s != PQ_OK && pq_last_error()[0] == '\0') abort();
    (void)pq_model_check_finite(m);
    free(logits);
    pq_engine_free(e);
    pq_model_free(m);
    return 0;
}
