// formats/safetensors.c — the validated safetensors reader: one file (mmap),
// one .zst file (decompressed into memory), a shard index, or a directory.
//
// Nothing in a header is trusted before it is checked: the header length
// against the file, the JSON types, dtypes, shapes (and their products,
// without overflow), byte counts, offsets against the data region, overlaps,
// and duplicate names (within a file by the JSON parser, across shards here).
#include "formats/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/sys.h"
#include "formats/fileio.h"
#include "formats/sha256.h"
#include "formats/zstd_io.h"

#define MAX_HEADER_BYTES 100000000ull        // the Hugging Face library's limit
#define MAX_INDEX_BYTES  ((size_t)100 << 20) // model.safetensors.index.json
#define MAX_ZSTD_BYTES   ((uint64_t)1 << 42) // decompressed .zst image
#define MAX_ZSTD_RATIO   1024                // ... at most this many times its compressed size
#define MIN_ZSTD_CAP     ((uint64_t)64 << 20) // ... or this many bytes
#define PATH_CAP         4096

static const struct {
    const char *name;
    size_t size;
} dtypes[PQ_DT_COUNT] = {
    [PQ_DT_F64] = {"F64", 8},   [PQ_DT_F32] = {"F32", 4},         [PQ_DT_F16] = {"F16", 2},
    [PQ_DT_BF16] = {"BF16", 2}, [PQ_DT_F8_E4M3] = {"F8_E4M3", 1}, [PQ_DT_F8_E5M2] = {"F8_E5M2", 1},
    [PQ_DT_I64] = {"I64", 8},   [PQ_DT_I32] = {"I32", 4},         [PQ_DT_I16] = {"I16", 2},
    [PQ_DT_I8] = {"I8", 1},     [PQ_DT_U64] = {"U64", 8},         [PQ_DT_U32] = {"U32", 4},
    [PQ_DT_U16] = {"U16", 2},   [PQ_DT_U8] = {"U8", 1},           [PQ_DT_BOOL] = {"BOOL", 1},
};

size_t pq_dtype_size(pq_dtype dt) { return (unsigned)dt < PQ_DT_COUNT ? dtypes[dt].size : 0; }

const char *pq_dtype_name(pq_dtype dt) { return (unsigned)dt < PQ_DT_COUNT ? dtypes[dt].name : "?"; }

static int find_dtype(const char *name) {
    for (int i = 0; i < PQ_DT_COUNT; i++)
        if (strcmp(name, dtypes[i].name) == 0) return i;
    return -1;
}

pq_status pq_dtype_parse(const char *name, pq_dtype *out) {
    int dt = name ? find_dtype(name) : -1;
    PQ_FAIL_IF(dt < 0, PQ_ERR_FORMAT, "unknown dtype '%.64s'", name ? name : "(null)");
    *out = (pq_dtype)dt;
    return PQ_OK;
}

typedef struct {
    char *path;
    const uint8_t *base; // the safetensors image: 8-byte length, header, data
    size_t len;
    void *map;     // mmap'd plain file (len bytes), or NULL
    int cleanup;   // the map's common/cleanup.h handle (a bus error names the file), -1 if none
    uint8_t *heap; // decompressed .zst image, or NULL
    void *copies;  // aligned copies of its misaligned tensors, or NULL (pq_free)
    uint64_t disk_bytes;
    json_t *header; // tensor names and metadata borrow from it
} st_file;

struct pq_st {
    char *path; // what was opened (the chosen file for a directory)
    st_file *files;
    int nfiles;
    pq_tensor *t; // by file, then data offset
    int count;
    const pq_tensor **by_name; // sorted by strcmp, for lookups
    json_t *meta;              // the first file's __metadata__, or NULL
    char *view_names;          // pq_st_open_view: the tensor names
};

const char *pq_shape_str(char *buf, size_t cap, int ndim, const int64_t *shape, const char *sep) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? sep : "", (long long)shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
    return buf;
}

static const char *shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
    return pq_shape_str(buf, cap, ndim, shape, ",");
}

static pq_status parse_shape(const char *file, const char *name, json_t *js, pq_tensor *t, uint64_t *numel) {
    PQ_FAIL_IF(!json_is_array(js), PQ_ERR_FORMAT, "%s: tensor '%.200s': shape missing or not an array", file,
               name);
    size_t nd = json_array_size(js);
    PQ_FAIL_IF(nd > PQ_MAX_DIMS, PQ_ERR_FORMAT, "%s: tensor '%.200s': shape has %zu dimensions, more than %d",
               file, name, nd, PQ_MAX_DIMS);
    *numel = 1;
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(js, i);
        PQ_FAIL_IF(!json_is_integer(d), PQ_ERR_FORMAT, "%s: tensor '%.200s': shape[%zu] is not an integer",
                   file, name, i);
        json_int_t x = json_integer_value(d);
        PQ_FAIL_IF(x < 0, PQ_ERR_FORMAT, "%s: tensor '%.200s': shape[%zu] = %lld is negative", file, name, i,
                   (long long)x);
        PQ_FAIL_IF(__builtin_mul_overflow(*numel, (uint64_t)x, numel) || *numel > (uint64_t)INT64_MAX,
                   PQ_ERR_FORMAT, "%s: tensor '%.200s': shape element count overflows", file, name);
        t->shape[i] = x;
    }
    t->ndim = (int)nd;
    t->numel = (int64_t)*numel;
    return PQ_OK;
}

// Validates one header entry and fills t (all but data and file); *begin is
// its offset in the data region of data_len bytes.
static pq_status parse_entry(const char *file, const char *name, json_t *v, size_t data_len, pq_tensor *t,
                             uint64_t *begin) {
    memset(t, 0, sizeof *t);
    t->name = name;
    PQ_FAIL_IF(!json_is_object(v), PQ_ERR_FORMAT, "%s: tensor '%.200s': entry is not a JSON object", file,
               name);
    json_t *jd = json_object_get(v, "dtype"), *jo = json_object_get(v, "data_offsets");
    PQ_FAIL_IF(!json_is_string(jd), PQ_ERR_FORMAT, "%s: tensor '%.200s': dtype missing or not a string", file,
               name);
    int dt = find_dtype(json_string_value(jd));
    PQ_FAIL_IF(dt < 0, PQ_ERR_FORMAT, "%s: tensor '%.200s': unknown dtype '%.32s'", file, name,
               json_string_value(jd));
    t->dtype = (pq_dtype)dt;
    uint64_t numel = 0, nbytes = 0;
    PQ_TRY(parse_shape(file, name, json_object_get(v, "shape"), t, &numel));
    PQ_FAIL_IF(__builtin_mul_overflow(numel, (uint64_t)dtypes[dt].size, &nbytes), PQ_ERR_FORMAT,
               "%s: tensor '%.200s': byte size overflows", file, name);
    PQ_FAIL_IF(!json_is_array(jo) || json_array_size(jo) != 2 || !json_is_integer(json_array_get(jo, 0)) ||
                   !json_is_integer(json_array_get(jo, 1)),
               PQ_ERR_FORMAT, "%s: tensor '%.200s': data_offsets missing or not [begin,end] integers", file,
               name);
    json_int_t b = json_integer_value(json_array_get(jo, 0)), e = json_integer_value(json_array_get(jo, 1));
    PQ_FAIL_IF(b < 0 || e < 0, PQ_ERR_FORMAT, "%s: tensor '%.200s': data_offsets [%lld,%lld] negative", file,
               name, (long long)b, (long long)e);
    PQ_FAIL_IF(b > e, PQ_ERR_FORMAT, "%s: tensor '%.200s': data_offsets [%lld,%lld] end before start", file,
               name, (long long)b, (long long)e);
    PQ_FAIL_IF((uint64_t)e > data_len, PQ_ERR_FORMAT,
               "%s: tensor '%.200s': data_offsets [%lld,%lld] past the end of the %zu-byte data region", file,
               name, (long long)b, (long long)e, data_len);
    char sb[160];
    PQ_FAIL_IF((uint64_t)(e - b) != nbytes, PQ_ERR_FORMAT,
               "%s: tensor '%.200s': %s %s is %llu bytes but data_offsets [%lld,%lld] hold %lld", file, name,
               dtypes[dt].name, shape_str(sb, sizeof sb, t->ndim, t->shape), (unsigned long long)nbytes,
               (long long)b, (long long)e, (long long)(e - b));
    t->nbytes = (size_t)nbytes;
    *begin = (uint64_t)b;
    return PQ_OK;
}

static pq_status check_metadata(const char *file, json_t *m) {
    PQ_FAIL_IF(!json_is_object(m), PQ_ERR_FORMAT, "%s: __metadata__ is not a JSON object", file);
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v) {
        PQ_FAIL_IF(!json_is_string(v), PQ_ERR_FORMAT, "%s: __metadata__ '%.200s' is not a string", file, k);
    }
    return PQ_OK;
}

static int cmp_offset(const void *a, const void *b) {
    const pq_tensor *x = a, *y = b;
    const uint8_t *px = x->data, *py = y->data;
    if (px != py) return px < py ? -1 : 1;
    return strcmp(x->name, y->name);
}

// The JSON header of n bytes at p, validated as a JSON object (*out owned).
static pq_status load_header(const char *fn, const uint8_t *p, uint64_t n, json_t **out) {
    *out = NULL;
    PQ_FAIL_IF(n > MAX_HEADER_BYTES, PQ_ERR_FORMAT, "%s: header length %llu is over the %llu-byte limit", fn,
               (unsigned long long)n, MAX_HEADER_BYTES);
    json_error_t err;
    json_t *h = json_loadb((const char *)p, (size_t)n, JSON_REJECT_DUPLICATES, &err);
    PQ_FAIL_IF(!h && json_error_code(&err) == json_error_duplicate_key, PQ_ERR_FORMAT,
               "%s: header names a tensor twice: %s", fn, err.text);
    PQ_FAIL_IF(!h, PQ_ERR_FORMAT, "%s: header is not valid JSON: %s (at byte %d)", fn, err.text, err.position);
    if (!json_is_object(h)) {
        json_decref(h);
        return PQ_FAIL(PQ_ERR_FORMAT, "%s: header is not a JSON object", fn);
    }
    *out = h;
    return PQ_OK;
}

// Moves every tensor of files[file] whose data is not aligned to its
// dtype's size into one aligned block owned by the file.
static pq_status align_tensors(pq_st *st, int file, int first) {
    size_t total = 0;
    for (int i = first; i < st->count; i++) {
        const pq_tensor *t = &st->t[i];
        if (t->nbytes && (uintptr_t)t->data % pq_dtype_size(t->dtype)) total += (t->nbytes + 63) & ~(size_t)63;
    }
    if (!total) return PQ_OK;
    st_file *f = &st->files[file];
    uint8_t *p = f->copies = pq_alloc(total);
    PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "%s: out of memory for aligned copies of %zu bytes of misaligned tensors", f->path,
               total);
    for (int i = first; i < st->count; i++) {
        pq_tensor *t = &st->t[i];
        if (!t->nbytes || (uintptr_t)t->data % pq_dtype_size(t->dtype) == 0) continue;
        memcpy(p, t->data, t->nbytes);
        t->data = p;
        p += (t->nbytes + 63) & ~(size_t)63;
    }
    return PQ_OK;
}

// Parses files[file]'s image and appends its tensors, sorted by offset.
static pq_status add_image(pq_st *st, int file) {
    st_file *f = &st->files[file];
    const char *fn = f->path;
    PQ_FAIL_IF(f->len < 8, PQ_ERR_FORMAT, "%s: %zu bytes, too short for the 8-byte header length", fn, f->len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | f->base[i];
    PQ_FAIL_IF(n > f->len - 8, PQ_ERR_FORMAT,
               "%s: header length %llu runs past the end of the file (%zu bytes)", fn, (unsigned long long)n,
               f->len);
    PQ_TRY(load_header(fn, f->base + 8, n, &f->header));
    size_t nt = json_object_size(f->header);
    PQ_FAIL_IF(nt > (size_t)(INT_MAX - st->count), PQ_ERR_FORMAT, "%s: too many tensors", fn);
    pq_tensor *nt_arr = realloc(st->t, (st->count + nt + 1) * sizeof *st->t);
    PQ_FAIL_IF(!nt_arr, PQ_ERR_NOMEM, "%s: out of memory for %zu tensors", fn, nt);
    st->t = nt_arr;
    const uint8_t *data = f->base + 8 + n;
    size_t data_len = f->len - 8 - (size_t)n;
    int first = st->count;
    const char *key;
    json_t *v;
    json_object_foreach(f->header, key, v) {
        if (strcmp(key, "__metadata__") == 0) {
            PQ_TRY(check_metadata(fn, v));
            if (file == 0) st->meta = v;
            continue;
        }
        pq_tensor *t = &st->t[st->count];
        uint64_t begin = 0;
        PQ_TRY(parse_entry(fn, key, v, data_len, t, &begin));
        t->data = data + begin;
        t->offset = 8 + n + begin;
        t->file = file;
        st->count++;
    }
    qsort(st->t + first, (size_t)(st->count - first), sizeof *st->t, cmp_offset);
    const pq_tensor *prev = NULL; // the previous non-empty one: the furthest reaching, as none overlapped so far
    for (int i = first; i < st->count; i++) {
        const pq_tensor *t = &st->t[i];
        if (t->nbytes == 0) continue;
        PQ_FAIL_IF(
            prev && (const uint8_t *)t->data < (const uint8_t *)prev->data + prev->nbytes, PQ_ERR_FORMAT,
            "%s: tensor '%.200s' (data_offsets [%td,%td]) overlaps tensor '%.200s' ([%td,%td])", fn, t->name,
            (const uint8_t *)t->data - data, (const uint8_t *)t->data - data + (ptrdiff_t)t->nbytes, prev->name,
            (const uint8_t *)prev->data - data, (const uint8_t *)prev->data - data + (ptrdiff_t)prev->nbytes);
        prev = t;
    }
    return align_tensors(st, file, first);
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static st_file *new_file(pq_st *st, const char *path) {
    st_file *nf = realloc(st->files, (size_t)(st->nfiles + 1) * sizeof *nf);
    if (!nf) return NULL;
    st->files = nf;
    st_file *f = &nf[st->nfiles];
    memset(f, 0, sizeof *f);
    f->cleanup = -1;
    f->path = strdup(path);
    if (!f->path) return NULL;
    st->nfiles++;
    return f;
}

static pq_status map_plain(st_file *f) {
    int fd;
    PQ_TRY(pq_open_regular(f->path, &fd));
    struct stat sb;
    pq_status st = PQ_OK;
    PQ_CHECK_GOTO(fstat(fd, &sb) != 0, st, PQ_ERR_IO, "%s: cannot stat: %s", f->path, strerror(errno));
    f->disk_bytes = (uint64_t)sb.st_size;
    f->len = (size_t)sb.st_size;
    if (f->len > 0) { // an empty file is reported as too short by add_image
        void *m = mmap(NULL, f->len, PROT_READ, MAP_PRIVATE, fd, 0);
        PQ_CHECK_GOTO(m == MAP_FAILED, st, PQ_ERR_IO, "%s: mmap failed: %s", f->path, strerror(errno));
        f->map = m;
        f->base = m;
        f->cleanup = pq_cleanup_add_map(m, f->len, f->path);
    }
done:
    close(fd);
    return st;
}

// Grows *buf to hold want bytes: doubling from 64 KiB, never past limit,
// so memory follows the bytes a stream really produces, not a claim.
static pq_status reserve(const char *fn, uint8_t **buf, size_t *cap, size_t want, size_t limit) {
    if (want <= *cap) return PQ_OK;
    size_t ncap = *cap ? *cap : (size_t)1 << 16;
    while (ncap < want) ncap = ncap > SIZE_MAX / 2 ? want : 2 * ncap;
    if (ncap > limit) ncap = limit > want ? limit : want;
    uint8_t *nb = realloc(*buf, ncap);
    PQ_FAIL_IF(!nb, PQ_ERR_NOMEM, "%s: out of memory decompressing %zu bytes", fn, ncap);
    *buf = nb;
    *cap = ncap;
    return PQ_OK;
}

// Decompresses until *len == want, 16 MiB at a time; *len < want when the
// stream ends first.
static pq_status fill(pq_zstd_reader *z, const char *fn, uint8_t **buf, size_t *cap, size_t *len, size_t want) {
    while (*len < want) {
        size_t chunk = want - *len < ((size_t)1 << 24) ? want - *len : (size_t)1 << 24, got;
        PQ_TRY(reserve(fn, buf, cap, *len + chunk, want));
        PQ_TRY(pq_zstd_reader_read(z, *buf + *len, chunk, &got));
        *len += got;
        if (got < chunk) break;
    }
    return PQ_OK;
}

// Where the data region of header h ends: the largest data_offsets end, every
// entry validated as add_image validates it.
static pq_status header_data_end(const char *fn, json_t *h, uint64_t *end) {
    *end = 0;
    const char *key;
    json_t *v;
    json_object_foreach(h, key, v) {
        if (strcmp(key, "__metadata__") == 0) continue;
        pq_tensor t;
        uint64_t begin;
        PQ_TRY(parse_entry(fn, key, v, SIZE_MAX, &t, &begin));
        if (begin + t.nbytes > *end) *end = begin + t.nbytes;
    }
    return PQ_OK;
}

// A .zst file's safetensors image into f->heap: the 8-byte length, the
// header (validated), then exactly the bytes its tensors account for; a
// stream that holds more is refused without decompressing the rest.
static pq_status read_zst(st_file *f) {
    const char *fn = f->path;
    pq_zstd_reader *z = NULL;
    uint8_t *buf = NULL;
    size_t cap = 0, len = 0, got;
    json_t *h = NULL;
    pq_status s;
    PQ_TRY(pq_zstd_reader_open(fn, &z));
    uint64_t declared = pq_zstd_reader_declared(z), n = 0, end;
    PQ_CHECK_GOTO(declared != UINT64_MAX && declared > MAX_ZSTD_BYTES, s, PQ_ERR_FORMAT,
                  "%s: zstd frame declares %llu bytes, more than the %llu allowed", fn, (unsigned long long)declared,
                  (unsigned long long)MAX_ZSTD_BYTES);
    PQ_TRY_GOTO(s, fill(z, fn, &buf, &cap, &len, 8));
    PQ_CHECK_GOTO(len < 8, s, PQ_ERR_FORMAT, "%s: decompresses to %zu bytes, too short for the 8-byte header length",
                  fn, len);
    for (int i = 7; i >= 0; i--) n = n << 8 | buf[i];
    PQ_CHECK_GOTO(n > MAX_HEADER_BYTES, s, PQ_ERR_FORMAT, "%s: header length %llu is over the %llu-byte limit", fn,
                  (unsigned long long)n, MAX_HEADER_BYTES);
    PQ_TRY_GOTO(s, fill(z, fn, &buf, &cap, &len, 8 + (size_t)n));
    PQ_CHECK_GOTO(len < 8 + n, s, PQ_ERR_FORMAT, "%s: header length %llu runs past the end of the decompressed data "
                  "(%zu bytes)", fn, (unsigned long long)n, len);
    PQ_TRY_GOTO(s, load_header(fn, buf + 8, n, &h));
    PQ_TRY_GOTO(s, header_data_end(fn, h, &end));
    // weights compress ~1.1-1.5x; a stream claiming to expand more than
    // MAX_ZSTD_RATIO-fold (past a small floor) is a bomb, not a checkpoint
    uint64_t disk = pq_zstd_reader_file_bytes(z),
             limit = disk < MAX_ZSTD_BYTES / MAX_ZSTD_RATIO ? disk * MAX_ZSTD_RATIO : MAX_ZSTD_BYTES;
    if (limit < MIN_ZSTD_CAP) limit = MIN_ZSTD_CAP;
    PQ_CHECK_GOTO(end > limit - 8 - n, s, PQ_ERR_FORMAT, "%s: the header's tensors need %llu bytes, more than %d x the "
                  "%llu-byte compressed file (or %llu bytes)", fn, (unsigned long long)end, MAX_ZSTD_RATIO,
                  (unsigned long long)disk, (unsigned long long)limit);
    size_t total = 8 + (size_t)n + (size_t)end;
    PQ_TRY_GOTO(s, fill(z, fn, &buf, &cap, &len, total));
    PQ_CHECK_GOTO(len < total, s, PQ_ERR_FORMAT, "%s: decompresses to %zu bytes, but its header's tensors need %zu", fn,
                  len, total);
    uint8_t probe;
    PQ_TRY_GOTO(s, pq_zstd_reader_read(z, &probe, 1, &got));
    PQ_CHECK_GOTO(got, s, PQ_ERR_FORMAT, "%s: decompresses to more than the %zu bytes its header accounts for", fn,
                  total);
    f->heap = buf;
    f->base = buf;
    f->len = total;
    f->disk_bytes = pq_zstd_reader_disk_bytes(z);
    buf = NULL;
done:
    json_decref(h);
    free(buf);
    pq_zstd_reader_free(z);
    return s;
}

// Opens one safetensors file (plain or .zst) as the next file of st.
static pq_status add_file(pq_st *st, const char *path) {
    st_file *f = new_file(st, path);
    PQ_FAIL_IF(!f, PQ_ERR_NOMEM, "%s: out of memory", path);
    PQ_TRY(ends_with(path, ".zst") ? read_zst(f) : map_plain(f));
    return add_image(st, st->nfiles - 1);
}

static int cmp_name_ptr(const void *a, const void *b) {
    return strcmp((*(const pq_tensor *const *)a)->name, (*(const pq_tensor *const *)b)->name);
}

// Builds the name index and refuses a name that two shards both hold.
static pq_status index_names(pq_st *st) {
    st->by_name = malloc((size_t)(st->count + 1) * sizeof *st->by_name);
    PQ_FAIL_IF(!st->by_name, PQ_ERR_NOMEM, "%s: out of memory", st->path);
    for (int i = 0; i < st->count; i++) st->by_name[i] = &st->t[i];
    qsort(st->by_name, (size_t)st->count, sizeof *st->by_name, cmp_name_ptr);
    for (int i = 1; i < st->count; i++) {
        const pq_tensor *a = st->by_name[i - 1], *b = st->by_name[i];
        PQ_FAIL_IF(strcmp(a->name, b->name) == 0, PQ_ERR_FORMAT, "%s: tensor '%.200s' is in both %s and %s",
                   st->path, a->name, st->files[a->file].path, st->files[b->file].path);
    }
    return PQ_OK;
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// The shards named by a weight_map (sorted, unique) into *out (borrowed
// strings); each must be a file name in the index's directory.
static pq_status list_shards(const char *path, json_t *wm, const char ***out, int *n) {
    size_t cap = json_object_size(wm);
    const char **names = malloc((cap + 1) * sizeof *names);
    PQ_FAIL_IF(!names, PQ_ERR_NOMEM, "%s: out of memory", path);
    int k = 0;
    const char *key;
    json_t *v;
    json_object_foreach(wm, key, v) {
        const char *s = json_string_value(v);
        if (!s || !*s || strchr(s, '/') || strcmp(s, ".") == 0 || strcmp(s, "..") == 0) {
            free(names);
            return PQ_FAIL(PQ_ERR_FORMAT,
                           "%s: weight_map entry '%.200s' is not a file name in the same directory", path, key);
        }
        names[k++] = s;
    }
    qsort(names, (size_t)k, sizeof *names, cmp_str_ptr);
    int u = 0;
    for (int i = 0; i < k; i++)
        if (u == 0 || strcmp(names[u - 1], names[i]) != 0) names[u++] = names[i];
    *out = names;
    *n = u;
    return PQ_OK;
}

// Opens every shard of an index (a shard may also be stored as "<shard>.zst")
// and checks that each listed tensor is in the shard the index names.
static pq_status open_index(pq_st *st, const char *path) {
    pq_status s = PQ_OK;
    char *text = NULL, dir[PATH_CAP], full[PATH_CAP], zst[PATH_CAP];
    const char **shards = NULL;
    int nshards = 0;
    size_t len;
    json_error_t err;
    PQ_TRY(pq_file_read(path, MAX_INDEX_BYTES, &text, &len));
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    free(text);
    PQ_FAIL_IF(!root, PQ_ERR_FORMAT, "%s: not valid JSON: %s (line %d column %d)", path, err.text, err.line,
               err.column);
    json_t *wm = json_object_get(root, "weight_map");
    PQ_CHECK_GOTO(!json_is_object(wm), s, PQ_ERR_FORMAT, "%s: no \"weight_map\" object", path);
    PQ_CHECK_GOTO(json_object_size(wm) == 0, s, PQ_ERR_FORMAT, "%s: weight_map is empty", path);
    PQ_TRY_GOTO(s, list_shards(path, wm, &shards, &nshards));
    PQ_TRY_GOTO(s, pq_path_dir(dir, sizeof dir, path));
    for (int i = 0; i < nshards; i++) {
        PQ_TRY_GOTO(s, pq_path_join(full, sizeof full, dir, shards[i]));
        int n = snprintf(zst, sizeof zst, "%s.zst", full);
        int use_zst = !pq_path_exists(full) && n > 0 && (size_t)n < sizeof zst && pq_path_exists(zst);
        s = add_file(st, use_zst ? zst : full);
        if (s != PQ_OK) {
            s = pq_fail_context(s, "%s", path);
            goto done;
        }
    }
    PQ_TRY_GOTO(s, index_names(st));
    const char *key;
    json_t *v;
    json_object_foreach(wm, key, v) {
        const pq_tensor *t = pq_st_find(st, key);
        const char *want = json_string_value(v);
        PQ_CHECK_GOTO(!t, s, PQ_ERR_FORMAT, "%s: tensor '%.200s' listed in weight_map is not in %s", path, key,
                      want);
        // files were opened in the order of the sorted shard list
        PQ_CHECK_GOTO(strcmp(shards[t->file], want) != 0, s, PQ_ERR_FORMAT,
                      "%s: tensor '%.200s' is listed in %s but stored in %s", path, key, want, shards[t->file]);
    }
    // the index and the shards agree both ways: every tensor a shard holds is listed
    for (int i = 0; i < st->count; i++)
        PQ_CHECK_GOTO(!json_object_get(wm, st->t[i].name), s, PQ_ERR_FORMAT,
                      "%s: tensor '%.200s' is in %s but not in weight_map", path, st->t[i].name,
                      shards[st->t[i].file]);
done:
    free(shards);
    json_decref(root);
    return s;
}

pq_status pq_st_open(const char *path, pq_st **out) {
    PQ_FAIL_IF(!out, PQ_ERR_ARG, "pq_st_open: NULL out");
    *out = NULL;
    PQ_FAIL_IF(!path, PQ_ERR_ARG, "pq_st_open: NULL path");
    static const char *const in_dir[] = {"model.safetensors", "model.safetensors.zst",
                                         "model.safetensors.index.json"};
    char chosen[PATH_CAP];
    PQ_FAIL_IF(strlen(path) >= sizeof chosen, PQ_ERR_IO, "%s: path longer than %d bytes", path, PATH_CAP - 1);
    snprintf(chosen, sizeof chosen, "%s", path);
    if (pq_dir_exists(path)) {
        int found = 0;
        for (int i = 0; i < 3 && !found; i++) {
            PQ_TRY(pq_path_join(chosen, sizeof chosen, path, in_dir[i]));
            found = pq_path_exists(chosen); // a FIFO or a dangling link is refused by name, not passed over
        }
        PQ_FAIL_IF(!found, PQ_ERR_IO, "%s: directory has no model.safetensors, .safetensors.zst or .index.json",
                   path);
    }
    pq_st *st = calloc(1, sizeof *st);
    PQ_FAIL_IF(!st, PQ_ERR_NOMEM, "%s: out of memory", path);
    pq_status s = PQ_OK;
    st->path = strdup(chosen);
    PQ_CHECK_GOTO(!st->path, s, PQ_ERR_NOMEM, "%s: out of memory", path);
    if (ends_with(chosen, ".json")) {
        PQ_TRY_GOTO(s, open_index(st, chosen));
    } else {
        PQ_TRY_GOTO(s, add_file(st, chosen));
        PQ_TRY_GOTO(s, index_names(st));
    }
    *out = st;
    return PQ_OK;
done:
    pq_st_close(st);
    return s;
}

pq_status pq_st_open_buffer(const void *data, size_t len, const char *name, pq_st **out) {
    PQ_FAIL_IF(!out, PQ_ERR_ARG, "pq_st_open_buffer: NULL out");
    *out = NULL;
    if (!name) name = "<buffer>";
    PQ_FAIL_IF(!data && len, PQ_ERR_ARG, "%s: NULL data", name);
    pq_st *st = calloc(1, sizeof *st);
    PQ_FAIL_IF(!st, PQ_ERR_NOMEM, "%s: out of memory", name);
    pq_status s = PQ_OK;
    st->path = strdup(name);
    st_file *f = st->path ? new_file(st, name) : NULL;
    PQ_CHECK_GOTO(!f, s, PQ_ERR_NOMEM, "%s: out of memory", name);
    f->base = data;
    f->len = len;
    f->disk_bytes = len;
    PQ_TRY_GOTO(s, add_image(st, 0));
    PQ_TRY_GOTO(s, index_names(st));
    *out = st;
    return PQ_OK;
done:
    pq_st_close(st);
    return s;
}

pq_status pq_st_open_view(const char *source, uint64_t source_bytes, const pq_tensor *tensors, int n, pq_st **out) {
    PQ_FAIL_IF(!out || !source || n < 0 || (n && !tensors), PQ_ERR_ARG, "pq_st_open_view: bad arguments");
    *out = NULL;
    size_t name_bytes = 0;
    for (int i = 0; i < n; i++) name_bytes += strlen(tensors[i].name) + 1;
    pq_st *st = calloc(1, sizeof *st);
    PQ_FAIL_IF(!st, PQ_ERR_NOMEM, "%s: out of memory", source);
    pq_status s = PQ_OK;
    st->path = strdup(source);
    st->t = malloc((size_t)(n + 1) * sizeof *st->t);
    st->view_names = malloc(name_bytes + 1);
    st_file *f = st->path && st->t && st->view_names ? new_file(st, source) : NULL;
    PQ_CHECK_GOTO(!f, s, PQ_ERR_NOMEM, "%s: out of memory", source);
    f->len = (size_t)source_bytes;
    f->disk_bytes = source_bytes;
    char *names = st->view_names;
    for (int i = 0; i < n; i++) {
        pq_tensor t = tensors[i];
        uint64_t numel = 1;
        int ok = t.ndim >= 0 && t.ndim <= PQ_MAX_DIMS && (unsigned)t.dtype < PQ_DT_COUNT;
        for (int d = 0; ok && d < t.ndim; d++) ok = t.shape[d] >= 0 && !__builtin_mul_overflow(numel, (uint64_t)t.shape[d], &numel);
        ok = ok && (int64_t)numel == t.numel && t.nbytes == numel * dtypes[t.dtype].size && (t.data || !t.nbytes);
        PQ_CHECK_GOTO(!ok, s, PQ_ERR_ARG, "%s: tensor '%.200s': inconsistent shape, dtype or size", source, t.name);
        size_t len = strlen(t.name) + 1;
        memcpy(names, t.name, len);
        t.name = names;
        names += len;
        t.file = 0;
        st->t[st->count++] = t;
    }
    PQ_TRY_GOTO(s, index_names(st));
    *out = st;
    return PQ_OK;
done:
    pq_st_close(st);
    return s;
}

void pq_st_close(pq_st *st) {
    if (!st) return;
    for (int i = 0; i < st->nfiles; i++) {
        st_file *f = &st->files[i];
        if (f->map) pq_cleanup_drop_map(f->cleanup), munmap(f->map, f->len);
        free(f->heap);
        pq_free(f->copies);
        json_decref(f->header);
        free(f->path);
    }
    free(st->files);
    free(st->t);
    free(st->by_name);
    free(st->view_names);
    free(st->path);
    free(st);
}

int pq_st_count(const pq_st *st) { return st ? st->count : 0; }

const pq_tensor *pq_st_at(const pq_st *st, int i) { return st && i >= 0 && i < st->count ? &st->t[i] : NULL; }

int pq_st_index(const pq_st *st, const pq_tensor *t) {
    return st && t >= st->t && t < st->t + st->count ? (int)(t - st->t) : -1;
}

static int cmp_key_name(const void *key, const void *elem) {
    return strcmp(key, (*(const pq_tensor *const *)elem)->name);
}

const pq_tensor *pq_st_find(const pq_st *st, const char *name) {
    if (!st || !name || !st->count) return NULL;
    const pq_tensor *const *p =
        bsearch(name, st->by_name, (size_t)st->count, sizeof *st->by_name, cmp_key_name);
    return p ? *p : NULL;
}

const char *pq_st_metadata(const pq_st *st, const char *key) {
    return st && st->meta && key ? json_string_value(json_object_get(st->meta, key)) : NULL;
}

int pq_st_file_count(const pq_st *st) { return st ? st->nfiles : 0; }

const char *pq_st_file_path(const pq_st *st, int file) {
    return st && file >= 0 && file < st->nfiles ? st->files[file].path : NULL;
}

uint64_t pq_st_file_disk_bytes(const pq_st *st, int file) {
    return st && file >= 0 && file < st->nfiles ? st->files[file].disk_bytes : 0;
}

uint64_t pq_st_file_raw_bytes(const pq_st *st, int file) {
    return st && file >= 0 && file < st->nfiles ? st->files[file].len : 0;
}

pq_status pq_st_sha256(const pq_st *st, char hex[65]) {
    pq_sha256 h;
    pq_sha256_init(&h);
    for (int f = 0; f < st->nfiles; f++) {
        const st_file *sf = &st->files[f];
        uint64_t before = h.len;
        if (sf->heap) pq_sha256_update(&h, sf->base, sf->len);
        else PQ_TRY(pq_sha256_file(&h, sf->path));
        PQ_FAIL_IF(h.len - before != sf->len, PQ_ERR_IO, "%s: changed on disk while pq was reading it (%llu bytes "
                   "now, %zu when it was opened)", sf->path, (unsigned long long)(h.len - before), sf->len);
    }
    pq_sha256_hex(&h, hex);
    return PQ_OK;
}

pq_status pq_st_expect(const pq_st *st, const char *name, pq_dtype dtype, int ndim, const int64_t *shape,
                       const pq_tensor **out) {
    if (out) *out = NULL;
    PQ_FAIL_IF(!st || !name || ndim < 0 || ndim > PQ_MAX_DIMS || (ndim && !shape), PQ_ERR_ARG,
               "pq_st_expect: bad arguments");
    const pq_tensor *t = pq_st_find(st, name);
    PQ_FAIL_IF(!t, PQ_ERR_FORMAT, "%s: tensor '%.200s' not found", st->path, name);
    const char *fn = st->files[t->file].path;
    PQ_FAIL_IF(t->dtype != dtype, PQ_ERR_FORMAT, "%s: tensor '%.200s': dtype %s, expected %s", fn, name,
               pq_dtype_name(t->dtype), pq_dtype_name(dtype));
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    char a[160], b[160];
    PQ_FAIL_IF(!same, PQ_ERR_FORMAT, "%s: tensor '%.200s': shape %s, expected %s", fn, name,
               shape_str(a, sizeof a, t->ndim, t->shape), shape_str(b, sizeof b, ndim, shape));
    if (out) *out = t;
    return PQ_OK;
}
