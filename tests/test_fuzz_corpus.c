// tests/test_fuzz_corpus.c — the seed corpora say what they are: a seed
// named bad_* must be refused and every other one accepted, by the same call
// its fuzz target makes first. A replay only proves nothing crashes; a seed
// that silently stopped loading (a renamed field, a broken generator, a
// target that opened the wrong path) would leave its target fuzzing error
// paths only -- as fuzz_model_open did while its seeds lost their directory.
#include <dirent.h>
#include <sys/stat.h>

#include "eval/engine.h"
#include "formats/config.h"
#include "formats/fileio.h"
#include "formats/packed.h"
#include "formats/safetensors.h"
#include "formats/tokenizer/tokenizer.h"
#include "tests/test.h"

static char scratch[256];

// pq_model_open + 3 tokens forward, as fuzz_model_open does
static pq_status model_open(const char *data, size_t n) {
    const char *nul = memchr(data, 0, n);
    if (!nul) return PQ_ERR_FORMAT;
    char cfg[400], st[400];
    snprintf(cfg, sizeof cfg, "%s/config.json", scratch);
    snprintf(st, sizeof st, "%s/model.safetensors", scratch);
    FILE *f = fopen(cfg, "wb"), *g = fopen(st, "wb");
    if (!f || !g) return PQ_ERR_IO;
    fwrite(data, 1, (size_t)(nul - data), f);
    fwrite(nul + 1, 1, n - (size_t)(nul - data) - 1, g);
    fclose(f), fclose(g);
    pq_model *m = NULL;
    pq_engine *e = NULL;
    pq_status s = pq_model_open(scratch, &m);
    pq_engine_params p = pq_engine_default_params();
    p.device = PQ_DEVICE_CPU, p.nthreads = 1, p.max_ctx = 4;
    int32_t tok[3] = {0, 1, 2};
    if (s == PQ_OK) s = pq_engine_create(m, &p, &e);
    if (s == PQ_OK) s = pq_engine_forward(e, tok, 3, 0);
    pq_engine_free(e);
    pq_model_free(m);
    return s;
}

static pq_status safetensors(const char *data, size_t n) {
    pq_st *st = NULL;
    pq_status s = pq_st_open_buffer(data, n, "seed", &st);
    pq_st_close(st);
    return s;
}

static pq_status config(const char *data, size_t n) {
    pq_config c;
    return pq_config_parse(data, n, "seed", &c);
}

static pq_status packed_config(const char *data, size_t n) {
    pq_packed_info info;
    pq_status s = pq_packed_info_parse(data, n, "seed", &info);
    pq_packed_info_free(&info);
    return s;
}

static pq_status tokenizer(const char *data, size_t n) {
    pq_tokenizer *tok = NULL;
    pq_status s = pq_tok_load_json(data, n, NULL, 0, "seed", &tok);
    pq_tok_free(tok);
    return s;
}

static void check_corpus(const char *target, pq_status (*accept)(const char *, size_t)) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", target);
    DIR *d = opendir(dir);
    PQ_CHECK(d != NULL, "%s: corpus %s opens", target, dir);
    if (!d) return;
    int good = 0, bad = 0, wrong = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[600], *data = NULL;
        size_t n = 0;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (pq_file_read(path, (size_t)1 << 20, &data, &n) != PQ_OK) {
            PQ_CHECK(0, "%s: read %s", target, path);
            continue;
        }
        int want_bad = strncmp(e->d_name, "bad_", 4) == 0;
        pq_status s = accept(data, n);
        if ((s != PQ_OK) != want_bad) {
            wrong++;
            printf("    %s: %s (%s)\n", e->d_name, s == PQ_OK ? "accepted" : "refused", s ? pq_last_error() : "");
        }
        good += !want_bad, bad += want_bad;
        free(data);
    }
    closedir(d);
    PQ_CHECK(wrong == 0 && good > 0, "%s: %d seeds accepted, %d bad_* seeds refused, %d otherwise", target, good, bad,
             wrong);
}

int main(void) {
    snprintf(scratch, sizeof scratch, "%s/pq-seeds.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(scratch)) return printf("FAIL - mkdtemp\n"), 1;
    check_corpus("fuzz_model_open", model_open);
    check_corpus("fuzz_safetensors", safetensors);
    check_corpus("fuzz_config", config);
    check_corpus("fuzz_packed_config", packed_config);
    check_corpus("fuzz_tokenizer", tokenizer);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
    if (system(cmd) != 0) printf("# could not remove %s\n", scratch);
    return pq_test_done();
}
