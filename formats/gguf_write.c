// formats/gguf_write.c — the streaming, atomic GGUF v3 writer (see
// gguf_write.h).
#include "formats/gguf_write.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/fileio.h"
#include "formats/tokenizer/unicode.h"
#include "kernels/ggml_blocks.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "GGUF numbers are written in host order");

#define PATH_CAP 4096
#define NAME_MAX_BYTES 65535

typedef struct {
    char *name;
    int n_dims;
    int64_t ne[PQ_GGUF_MAX_DIMS];
    uint32_t type;
    uint64_t nbytes, offset; // offset from the start of the data section
    int written;
} wtensor;

typedef struct {
    uint8_t *p;
    size_t n, cap;
    int oom;
} buf;

enum { DECLARING, WRITING, COMMITTED, FAILED };

struct pq_gguf_writer {
    char *final_path;
    char tmp_path[PATH_CAP];
    buf kv;            // the serialized pairs
    uint64_t n_kv;
    char **keys;       // for uniqueness
    uint32_t alignment;
    wtensor *t;
    int n, cap;
    int state, fd, keep_tmp;
    buf header;        // everything before the data section, padded
    uint64_t total;    // the final file size
};

static void put(buf *b, const void *d, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t c = (b->n + n) * 2 + 256;
        uint8_t *p = realloc(b->p, c);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p, b->cap = c;
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s, size_t n) { put_u64(b, n), put(b, s, n); }

static size_t scalar_size(pq_gguf_vtype t) {
    switch (t) {
    case PQ_GGUF_U8: case PQ_GGUF_I8: case PQ_GGUF_BOOL: return 1;
    case PQ_GGUF_U16: case PQ_GGUF_I16: return 2;
    case PQ_GGUF_U32: case PQ_GGUF_I32: case PQ_GGUF_F32: return 4;
    case PQ_GGUF_U64: case PQ_GGUF_I64: case PQ_GGUF_F64: return 8;
    default: return 0; // STRING, ARRAY: not fixed-size
    }
}

pq_status pq_gguf_writer_create(const char *final_path, pq_gguf_writer **out) {
    PQ_FAIL_IF(!out, PQ_ERR_ARG, "pq_gguf_writer_create: NULL out");
    *out = NULL;
    PQ_FAIL_IF(!final_path || !*final_path, PQ_ERR_ARG, "pq_gguf_writer_create: empty path");
    pq_gguf_writer *w = calloc(1, sizeof *w);
    PQ_FAIL_IF(!w, PQ_ERR_NOMEM, "%s: out of memory", final_path);
    w->fd = -1;
    w->alignment = PQ_GGUF_DEFAULT_ALIGNMENT;
    w->final_path = strdup(final_path);
    pq_status s = PQ_OK;
    PQ_CHECK_GOTO(!w->final_path, s, PQ_ERR_NOMEM, "%s: out of memory", final_path);
    PQ_TRY_GOTO(s, pq_tmp_path(w->tmp_path, sizeof w->tmp_path, final_path));
    *out = w;
    return PQ_OK;
done:
    pq_gguf_writer_free(w);
    return s;
}

// A key (or tensor name) that can be written: non-empty, not too long, UTF-8.
static pq_status check_name(const pq_gguf_writer *w, const char *what, const char *name) {
    PQ_FAIL_IF(!name || !*name, PQ_ERR_ARG, "%s: an empty %s", w->final_path, what);
    size_t n = strlen(name);
    PQ_FAIL_IF(n > NAME_MAX_BYTES, PQ_ERR_ARG, "%s: %s '%.60s...' is %zu bytes long", w->final_path, what, name, n);
    PQ_FAIL_IF(pq_utf8_check(name, n) != n, PQ_ERR_ARG, "%s: %s '%.200s' is not valid UTF-8", w->final_path, what,
               name);
    return PQ_OK;
}

// The key's checks and its bytes (key, value type).
static pq_status begin_kv(pq_gguf_writer *w, const char *key, pq_gguf_vtype type) {
    PQ_FAIL_IF(!w, PQ_ERR_ARG, "pq_gguf_writer: NULL writer");
    PQ_TRY(check_name(w, "metadata key", key));
    PQ_FAIL_IF(w->state != DECLARING, PQ_ERR_ARG, "%s: metadata '%.200s' added after the header was written",
               w->final_path, key);
    for (uint64_t i = 0; i < w->n_kv; i++)
        PQ_FAIL_IF(strcmp(w->keys[i], key) == 0, PQ_ERR_ARG, "%s: metadata key '%.200s' given twice", w->final_path,
                   key);
    char **k = realloc(w->keys, (size_t)(w->n_kv + 1) * sizeof *k);
    PQ_FAIL_IF(!k, PQ_ERR_NOMEM, "%s: out of memory", w->final_path);
    w->keys = k;
    PQ_FAIL_IF(!(w->keys[w->n_kv] = strdup(key)), PQ_ERR_NOMEM, "%s: out of memory", w->final_path);
    w->n_kv++;
    put_str(&w->kv, key, strlen(key));
    put_u32(&w->kv, (uint32_t)type);
    PQ_FAIL_IF(w->kv.oom, PQ_ERR_NOMEM, "%s: out of memory for metadata", w->final_path);
    return PQ_OK;
}

static pq_status end_kv(pq_gguf_writer *w) {
    PQ_FAIL_IF(w->kv.oom, PQ_ERR_NOMEM, "%s: out of memory for metadata", w->final_path);
    return PQ_OK;
}

pq_status pq_gguf_writer_kv(pq_gguf_writer *w, const char *key, pq_gguf_vtype type, const void *value) {
    PQ_FAIL_IF(!w || !value, PQ_ERR_ARG, "pq_gguf_writer_kv: NULL argument");
    size_t sz = scalar_size(type);
    PQ_FAIL_IF(!sz, PQ_ERR_ARG, "%s: metadata '%.200s': type %s is not a fixed-size scalar", w->final_path,
               key ? key : "", pq_gguf_vtype_name(type));
    PQ_FAIL_IF(type == PQ_GGUF_BOOL && *(const uint8_t *)value > 1, PQ_ERR_ARG,
               "%s: metadata '%.200s': a bool is 0 or 1", w->final_path, key ? key : "");
    int align = key && strcmp(key, "general.alignment") == 0;
    if (align) {
        uint32_t a = 0;
        if (type == PQ_GGUF_U32) memcpy(&a, value, 4);
        PQ_FAIL_IF(type != PQ_GGUF_U32 || a == 0 || (a & (a - 1)), PQ_ERR_ARG,
                   "%s: general.alignment must be a u32 power of two", w->final_path);
    }
    PQ_TRY(begin_kv(w, key, type));
    put(&w->kv, value, sz);
    if (align) memcpy(&w->alignment, value, 4);
    return end_kv(w);
}

pq_status pq_gguf_writer_kv_u32(pq_gguf_writer *w, const char *key, uint32_t v) {
    return pq_gguf_writer_kv(w, key, PQ_GGUF_U32, &v);
}
pq_status pq_gguf_writer_kv_i32(pq_gguf_writer *w, const char *key, int32_t v) {
    return pq_gguf_writer_kv(w, key, PQ_GGUF_I32, &v);
}
pq_status pq_gguf_writer_kv_f32(pq_gguf_writer *w, const char *key, float v) {
    return pq_gguf_writer_kv(w, key, PQ_GGUF_F32, &v);
}
pq_status pq_gguf_writer_kv_bool(pq_gguf_writer *w, const char *key, int v) {
    uint8_t b = v ? 1 : 0;
    return pq_gguf_writer_kv(w, key, PQ_GGUF_BOOL, &b);
}

static pq_status check_value(const pq_gguf_writer *w, const char *key, const char *s, size_t len) {
    PQ_FAIL_IF(!s && len, PQ_ERR_ARG, "%s: metadata '%.200s': NULL string", w->final_path, key);
    PQ_FAIL_IF(len && pq_utf8_check(s, len) != len, PQ_ERR_ARG, "%s: metadata '%.200s': a string that is not UTF-8",
               w->final_path, key);
    return PQ_OK;
}

pq_status pq_gguf_writer_kv_str(pq_gguf_writer *w, const char *key, const char *s, size_t len) {
    PQ_FAIL_IF(!w, PQ_ERR_ARG, "pq_gguf_writer_kv_str: NULL writer");
    PQ_TRY(check_value(w, key ? key : "", s, len));
    PQ_TRY(begin_kv(w, key, PQ_GGUF_STRING));
    put_str(&w->kv, s, len);
    return end_kv(w);
}

pq_status pq_gguf_writer_kv_array(pq_gguf_writer *w, const char *key, pq_gguf_vtype elem, const void *data,
                                  uint64_t n) {
    PQ_FAIL_IF(!w || (n && !data), PQ_ERR_ARG, "pq_gguf_writer_kv_array: NULL argument");
    size_t sz = scalar_size(elem);
    PQ_FAIL_IF(!sz, PQ_ERR_ARG, "%s: metadata '%.200s': array elements of type %s are not fixed-size", w->final_path,
               key ? key : "", pq_gguf_vtype_name(elem));
    PQ_FAIL_IF(n > SIZE_MAX / sz, PQ_ERR_ARG, "%s: metadata '%.200s': %llu elements", w->final_path, key ? key : "",
               (unsigned long long)n);
    for (uint64_t i = 0; elem == PQ_GGUF_BOOL && i < n; i++)
        PQ_FAIL_IF(((const uint8_t *)data)[i] > 1, PQ_ERR_ARG, "%s: metadata '%.200s': a bool is 0 or 1",
                   w->final_path, key ? key : "");
    PQ_TRY(begin_kv(w, key, PQ_GGUF_ARRAY));
    put_u32(&w->kv, (uint32_t)elem);
    put_u64(&w->kv, n);
    put(&w->kv, data, (size_t)n * sz);
    return end_kv(w);
}

pq_status pq_gguf_writer_kv_strs(pq_gguf_writer *w, const char *key, const char *const *strs, const size_t *lens,
                                 uint64_t n) {
    PQ_FAIL_IF(!w || (n && !strs), PQ_ERR_ARG, "pq_gguf_writer_kv_strs: NULL argument");
    for (uint64_t i = 0; i < n; i++) {
        PQ_FAIL_IF(!strs[i], PQ_ERR_ARG, "%s: metadata '%.200s': string %llu is NULL", w->final_path, key ? key : "",
                   (unsigned long long)i);
        PQ_TRY(check_value(w, key ? key : "", strs[i], lens ? lens[i] : strlen(strs[i])));
    }
    PQ_TRY(begin_kv(w, key, PQ_GGUF_ARRAY));
    put_u32(&w->kv, (uint32_t)PQ_GGUF_STRING);
    put_u64(&w->kv, n);
    for (uint64_t i = 0; i < n; i++) put_str(&w->kv, strs[i], lens ? lens[i] : strlen(strs[i]));
    return end_kv(w);
}

pq_status pq_gguf_writer_declare(pq_gguf_writer *w, const char *name, int n_dims, const int64_t *ne, uint32_t type) {
    PQ_FAIL_IF(!w || (n_dims > 0 && !ne), PQ_ERR_ARG, "pq_gguf_writer_declare: NULL argument");
    const char *fn = w->final_path;
    PQ_TRY(check_name(w, "tensor name", name));
    PQ_FAIL_IF(w->state != DECLARING, PQ_ERR_ARG, "%s: tensor '%.200s' declared after the header was written", fn,
               name);
    PQ_FAIL_IF(n_dims < 1 || n_dims > PQ_GGUF_MAX_DIMS, PQ_ERR_ARG, "%s: tensor '%.200s': %d dimensions (1..%d)", fn,
               name, n_dims, PQ_GGUF_MAX_DIMS);
    const pq_ggml_type_info *ti = pq_ggml_type_get(type);
    PQ_FAIL_IF(!ti, PQ_ERR_ARG, "%s: tensor '%.200s': unknown ggml type %u", fn, name, type);
    PQ_FAIL_IF(ne[0] < 1 || ne[0] % ti->block, PQ_ERR_ARG,
               "%s: tensor '%.200s': rows of %lld values are not whole %s blocks of %d", fn, name, (long long)ne[0],
               ti->name, ti->block);
    wtensor t = {.n_dims = n_dims, .type = type, .nbytes = (uint64_t)(ne[0] / ti->block) * (uint64_t)ti->bytes};
    for (int d = 0; d < PQ_GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        PQ_FAIL_IF(t.ne[d] < 1, PQ_ERR_ARG, "%s: tensor '%.200s': ne[%d] = %lld", fn, name, d, (long long)t.ne[d]);
        if (d > 0)
            PQ_FAIL_IF(__builtin_mul_overflow(t.nbytes, (uint64_t)t.ne[d], &t.nbytes) || t.nbytes > (uint64_t)INT64_MAX,
                       PQ_ERR_ARG, "%s: tensor '%.200s': its size overflows", fn, name);
    }
    for (int i = 0; i < w->n; i++)
        PQ_FAIL_IF(strcmp(w->t[i].name, name) == 0, PQ_ERR_ARG, "%s: tensor '%.200s' declared twice", fn, name);
    if (w->n == w->cap) {
        PQ_FAIL_IF(w->cap > INT_MAX / 2, PQ_ERR_ARG, "%s: too many tensors", fn);
        int c = w->cap ? w->cap * 2 : 64;
        wtensor *nt = realloc(w->t, (size_t)c * sizeof *nt);
        PQ_FAIL_IF(!nt, PQ_ERR_NOMEM, "%s: out of memory", fn);
        w->t = nt, w->cap = c;
    }
    PQ_FAIL_IF(!(t.name = strdup(name)), PQ_ERR_NOMEM, "%s: out of memory", fn);
    w->t[w->n++] = t;
    return PQ_OK;
}

static wtensor *find(const pq_gguf_writer *w, const char *name) {
    for (int i = 0; w && name && i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0) return &w->t[i];
    return NULL;
}

uint64_t pq_gguf_writer_tensor_bytes(const pq_gguf_writer *w, const char *name) {
    const wtensor *t = find(w, name);
    return t ? t->nbytes : 0;
}

static uint64_t align_up(uint64_t v, uint32_t a) { return (v + a - 1) / a * a; }

// Offsets in declaration order, and the header: magic, version, counts,
// metadata, tensor infos, padding.
static pq_status build_header(pq_gguf_writer *w) {
    const char *fn = w->final_path;
    uint64_t off = 0;
    for (int i = 0; i < w->n; i++) {
        w->t[i].offset = off;
        PQ_FAIL_IF(__builtin_add_overflow(off, w->t[i].nbytes, &off) || off > (uint64_t)INT64_MAX / 2, PQ_ERR_ARG,
                   "%s: the total size overflows", fn);
        off = align_up(off, w->alignment);
    }
    buf *h = &w->header;
    put(h, "GGUF", 4);
    put_u32(h, 3);
    put_u64(h, (uint64_t)w->n);
    put_u64(h, w->n_kv);
    put(h, w->kv.p, w->kv.n);
    for (int i = 0; i < w->n; i++) {
        const wtensor *t = &w->t[i];
        put_str(h, t->name, strlen(t->name));
        put_u32(h, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) put_u64(h, (uint64_t)t->ne[d]);
        put_u32(h, t->type);
        put_u64(h, t->offset);
    }
    static const uint8_t zeros[256];
    while (!h->oom && h->n % w->alignment) {
        size_t need = (size_t)(align_up(h->n, w->alignment) - h->n);
        put(h, zeros, need < sizeof zeros ? need : sizeof zeros);
    }
    PQ_FAIL_IF(h->oom, PQ_ERR_NOMEM, "%s: out of memory for the header", fn);
    w->total = (uint64_t)h->n + off;
    return PQ_OK;
}

pq_status pq_gguf_writer_begin(pq_gguf_writer *w) {
    PQ_FAIL_IF(!w, PQ_ERR_ARG, "pq_gguf_writer_begin: NULL writer");
    PQ_FAIL_IF(w->state != DECLARING, PQ_ERR_ARG, "%s: begin called twice", w->final_path);
    PQ_TRY(build_header(w));
    w->fd = open(w->tmp_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    PQ_FAIL_IF(w->fd < 0, PQ_ERR_IO, "%s: cannot create: %s", w->tmp_path, strerror(errno));
    w->state = WRITING; // from here on, free removes the temporary file
    return pq_fd_write_all(w->fd, w->header.p, w->header.n, w->tmp_path);
}

pq_status pq_gguf_writer_resume(pq_gguf_writer *w) {
    PQ_FAIL_IF(!w, PQ_ERR_ARG, "pq_gguf_writer_resume: NULL writer");
    PQ_FAIL_IF(w->state != DECLARING, PQ_ERR_ARG, "%s: resume after begin", w->final_path);
    PQ_TRY(build_header(w));
    PQ_TRY(pq_file_reopen_tmp(w->tmp_path, w->header.p, w->header.n, w->total, &w->fd));
    for (int i = 0; i < w->n; i++) w->t[i].written = 1;
    w->state = WRITING;
    return PQ_OK;
}

pq_status pq_gguf_writer_put(pq_gguf_writer *w, const char *name, const void *data, size_t nbytes) {
    PQ_FAIL_IF(!w || !name || (nbytes && !data), PQ_ERR_ARG, "pq_gguf_writer_put: NULL argument");
    PQ_FAIL_IF(w->state != WRITING, PQ_ERR_ARG, "%s: tensor '%.200s' put %s", w->final_path, name,
               w->state == DECLARING ? "before begin" : "after commit or a failed commit");
    wtensor *t = find(w, name);
    PQ_FAIL_IF(!t, PQ_ERR_ARG, "%s: tensor '%.200s' was not declared", w->final_path, name);
    PQ_FAIL_IF(nbytes != t->nbytes, PQ_ERR_ARG, "%s: tensor '%.200s': put of %zu bytes, declared %llu", w->final_path,
               name, nbytes, (unsigned long long)t->nbytes);
    PQ_TRY(pq_fd_pwrite_all(w->fd, data, nbytes, w->header.n + t->offset, w->tmp_path));
    t->written = 1;
    return PQ_OK;
}

pq_status pq_gguf_writer_read(pq_gguf_writer *w, const char *name, void *data, size_t nbytes) {
    PQ_FAIL_IF(!w || w->state != WRITING, PQ_ERR_ARG, "pq_gguf_writer_read: no open temporary file");
    wtensor *t = find(w, name);
    PQ_FAIL_IF(!t || nbytes != t->nbytes, PQ_ERR_ARG, "%s: tensor '%.200s' is not %zu bytes", w->final_path,
               name ? name : "", nbytes);
    uint64_t off = w->header.n + t->offset;
    for (size_t done = 0; done < nbytes;) {
        ssize_t r = pread(w->fd, (uint8_t *)data + done, nbytes - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR) continue;
        PQ_FAIL_IF(r <= 0, PQ_ERR_IO, "%s: cannot read tensor '%.200s' back: %s", w->tmp_path, name,
                   r < 0 ? strerror(errno) : "the file ends before it");
        done += (size_t)r;
    }
    return PQ_OK;
}

pq_status pq_gguf_writer_sync(pq_gguf_writer *w) {
    PQ_FAIL_IF(!w || w->state != WRITING, PQ_ERR_ARG, "pq_gguf_writer_sync: no open temporary file");
    PQ_FAIL_IF(fsync(w->fd) != 0, PQ_ERR_IO, "%s: fsync failed: %s", w->tmp_path, strerror(errno));
    return PQ_OK;
}

// The padding after the last tensor, written (not a hole: a full disk shows here).
static pq_status finish(pq_gguf_writer *w) {
    struct stat sb;
    PQ_FAIL_IF(fstat(w->fd, &sb) != 0, PQ_ERR_IO, "%s: cannot stat: %s", w->tmp_path, strerror(errno));
    uint64_t end = w->header.n + (w->n ? w->t[w->n - 1].offset + w->t[w->n - 1].nbytes : 0);
    static const uint8_t zeros[256];
    while (end < w->total) {
        size_t n = w->total - end < sizeof zeros ? (size_t)(w->total - end) : sizeof zeros;
        PQ_TRY(pq_fd_pwrite_all(w->fd, zeros, n, end, w->tmp_path));
        end += n;
    }
    PQ_FAIL_IF(fstat(w->fd, &sb) != 0 || (uint64_t)sb.st_size != w->total, PQ_ERR_FORMAT,
               "%s: %lld bytes, expected %llu", w->tmp_path, (long long)sb.st_size, (unsigned long long)w->total);
    pq_status s = pq_file_commit_tmp(w->fd, w->tmp_path, w->final_path);
    w->fd = -1;
    return s;
}

pq_status pq_gguf_writer_commit(pq_gguf_writer *w) {
    PQ_FAIL_IF(!w, PQ_ERR_ARG, "pq_gguf_writer_commit: NULL writer");
    PQ_FAIL_IF(w->state != WRITING, PQ_ERR_ARG, "%s: commit %s", w->final_path,
               w->state == DECLARING ? "before begin" : w->state == COMMITTED ? "called twice" : "after a failed commit");
    for (int i = 0; i < w->n; i++)
        PQ_FAIL_IF(!w->t[i].written, PQ_ERR_ARG, "%s: tensor '%.200s' was never written", w->final_path, w->t[i].name);
    pq_status s = finish(w);
    w->state = s == PQ_OK ? COMMITTED : FAILED;
    return s;
}

void pq_gguf_writer_free(pq_gguf_writer *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if ((w->state == WRITING || w->state == FAILED) && !w->keep_tmp) unlink(w->tmp_path);
    for (int i = 0; i < w->n; i++) free(w->t[i].name);
    for (uint64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    free(w->keys);
    free(w->t);
    free(w->kv.p);
    free(w->header.p);
    free(w->final_path);
    free(w);
}

void pq_gguf_writer_keep_tmp(pq_gguf_writer *w) {
    if (w) w->keep_tmp = 1;
}

const char *pq_gguf_writer_tmp_path(const pq_gguf_writer *w) { return w ? w->tmp_path : NULL; }

uint64_t pq_gguf_writer_total_bytes(const pq_gguf_writer *w) { return w ? w->total : 0; }
