// formats/safetensors_write.c — the streaming, atomic safetensors writer.
//
// Layout, as the Hugging Face library writes it: 8-byte little-endian header
// length N, N bytes of compact JSON ("__metadata__" first when there is
// any, then the tensors in byte-wise name order) padded with spaces so that
// N is a multiple of 8, then every tensor's bytes back to back in the same
// order.
#include "formats/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "formats/fileio.h"
#include "formats/zstd_io.h"

#define PATH_CAP 4096

typedef struct {
    char *name;
    pq_dtype dtype;
    int ndim;
    int64_t shape[PQ_MAX_DIMS];
    uint64_t nbytes, offset; // offset within the data region
    int written;
} wtensor;

enum { DECLARING, WRITING, COMMITTED, FAILED };

struct pq_st_writer {
    char *final_path;
    char tmp_path[PATH_CAP];
    json_t *meta; // object of strings, in the order they were set
    wtensor *t;   // sorted by name from begin/resume on
    int n, cap;
    int state;
    int fd;
    char *header; // the 8-byte length + padded JSON
    size_t header_len;
    uint64_t total; // header + data: the final file size
    int keep_tmp;   // free leaves the temporary file
};

pq_status pq_st_writer_create(const char *final_path, pq_st_writer **out) {
    PQ_FAIL_IF(!out, PQ_ERR_ARG, "pq_st_writer_create: NULL out");
    *out = NULL;
    PQ_FAIL_IF(!final_path || !*final_path, PQ_ERR_ARG, "pq_st_writer_create: empty path");
    pq_st_writer *w = calloc(1, sizeof *w);
    PQ_FAIL_IF(!w, PQ_ERR_NOMEM, "%s: out of memory", final_path);
    w->fd = -1;
    w->final_path = strdup(final_path);
    w->meta = json_object();
    pq_status s = PQ_OK;
    PQ_CHECK_GOTO(!w->final_path || !w->meta, s, PQ_ERR_NOMEM, "%s: out of memory", final_path);
    PQ_TRY_GOTO(s, pq_tmp_path(w->tmp_path, sizeof w->tmp_path, final_path));
    *out = w;
    return PQ_OK;
done:
    pq_st_writer_free(w);
    return s;
}

pq_status pq_st_writer_set_metadata(pq_st_writer *w, const char *key, const char *value) {
    PQ_FAIL_IF(!w || !key || !value, PQ_ERR_ARG, "pq_st_writer_set_metadata: NULL argument");
    PQ_FAIL_IF(w->state != DECLARING, PQ_ERR_ARG, "%s: metadata '%.200s' set after the header was written",
               w->final_path, key);
    json_t *v = json_string(value);
    PQ_FAIL_IF(!v, PQ_ERR_ARG, "%s: metadata '%.200s': value is not valid UTF-8", w->final_path, key);
    PQ_FAIL_IF(json_object_set_new(w->meta, key, v) != 0, PQ_ERR_ARG,
               "%s: metadata key '%.200s' is not valid UTF-8", w->final_path, key);
    return PQ_OK;
}

pq_status pq_st_writer_declare(pq_st_writer *w, const char *name, pq_dtype dtype, int ndim,
                               const int64_t *shape) {
    PQ_FAIL_IF(!w || !name || (ndim > 0 && !shape), PQ_ERR_ARG, "pq_st_writer_declare: NULL argument");
    const char *fn = w->final_path;
    PQ_FAIL_IF(w->state != DECLARING, PQ_ERR_ARG, "%s: tensor '%.200s' declared after the header was written",
               fn, name);
    PQ_FAIL_IF(strcmp(name, "__metadata__") == 0, PQ_ERR_ARG, "%s: '__metadata__' is not a tensor name", fn);
    PQ_FAIL_IF((unsigned)dtype >= PQ_DT_COUNT, PQ_ERR_ARG, "%s: tensor '%.200s': bad dtype %d", fn, name,
               (int)dtype);
    PQ_FAIL_IF(ndim < 0 || ndim > PQ_MAX_DIMS, PQ_ERR_ARG, "%s: tensor '%.200s': ndim %d not in 0..%d", fn,
               name, ndim, PQ_MAX_DIMS);
    PQ_FAIL_IF(w->n == INT_MAX, PQ_ERR_ARG, "%s: too many tensors", fn);
    // the element count first, then the bytes, as the reader counts them:
    // [2^62, 0] holds 0 bytes, it does not overflow
    wtensor t = {.dtype = dtype, .ndim = ndim};
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        PQ_FAIL_IF(shape[i] < 0, PQ_ERR_ARG, "%s: tensor '%.200s': shape[%d] = %lld is negative", fn, name, i,
                   (long long)shape[i]);
        PQ_FAIL_IF(__builtin_mul_overflow(numel, (uint64_t)shape[i], &numel) || numel > (uint64_t)INT64_MAX,
                   PQ_ERR_ARG, "%s: tensor '%.200s': element count overflows", fn, name);
        t.shape[i] = shape[i];
    }
    PQ_FAIL_IF(__builtin_mul_overflow(numel, (uint64_t)pq_dtype_size(dtype), &t.nbytes) || t.nbytes > (uint64_t)INT64_MAX,
               PQ_ERR_ARG, "%s: tensor '%.200s': byte size overflows", fn, name);
    if (w->n == w->cap) {
        int ncap = w->cap ? (w->cap > INT_MAX / 2 ? INT_MAX : w->cap * 2) : 64;
        wtensor *nt = realloc(w->t, (size_t)ncap * sizeof *nt);
        PQ_FAIL_IF(!nt, PQ_ERR_NOMEM, "%s: out of memory for %d tensors", fn, ncap);
        w->t = nt;
        w->cap = ncap;
    }
    t.name = strdup(name);
    PQ_FAIL_IF(!t.name, PQ_ERR_NOMEM, "%s: out of memory", fn);
    w->t[w->n++] = t;
    return PQ_OK;
}

static int cmp_wname(const void *a, const void *b) {
    return strcmp(((const wtensor *)a)->name, ((const wtensor *)b)->name);
}

static json_t *entry_json(const wtensor *t) {
    json_t *shape = json_array();
    for (int i = 0; shape && i < t->ndim; i++)
        if (json_array_append_new(shape, json_integer(t->shape[i])) != 0) {
            json_decref(shape);
            return NULL;
        }
    // "o" steals shape (and frees it if packing fails)
    return json_pack("{s:s, s:o, s:[I,I]}", "dtype", pq_dtype_name(t->dtype), "shape", shape, "data_offsets",
                     (json_int_t)t->offset, (json_int_t)(t->offset + t->nbytes));
}

// Sorts the tensors by name, assigns offsets and renders the header.
static pq_status build_header(pq_st_writer *w) {
    const char *fn = w->final_path;
    if (w->n > 1) qsort(w->t, (size_t)w->n, sizeof *w->t, cmp_wname);
    uint64_t off = 0;
    for (int i = 0; i < w->n; i++) {
        PQ_FAIL_IF(i > 0 && strcmp(w->t[i - 1].name, w->t[i].name) == 0, PQ_ERR_ARG,
                   "%s: tensor '%.200s' declared twice", fn, w->t[i].name);
        w->t[i].offset = off;
        PQ_FAIL_IF(__builtin_add_overflow(off, w->t[i].nbytes, &off) || off > (uint64_t)INT64_MAX, PQ_ERR_ARG,
                   "%s: total size overflows", fn);
    }
    pq_status s = PQ_OK;
    char *text = NULL;
    json_t *root = json_object();
    PQ_CHECK_GOTO(!root, s, PQ_ERR_NOMEM, "%s: out of memory", fn);
    if (json_object_size(w->meta) > 0)
        PQ_CHECK_GOTO(json_object_set(root, "__metadata__", w->meta) != 0, s, PQ_ERR_NOMEM, "%s: out of memory",
                      fn);
    for (int i = 0; i < w->n; i++) {
        json_t *e = entry_json(&w->t[i]);
        PQ_CHECK_GOTO(!e, s, PQ_ERR_NOMEM, "%s: out of memory", fn);
        // fails (and frees e) for a name that is not valid UTF-8
        PQ_CHECK_GOTO(json_object_set_new(root, w->t[i].name, e) != 0, s, PQ_ERR_ARG,
                      "%s: tensor name '%.200s' is not valid UTF-8", fn, w->t[i].name);
    }
    text = json_dumps(root, JSON_COMPACT);
    PQ_CHECK_GOTO(!text, s, PQ_ERR_NOMEM, "%s: out of memory", fn);
    size_t jlen = strlen(text), n = (jlen + 7) / 8 * 8;
    w->header = malloc(8 + n);
    PQ_CHECK_GOTO(!w->header, s, PQ_ERR_NOMEM, "%s: out of memory", fn);
    for (int i = 0; i < 8; i++) w->header[i] = (char)(uint8_t)((uint64_t)n >> (8 * i));
    memcpy(w->header + 8, text, jlen);
    memset(w->header + 8 + jlen, ' ', n - jlen);
    w->header_len = 8 + n;
    PQ_CHECK_GOTO(__builtin_add_overflow(off, (uint64_t)w->header_len, &w->total), s, PQ_ERR_ARG,
                  "%s: total size overflows", fn);
done:
    free(text);
    json_decref(root);
    return s;
}

pq_status pq_st_writer_begin(pq_st_writer *w) {
    PQ_FAIL_IF(!w, PQ_ERR_ARG, "pq_st_writer_begin: NULL writer");
    PQ_FAIL_IF(w->state != DECLARING, PQ_ERR_ARG, "%s: begin called twice", w->final_path);
    PQ_TRY(build_header(w));
    w->fd = open(w->tmp_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    PQ_FAIL_IF(w->fd < 0, PQ_ERR_IO, "%s: cannot create: %s", w->tmp_path, strerror(errno));
    w->state = WRITING; // from here on, free removes the temporary file
    return pq_fd_write_all(w->fd, w->header, w->header_len, w->tmp_path);
}

pq_status pq_st_writer_resume(pq_st_writer *w) {
    PQ_FAIL_IF(!w, PQ_ERR_ARG, "pq_st_writer_resume: NULL writer");
    PQ_FAIL_IF(w->state != DECLARING, PQ_ERR_ARG, "%s: resume after begin", w->final_path);
    PQ_TRY(build_header(w));
    PQ_TRY(pq_file_reopen_tmp(w->tmp_path, w->header, w->header_len, w->total, &w->fd));
    for (int i = 0; i < w->n; i++) w->t[i].written = 1; // the caller's journal knows what is in there
    w->state = WRITING;
    return PQ_OK;
}

pq_status pq_st_writer_put(pq_st_writer *w, const char *name, const void *data, size_t nbytes) {
    PQ_FAIL_IF(!w || !name || (nbytes && !data), PQ_ERR_ARG, "pq_st_writer_put: NULL argument");
    PQ_FAIL_IF(w->state != WRITING, PQ_ERR_ARG, "%s: tensor '%.200s' put %s", w->final_path, name,
               w->state == DECLARING ? "before begin" : "after commit or a failed commit");
    wtensor key = {.name = (char *)name};
    wtensor *t = w->n ? bsearch(&key, w->t, (size_t)w->n, sizeof *w->t, cmp_wname) : NULL;
    PQ_FAIL_IF(!t, PQ_ERR_ARG, "%s: tensor '%.200s' was not declared", w->final_path, name);
    PQ_FAIL_IF(nbytes != t->nbytes, PQ_ERR_ARG, "%s: tensor '%.200s': put of %zu bytes, declared %llu",
               w->final_path, name, nbytes, (unsigned long long)t->nbytes);
    PQ_TRY(pq_fd_pwrite_all(w->fd, data, nbytes, w->header_len + t->offset, w->tmp_path));
    t->written = 1;
    return PQ_OK;
}

pq_status pq_st_writer_sync(pq_st_writer *w) {
    PQ_FAIL_IF(!w, PQ_ERR_ARG, "pq_st_writer_sync: NULL writer");
    PQ_FAIL_IF(w->state != WRITING, PQ_ERR_ARG, "%s: sync without an open temporary file", w->final_path);
    PQ_FAIL_IF(fsync(w->fd) != 0, PQ_ERR_IO, "%s: fsync failed: %s", w->tmp_path, strerror(errno));
    return PQ_OK;
}

// Everything commit does once the arguments are known to be good.
static pq_status finish(pq_st_writer *w, int zstd_level) {
    char zst[PATH_CAP];
    struct stat sb;
    PQ_FAIL_IF(fstat(w->fd, &sb) != 0, PQ_ERR_IO, "%s: cannot stat: %s", w->tmp_path, strerror(errno));
    PQ_FAIL_IF((uint64_t)sb.st_size != w->total, PQ_ERR_FORMAT,
               "%s: %lld bytes, expected %llu: some tensor data was never written", w->tmp_path,
               (long long)sb.st_size, (unsigned long long)w->total);
    int n = snprintf(zst, sizeof zst, "%s.zst", w->final_path);
    PQ_FAIL_IF(n < 0 || (size_t)n >= sizeof zst, PQ_ERR_ARG, "%s: path too long", w->final_path);
    // the .zst goes first: a failure then leaves nothing at the final path
    if (zstd_level > 0) PQ_TRY(pq_zstd_compress_file(w->tmp_path, zst, zstd_level));
    pq_status s = pq_file_commit_tmp(w->fd, w->tmp_path, w->final_path);
    w->fd = -1;
    if (s != PQ_OK && zstd_level > 0 && !pq_file_exists(w->final_path)) unlink(zst);
    return s;
}

pq_status pq_st_writer_commit(pq_st_writer *w, int zstd_level) {
    PQ_FAIL_IF(!w, PQ_ERR_ARG, "pq_st_writer_commit: NULL writer");
    const char *fn = w->final_path;
    PQ_FAIL_IF(w->state != WRITING, PQ_ERR_ARG, "%s: commit %s", fn,
               w->state == DECLARING   ? "before begin"
               : w->state == COMMITTED ? "called twice"
                                       : "after a failed commit");
    PQ_FAIL_IF(zstd_level < 0 || zstd_level > ZSTD_maxCLevel(), PQ_ERR_ARG, "%s: zstd level %d not in 0..%d",
               fn, zstd_level, ZSTD_maxCLevel());
    for (int i = 0; i < w->n; i++)
        PQ_FAIL_IF(!w->t[i].written, PQ_ERR_ARG, "%s: tensor '%.200s' was never written", fn, w->t[i].name);
    pq_status s = finish(w, zstd_level);
    w->state = s == PQ_OK ? COMMITTED : FAILED;
    return s;
}

void pq_st_writer_free(pq_st_writer *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if ((w->state == WRITING || w->state == FAILED) && !w->keep_tmp) unlink(w->tmp_path);
    for (int i = 0; i < w->n; i++) free(w->t[i].name);
    free(w->t);
    json_decref(w->meta);
    free(w->header);
    free(w->final_path);
    free(w);
}

const char *pq_st_writer_tmp_path(const pq_st_writer *w) { return w ? w->tmp_path : NULL; }

uint64_t pq_st_writer_total_bytes(const pq_st_writer *w) { return w ? w->total : 0; }

void pq_st_writer_keep_tmp(pq_st_writer *w) {
    if (w) w->keep_tmp = 1;
}
