// tests/ubsan_unaligned.c — built against a libpq compiled with
// -fsanitize=undefined -fno-sanitize-recover (build/tests/test_ubsan_unaligned,
// see the Makefile): issue 10 item 10. The fixture's model.safetensors with
// its header grown by 1..7 spaces (a valid file whose every F16 tensor then
// starts at an odd address) opens, every linear widens to the same floats,
// and a forward pass gives the same logits as the original. A misaligned
// typed load anywhere on that path (kernels/dense.c read uint16_t through an
// odd pointer) aborts the binary, which tests/run.sh counts as a failure.
#include <sys/stat.h>

#include "eval/engine.h"
#include "formats/fileio.h"
#include "tests/test.h"

static char tmpdir[256];

// dir/<name> = the fixture's file, with pad spaces appended to the
// safetensors header of model.safetensors.
static int copy_shifted(const char *dir, int pad) {
    char src[1024], dst[1024], *img = NULL;
    size_t len;
    static const char *const files[] = {"config.json", "tokenizer.json", "model.safetensors"};
    for (int i = 0; i < 3; i++) {
        snprintf(src, sizeof src, "%s/%s", pq_test_path("fixtures/stories260K"), files[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        if (pq_file_read(src, (size_t)1 << 26, &img, &len) != PQ_OK) return 0;
        FILE *f = fopen(dst, "wb");
        if (!f) return free(img), 0;
        if (i == 2 && pad) {
            uint64_t hl = 0;
            for (int k = 7; k >= 0; k--) hl = hl << 8 | (uint8_t)img[k];
            uint64_t nl = hl + (uint64_t)pad;
            uint8_t le[8];
            for (int k = 0; k < 8; k++) le[k] = (uint8_t)(nl >> (8 * k));
            fwrite(le, 1, 8, f);
            fwrite(img + 8, 1, hl, f);
            for (int k = 0; k < pad; k++) fputc(' ', f);
            fwrite(img + 8 + hl, 1, len - 8 - hl, f);
        } else {
            fwrite(img, 1, len, f);
        }
        fclose(f);
        free(img);
    }
    return 1;
}

// Logits of a fixed 24-token prompt, and every linear widened, into out.
static pq_status run(const char *dir, float *logits, float *weights, size_t *nw) {
    pq_model *m = NULL;
    pq_engine *e = NULL;
    pq_status s = pq_model_open(dir, &m);
    pq_engine_params p = pq_engine_default_params();
    p.device = PQ_DEVICE_CPU, p.max_ctx = 32, p.nthreads = 2;
    if (s == PQ_OK) s = pq_engine_create(m, &p, &e);
    int32_t tok[24];
    for (int i = 0; i < 24; i++) tok[i] = (int32_t)((i * 37 + 5) % 512);
    if (s == PQ_OK) s = pq_engine_forward(e, tok, 24, 0);
    if (s == PQ_OK) s = pq_engine_logits(e, 0, 24, logits);
    *nw = 0;
    for (int l = 0; s == PQ_OK && l < m->cfg.n_layers; l++)
        for (int k = 0; k < PQ_NLINEAR; k++) {
            const pq_linear *L = &m->layers[l].lin[k];
            pq_linear_rows(L, 0, L->rows, weights + *nw);
            *nw += (size_t)L->rows * L->cols;
        }
    pq_engine_free(e);
    pq_model_free(m);
    return s;
}

int main(void) {
    if (!pq_dir_exists(pq_test_path("fixtures/stories260K"))) {
        PQ_CHECK(0, "unaligned tensors under UBSan: the fixture at %s", pq_test_path("fixtures/stories260K"));
        return pq_test_done();
    }
    snprintf(tmpdir, sizeof tmpdir, "%s/pq-ubsan.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) return printf("FAIL - mkdtemp\n"), 1;
    enum { V = 512, T = 24 };
    float *want = malloc(T * V * 4), *got = malloc(T * V * 4), *w0 = malloc(1 << 22), *w1 = malloc(1 << 22);
    size_t n0 = 0, n1 = 0;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/aligned", tmpdir);
    mkdir(dir, 0755);
    pq_status s = copy_shifted(dir, 0) ? run(dir, want, w0, &n0) : PQ_ERR_IO;
    PQ_CHECK(s == PQ_OK, "the fixture runs under UBSan (%s)", s ? pq_last_error() : "ok");
    for (int pad = 1; s == PQ_OK && pad < 8; pad++) {
        snprintf(dir, sizeof dir, "%s/pad%d", tmpdir, pad);
        mkdir(dir, 0755);
        pq_status r = copy_shifted(dir, pad) ? run(dir, got, w1, &n1) : PQ_ERR_IO;
        PQ_CHECK(r == PQ_OK && n1 == n0 && memcmp(w0, w1, n0 * 4) == 0 && memcmp(want, got, (size_t)T * V * 4) == 0,
                 "data region at 8k+%d in the file (header + %d byte%s): same weights, same logits, no "
                 "misaligned load (%s)", pad, pad, pad > 1 ? "s" : "", r ? pq_last_error() : "ok");
    }
    free(want), free(got), free(w0), free(w1);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) printf("# could not remove %s\n", tmpdir);
    return pq_test_done();
}
