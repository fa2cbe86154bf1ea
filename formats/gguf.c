// formats/gguf.c — the validated GGUF reader (format in formats/gguf.h).
//
// The header is walked with a bounds-checked cursor: every count is checked
// against the bytes that remain before anything is allocated for it, and
// every length before it is used, so a lying file fails with a message
// instead of reading past its end or allocating without bound.
#include "formats/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/ggml_blocks.h"

#define DEFAULT_ALIGNMENT 32
#define MAX_KEY_BYTES 65535  // the spec's limit
#define MAX_NAME_BYTES 4096  // ggml's is 63; real names are short
#define MIN_KV_BYTES 13      // key length (8) + type (4) + a 1-byte value
#define MIN_TENSOR_BYTES 32  // name length (8) + n_dims (4) + one ne (8) + type (4) + offset (8)

struct pq_gguf {
    char *path;
    const uint8_t *base;
    size_t len;
    void *map; // the mmap of an opened file (len bytes), or NULL
    uint32_t version, alignment;
    pq_gguf_kv *kv;
    int n_kv;
    const pq_gguf_kv **kv_by_key; // sorted by key
    pq_gguf_tensor *t;
    int n_t;
    const pq_gguf_tensor **t_by_name; // sorted by name
    pq_gguf_str *strs;  // every string value, all kvs together
    char *keys, *names; // NUL-terminated keys, tensor names
    size_t keys_cap, names_cap;
};

static const char *const VTYPE_NAMES[PQ_GGUF_NTYPES] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                        "bool", "string", "array", "u64", "i64", "f64"};
static const int VTYPE_SIZE[PQ_GGUF_NTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *pq_gguf_vtype_name(pq_gguf_vtype t) { return (unsigned)t < PQ_GGUF_NTYPES ? VTYPE_NAMES[t] : "?"; }

// ---- the cursor -------------------------------------------------------------

typedef struct {
    const uint8_t *base, *p, *end;
    const char *file;
} cursor;

static size_t left(const cursor *c) { return (size_t)(c->end - c->p); }

static pq_status need(const cursor *c, uint64_t n, const char *what) {
    PQ_FAIL_IF(n > left(c), PQ_ERR_FORMAT, "%s: truncated: %s needs %llu bytes at offset %zu, the file has %zu left",
               c->file, what, (unsigned long long)n, (size_t)(c->p - c->base), left(c));
    return PQ_OK;
}

static pq_status rd_u32(cursor *c, const char *what, uint32_t *out) {
    PQ_TRY(need(c, 4, what));
    *out = (uint32_t)c->p[0] | (uint32_t)c->p[1] << 8 | (uint32_t)c->p[2] << 16 | (uint32_t)c->p[3] << 24;
    c->p += 4;
    return PQ_OK;
}

static pq_status rd_u64(cursor *c, const char *what, uint64_t *out) {
    PQ_TRY(need(c, 8, what));
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | c->p[i];
    *out = v;
    c->p += 8;
    return PQ_OK;
}

static pq_status rd_str(cursor *c, const char *what, pq_gguf_str *out) {
    uint64_t n;
    PQ_TRY(rd_u64(c, what, &n));
    PQ_FAIL_IF(n > left(c), PQ_ERR_FORMAT,
               "%s: %s: string length %llu at offset %zu runs past the end of the file (%zu bytes left)", c->file,
               what, (unsigned long long)n, (size_t)(c->p - c->base) - 8, left(c));
    out->p = (const char *)c->p;
    out->len = (size_t)n;
    c->p += n;
    return PQ_OK;
}

// ---- metadata --------------------------------------------------------------------

// Reads one value of type `type` (not an array) into kv storage: fixed-size
// values are left in the file (kv->data points at the first), strings go to
// strs[*n_strs].
static pq_status rd_scalar(cursor *c, pq_gguf_vtype type, const char *key, pq_gguf_str *strs, size_t *n_strs) {
    if (type == PQ_GGUF_STRING) return rd_str(c, key, &strs[(*n_strs)++]);
    PQ_TRY(need(c, (uint64_t)VTYPE_SIZE[type], key));
    PQ_FAIL_IF(type == PQ_GGUF_BOOL && c->p[0] > 1, PQ_ERR_FORMAT, "%s: key '%.200s': bool value %u is not 0 or 1",
               c->file, key, c->p[0]);
    c->p += VTYPE_SIZE[type];
    return PQ_OK;
}

static pq_status rd_vtype(cursor *c, const char *key, const char *what, pq_gguf_vtype *out) {
    uint32_t t;
    PQ_TRY(rd_u32(c, key, &t));
    PQ_FAIL_IF(t >= PQ_GGUF_NTYPES, PQ_ERR_FORMAT, "%s: key '%.200s': unknown %s type %u", c->file, key, what, t);
    *out = (pq_gguf_vtype)t;
    return PQ_OK;
}

// Copies s into arena (of cap bytes) at *used; refuses NUL bytes and empty
// or long names. The arenas are sized by a counting pass that walks the
// header as the reading pass does, so they cannot overflow.
static pq_status copy_name(const cursor *c, char *arena, size_t cap, size_t *used, pq_gguf_str s, size_t max,
                           const char *what, const char **out) {
    PQ_FAIL_IF(s.len == 0, PQ_ERR_FORMAT, "%s: an empty %s at offset %zu", c->file, what,
               (size_t)((const uint8_t *)s.p - c->base));
    PQ_FAIL_IF(s.len > max, PQ_ERR_FORMAT, "%s: a %s of %zu bytes (more than %zu) at offset %zu", c->file, what, s.len,
               max, (size_t)((const uint8_t *)s.p - c->base));
    PQ_FAIL_IF(memchr(s.p, 0, s.len), PQ_ERR_FORMAT, "%s: %s '%.*s' contains a NUL byte", c->file, what,
               (int)strnlen(s.p, s.len), s.p);
    PQ_ASSERT(*used + s.len + 1 <= cap);
    char *dst = arena + *used;
    memcpy(dst, s.p, s.len);
    dst[s.len] = '\0';
    *used += s.len + 1;
    *out = dst;
    return PQ_OK;
}

// One key/value pair. The strings of the whole header are counted before
// any is stored (count_strings), so strs and keys have room.
static pq_status rd_kv(cursor *c, pq_gguf *g, pq_gguf_kv *kv, size_t *n_strs, size_t *keys_used) {
    pq_gguf_str key;
    PQ_TRY(rd_str(c, "a metadata key", &key));
    PQ_TRY(copy_name(c, g->keys, g->keys_cap, keys_used, key, MAX_KEY_BYTES, "metadata key", &kv->key));
    PQ_TRY(rd_vtype(c, kv->key, "value", &kv->type));
    kv->elem = kv->type;
    kv->n = 1;
    if (kv->type == PQ_GGUF_ARRAY) {
        PQ_TRY(rd_vtype(c, kv->key, "array element", &kv->elem));
        PQ_FAIL_IF(kv->elem == PQ_GGUF_ARRAY, PQ_ERR_FORMAT, "%s: key '%.200s': arrays of arrays are not supported",
                   c->file, kv->key);
        PQ_TRY(rd_u64(c, kv->key, &kv->n));
    }
    uint64_t min_each = kv->elem == PQ_GGUF_STRING ? 8 : (uint64_t)VTYPE_SIZE[kv->elem];
    PQ_FAIL_IF(kv->n > left(c) / min_each, PQ_ERR_FORMAT,
               "%s: key '%.200s': %llu %s value%s cannot fit in the %zu bytes left", c->file, kv->key,
               (unsigned long long)kv->n, VTYPE_NAMES[kv->elem], kv->n == 1 ? "" : "s", left(c));
    kv->data = c->p;
    if (kv->elem == PQ_GGUF_STRING) kv->strs = g->strs + *n_strs;
    if (kv->elem != PQ_GGUF_STRING && kv->elem != PQ_GGUF_BOOL) { // checked by the bound above
        c->p += kv->n * (uint64_t)VTYPE_SIZE[kv->elem];
        return PQ_OK;
    }
    for (uint64_t i = 0; i < kv->n; i++) PQ_TRY(rd_scalar(c, kv->elem, kv->key, g->strs, n_strs));
    return PQ_OK;
}

// Walks the metadata once without storing anything to count its strings
// (every string value, array elements included) and the bytes of the keys,
// so the arrays can be sized exactly. The walk checks only what it needs to
// stay inside the file; rd_kv checks the rest.
static pq_status count_strings(cursor c, uint64_t n_kv, size_t *n_strs, size_t *key_bytes) {
    *n_strs = *key_bytes = 0;
    for (uint64_t i = 0; i < n_kv; i++) {
        pq_gguf_str key;
        uint32_t type, elem;
        uint64_t n = 1;
        char what[240];
        PQ_TRY(rd_str(&c, "a metadata key", &key));
        *key_bytes += key.len + 1;
        snprintf(what, sizeof what, "key '%.*s'", (int)(key.len > 200 ? 200 : key.len), key.p);
        PQ_TRY(rd_u32(&c, what, &type));
        elem = type;
        if (type == PQ_GGUF_ARRAY) {
            PQ_TRY(rd_u32(&c, what, &elem));
            PQ_TRY(rd_u64(&c, what, &n));
        }
        if (elem >= PQ_GGUF_NTYPES || elem == PQ_GGUF_ARRAY) return PQ_OK; // rd_kv reports it
        if (elem != PQ_GGUF_STRING) {
            uint64_t size = (uint64_t)VTYPE_SIZE[elem];
            if (n > left(&c) / size) return PQ_OK; // rd_kv reports it
            c.p += n * size;
            continue;
        }
        if (n > left(&c) / 8) return PQ_OK;
        for (uint64_t k = 0; k < n; k++) {
            pq_gguf_str s;
            PQ_TRY(rd_str(&c, what, &s));
        }
        *n_strs += (size_t)n;
    }
    return PQ_OK;
}

// ---- tensors -------------------------------------------------------------------

// The bytes the tensor names take (with their NULs), by a walk that stops
// where rd_tensor will report an error.
static size_t count_names(cursor c, uint64_t n_t) {
    size_t bytes = 0;
    for (uint64_t i = 0; i < n_t; i++) {
        pq_gguf_str name;
        uint32_t nd;
        if (rd_str(&c, "a tensor name", &name) != PQ_OK) break;
        bytes += name.len + 1;
        if (rd_u32(&c, "n_dims", &nd) != PQ_OK || nd < 1 || nd > PQ_GGUF_MAX_DIMS) break;
        if (need(&c, 8ull * nd + 12, "a tensor info") != PQ_OK) break;
        c.p += 8ull * nd + 12;
    }
    return bytes;
}

static pq_status rd_tensor(cursor *c, pq_gguf *g, pq_gguf_tensor *t, size_t *names_used) {
    pq_gguf_str name;
    uint32_t nd;
    PQ_TRY(rd_str(c, "a tensor name", &name));
    PQ_TRY(copy_name(c, g->names, g->names_cap, names_used, name, MAX_NAME_BYTES, "tensor name", &t->name));
    PQ_TRY(rd_u32(c, t->name, &nd));
    PQ_FAIL_IF(nd < 1 || nd > PQ_GGUF_MAX_DIMS, PQ_ERR_FORMAT, "%s: tensor '%.200s' has %u dimensions (1 to %d allowed)",
               c->file, t->name, nd, PQ_GGUF_MAX_DIMS);
    t->n_dims = (int)nd;
    uint64_t numel = 1;
    for (int d = 0; d < PQ_GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if (d < t->n_dims) PQ_TRY(rd_u64(c, t->name, &ne));
        PQ_FAIL_IF(ne < 1 || ne > (uint64_t)INT64_MAX, PQ_ERR_FORMAT, "%s: tensor '%.200s': ne[%d] = %llu is not >= 1",
                   c->file, t->name, d, (unsigned long long)ne);
        PQ_FAIL_IF(__builtin_mul_overflow(numel, ne, &numel) || numel > (uint64_t)INT64_MAX, PQ_ERR_FORMAT,
                   "%s: tensor '%.200s': the element count overflows", c->file, t->name);
        t->ne[d] = (int64_t)ne;
    }
    t->numel = (int64_t)numel;
    PQ_TRY(rd_u32(c, t->name, &t->type));
    const pq_ggml_type_info *ti = pq_ggml_type_get(t->type);
    PQ_FAIL_IF(!ti, PQ_ERR_FORMAT, "%s: tensor '%.200s' has unknown ggml type %u", c->file, t->name, t->type);
    PQ_FAIL_IF(t->ne[0] % ti->block, PQ_ERR_FORMAT,
               "%s: tensor '%.200s': a row of %lld values is not a whole number of %s blocks of %d", c->file, t->name,
               (long long)t->ne[0], ti->name, ti->block);
    uint64_t nbytes;
    PQ_FAIL_IF(__builtin_mul_overflow(numel / (uint64_t)ti->block, (uint64_t)ti->bytes, &nbytes) ||
                   nbytes > (uint64_t)SIZE_MAX,
               PQ_ERR_FORMAT, "%s: tensor '%.200s': the byte size overflows", c->file, t->name);
    t->nbytes = (size_t)nbytes;
    return rd_u64(c, t->name, &t->offset);
}

static int cmp_offset(const void *a, const void *b) {
    const pq_gguf_tensor *x = *(const pq_gguf_tensor *const *)a, *y = *(const pq_gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

// Offsets aligned, data inside the file, no two tensors overlapping.
static pq_status place_tensors(pq_gguf *g, size_t data_start) {
    size_t data_len = g->len > data_start ? g->len - data_start : 0;
    const pq_gguf_tensor **by_off = malloc((size_t)(g->n_t + 1) * sizeof *by_off);
    PQ_FAIL_IF(!by_off, PQ_ERR_NOMEM, "%s: out of memory", g->path);
    pq_status s = PQ_OK;
    for (int i = 0; i < g->n_t; i++) {
        pq_gguf_tensor *t = &g->t[i];
        PQ_CHECK_GOTO(t->offset % g->alignment, s, PQ_ERR_FORMAT,
                      "%s: tensor '%.200s': offset %llu is not a multiple of the alignment %u", g->path, t->name,
                      (unsigned long long)t->offset, g->alignment);
        PQ_CHECK_GOTO(t->offset > data_len || t->nbytes > data_len - t->offset, s, PQ_ERR_FORMAT,
                      "%s: tensor '%.200s': %zu bytes at data offset %llu run past the end of the file (the data "
                      "section holds %zu bytes)",
                      g->path, t->name, t->nbytes, (unsigned long long)t->offset, data_len);
        t->data = g->base + data_start + t->offset;
        by_off[i] = t;
    }
    qsort(by_off, (size_t)g->n_t, sizeof *by_off, cmp_offset);
    for (int i = 1; i < g->n_t; i++) {
        const pq_gguf_tensor *a = by_off[i - 1], *b = by_off[i];
        PQ_CHECK_GOTO(b->offset < a->offset + a->nbytes, s, PQ_ERR_FORMAT,
                      "%s: tensor '%.200s' (data offset %llu) overlaps tensor '%.200s' (offset %llu, %zu bytes)",
                      g->path, b->name, (unsigned long long)b->offset, a->name, (unsigned long long)a->offset,
                      a->nbytes);
    }
done:
    free(by_off);
    return s;
}

// ---- indexes ------------------------------------------------------------------

static int cmp_kv_key(const void *a, const void *b) {
    return strcmp((*(const pq_gguf_kv *const *)a)->key, (*(const pq_gguf_kv *const *)b)->key);
}

static int cmp_t_name(const void *a, const void *b) {
    return strcmp((*(const pq_gguf_tensor *const *)a)->name, (*(const pq_gguf_tensor *const *)b)->name);
}

static pq_status index_all(pq_gguf *g) {
    g->kv_by_key = malloc((size_t)(g->n_kv + 1) * sizeof *g->kv_by_key);
    g->t_by_name = malloc((size_t)(g->n_t + 1) * sizeof *g->t_by_name);
    PQ_FAIL_IF(!g->kv_by_key || !g->t_by_name, PQ_ERR_NOMEM, "%s: out of memory", g->path);
    for (int i = 0; i < g->n_kv; i++) g->kv_by_key[i] = &g->kv[i];
    for (int i = 0; i < g->n_t; i++) g->t_by_name[i] = &g->t[i];
    qsort(g->kv_by_key, (size_t)g->n_kv, sizeof *g->kv_by_key, cmp_kv_key);
    qsort(g->t_by_name, (size_t)g->n_t, sizeof *g->t_by_name, cmp_t_name);
    for (int i = 1; i < g->n_kv; i++)
        PQ_FAIL_IF(strcmp(g->kv_by_key[i - 1]->key, g->kv_by_key[i]->key) == 0, PQ_ERR_FORMAT,
                   "%s: metadata key '%.200s' appears twice", g->path, g->kv_by_key[i]->key);
    for (int i = 1; i < g->n_t; i++)
        PQ_FAIL_IF(strcmp(g->t_by_name[i - 1]->name, g->t_by_name[i]->name) == 0, PQ_ERR_FORMAT,
                   "%s: tensor '%.200s' appears twice", g->path, g->t_by_name[i]->name);
    return PQ_OK;
}

// ---- the header ----------------------------------------------------------------

static pq_status parse(pq_gguf *g) {
    cursor c = {g->base, g->base, g->base + g->len, g->path};
    uint32_t magic;
    PQ_FAIL_IF(g->len < 4 || memcmp(g->base, "GGUF", 4) != 0, PQ_ERR_FORMAT, "%s: not a GGUF file (no \"GGUF\" magic)",
               g->path);
    PQ_TRY(rd_u32(&c, "the magic", &magic));
    PQ_TRY(rd_u32(&c, "the version", &g->version));
    PQ_FAIL_IF(g->version > 0xffff && (g->version & 0xffff) == 0, PQ_ERR_FORMAT,
               "%s: a big-endian GGUF file (version 0x%08x) is not supported", g->path, g->version);
    PQ_FAIL_IF(g->version != 2 && g->version != 3, PQ_ERR_FORMAT, "%s: GGUF version %u is not supported (2 or 3)",
               g->path, g->version);
    uint64_t n_t, n_kv;
    PQ_TRY(rd_u64(&c, "the tensor count", &n_t));
    PQ_TRY(rd_u64(&c, "the metadata count", &n_kv));
    PQ_FAIL_IF(n_kv > left(&c) / MIN_KV_BYTES || n_kv > INT_MAX, PQ_ERR_FORMAT,
               "%s: %llu metadata pairs cannot fit in the %zu bytes left", g->path, (unsigned long long)n_kv, left(&c));
    PQ_FAIL_IF(n_t > left(&c) / MIN_TENSOR_BYTES || n_t > INT_MAX, PQ_ERR_FORMAT,
               "%s: %llu tensor infos cannot fit in the %zu bytes left", g->path, (unsigned long long)n_t, left(&c));
    size_t n_strs, key_bytes;
    PQ_TRY(count_strings(c, n_kv, &n_strs, &key_bytes));
    g->keys_cap = key_bytes + 1;
    g->keys = malloc(g->keys_cap);
    g->strs = malloc((n_strs + 1) * sizeof *g->strs);
    g->kv = calloc((size_t)n_kv + 1, sizeof *g->kv);
    g->t = calloc((size_t)n_t + 1, sizeof *g->t);
    PQ_FAIL_IF(!g->keys || !g->strs || !g->kv || !g->t, PQ_ERR_NOMEM, "%s: out of memory for its header", g->path);
    size_t strs_used = 0, keys_used = 0, names_used = 0;
    g->alignment = DEFAULT_ALIGNMENT;
    for (g->n_kv = 0; g->n_kv < (int)n_kv; g->n_kv++) {
        pq_gguf_kv *kv = &g->kv[g->n_kv];
        PQ_TRY(rd_kv(&c, g, kv, &strs_used, &keys_used));
        if (strcmp(kv->key, "general.alignment") != 0) continue;
        PQ_FAIL_IF(kv->type != PQ_GGUF_U32, PQ_ERR_FORMAT, "%s: general.alignment is a %s, not a u32", g->path,
                   VTYPE_NAMES[kv->type]);
        g->alignment = (uint32_t)pq_gguf_kv_int(kv, 0);
        PQ_FAIL_IF(g->alignment == 0 || (g->alignment & (g->alignment - 1)), PQ_ERR_FORMAT,
                   "%s: general.alignment %u is not a power of two", g->path, g->alignment);
    }
    g->names_cap = count_names(c, n_t) + 1;
    g->names = malloc(g->names_cap);
    PQ_FAIL_IF(!g->names, PQ_ERR_NOMEM, "%s: out of memory for its tensor names", g->path);
    for (g->n_t = 0; g->n_t < (int)n_t; g->n_t++) PQ_TRY(rd_tensor(&c, g, &g->t[g->n_t], &names_used));
    size_t end = (size_t)(c.p - g->base), pad = (g->alignment - end % g->alignment) % g->alignment;
    PQ_TRY(index_all(g));
    return place_tensors(g, end + pad);
}

// ---- opening -------------------------------------------------------------------

int pq_gguf_is_file(const char *path) {
    struct stat sb;
    if (!path || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char magic[4];
    ssize_t n = read(fd, magic, 4);
    close(fd);
    return n == 4 && memcmp(magic, "GGUF", 4) == 0;
}

void pq_gguf_close(pq_gguf *g) {
    if (!g) return;
    if (g->map) munmap(g->map, g->len);
    free(g->kv);
    free(g->kv_by_key);
    free(g->t);
    free(g->t_by_name);
    free(g->strs);
    free(g->keys);
    free(g->names);
    free(g->path);
    free(g);
}

static pq_status finish_open(pq_gguf *g, pq_gguf **out) {
    pq_status s = parse(g);
    if (s != PQ_OK) {
        pq_gguf_close(g);
        return s;
    }
    *out = g;
    return PQ_OK;
}

pq_status pq_gguf_open(const char *path, pq_gguf **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    PQ_FAIL_IF(fd < 0, PQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    pq_status s = PQ_OK;
    pq_gguf *g = calloc(1, sizeof *g);
    PQ_CHECK_GOTO(!g || !(g->path = strdup(path)), s, PQ_ERR_NOMEM, "%s: out of memory", path);
    PQ_CHECK_GOTO(fstat(fd, &sb) != 0, s, PQ_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    PQ_CHECK_GOTO(!S_ISREG(sb.st_mode), s, PQ_ERR_IO, "%s: not a regular file", path);
    g->len = (size_t)sb.st_size;
    if (g->len > 0) { // an empty file fails the magic check
        void *m = mmap(NULL, g->len, PROT_READ, MAP_PRIVATE, fd, 0);
        PQ_CHECK_GOTO(m == MAP_FAILED, s, PQ_ERR_IO, "%s: mmap failed: %s", path, strerror(errno));
        g->map = m;
        g->base = m;
    }
    close(fd);
    return finish_open(g, out);
done:
    close(fd);
    pq_gguf_close(g);
    return s;
}

pq_status pq_gguf_open_buffer(const void *data, size_t len, const char *name, pq_gguf **out) {
    *out = NULL;
    if (!name) name = "<buffer>";
    PQ_FAIL_IF(!data && len, PQ_ERR_ARG, "%s: NULL data", name);
    pq_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(name))) {
        pq_gguf_close(g);
        return PQ_FAIL(PQ_ERR_NOMEM, "%s: out of memory", name);
    }
    g->base = data;
    g->len = len;
    return finish_open(g, out);
}

// ---- queries ---------------------------------------------------------------------

const char *pq_gguf_path(const pq_gguf *g) { return g->path; }
uint32_t pq_gguf_version(const pq_gguf *g) { return g->version; }
uint32_t pq_gguf_alignment(const pq_gguf *g) { return g->alignment; }
uint64_t pq_gguf_file_bytes(const pq_gguf *g) { return g->len; }
int pq_gguf_kv_count(const pq_gguf *g) { return g->n_kv; }
int pq_gguf_tensor_count(const pq_gguf *g) { return g->n_t; }

const pq_gguf_kv *pq_gguf_kv_at(const pq_gguf *g, int i) { return i >= 0 && i < g->n_kv ? &g->kv[i] : NULL; }

const pq_gguf_tensor *pq_gguf_tensor_at(const pq_gguf *g, int i) { return i >= 0 && i < g->n_t ? &g->t[i] : NULL; }

static int cmp_key_kv(const void *key, const void *elem) {
    return strcmp(key, (*(const pq_gguf_kv *const *)elem)->key);
}

static int cmp_key_t(const void *key, const void *elem) {
    return strcmp(key, (*(const pq_gguf_tensor *const *)elem)->name);
}

const pq_gguf_kv *pq_gguf_find(const pq_gguf *g, const char *key) {
    if (!g->n_kv || !key) return NULL;
    const pq_gguf_kv *const *p = bsearch(key, g->kv_by_key, (size_t)g->n_kv, sizeof *g->kv_by_key, cmp_key_kv);
    return p ? *p : NULL;
}

const pq_gguf_tensor *pq_gguf_tensor_find(const pq_gguf *g, const char *name) {
    if (!g->n_t || !name) return NULL;
    const pq_gguf_tensor *const *p = bsearch(name, g->t_by_name, (size_t)g->n_t, sizeof *g->t_by_name, cmp_key_t);
    return p ? *p : NULL;
}

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static int is_int(pq_gguf_vtype t) {
    return t <= PQ_GGUF_I32 || t == PQ_GGUF_U64 || t == PQ_GGUF_I64 || t == PQ_GGUF_BOOL;
}

int64_t pq_gguf_kv_int(const pq_gguf_kv *kv, uint64_t i) {
    int size = VTYPE_SIZE[kv->elem];
    uint64_t u = le(kv->data + i * (uint64_t)size, size);
    switch (kv->elem) {
    case PQ_GGUF_I8: return (int8_t)u;
    case PQ_GGUF_I16: return (int16_t)u;
    case PQ_GGUF_I32: return (int32_t)u;
    case PQ_GGUF_I64: return (int64_t)u;
    case PQ_GGUF_U64: return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u; // saturated: out of any range asked
    default: return (int64_t)u;
    }
}

double pq_gguf_kv_float(const pq_gguf_kv *kv, uint64_t i) {
    if (kv->elem == PQ_GGUF_F64) {
        uint64_t u = le(kv->data + 8 * i, 8);
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    uint32_t u = (uint32_t)le(kv->data + 4 * i, 4);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// The kv of key, whose type is an array (array != 0) or a scalar, with
// elements of the family ok accepts or, without ok, of type elem (want
// names it in the message).
static pq_status find_typed(const pq_gguf *g, const char *key, int array, int (*ok)(pq_gguf_vtype),
                            pq_gguf_vtype elem, const char *want, const pq_gguf_kv **out) {
    const pq_gguf_kv *kv = pq_gguf_find(g, key);
    PQ_FAIL_IF(!kv, PQ_ERR_FORMAT, "%s: metadata key '%.200s' is missing", g->path, key);
    int good = (kv->type == PQ_GGUF_ARRAY) == (array != 0) && (ok ? ok(kv->elem) : kv->elem == elem);
    PQ_FAIL_IF(!good, PQ_ERR_FORMAT, "%s: metadata key '%.200s' holds %s %s%s, expected %s", g->path, key,
               kv->type == PQ_GGUF_ARRAY ? "an array of" : "a", VTYPE_NAMES[kv->elem],
               kv->type == PQ_GGUF_ARRAY ? " values" : " value", want);
    *out = kv;
    return PQ_OK;
}

static int is_int_not_bool(pq_gguf_vtype t) { return is_int(t) && t != PQ_GGUF_BOOL; }
static int is_float(pq_gguf_vtype t) { return t == PQ_GGUF_F32 || t == PQ_GGUF_F64; }
static int is_bool(pq_gguf_vtype t) { return t == PQ_GGUF_BOOL; }
static int is_str(pq_gguf_vtype t) { return t == PQ_GGUF_STRING; }

pq_status pq_gguf_get_int(const pq_gguf *g, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    const pq_gguf_kv *kv;
    PQ_TRY(find_typed(g, key, 0, is_int_not_bool, 0, "an integer", &kv));
    int64_t v = pq_gguf_kv_int(kv, 0);
    int big = kv->elem == PQ_GGUF_U64 && le(kv->data, 8) > (uint64_t)INT64_MAX;
    PQ_FAIL_IF(big || v < lo || v > hi, PQ_ERR_FORMAT, "%s: metadata key '%.200s' = %s%lld is outside [%lld, %lld]",
               g->path, key, big ? ">" : "", (long long)v, (long long)lo, (long long)hi);
    *out = v;
    return PQ_OK;
}

pq_status pq_gguf_get_float(const pq_gguf *g, const char *key, double *out) {
    const pq_gguf_kv *kv;
    PQ_TRY(find_typed(g, key, 0, is_float, 0, "an f32 or f64", &kv));
    *out = pq_gguf_kv_float(kv, 0);
    return PQ_OK;
}

pq_status pq_gguf_get_bool(const pq_gguf *g, const char *key, int *out) {
    const pq_gguf_kv *kv;
    PQ_TRY(find_typed(g, key, 0, is_bool, 0, "a bool", &kv));
    *out = kv->data[0] != 0;
    return PQ_OK;
}

pq_status pq_gguf_get_str(const pq_gguf *g, const char *key, pq_gguf_str *out) {
    const pq_gguf_kv *kv;
    PQ_TRY(find_typed(g, key, 0, is_str, 0, "a string", &kv));
    *out = kv->strs[0];
    return PQ_OK;
}

pq_status pq_gguf_get_array(const pq_gguf *g, const char *key, pq_gguf_vtype elem, const pq_gguf_kv **out) {
    char want[64];
    snprintf(want, sizeof want, "an array of %s values", pq_gguf_vtype_name(elem));
    return find_typed(g, key, 1, NULL, elem, want, out);
}
