// tests/test_safetensors.c — the formats/ file layer: fileio, zstd I/O, the
// safetensors reader (plain, .zst, sharded, directory) and the atomic writer.
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/half.h"
#include "formats/fileio.h"
#include "formats/safetensors.h"
#include "formats/zstd_io.h"
#include "tests/test.h"

static char tmpdir[256];

// tmpdir/name in one of 8 rotating buffers
static const char *tp(const char *name) {
    static char buf[8][512];
    static int slot;
    char *b = buf[slot++ & 7];
    snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
    return b;
}

static int contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

// for a check's description: the error of a call that should have worked
static const char *why(pq_status s) { return s == PQ_OK ? "ok" : pq_last_error(); }

static void write_bytes(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    if (len) fwrite(data, 1, len, f);
    fclose(f);
}

// malloc'd contents of path (NULL if unreadable)
static uint8_t *slurp(const char *path, size_t *len) {
    char *d = NULL;
    *len = 0;
    return pq_file_read(path, (size_t)1 << 30, &d, len) == PQ_OK ? (uint8_t *)d : NULL;
}

static void fill_random(uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(pq_test_u64() >> 56);
}

// Writes an 8-byte length + header (as given, unpadded) + data_len pattern bytes.
static const char *write_raw(const char *name, const char *header, size_t data_len) {
    size_t hl = strlen(header), len = 8 + hl + data_len;
    uint8_t *b = malloc(len);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    for (size_t i = 0; i < data_len; i++) b[8 + hl + i] = (uint8_t)(i * 7 + 1);
    const char *path = tp(name);
    write_bytes(path, b, len);
    free(b);
    return path;
}

// The open of path fails with code, returns NULL, and the message names the file.
static void expect_reject(const char *path, const char *fname, pq_status code, const char *what) {
    pq_st *st = (pq_st *)1;
    pq_status s = pq_st_open(path, &st);
    PQ_CHECK(s == code && st == NULL && contains(pq_last_error(), fname), "rejects %s (%s): %s", what,
             pq_status_name(code), pq_last_error());
    if (s == PQ_OK) pq_st_close(st);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

// ---- fileio ---------------------------------------------------------------

static void test_fileio(void) {
    char out[64];
    PQ_CHECK(pq_path_join(out, sizeof out, "a/b/", "c") == PQ_OK && strcmp(out, "a/b/c") == 0,
             "path_join strips a trailing slash: %s", out);
    PQ_CHECK(pq_path_join(out, sizeof out, "/", "x") == PQ_OK && strcmp(out, "/x") == 0,
             "path_join keeps the root: %s", out);
    PQ_CHECK(pq_path_join(out, sizeof out, "", "x") == PQ_OK && strcmp(out, "x") == 0,
             "path_join with an empty dir gives the name: %s", out);
    PQ_CHECK(pq_path_join(out, 8, "abcdef", "ghij") == PQ_ERR_ARG,
             "path_join refuses a path that does not fit");
    char d1[16], d2[16], d3[16], d4[4];
    PQ_CHECK(pq_path_dir(d1, sizeof d1, "a/b/c") == PQ_OK && strcmp(d1, "a/b") == 0 &&
                 pq_path_dir(d2, sizeof d2, "c") == PQ_OK && strcmp(d2, ".") == 0 &&
                 pq_path_dir(d3, sizeof d3, "/c") == PQ_OK && strcmp(d3, "/") == 0 &&
                 pq_path_dir(d4, sizeof d4, "abcdef/x") == PQ_ERR_ARG,
             "path_dir: %s %s %s", d1, d2, d3);

    const char *p = tp("atomic.txt");
    PQ_CHECK(pq_file_write_atomic(p, "hello", 5) == PQ_OK && pq_file_exists(p) &&
                 !pq_file_exists(tp("atomic.txt.tmp")),
             "write_atomic leaves the file and no .tmp");
    char *d = NULL;
    size_t len = 0;
    PQ_CHECK(pq_file_read(p, 100, &d, &len) == PQ_OK && len == 5 && memcmp(d, "hello", 6) == 0,
             "file_read returns the bytes, NUL-terminated");
    free(d);
    d = (char *)1;
    PQ_CHECK(pq_file_read(p, 4, &d, &len) == PQ_ERR_IO && d == NULL && contains(pq_last_error(), "atomic.txt"),
             "file_read refuses a file over max_bytes: %s", pq_last_error());
    PQ_CHECK(pq_file_read(tp("missing.txt"), 100, &d, &len) == PQ_ERR_IO &&
                 contains(pq_last_error(), "missing.txt"),
             "file_read of a missing file names it: %s", pq_last_error());
    PQ_CHECK(pq_file_read(tmpdir, 100, &d, &len) == PQ_ERR_IO, "file_read of a directory fails: %s",
             pq_last_error());
    PQ_CHECK(pq_file_copy_atomic(p, tp("copy.txt")) == PQ_OK &&
                 pq_file_read(tp("copy.txt"), 100, &d, &len) == PQ_OK && len == 5 && memcmp(d, "hello", 5) == 0,
             "copy_atomic copies the bytes");
    free(d);
    PQ_CHECK(pq_file_copy_atomic(tp("missing.txt"), tp("copy2.txt")) == PQ_ERR_IO &&
                 !pq_file_exists(tp("copy2.txt")),
             "copy_atomic of a missing source fails and creates nothing");
    PQ_CHECK(pq_file_write_atomic(tp("nodir/x.txt"), "x", 1) == PQ_ERR_IO &&
                 contains(pq_last_error(), "x.txt.tmp"),
             "write_atomic into a missing directory names the file: %s", pq_last_error());
    PQ_CHECK(pq_dir_exists(tmpdir) && !pq_dir_exists(p) && !pq_file_exists(tmpdir),
             "exists checks tell files from directories");
    PQ_CHECK(pq_fsync_dir(tmpdir) == PQ_OK && pq_fsync_dir(tp("nodir")) == PQ_ERR_IO, "fsync_dir");
}

// ---- writer / reader round trip ------------------------------------------

typedef struct {
    const char *name;
    pq_dtype dt;
    int ndim;
    int64_t shape[4];
} spec;

static spec specs[] = {
    {"b.f32", PQ_DT_F32, 2, {3, 4}},     {"a.f16", PQ_DT_F16, 1, {5}},     {"c.bf16", PQ_DT_BF16, 3, {2, 3, 4}},
    {"d.i8", PQ_DT_I8, 1, {7}},          {"e.empty", PQ_DT_U8, 2, {0, 3}}, {"f.scalar", PQ_DT_I64, 0, {0}},
    {"g.bool", PQ_DT_BOOL, 1, {3}},      {"h.f64", PQ_DT_F64, 1, {2}},     {"Z.upper", PQ_DT_U16, 1, {3}},
    {"i.fp8", PQ_DT_F8_E4M3, 2, {2, 2}}, {"j.i32", PQ_DT_I32, 1, {1}},     {"k.u64", PQ_DT_U64, 1, {2}},
};
enum { NSPEC = sizeof specs / sizeof specs[0] };
static uint8_t *spec_data[NSPEC];
static size_t spec_bytes[NSPEC];

static void make_specs(void) {
    for (int i = 0; i < NSPEC; i++) {
        size_t n = pq_dtype_size(specs[i].dt);
        for (int d = 0; d < specs[i].ndim; d++) n *= (size_t)specs[i].shape[d];
        spec_bytes[i] = n;
        spec_data[i] = malloc(n + 1);
        fill_random(spec_data[i], n);
    }
    // real values where the dtype is a float, so the oracle check can read them
    float *f = (float *)spec_data[0];
    for (int i = 0; i < 12; i++) f[i] = pq_test_normal();
    uint16_t *h = (uint16_t *)spec_data[1];
    for (int i = 0; i < 5; i++) h[i] = pq_f32_to_fp16(pq_test_normal());
    for (int i = 0; i < 3; i++) spec_data[6][i] = (uint8_t)(i & 1);
}

// Declares every spec into a new writer for path (with metadata).
static pq_st_writer *spec_writer(const char *path) {
    pq_st_writer *w = NULL;
    if (pq_st_writer_create(path, &w) != PQ_OK) return NULL;
    pq_st_writer_set_metadata(w, "format", "pt");
    pq_st_writer_set_metadata(w, "pq.note", "h\xc3\xa9llo \"quoted\"\nline");
    for (int i = 0; i < NSPEC; i++)
        pq_st_writer_declare(w, specs[i].name, specs[i].dt, specs[i].ndim, specs[i].shape);
    return w;
}

static pq_status put_specs(pq_st_writer *w, int from, int to) {
    for (int i = to - 1; i >= from; i--) { // reverse order: puts need not follow the layout
        pq_status s = pq_st_writer_put(w, specs[i].name, spec_data[i], spec_bytes[i]);
        if (s != PQ_OK) return s;
    }
    return PQ_OK;
}

// All specs present in st with the right dtype, shape and bytes.
static int specs_match(const pq_st *st) {
    int ok = pq_st_count(st) == NSPEC;
    for (int i = 0; ok && i < NSPEC; i++) {
        const pq_tensor *t = NULL;
        ok = pq_st_expect(st, specs[i].name, specs[i].dt, specs[i].ndim, specs[i].shape, &t) == PQ_OK &&
             t->nbytes == spec_bytes[i] && (t->nbytes == 0 || memcmp(t->data, spec_data[i], t->nbytes) == 0);
        if (!ok) printf("    mismatch at %s: %s\n", specs[i].name, pq_last_error());
    }
    return ok;
}

static uint64_t le64(const uint8_t *b) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | b[i];
    return n;
}

static void test_roundtrip(void) {
    const char *path = tp("rt.safetensors");
    pq_st_writer *w = spec_writer(path);
    PQ_CHECK(w && pq_st_writer_begin(w) == PQ_OK, "writer begins");
    PQ_CHECK(pq_file_exists(pq_st_writer_tmp_path(w)) && !pq_file_exists(path), "begin writes only the .tmp");
    PQ_CHECK(put_specs(w, 0, NSPEC) == PQ_OK && pq_st_writer_sync(w) == PQ_OK,
             "puts in reverse order and syncs");
    pq_status s = pq_st_writer_commit(w, 0);
    PQ_CHECK(s == PQ_OK, "commit: %s", why(s));
    PQ_CHECK(pq_file_exists(path) && !pq_file_exists(tp("rt.safetensors.tmp")) &&
                 !pq_file_exists(tp("rt.safetensors.zst")),
             "commit leaves the final file only");
    PQ_CHECK(pq_st_writer_put(w, specs[0].name, spec_data[0], spec_bytes[0]) == PQ_ERR_ARG,
             "put after commit is refused");
    pq_st_writer_free(w);
    PQ_CHECK(pq_file_exists(path), "free after commit keeps the file");

    // the layout the Hugging Face library writes
    size_t len;
    uint8_t *raw = slurp(path, &len);
    uint64_t n = raw ? le64(raw) : 0;
    PQ_CHECK(raw && n % 8 == 0 && 8 + n <= len, "header length %llu is a multiple of 8", (unsigned long long)n);
    PQ_CHECK(raw && memcmp(raw + 8, "{\"__metadata__\":{\"format\":\"pt\",", 31) == 0,
             "header is compact JSON with __metadata__ first");
    size_t end = raw ? 8 + n : 0;
    while (end > 8 && raw[end - 1] == ' ') end--;
    PQ_CHECK(raw && end > 8 && raw[end - 1] == '}' && 8 + n - end < 8, "header padded with at most 7 spaces");
    size_t total = 0;
    for (int i = 0; i < NSPEC; i++) total += spec_bytes[i];
    PQ_CHECK(len == 8 + n + total, "data back to back: %zu bytes = 8 + %llu + %zu", len, (unsigned long long)n,
             total);

    pq_st *st = NULL;
    s = pq_st_open(path, &st);
    PQ_CHECK(s == PQ_OK, "reopen: %s", why(s));
    PQ_CHECK(st && specs_match(st), "every tensor comes back with its dtype, shape and bytes");
    PQ_CHECK(st && strcmp(pq_st_metadata(st, "format"), "pt") == 0 &&
                 strcmp(pq_st_metadata(st, "pq.note"), "h\xc3\xa9llo \"quoted\"\nline") == 0 &&
                 !pq_st_metadata(st, "nope"),
             "metadata comes back (escapes and UTF-8 too)");
    int sorted = 1;
    uint64_t expect_off = 8 + n;
    for (int i = 0; st && i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        if (i > 0 && strcmp(pq_st_at(st, i - 1)->name, t->name) >= 0) sorted = 0;
        if (t->offset != expect_off) sorted = 0;
        expect_off += t->nbytes;
    }
    PQ_CHECK(sorted, "tensors laid out in byte-wise name order, back to back");
    PQ_CHECK(st && pq_st_at(st, 0) && strcmp(pq_st_at(st, 0)->name, "Z.upper") == 0 && !pq_st_at(st, NSPEC),
             "at() follows the layout and is NULL past the end");
    PQ_CHECK(st && pq_st_file_count(st) == 1 && pq_st_file_raw_bytes(st, 0) == len &&
                 pq_st_file_disk_bytes(st, 0) == len && strcmp(pq_st_file_path(st, 0), path) == 0 &&
                 !pq_st_file_path(st, 1),
             "file accessors");
    PQ_CHECK(st && !pq_st_find(st, "nope") && pq_st_find(st, "f.scalar")->numel == 1 &&
                 pq_st_find(st, "e.empty")->numel == 0,
             "find; a scalar has one element, [0,3] none");
    const pq_tensor *t = (const pq_tensor *)1;
    int64_t sh[2] = {3, 4}, bad[2] = {4, 3};
    PQ_CHECK(st && pq_st_expect(st, "b.f32", PQ_DT_F16, 2, sh, &t) == PQ_ERR_FORMAT && !t &&
                 contains(pq_last_error(), "rt.safetensors") &&
                 contains(pq_last_error(), "dtype F32, expected F16"),
             "expect: wrong dtype: %s", pq_last_error());
    PQ_CHECK(st && pq_st_expect(st, "b.f32", PQ_DT_F32, 2, bad, &t) == PQ_ERR_FORMAT &&
                 contains(pq_last_error(), "shape [3,4], expected [4,3]"),
             "expect: wrong shape: %s", pq_last_error());
    PQ_CHECK(st && pq_st_expect(st, "nope", PQ_DT_F32, 2, sh, &t) == PQ_ERR_FORMAT &&
                 contains(pq_last_error(), "'nope' not found"),
             "expect: absent: %s", pq_last_error());
    pq_st_close(st);

    pq_st *sb = NULL;
    PQ_CHECK(raw && pq_st_open_buffer(raw, len, "mem.safetensors", &sb) == PQ_OK && specs_match(sb),
             "open_buffer reads the same image");
    pq_st_close(sb);
    free(raw);
    pq_st_close(NULL);
    pq_st_writer_free(NULL);

    // the empty set is a valid file, too
    w = NULL;
    PQ_CHECK(pq_st_writer_create(tp("empty.safetensors"), &w) == PQ_OK && pq_st_writer_begin(w) == PQ_OK &&
                 pq_st_writer_commit(w, 0) == PQ_OK && pq_st_open(tp("empty.safetensors"), &st) == PQ_OK &&
                 pq_st_count(st) == 0 && !pq_st_metadata(st, "format") && !pq_st_find(st, "x"),
             "a file with no tensors and no metadata round-trips");
    pq_st_close(st);
    pq_st_writer_free(w);

    pq_dtype dt;
    PQ_CHECK(pq_dtype_parse("F8_E5M2", &dt) == PQ_OK && dt == PQ_DT_F8_E5M2 &&
                 pq_dtype_parse("F4", &dt) == PQ_ERR_FORMAT && pq_dtype_size(PQ_DT_BF16) == 2 &&
                 strcmp(pq_dtype_name(PQ_DT_BOOL), "BOOL") == 0 && pq_dtype_size(PQ_DT_COUNT) == 0,
             "dtype names and sizes");
}

static void test_fixture(void) {
    const char *path = pq_test_path("fixtures/stories260K/model.safetensors");
    pq_st *st = NULL;
    pq_status s = pq_st_open(path, &st);
    PQ_CHECK(s == PQ_OK && pq_st_count(st) == 47, "fixture opens with 47 tensors: %s", why(s));
    int all_f16 = st != NULL;
    for (int i = 0; st && i < pq_st_count(st); i++) all_f16 &= pq_st_at(st, i)->dtype == PQ_DT_F16;
    PQ_CHECK(all_f16, "fixture tensors are all F16");
    int64_t emb[2] = {512, 64};
    PQ_CHECK(st && pq_st_expect(st, "model.embed_tokens.weight", PQ_DT_F16, 2, emb, NULL) == PQ_OK &&
                 pq_st_find(st, "model.layers.4.mlp.down_proj.weight") && !pq_st_find(st, "lm_head.weight"),
             "fixture names and shapes");
    pq_st_close(st);
    st = NULL;
    PQ_CHECK(pq_st_open(pq_test_path("fixtures/stories260K"), &st) == PQ_OK && pq_st_count(st) == 47 &&
                 contains(pq_st_file_path(st, 0), "model.safetensors"),
             "a model directory opens its model.safetensors");
    pq_st_close(st);
}

// ---- zstd -----------------------------------------------------------------

static void test_zstd(void) {
    const char *path = tp("z.safetensors"), *zpath = tp("z.safetensors.zst");
    pq_st_writer *w = NULL;
    int64_t big[2] = {256, 64};
    uint8_t *zeros = calloc(256 * 64, 4);
    int ok = pq_st_writer_create(path, &w) == PQ_OK && pq_st_writer_set_metadata(w, "k", "v") == PQ_OK &&
             pq_st_writer_declare(w, "small", PQ_DT_F32, 2, specs[0].shape) == PQ_OK &&
             pq_st_writer_declare(w, "zeros", PQ_DT_F32, 2, big) == PQ_OK && pq_st_writer_begin(w) == PQ_OK &&
             pq_st_writer_put(w, "small", spec_data[0], spec_bytes[0]) == PQ_OK &&
             pq_st_writer_put(w, "zeros", zeros, 256 * 64 * 4) == PQ_OK;
    PQ_CHECK(ok && pq_st_writer_commit(w, 99) == PQ_ERR_ARG, "commit refuses zstd level 99");
    pq_status s = ok ? pq_st_writer_commit(w, 3) : PQ_ERR_ARG;
    PQ_CHECK(s == PQ_OK && pq_file_exists(path) && pq_file_exists(zpath) &&
                 !pq_file_exists(tp("z.safetensors.zst.tmp")),
             "commit with zstd writes the file and its .zst: %s", why(s));
    pq_st_writer_free(w);

    size_t plen, zlen, dlen = 0;
    uint8_t *plain = slurp(path, &plen), *z = slurp(zpath, &zlen), *dec = NULL;
    uint64_t disk = 0;
    pq_zstd_reader *zr = NULL;
    dec = malloc(plen + 1);
    int rd = pq_zstd_reader_open(zpath, &zr) == PQ_OK && pq_zstd_reader_declared(zr) == plen &&
             pq_zstd_reader_read(zr, dec, plen + 1, &dlen) == PQ_OK;
    if (rd) disk = pq_zstd_reader_disk_bytes(zr);
    PQ_CHECK(rd && dlen == plen && memcmp(dec, plain, plen) == 0 && disk == zlen,
             "the .zst decompresses to exactly the plain file (%zu -> %zu bytes)", plen, zlen);
    pq_zstd_reader_free(zr);
    free(dec);
    // frame header: magic, then a descriptor with the content-size field and the checksum flag
    PQ_CHECK(z && zlen > 8 && le64(z) % ((uint64_t)1 << 32) == 0xFD2FB528u && (z[4] & 0x04) &&
                 (z[4] >> 6 || (z[4] & 0x20)),
             "a standard zstd frame with checksum and content size");

    pq_st *st = NULL;
    PQ_CHECK(pq_st_open(zpath, &st) == PQ_OK && pq_st_count(st) == 2 && pq_st_file_disk_bytes(st, 0) == zlen &&
                 pq_st_file_raw_bytes(st, 0) == plen && strcmp(pq_st_metadata(st, "k"), "v") == 0 &&
                 memcmp(pq_st_find(st, "small")->data, spec_data[0], spec_bytes[0]) == 0,
             "the .zst opens with the same tensors (%zu of %zu bytes on disk)", zlen, plen);
    pq_st_close(st);

    // a directory holding only the .zst picks it
    char dir[512], f[600];
    snprintf(dir, sizeof dir, "%s", tp("zdir"));
    mkdir(dir, 0755);
    snprintf(f, sizeof f, "%s/model.safetensors.zst", dir);
    write_bytes(f, z, zlen);
    st = NULL;
    PQ_CHECK(pq_st_open(dir, &st) == PQ_OK && pq_st_count(st) == 2 && contains(pq_st_file_path(st, 0), ".zst"),
             "a directory with only model.safetensors.zst opens it");
    pq_st_close(st);

    uint8_t *bad = malloc(zlen);
    memcpy(bad, z, zlen);
    bad[zlen - 1] ^= 0x55; // the last byte belongs to the checksum
    write_bytes(tp("badsum.safetensors.zst"), bad, zlen);
    expect_reject(tp("badsum.safetensors.zst"), "badsum.safetensors.zst", PQ_ERR_FORMAT,
                  "a .zst with a flipped byte");
    PQ_CHECK(contains(pq_last_error(), "checksum"), "the flipped byte is reported as a checksum error: %s",
             pq_last_error());
    memcpy(bad, z, zlen);
    bad[zlen / 2] ^= 0xff;
    write_bytes(tp("badmid.safetensors.zst"), bad, zlen);
    expect_reject(tp("badmid.safetensors.zst"), "badmid.safetensors.zst", PQ_ERR_FORMAT,
                  "a .zst corrupted in the middle");
    write_bytes(tp("trunc.safetensors.zst"), z, zlen / 2);
    expect_reject(tp("trunc.safetensors.zst"), "trunc.safetensors.zst", PQ_ERR_FORMAT, "a truncated .zst");
    write_bytes(tp("notzstd.safetensors.zst"), plain, 64);
    expect_reject(tp("notzstd.safetensors.zst"), "notzstd.safetensors.zst", PQ_ERR_FORMAT,
                  "a .zst that is not zstd");
    write_bytes(tp("empty.safetensors.zst"), "", 0);
    expect_reject(tp("empty.safetensors.zst"), "empty.safetensors.zst", PQ_ERR_FORMAT, "an empty .zst");
    expect_reject(tp("absent.safetensors.zst"), "absent.safetensors.zst", PQ_ERR_IO, "a missing .zst");
    PQ_CHECK(pq_zstd_compress_file(tp("absent"), tp("absent.zst"), 3) == PQ_ERR_IO &&
                 !pq_file_exists(tp("absent.zst")),
             "compressing a missing file fails and writes nothing");
    free(bad);
    free(plain);
    free(z);
    free(zeros);
}

// ---- shards ---------------------------------------------------------------

static void write_shard(const char *path, const char *const *names, int n, const char *meta, int zstd_level) {
    pq_st_writer *w = NULL;
    int64_t shape[1] = {4};
    float v[4] = {1, 2, 3, 4};
    pq_st_writer_create(path, &w);
    if (meta) pq_st_writer_set_metadata(w, "shard", meta);
    for (int i = 0; i < n; i++) pq_st_writer_declare(w, names[i], PQ_DT_F32, 1, shape);
    pq_st_writer_begin(w);
    for (int i = 0; i < n; i++) pq_st_writer_put(w, names[i], v, sizeof v);
    if (pq_st_writer_commit(w, zstd_level) != PQ_OK) printf("# shard %s: %s\n", path, pq_last_error());
    pq_st_writer_free(w);
}

static const char *write_index(const char *dir, const char *name, const char *json) {
    static char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_bytes(path, json, strlen(json));
    return path;
}

static void test_sharded(void) {
    char dir[512], p[600];
    snprintf(dir, sizeof dir, "%s", tp("sharded"));
    mkdir(dir, 0755);
    static const char *const s1[] = {"a", "b"}, *const s2[] = {"c"}, *const s3[] = {"a", "d"};
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", dir);
    write_shard(p, s1, 2, "first", 0);
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
    write_shard(p, s2, 1, "second", 1);
    snprintf(p, sizeof p, "%s/dup.safetensors", dir);
    write_shard(p, s3, 2, NULL, 0);
    const char *good =
        "{\"metadata\":{\"total_size\":48},\"weight_map\":{\"c\":\"model-00002-of-00002.safetensors\","
        "\"a\":\"model-00001-of-00002.safetensors\",\"b\":\"model-00001-of-00002.safetensors\"}}";
    const char *idx = write_index(dir, "model.safetensors.index.json", good);

    pq_st *st = NULL;
    pq_status s = pq_st_open(idx, &st);
    PQ_CHECK(s == PQ_OK && pq_st_count(st) == 3 && pq_st_file_count(st) == 2, "a sharded set opens: %s",
             why(s));
    PQ_CHECK(st && pq_st_find(st, "a")->file == 0 && pq_st_find(st, "c")->file == 1 &&
                 contains(pq_st_file_path(st, 1), "model-00002-of-00002.safetensors") &&
                 ((const float *)pq_st_find(st, "c")->data)[3] == 4.0f,
             "each tensor comes from its shard");
    PQ_CHECK(st && strcmp(pq_st_metadata(st, "shard"), "first") == 0, "metadata comes from the first shard");
    pq_st_close(st);
    st = NULL;
    PQ_CHECK(pq_st_open(dir, &st) == PQ_OK && pq_st_count(st) == 3, "a directory with only an index opens it");
    pq_st_close(st);

    // a shard kept only as .zst is found
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
    char moved[640];
    snprintf(moved, sizeof moved, "%s.away", p);
    rename(p, moved);
    st = NULL;
    s = pq_st_open(idx, &st);
    PQ_CHECK(s == PQ_OK && pq_st_count(st) == 3 && contains(pq_st_file_path(st, 1), ".zst"),
             "a shard stored only as .zst is read from it: %s", why(s));
    pq_st_close(st);
    rename(moved, p);

    idx =
        write_index(dir, "missing.index.json", "{\"weight_map\":{\"a\":\"model-00003-of-00002.safetensors\"}}");
    expect_reject(idx, "model-00003-of-00002.safetensors", PQ_ERR_IO, "an index naming a missing shard");
    PQ_CHECK(contains(pq_last_error(), "missing.index.json"), "the missing-shard message names the index too");
    idx = write_index(dir, "notin.index.json",
                      "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
                      "\"zz\":\"model-00001-of-00002.safetensors\"}}");
    expect_reject(idx, "notin.index.json", PQ_ERR_FORMAT, "an index listing a tensor its shard lacks");
    PQ_CHECK(contains(pq_last_error(), "'zz'"), "the message names the tensor: %s", pq_last_error());
    idx = write_index(dir, "unlisted.index.json",
                      "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
                      "\"c\":\"model-00002-of-00002.safetensors\"}}");
    expect_reject(idx, "unlisted.index.json", PQ_ERR_FORMAT, "an index leaving out a tensor its shard holds");
    PQ_CHECK(contains(pq_last_error(), "tensor 'b' is in model-00001-of-00002.safetensors but not in weight_map"),
             "... naming it: %s", pq_last_error());
    idx =
        write_index(dir, "wrong.index.json",
                    "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
                    "\"c\":\"model-00001-of-00002.safetensors\",\"x\":\"model-00002-of-00002.safetensors\"}}");
    expect_reject(idx, "wrong.index.json", PQ_ERR_FORMAT, "an index placing a tensor in the wrong shard");
    idx = write_index(dir, "dup.index.json",
                      "{\"weight_map\":{\"b\":\"model-00001-of-00002.safetensors\","
                      "\"d\":\"dup.safetensors\"}}");
    expect_reject(idx, "dup.safetensors", PQ_ERR_FORMAT, "a tensor present in two shards");
    idx = write_index(dir, "slash.index.json",
                      "{\"weight_map\":{\"a\":\"../model-00001-of-00002.safetensors\"}}");
    expect_reject(idx, "slash.index.json", PQ_ERR_FORMAT, "a shard path outside the directory");
    idx = write_index(dir, "empty.index.json", "{\"weight_map\":{}}");
    expect_reject(idx, "empty.index.json", PQ_ERR_FORMAT, "an empty weight_map");
    idx = write_index(dir, "nomap.index.json", "{\"weight_map\":[1]}");
    expect_reject(idx, "nomap.index.json", PQ_ERR_FORMAT, "a weight_map that is not an object");
    idx = write_index(dir, "notjson.index.json", "{\"weight_map\":");
    expect_reject(idx, "notjson.index.json", PQ_ERR_FORMAT, "an index that is not JSON");
}

// ---- resume, abandon, writer misuse ---------------------------------------

// Runs fn in a child that exits without freeing its writer (a crash).
static void in_child(void (*fn)(void)) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
}

static void crash_after_half(void) {
    pq_st_writer *w = spec_writer(tp("res.safetensors"));
    if (pq_st_writer_begin(w) == PQ_OK && put_specs(w, NSPEC / 2, NSPEC) == PQ_OK) pq_st_writer_sync(w);
}

static void crash_after_header(void) {
    pq_st_writer *w = spec_writer(tp("short.safetensors"));
    pq_st_writer_begin(w);
}

static void test_resume(void) {
    // the reference: the same tensors written in one go
    pq_st_writer *w = spec_writer(tp("ref.safetensors"));
    pq_st_writer_begin(w);
    put_specs(w, 0, NSPEC);
    PQ_CHECK(pq_st_writer_commit(w, 0) == PQ_OK, "reference file written");
    pq_st_writer_free(w);

    in_child(crash_after_half);
    const char *final = tp("res.safetensors"), *tmp = tp("res.safetensors.tmp");
    PQ_CHECK(pq_file_exists(tmp) && !pq_file_exists(final),
             "an interrupted writer leaves its .tmp and no final file");

    w = NULL;
    pq_st_writer_create(final, &w);
    pq_st_writer_declare(w, "other", PQ_DT_F32, 0, NULL);
    PQ_CHECK(pq_st_writer_resume(w) == PQ_ERR_FORMAT && contains(pq_last_error(), "res.safetensors.tmp"),
             "resume refuses a .tmp longer than the declared file: %s", pq_last_error());
    pq_st_writer_free(w);
    w = spec_writer(final);
    int64_t extra[1] = {4096};
    pq_st_writer_declare(w, "zz.extra", PQ_DT_U8, 1, extra);
    PQ_CHECK(pq_st_writer_resume(w) == PQ_ERR_FORMAT && contains(pq_last_error(), "res.safetensors.tmp") &&
                 contains(pq_last_error(), "header differs"),
             "resume refuses a .tmp with a different header: %s", pq_last_error());
    pq_st_writer_free(w);
    PQ_CHECK(pq_file_exists(tmp), "a refused resume leaves the .tmp alone");

    w = spec_writer(final);
    pq_status s = pq_st_writer_resume(w);
    PQ_CHECK(s == PQ_OK, "resume reuses the identical .tmp: %s", why(s));
    PQ_CHECK(put_specs(w, 0, NSPEC / 2) == PQ_OK && pq_st_writer_commit(w, 0) == PQ_OK,
             "the rest is put and committed");
    pq_st_writer_free(w);
    size_t la, lb;
    uint8_t *a = slurp(final, &la), *b = slurp(tp("ref.safetensors"), &lb);
    PQ_CHECK(a && b && la == lb && memcmp(a, b, la) == 0,
             "the resumed file is byte-identical to a one-go write");
    free(a);
    free(b);

    w = spec_writer(tp("none.safetensors"));
    PQ_CHECK(pq_st_writer_resume(w) == PQ_ERR_IO && contains(pq_last_error(), "none.safetensors.tmp"),
             "resume without a .tmp fails: %s", pq_last_error());
    pq_st_writer_free(w);

    in_child(crash_after_header);
    w = spec_writer(tp("short.safetensors"));
    PQ_CHECK(pq_st_writer_resume(w) == PQ_OK && pq_st_writer_commit(w, 0) == PQ_ERR_FORMAT &&
                 contains(pq_last_error(), "short.safetensors.tmp"),
             "commit of a resumed .tmp missing data fails: %s", pq_last_error());
    pq_st_writer_free(w);
    PQ_CHECK(!pq_file_exists(tp("short.safetensors")) && !pq_file_exists(tp("short.safetensors.tmp")),
             "after that failure nothing is left");
}

static void test_writer_misuse(void) {
    const char *final = tp("abandon.safetensors");
    pq_st_writer *w = spec_writer(final);
    PQ_CHECK(w && pq_st_writer_put(w, "a.f16", spec_data[1], spec_bytes[1]) == PQ_ERR_ARG,
             "put before begin is refused");
    PQ_CHECK(pq_st_writer_commit(w, 0) == PQ_ERR_ARG && pq_st_writer_sync(w) == PQ_ERR_ARG,
             "commit/sync before begin are refused");
    PQ_CHECK(pq_st_writer_begin(w) == PQ_OK && put_specs(w, 1, NSPEC) == PQ_OK, "begin and put all but one");
    PQ_CHECK(pq_st_writer_begin(w) == PQ_ERR_ARG && pq_st_writer_resume(w) == PQ_ERR_ARG,
             "begin/resume twice are refused");
    PQ_CHECK(pq_st_writer_declare(w, "late", PQ_DT_F32, 0, NULL) == PQ_ERR_ARG &&
                 pq_st_writer_set_metadata(w, "late", "x") == PQ_ERR_ARG,
             "declare/metadata after begin are refused");
    PQ_CHECK(pq_st_writer_put(w, "nope", spec_data[1], 1) == PQ_ERR_ARG && contains(pq_last_error(), "'nope'"),
             "put of an undeclared tensor: %s", pq_last_error());
    PQ_CHECK(pq_st_writer_put(w, "b.f32", spec_data[0], 3) == PQ_ERR_ARG, "put with the wrong size: %s",
             pq_last_error());
    PQ_CHECK(pq_st_writer_commit(w, 0) == PQ_ERR_ARG && contains(pq_last_error(), "'b.f32' was never written"),
             "commit with a tensor missing: %s", pq_last_error());
    pq_st_writer_free(w);
    PQ_CHECK(!pq_file_exists(final) && !pq_file_exists(tp("abandon.safetensors.tmp")),
             "a writer freed before commit leaves no final file and no .tmp");

    int64_t neg[1] = {-2};
    w = NULL;
    PQ_CHECK(pq_st_writer_create(tp("misuse.safetensors"), &w) == PQ_OK &&
                 pq_st_writer_declare(w, "x", PQ_DT_F32, 1, neg) == PQ_ERR_ARG &&
                 pq_st_writer_declare(w, "x", PQ_DT_COUNT, 0, NULL) == PQ_ERR_ARG &&
                 pq_st_writer_declare(w, "x", PQ_DT_F32, PQ_MAX_DIMS + 1, neg) == PQ_ERR_ARG &&
                 pq_st_writer_declare(w, "__metadata__", PQ_DT_F32, 0, NULL) == PQ_ERR_ARG &&
                 pq_st_writer_set_metadata(w, "k", "\xff") == PQ_ERR_ARG,
             "bad declarations are refused");
    pq_st_writer_declare(w, "x", PQ_DT_F32, 0, NULL);
    pq_st_writer_declare(w, "x", PQ_DT_F16, 0, NULL);
    PQ_CHECK(pq_st_writer_begin(w) == PQ_ERR_ARG && contains(pq_last_error(), "'x' declared twice"),
             "a name declared twice: %s", pq_last_error());
    pq_st_writer_free(w);
    w = NULL;
    pq_st_writer_create(tp("utf8.safetensors"), &w);
    pq_st_writer_declare(w, "bad\xc3", PQ_DT_F32, 0, NULL);
    PQ_CHECK(pq_st_writer_begin(w) == PQ_ERR_ARG, "a name that is not UTF-8: %s", pq_last_error());
    pq_st_writer_free(w);
    w = NULL;
    pq_st_writer_create(tp("nodir/x.safetensors"), &w);
    PQ_CHECK(pq_st_writer_begin(w) == PQ_ERR_IO && contains(pq_last_error(), "x.safetensors.tmp"),
             "begin in a missing directory names the file: %s", pq_last_error());
    pq_st_writer_free(w);
    PQ_CHECK(pq_st_writer_create("", &w) == PQ_ERR_ARG && !w, "create with an empty path fails");
}

// ---- disk full --------------------------------------------------------------

typedef struct {
    int status;
    int final_exists, tmp_exists, zst_exists;
    char msg[1024];
} child_report;

// Writes a 256 KiB tensor of random bytes to path; the file-size limit is
// applied before the data (limit_before_put) or just before a zstd commit.
static child_report write_limited(const char *path, int limit_before_put) {
    int fds[2];
    child_report r = {.status = -1};
    if (pipe(fds) != 0) return r;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        signal(SIGXFSZ, SIG_IGN); // a write past the limit then fails with EFBIG
        struct rlimit lim = {64 << 10, 64 << 10};
        enum { N = 256 << 10 };
        uint8_t *data = malloc(N);
        fill_random(data, N);
        int64_t shape[1] = {N};
        pq_st_writer *w = NULL;
        pq_status s = pq_st_writer_create(path, &w);
        if (s == PQ_OK) s = pq_st_writer_declare(w, "big", PQ_DT_U8, 1, shape);
        if (s == PQ_OK) s = pq_st_writer_begin(w);
        if (s == PQ_OK && limit_before_put) setrlimit(RLIMIT_FSIZE, &lim);
        if (s == PQ_OK) s = pq_st_writer_put(w, "big", data, N);
        if (s == PQ_OK && !limit_before_put) setrlimit(RLIMIT_FSIZE, &lim);
        if (s == PQ_OK) s = pq_st_writer_commit(w, limit_before_put ? 0 : 1);
        child_report c = {.status = s};
        snprintf(c.msg, sizeof c.msg, "%s", pq_last_error());
        pq_st_writer_free(w);
        char z[600], t[600];
        snprintf(z, sizeof z, "%s.zst", path);
        snprintf(t, sizeof t, "%s.tmp", path);
        c.final_exists = pq_file_exists(path);
        c.tmp_exists = pq_file_exists(t);
        c.zst_exists = pq_file_exists(z);
        if (write(fds[1], &c, sizeof c) != (ssize_t)sizeof c) _exit(1);
        _exit(0);
    }
    close(fds[1]);
    if (read(fds[0], &r, sizeof r) != (ssize_t)sizeof r) r.status = -1;
    close(fds[0]);
    waitpid(pid, NULL, 0);
    return r;
}

static void test_disk_full(void) {
    child_report r = write_limited(tp("full.safetensors"), 1);
    PQ_CHECK(r.status == PQ_ERR_IO && contains(r.msg, "full.safetensors") && contains(r.msg, "File too large"),
             "a write past the file size limit fails with PQ_ERR_IO naming the file: %s", r.msg);
    PQ_CHECK(r.status != -1 && !r.final_exists && !r.tmp_exists, "and leaves no final file and no .tmp");
    r = write_limited(tp("fullz.safetensors"), 0);
    PQ_CHECK(r.status == PQ_ERR_IO && contains(r.msg, "fullz.safetensors.zst") &&
                 contains(r.msg, "File too large"),
             "a zstd commit past the file size limit fails with PQ_ERR_IO naming the file: %s", r.msg);
    PQ_CHECK(r.status != -1 && !r.final_exists && !r.zst_exists && !r.tmp_exists,
             "and leaves no final file, no .zst and no .tmp");
}

// ---- malformed files ----------------------------------------------------------

typedef struct {
    const char *file, *header;
    size_t data_len;
    const char *what;
} bad_case;

static const bad_case bad_cases[] = {
    {"notjson.safetensors", "{\"a\": {\"dtype\"", 0, "a header that is not JSON"},
    {"array.safetensors", "[1,2]   ", 0, "a header that is a JSON array"},
    {"dtype.safetensors", "{\"a\":{\"dtype\":\"F17\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
     "an unknown dtype"},
    {"nodtype.safetensors", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "a missing dtype"},
    {"bytes.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 24,
     "dtype x shape != byte count"},
    {"overlap.safetensors",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
     24, "overlapping offsets"},
    {"outside.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[64],\"data_offsets\":[0,64]}}", 32,
     "offsets past the end of the file"},
    {"backwards.safetensors", "{\"x\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[12,9]}}", 16,
     "begin > end"},
    {"negoff.safetensors", "{\"x\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[-3,0]}}", 16,
     "a negative offset"},
    {"offlen.safetensors", "{\"x\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3,4]}}", 16,
     "data_offsets of three numbers"},
    {"negshape.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1,4],\"data_offsets\":[0,16]}}", 16,
     "a negative shape"},
    {"floatshape.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4,
     "a non-integer shape"},
    {"shapeobj.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,4]}}", 4,
     "a shape that is not an array"},
    {"ndim.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1,
     "more than 8 dimensions"},
    {"overflow.safetensors",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", 0,
     "a shape whose product overflows"},
    {"overflow2.safetensors",
     "{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}", 0,
     "a byte size that overflows"},
    {"dup.safetensors",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
     "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
     2, "a name given twice"},
    {"duplook.safetensors",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
     "\"\\u0061\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
     2, "a name given twice, once escaped"},
    {"entry.safetensors", "{\"a\":[1,2]}", 0, "an entry that is not an object"},
    {"meta.safetensors", "{\"__metadata__\":[\"x\"]}", 0, "__metadata__ that is not an object"},
    {"metaval.safetensors", "{\"__metadata__\":{\"k\":1}}", 0, "a __metadata__ value that is not a string"},
    {"nul.safetensors", "{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
     "a name with a NUL"},
};

static void test_bad_inputs(void) {
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        expect_reject(write_raw(c->file, c->header, c->data_len), c->file, PQ_ERR_FORMAT, c->what);
    }

    // truncations of a valid file
    size_t len;
    uint8_t *raw = slurp(tp("rt.safetensors"), &len);
    write_bytes(tp("trunc5.safetensors"), raw, 5);
    expect_reject(tp("trunc5.safetensors"), "trunc5.safetensors", PQ_ERR_FORMAT, "a file shorter than 8 bytes");
    write_bytes(tp("truncdata.safetensors"), raw, len - 3);
    expect_reject(tp("truncdata.safetensors"), "truncdata.safetensors", PQ_ERR_FORMAT,
                  "a file cut inside its data");
    write_bytes(tp("trunchdr.safetensors"), raw, 40);
    expect_reject(tp("trunchdr.safetensors"), "trunchdr.safetensors", PQ_ERR_FORMAT,
                  "a file cut inside its header");
    write_bytes(tp("zero.safetensors"), raw, 0);
    expect_reject(tp("zero.safetensors"), "zero.safetensors", PQ_ERR_FORMAT, "an empty file");
    free(raw);

    uint8_t past[20] = {0xe8, 0x03}; // header length 1000 in a 20-byte file
    write_bytes(tp("past.safetensors"), past, sizeof past);
    expect_reject(tp("past.safetensors"), "past.safetensors", PQ_ERR_FORMAT,
                  "a header length past the end of the file");
    PQ_CHECK(contains(pq_last_error(), "header length 1000"), "the message gives the length: %s",
             pq_last_error());

    // a header length over 100 MB in a (sparse) file that is long enough
    uint64_t huge = 100000008;
    uint8_t hb[8];
    for (int i = 0; i < 8; i++) hb[i] = (uint8_t)(huge >> (8 * i));
    write_bytes(tp("hugehdr.safetensors"), hb, 8);
    PQ_CHECK(truncate(tp("hugehdr.safetensors"), (off_t)(8 + huge)) == 0,
             "sparse file for the header-size limit");
    expect_reject(tp("hugehdr.safetensors"), "hugehdr.safetensors", PQ_ERR_FORMAT, "a header over 100 MB");
    unlink(tp("hugehdr.safetensors"));

    expect_reject(tp("absent.safetensors"), "absent.safetensors", PQ_ERR_IO, "a missing file");
    char dir[512];
    snprintf(dir, sizeof dir, "%s", tp("emptydir"));
    mkdir(dir, 0755);
    expect_reject(dir, "emptydir", PQ_ERR_IO, "a directory without model files");

    pq_st *st = (pq_st *)1;
    PQ_CHECK(pq_st_open_buffer("\x02\0\0\0\0\0\0\0{}", 10, "buf.safetensors", &st) == PQ_OK &&
                 pq_st_count(st) == 0,
             "open_buffer accepts a minimal image");
    pq_st_close(st);
    PQ_CHECK(pq_st_open_buffer("\x02\0\0\0\0\0\0\0{", 9, "buf.safetensors", &st) == PQ_ERR_FORMAT && !st &&
                 contains(pq_last_error(), "buf.safetensors"),
             "open_buffer rejects a truncated image: %s", pq_last_error());
}

// Issue 10 item 10: the format lets the header length be any number, so
// every tensor can sit at an odd address; readers (the kernels, the
// quantizers, the CUDA upload) load them as typed arrays. Every tensor
// comes back aligned to its dtype's size with its file bytes, plain, .zst
// and in memory, for header lengths 8k+1 .. 8k+7.
static void test_alignment(void) {
    static const struct { const char *name, *dtype; size_t size, n; } ts[] = {
        {"a", "F32", 4, 3}, {"b", "F16", 2, 5}, {"c", "BF16", 2, 2}, {"d", "I64", 8, 1}, {"e", "U8", 1, 3},
        {"f", "F64", 8, 2}, {"g", "I32", 4, 1}};
    enum { NT = sizeof ts / sizeof ts[0] };
    int all_ok = 1, copied = 0;
    for (int pad = 1; pad < 8; pad++) {
        char header[1024];
        size_t off = 0, hl = 0;
        hl += (size_t)snprintf(header, sizeof header, "{");
        for (int i = 0; i < NT; i++) {
            size_t nb = ts[i].size * ts[i].n;
            hl += (size_t)snprintf(header + hl, sizeof header - hl, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%zu],"
                                   "\"data_offsets\":[%zu,%zu]}", i ? "," : "", ts[i].name, ts[i].dtype, ts[i].n,
                                   off, off + nb);
            off += nb;
        }
        hl += (size_t)snprintf(header + hl, sizeof header - hl, "}");
        while ((8 + hl) % 8 != (size_t)pad) header[hl++] = ' '; // data region starts at 8k + pad
        header[hl] = 0;
        uint8_t *img = malloc(8 + hl + off);
        for (int i = 0; i < 8; i++) img[i] = (uint8_t)((uint64_t)hl >> (8 * i));
        memcpy(img + 8, header, hl);
        fill_random(img + 8 + hl, off);
        write_bytes(tp("odd.safetensors"), img, 8 + hl + off);
        pq_zstd_compress_file(tp("odd.safetensors"), tp("odd.safetensors.zst"), 1);
        for (int form = 0; form < 3; form++) {
            pq_st *st = NULL;
            pq_status s = form == 0 ? pq_st_open(tp("odd.safetensors"), &st)
                        : form == 1 ? pq_st_open(tp("odd.safetensors.zst"), &st)
                                    : pq_st_open_buffer(img, 8 + hl + off, "odd", &st);
            int ok = s == PQ_OK && pq_st_count(st) == NT;
            for (int i = 0; ok && i < NT; i++) {
                const pq_tensor *t = pq_st_find(st, ts[i].name);
                ok = t && (uintptr_t)t->data % ts[i].size == 0 && t->offset < 8 + hl + off &&
                     memcmp(t->data, img + t->offset, t->nbytes) == 0;
                copied += t && t->data != img + t->offset;
            }
            if (!ok) {
                all_ok = 0;
                printf("    header length 8k+%d, %s: %s\n", pad, form == 0 ? "plain" : form == 1 ? "zst" : "buffer",
                       s == PQ_OK ? "a tensor is misaligned or differs" : pq_last_error());
            }
            pq_st_close(st);
        }
        free(img);
    }
    PQ_CHECK(all_ok && copied > 0, "data regions at 8k+1 .. 8k+7: every tensor aligned to its dtype, bytes as in the "
             "file (plain, .zst, buffer; %d copied)", copied);
}

// Issue 10 item 12: [2^62, 0] holds no bytes. The reader counted elements
// first, the writer bytes first (2 x 2^62 overflowed), so a file pq read it
// could not write; both count elements now.
static void test_empty_huge_dim(void) {
    const char *path = tp("empty_dim.safetensors");
    int64_t shape[2] = {(int64_t)1 << 62, 0};
    pq_st_writer *w = NULL;
    pq_status s = pq_st_writer_create(path, &w);
    if (s == PQ_OK) s = pq_st_writer_declare(w, "e", PQ_DT_F16, 2, shape);
    if (s == PQ_OK) s = pq_st_writer_begin(w);
    if (s == PQ_OK) s = pq_st_writer_put(w, "e", "", 0);
    if (s == PQ_OK) s = pq_st_writer_commit(w, 0);
    pq_st_writer_free(w);
    pq_st *st = NULL;
    if (s == PQ_OK) s = pq_st_open(path, &st);
    const pq_tensor *t = s == PQ_OK ? pq_st_find(st, "e") : NULL;
    PQ_CHECK(t && t->ndim == 2 && t->shape[0] == shape[0] && t->shape[1] == 0 && t->nbytes == 0 && t->numel == 0,
             "a [2^62, 0] tensor is written and read back: 0 bytes (%s)", why(s));
    pq_st_close(st);
    int64_t over[2] = {(int64_t)1 << 60, 4};
    PQ_CHECK(pq_st_writer_create(path, &w) == PQ_OK && pq_st_writer_declare(w, "e", PQ_DT_F16, 2, over) == PQ_ERR_ARG &&
                 contains(pq_last_error(), "byte size overflows"),
             "[2^60, 4] F16 (2^63 bytes) is refused: %s", pq_last_error());
    pq_st_writer_free(w);
}

int main(void) {
    pq_test_seed();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/pq_test_st.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    make_specs();
    test_fileio();
    test_roundtrip();
    test_fixture();
    test_alignment();
    test_empty_huge_dim();
    test_zstd();
    test_sharded();
    test_resume();
    test_writer_misuse();
    test_disk_full();
    test_bad_inputs();
    if (!getenv("PQ_KEEP_TMP"))
        nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    else
        printf("# kept %s\n", tmpdir);
    for (int i = 0; i < NSPEC; i++) free(spec_data[i]);
    return pq_test_done();
}
