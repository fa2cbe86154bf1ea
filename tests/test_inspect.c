// formats/inspect.h, the library call behind pq inspect: the natural order
// of tensor names, the report of a directory and of a single file.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/inspect.h"
#include "tests/test.h"

static void test_natural_cmp(void) {
    static const struct { const char *a, *b; int want; } cases[] = {
        {"model.layers.2.mlp", "model.layers.10.mlp", -1},
        {"model.layers.10.mlp", "model.layers.9.mlp", 1},
        {"model.layers.1.a", "model.layers.1.b", -1},
        {"layers.02", "layers.2", -1}, // equal values: byte order decides
        {"x9", "x9", 0},
        {"x", "x0", -1},
        {"a10b2", "a10b10", -1},
        {"a.100", "a.99", 1},
        {"abc", "abd", -1},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int c = pq_natural_cmp(cases[i].a, cases[i].b), r = pq_natural_cmp(cases[i].b, cases[i].a);
        int sign = (c > 0) - (c < 0), rsign = (r > 0) - (r < 0);
        if (sign != cases[i].want || rsign != -cases[i].want) {
            printf("# %s vs %s: %d (want %d), reversed %d\n", cases[i].a, cases[i].b, c, cases[i].want, r);
            bad++;
        }
    }
    PQ_CHECK(!bad, "natural order: digit runs by value (layers.2 < layers.10), else bytes; antisymmetric (%d wrong)",
             bad);
}

// A file with layers 0..11 written in byte order: inspect lists them 0, 1, 2, ..., 10, 11.
static void test_order(void) {
    char dir[] = "/tmp/pq-inspect.XXXXXX", path[64];
    if (!mkdtemp(dir)) { PQ_CHECK(0, "mkdtemp"); return; }
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    pq_st_writer *w;
    int64_t shape[1] = {2};
    uint16_t data[2] = {0x3c00, 0x4000};
    char name[64];
    pq_status s = pq_st_writer_create(path, &w);
    for (int l = 0; l < 12 && s == PQ_OK; l++) {
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
        s = pq_st_writer_declare(w, name, PQ_DT_F16, 1, shape);
    }
    if (s == PQ_OK) s = pq_st_writer_begin(w);
    for (int l = 0; l < 12 && s == PQ_OK; l++) {
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
        s = pq_st_writer_put(w, name, data, sizeof data);
    }
    if (s == PQ_OK) s = pq_st_writer_commit(w, 0);
    pq_st_writer_free(w);
    pq_inspect_report r;
    if (s == PQ_OK) s = pq_inspect(path, &r);
    int ok = s == PQ_OK && pq_st_count(r.st) == 12 && !r.has_config && r.total_bytes == 48 &&
             r.dtype_bytes[PQ_DT_F16] == 48 && pq_st_file_count(r.st) == 1 && r.files[0].disk == r.files[0].raw;
    for (int i = 0; ok && i < 12; i++) {
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", i);
        ok = strcmp(pq_st_at(r.st, r.order[i])->name, name) == 0;
    }
    PQ_CHECK(ok, "a file with layers 0..11 (stored in byte order: 1, 10, 11, 2, ...): listed 0, 1, 2, ..., 11; "
             "totals per dtype (%s)", s ? pq_last_error() : "ok");
    if (s == PQ_OK) pq_inspect_free(&r);
    unlink(path);
    rmdir(dir);
}

static void test_fixture(void) {
    pq_inspect_report r;
    pq_status s = pq_inspect(pq_test_path("fixtures/stories260K"), &r);
    PQ_CHECK(s == PQ_OK && r.has_config && r.params == 260032 && !r.quant.quantized &&
                 !strcmp(r.cfg.arch_name, "LlamaForCausalLM") && pq_st_count(r.st) > 0,
             "the fixture directory: config.json read (LlamaForCausalLM, 260032 parameters), not quantized (%s)",
             s ? pq_last_error() : "ok");
    if (s == PQ_OK) pq_inspect_free(&r);
    s = pq_inspect(pq_test_path("fixtures/no-such-model"), &r);
    PQ_CHECK(s != PQ_OK && strstr(pq_last_error(), "no-such-model") && !r.st, "a missing path: an error naming it (%s)",
             pq_last_error());
    pq_inspect_free(NULL);
}

int main(void) {
    test_natural_cmp();
    test_order();
    test_fixture();
    return pq_test_done();
}
