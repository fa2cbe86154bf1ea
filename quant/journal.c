// quant/journal.c — the resume journal (see journal.h).
#include "quant/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calib/driver.h"
#include "formats/fileio.h"
#include "formats/sha256.h"
#include "quant/quantize.h"

#define JOURNAL_VERSION 2
#define JOURNAL_MAX_BYTES ((size_t)256 << 20)

// SHA-256 of a file's bytes into hex; *absent when it does not exist or is
// not a regular file (a FIFO is never waited on: the output copies regular
// files only, formats/fileio.h's pq_file_exists).
static pq_status file_sha256(const char *path, char hex[65], int *absent) {
    *absent = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && (errno == ENOENT || errno == ENOTDIR)) return *absent = 1, PQ_OK; // ENOTDIR: a .gguf source
    PQ_FAIL_IF(fd < 0, PQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return *absent = 1, PQ_OK;
    }
    pq_sha256 h;
    pq_sha256_init(&h);
    char buf[1 << 16];
    pq_status s = PQ_OK;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            s = PQ_FAIL(PQ_ERR_IO, "%s: read failed: %s", path, strerror(errno));
            break;
        }
        if (r == 0) break;
        pq_sha256_update(&h, buf, (size_t)r);
    }
    close(fd);
    if (s == PQ_OK) pq_sha256_hex(&h, hex);
    return s;
}

pq_status pq_journal_key(const char *line, const char *const *files, int n, char key[65]) {
    pq_sha256 h;
    pq_sha256_init(&h);
    pq_sha256_update(&h, line, strlen(line) + 1);
    for (int i = 0; i < n; i++) {
        char hex[65];
        int absent;
        PQ_TRY(file_sha256(files[i], hex, &absent));
        const char *base = strrchr(files[i], '/') ? strrchr(files[i], '/') + 1 : files[i];
        pq_sha256_update(&h, base, strlen(base) + 1);
        pq_sha256_update(&h, absent ? "absent" : hex, absent ? 7 : 65);
    }
    pq_sha256_hex(&h, key);
    return PQ_OK;
}

pq_status pq_journal_write(const char *path, const pq_journal *j) {
    json_t *doc = json_pack("{s:i, s:s, s:i, s:i, s:O}", "pq_journal", JOURNAL_VERSION, "inputs", j->key,
                            "blocks_done", j->blocks_done, "damp_raised", j->damp_raised, "layers", j->layers);
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    PQ_FAIL_IF(!text, PQ_ERR_NOMEM, "out of memory");
    pq_status s = pq_file_write_atomic(path, text, strlen(text));
    free(text);
    return s;
}

static int is_hex64(const char *s) {
    if (strlen(s) != 64) return 0;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

// Entry i of the layers array: an object naming linear i of its block, with finite errors.
static int entry_ok(json_t *e, size_t i) {
    char want[128];
    snprintf(want, sizeof want, "model.layers.%zu.%s", i / PQ_NLINEAR,
             pq_linear_slot_name((pq_linear_slot)(i % PQ_NLINEAR)));
    json_t *name = json_object_get(e, "name"), *rel = json_object_get(e, PQ_JSON_REL_ERR),
           *out = json_object_get(e, PQ_JSON_OUT_ERR);
    return json_is_object(e) && json_is_string(name) && strcmp(json_string_value(name), want) == 0 &&
           json_is_real(rel) && json_real_value(rel) >= 0 && (!out || (json_is_real(out) && json_real_value(out) >= 0));
}

pq_status pq_journal_parse(const char *text, size_t len, const char *name, int n_layers, pq_journal *out) {
    memset(out, 0, sizeof *out);
    json_error_t err;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    PQ_FAIL_IF(!doc, PQ_ERR_FORMAT, "%s: damaged journal (line %d: %s)", name, err.line, err.text);
    pq_status s = PQ_OK;
    json_t *ver = json_object_get(doc, "pq_journal"), *inputs = json_object_get(doc, "inputs");
    json_t *done = json_object_get(doc, "blocks_done"), *damp = json_object_get(doc, "damp_raised");
    json_t *layers = json_object_get(doc, "layers");
    PQ_CHECK_GOTO(!json_is_integer(ver) || json_integer_value(ver) != JOURNAL_VERSION, s, PQ_ERR_FORMAT,
                  "%s: not a journal of this pq (pq_journal %d expected)", name, JOURNAL_VERSION);
    PQ_CHECK_GOTO(!json_is_string(inputs) || !is_hex64(json_string_value(inputs)) || !json_is_integer(done) ||
                      !json_is_integer(damp) || !json_is_array(layers),
                  s, PQ_ERR_FORMAT, "%s: damaged journal (a field is missing or has the wrong type)", name);
    json_int_t nd = json_integer_value(done), dr = json_integer_value(damp);
    PQ_CHECK_GOTO(nd < 0 || nd > n_layers || dr < 0 || dr > nd * PQ_NGROUPS, s, PQ_ERR_FORMAT,
                  "%s: damaged journal (%lld blocks done of %d, %lld dampenings raised)", name, (long long)nd,
                  n_layers, (long long)dr);
    PQ_CHECK_GOTO(json_array_size(layers) != (size_t)nd * PQ_NLINEAR, s, PQ_ERR_FORMAT,
                  "%s: damaged journal (%zu entries for %lld blocks)", name, json_array_size(layers), (long long)nd);
    for (size_t i = 0; i < json_array_size(layers); i++)
        PQ_CHECK_GOTO(!entry_ok(json_array_get(layers, i), i), s, PQ_ERR_FORMAT, "%s: damaged journal entry %zu",
                      name, i);
    snprintf(out->key, sizeof out->key, "%s", json_string_value(inputs));
    out->blocks_done = (int)nd;
    out->damp_raised = (int)dr;
    out->layers = json_incref(layers);
done:
    json_decref(doc);
    return s;
}

pq_status pq_journal_read(const char *path, int n_layers, pq_journal *out) {
    memset(out, 0, sizeof *out);
    char *text;
    size_t len;
    PQ_TRY(pq_file_read(path, JOURNAL_MAX_BYTES, &text, &len));
    pq_status s = pq_journal_parse(text, len, path, n_layers, out);
    free(text);
    return s;
}

void pq_journal_free(pq_journal *j) {
    if (!j) return;
    json_decref(j->layers);
    memset(j, 0, sizeof *j);
}

void pq_journal_test_kill(const char *var, int blocks) {
    const char *v = getenv(var);
    if (v && atoi(v) == blocks) raise(SIGKILL);
}
