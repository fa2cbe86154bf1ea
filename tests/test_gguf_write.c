// tests/test_gguf_write.c — formats/gguf_write: files written here are read
// back by pq's validated reader (formats/gguf.h): every metadata value type
// (scalars, arrays of each fixed-size type, strings and string arrays, NUL
// bytes inside a string), tensors of plain and block types with 1..4
// dimensions at offsets that are multiples of the alignment (32, and 64
// through general.alignment), written in any order; the file ends padded.
// Errors: keys and tensors given twice, bad shapes and types, a wrong put
// size, puts out of order, a commit with a tensor missing, a bad alignment;
// a writer freed before commit leaves nothing; resume accepts the same
// header and refuses another.
#include <sys/stat.h>
#include <unistd.h>

#include "common/half.h"
#include "formats/gguf.h"
#include "formats/gguf_write.h"
#include "kernels/ggml_blocks.h"
#include "tests/test.h"

static char tmpdir[256];

static const char *tp(const char *name) {
    static char buf[4][512];
    static int slot;
    char *b = buf[slot++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
    return b;
}

static int exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

// The tensors of the round trip: name, dims, ne, type.
typedef struct {
    const char *name;
    int nd;
    int64_t ne[4];
    uint32_t type;
} tdesc;

static const tdesc TENSORS[] = {
    {"a.f32", 1, {7}, PQ_GGML_F32},
    {"b.f16", 2, {5, 3}, PQ_GGML_F16},
    {"c.q4_0", 2, {64, 3}, PQ_GGML_Q4_0},
    {"d.q4_k", 3, {256, 2, 2}, PQ_GGML_Q4_K},
    {"e.q8_0", 4, {32, 1, 2, 3}, PQ_GGML_Q8_0},
    {"f.bf16", 1, {1}, PQ_GGML_BF16},
};
#define NT (int)(sizeof TENSORS / sizeof TENSORS[0])

static uint64_t nbytes_of(const tdesc *t) {
    const pq_ggml_type_info *ti = pq_ggml_type_get(t->type);
    uint64_t n = (uint64_t)(t->ne[0] / ti->block) * ti->bytes;
    for (int d = 1; d < t->nd; d++) n *= (uint64_t)t->ne[d];
    return n;
}

// Writes the round-trip file: every value type, the tensors with random
// bytes (kept in data[] to compare), put in reverse order.
static pq_status write_all(const char *path, uint32_t align, uint8_t **data) {
    pq_gguf_writer *w;
    PQ_TRY(pq_gguf_writer_create(path, &w));
    pq_status s = PQ_OK;
    uint8_t u8 = 200;
    int8_t i8 = -5;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    int32_t i32 = -2000000000;
    uint64_t u64 = 0x123456789abcdef0ull;
    int64_t i64 = -0x123456789abcll;
    double f64 = -1.0 / 3;
    float f32arr[3] = {1.5f, -0.0f, 3e-38f};
    int32_t i32arr[4] = {1, -2, 3, -4};
    uint8_t bools[3] = {1, 0, 1};
    const char *strs[3] = {"", "tok\xe2\x96\x81", "<0x0A>"};
    PQ_TRY_GOTO(s, pq_gguf_writer_kv(w, "t.u8", PQ_GGUF_U8, &u8));
    PQ_TRY_GOTO(s, pq_gguf_writer_kv(w, "t.i8", PQ_GGUF_I8, &i8));
    PQ_TRY_GOTO(s, pq_gguf_writer_kv(w, "t.u16", PQ_GGUF_U16, &u16));
    PQ_TRY_GOTO(s, pq_gguf_writer_kv(w, "t.i16", PQ_GGUF_I16, &i16));
    PQ_TRY_GOTO(s, pq_gguf_writer_kv_u32(w, "t.u32", 4000000000u));
    PQ_TRY_GOTO(s, pq_gguf_writer_kv_i32(w, "t.i32", i32));
    PQ_TRY_GOTO(s, pq_gguf_writer_kv_f32(w, "t.f32", 1e-5f));
    PQ_TRY_GOTO(s, pq_gguf_writer_kv_bool(w, "t.bool", 1));
    PQ_TRY_GOTO(s, pq_gguf_writer_kv_str(w, "t.str", "a\0b", 3));
    PQ_TRY_GOTO(s, pq_gguf_writer_kv(w, "t.u64", PQ_GGUF_U64, &u64));
    PQ_TRY_GOTO(s, pq_gguf_writer_kv(w, "t.i64", PQ_GGUF_I64, &i64));
    PQ_TRY_GOTO(s, pq_gguf_writer_kv(w, "t.f64", PQ_GGUF_F64, &f64));
    PQ_TRY_GOTO(s, pq_gguf_writer_kv_array(w, "t.arr_f32", PQ_GGUF_F32, f32arr, 3));
    PQ_TRY_GOTO(s, pq_gguf_writer_kv_array(w, "t.arr_i32", PQ_GGUF_I32, i32arr, 4));
    PQ_TRY_GOTO(s, pq_gguf_writer_kv_array(w, "t.arr_bool", PQ_GGUF_BOOL, bools, 3));
    PQ_TRY_GOTO(s, pq_gguf_writer_kv_array(w, "t.arr_empty", PQ_GGUF_U8, NULL, 0));
    PQ_TRY_GOTO(s, pq_gguf_writer_kv_strs(w, "t.arr_str", strs, NULL, 3));
    if (align != 32) PQ_TRY_GOTO(s, pq_gguf_writer_kv_u32(w, "general.alignment", align));
    for (int i = 0; i < NT; i++)
        PQ_TRY_GOTO(s, pq_gguf_writer_declare(w, TENSORS[i].name, TENSORS[i].nd, TENSORS[i].ne, TENSORS[i].type));
    PQ_TRY_GOTO(s, pq_gguf_writer_begin(w));
    for (int i = NT - 1; i >= 0; i--) {
        uint64_t n = nbytes_of(&TENSORS[i]);
        data[i] = malloc(n);
        for (uint64_t k = 0; k < n; k++) data[i][k] = (uint8_t)pq_test_u64();
        if (TENSORS[i].type == PQ_GGML_F32) // keep them finite floats
            for (uint64_t k = 0; k < n / 4; k++) ((float *)data[i])[k] = pq_test_normal();
        PQ_TRY_GOTO(s, pq_gguf_writer_put(w, TENSORS[i].name, data[i], n));
    }
    s = pq_gguf_writer_commit(w);
done:
    pq_gguf_writer_free(w);
    return s;
}

static int kv_is(const pq_gguf *g, const char *key, pq_gguf_vtype type, const void *v, size_t n) {
    const pq_gguf_kv *kv = pq_gguf_find(g, key);
    return kv && kv->type == type && kv->n == 1 && memcmp(kv->data, v, n) == 0;
}

static void check_round_trip(uint32_t align) {
    uint8_t *data[NT] = {0};
    char name[64];
    snprintf(name, sizeof name, "rt%u.gguf", align);
    const char *path = tp(name);
    pq_status s = write_all(path, align, data);
    PQ_CHECK(s == PQ_OK, "alignment %u: a file with every value type and %d tensors is written: %s", align, NT,
             s == PQ_OK ? "ok" : pq_last_error());
    if (s != PQ_OK) return;
    pq_gguf *g;
    s = pq_gguf_open(path, &g);
    PQ_CHECK(s == PQ_OK, "alignment %u: pq's reader accepts it: %s", align, s == PQ_OK ? "ok" : pq_last_error());
    if (s != PQ_OK) return;
    uint8_t u8 = 200, b1 = 1;
    int8_t i8 = -5;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    uint32_t u32 = 4000000000u;
    int32_t i32 = -2000000000;
    float f32 = 1e-5f;
    uint64_t u64 = 0x123456789abcdef0ull;
    int64_t i64 = -0x123456789abcll;
    double f64 = -1.0 / 3;
    int scalars = kv_is(g, "t.u8", PQ_GGUF_U8, &u8, 1) && kv_is(g, "t.i8", PQ_GGUF_I8, &i8, 1) &&
                  kv_is(g, "t.u16", PQ_GGUF_U16, &u16, 2) && kv_is(g, "t.i16", PQ_GGUF_I16, &i16, 2) &&
                  kv_is(g, "t.u32", PQ_GGUF_U32, &u32, 4) && kv_is(g, "t.i32", PQ_GGUF_I32, &i32, 4) &&
                  kv_is(g, "t.f32", PQ_GGUF_F32, &f32, 4) && kv_is(g, "t.bool", PQ_GGUF_BOOL, &b1, 1) &&
                  kv_is(g, "t.u64", PQ_GGUF_U64, &u64, 8) && kv_is(g, "t.i64", PQ_GGUF_I64, &i64, 8) &&
                  kv_is(g, "t.f64", PQ_GGUF_F64, &f64, 8);
    pq_gguf_str st = {0};
    int str_ok = pq_gguf_get_str(g, "t.str", &st) == PQ_OK && st.len == 3 && memcmp(st.p, "a\0b", 3) == 0;
    const pq_gguf_kv *a = pq_gguf_find(g, "t.arr_f32"), *ai = pq_gguf_find(g, "t.arr_i32"),
                     *ab = pq_gguf_find(g, "t.arr_bool"), *ae = pq_gguf_find(g, "t.arr_empty"),
                     *as = pq_gguf_find(g, "t.arr_str");
    float f32arr[3] = {1.5f, -0.0f, 3e-38f};
    int arrays = a && a->elem == PQ_GGUF_F32 && a->n == 3 && memcmp(a->data, f32arr, 12) == 0 && ai && ai->n == 4 &&
                 pq_gguf_kv_int(ai, 3) == -4 && ab && ab->elem == PQ_GGUF_BOOL && pq_gguf_kv_int(ab, 1) == 0 && ae &&
                 ae->n == 0 && as && as->n == 3 && as->strs[0].len == 0 && as->strs[1].len == 6 &&
                 memcmp(as->strs[2].p, "<0x0A>", 6) == 0;
    PQ_CHECK(scalars && str_ok && arrays && pq_gguf_kv_count(g) == 17 + (align != 32) && pq_gguf_version(g) == 3,
             "alignment %u: every scalar, string and array value reads back equal (scalars %d, string %d, arrays %d)",
             align, scalars, str_ok, arrays);
    int tensors = pq_gguf_tensor_count(g) == NT && pq_gguf_alignment(g) == align;
    for (int i = 0; i < NT && tensors; i++) {
        const pq_gguf_tensor *t = pq_gguf_tensor_at(g, i);
        tensors = strcmp(t->name, TENSORS[i].name) == 0 && t->n_dims == TENSORS[i].nd && t->type == TENSORS[i].type &&
                  t->nbytes == nbytes_of(&TENSORS[i]) && t->offset % align == 0 &&
                  memcmp(t->data, data[i], t->nbytes) == 0;
        for (int d = 0; d < TENSORS[i].nd; d++) tensors &= t->ne[d] == TENSORS[i].ne[d];
    }
    uint64_t size = pq_gguf_file_bytes(g);
    PQ_CHECK(tensors && size % align == 0,
             "alignment %u: %d tensors (1..4 dims, F32/F16/BF16/Q4_0/Q8_0/Q4_K) in declaration order at aligned "
             "offsets with their bytes; file size %llu padded",
             align, NT, (unsigned long long)size);
    pq_gguf_close(g);
    for (int i = 0; i < NT; i++) free(data[i]);
}

static void check_errors(void) {
    pq_gguf_writer *w;
    const char *path = tp("err.gguf");
    pq_gguf_writer_create(path, &w);
    int64_t ne[2] = {40, 2}, ne_ok[2] = {64, 2};
    PQ_CHECK(pq_gguf_writer_kv_u32(w, "k", 1) == PQ_OK && pq_gguf_writer_kv_u32(w, "k", 2) == PQ_ERR_ARG &&
                 strstr(pq_last_error(), "given twice"),
             "a key given twice is refused: %s", pq_last_error());
    PQ_CHECK(pq_gguf_writer_kv_u32(w, "", 1) == PQ_ERR_ARG && pq_gguf_writer_kv_str(w, "bad", "\xff", 1) == PQ_ERR_ARG &&
                 pq_gguf_writer_kv_u32(w, "general.alignment", 48) == PQ_ERR_ARG &&
                 pq_gguf_writer_kv_i32(w, "general.alignment", 64) == PQ_ERR_ARG,
             "an empty key, a value that is not UTF-8, alignment 48 and an i32 alignment are refused: %s",
             pq_last_error());
    uint8_t two = 2;
    PQ_CHECK(pq_gguf_writer_kv(w, "b", PQ_GGUF_BOOL, &two) == PQ_ERR_ARG &&
                 pq_gguf_writer_kv(w, "s", PQ_GGUF_STRING, "x") == PQ_ERR_ARG,
             "a bool of 2 and a string through the scalar call are refused: %s", pq_last_error());
    PQ_CHECK(pq_gguf_writer_declare(w, "q", 2, ne, PQ_GGML_Q4_0) == PQ_ERR_ARG && strstr(pq_last_error(), "40 values"),
             "rows of 40 values as Q4_0 are refused: %s", pq_last_error());
    PQ_CHECK(pq_gguf_writer_declare(w, "q", 2, ne_ok, 4) == PQ_ERR_ARG &&
                 pq_gguf_writer_declare(w, "q", 5, ne_ok, PQ_GGML_F32) == PQ_ERR_ARG,
             "a removed type id and 5 dimensions are refused: %s", pq_last_error());
    PQ_CHECK(pq_gguf_writer_declare(w, "q", 2, ne_ok, PQ_GGML_Q4_0) == PQ_OK &&
                 pq_gguf_writer_declare(w, "q", 2, ne_ok, PQ_GGML_F32) == PQ_ERR_ARG &&
                 pq_gguf_writer_declare(w, "r", 2, ne_ok, PQ_GGML_F32) == PQ_OK,
             "a tensor declared twice is refused: %s", pq_last_error());
    uint8_t blk[2 * 2 * 18] = {0};
    PQ_CHECK(pq_gguf_writer_put(w, "q", blk, sizeof blk) == PQ_ERR_ARG, "a put before begin is refused: %s",
             pq_last_error());
    PQ_CHECK(pq_gguf_writer_begin(w) == PQ_OK && pq_gguf_writer_kv_u32(w, "late", 1) == PQ_ERR_ARG &&
                 pq_gguf_writer_put(w, "q", blk, sizeof blk - 1) == PQ_ERR_ARG &&
                 pq_gguf_writer_put(w, "zz", blk, sizeof blk) == PQ_ERR_ARG,
             "after begin: metadata, a put of the wrong size and of an undeclared tensor are refused: %s",
             pq_last_error());
    PQ_CHECK(pq_gguf_writer_put(w, "q", blk, sizeof blk) == PQ_OK && pq_gguf_writer_commit(w) == PQ_ERR_ARG &&
                 strstr(pq_last_error(), "'r' was never written"),
             "a commit with a tensor never written is refused: %s", pq_last_error());
    PQ_CHECK(exists(pq_gguf_writer_tmp_path(w)) && !exists(path), "until then only the temporary file exists");
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s", pq_gguf_writer_tmp_path(w));
    pq_gguf_writer_free(w);
    PQ_CHECK(!exists(tmp) && !exists(path), "a writer freed before commit leaves no file");
}

static pq_status small(const char *path, int variant, int resume, pq_gguf_writer **out) {
    pq_gguf_writer *w;
    PQ_TRY(pq_gguf_writer_create(path, &w));
    int64_t ne[1] = {8};
    pq_status s = pq_gguf_writer_kv_u32(w, "v", (uint32_t)variant);
    if (s == PQ_OK) s = pq_gguf_writer_declare(w, "x", 1, ne, PQ_GGML_F32);
    if (s == PQ_OK) s = resume ? pq_gguf_writer_resume(w) : pq_gguf_writer_begin(w);
    if (s != PQ_OK) {
        pq_gguf_writer_free(w);
        return s;
    }
    *out = w;
    return PQ_OK;
}

static void check_resume(void) {
    const char *path = tp("res.gguf");
    pq_gguf_writer *w, *w2;
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    pq_status s = small(path, 1, 0, &w);
    if (s == PQ_OK) s = pq_gguf_writer_put(w, "x", x, sizeof x);
    if (s == PQ_OK) pq_gguf_writer_keep_tmp(w), pq_gguf_writer_free(w);
    PQ_CHECK(s == PQ_OK && small(path, 2, 1, &w2) == PQ_ERR_FORMAT && strstr(pq_last_error(), "header differs"),
             "resume with other metadata is refused: %s", pq_last_error());
    s = small(path, 1, 1, &w2);
    if (s == PQ_OK) s = pq_gguf_writer_commit(w2);
    pq_gguf *g = NULL;
    if (s == PQ_OK) s = pq_gguf_open(path, &g);
    PQ_CHECK(s == PQ_OK && memcmp(pq_gguf_tensor_at(g, 0)->data, x, sizeof x) == 0,
             "resume with the same header finishes the file with what was written before: %s",
             s == PQ_OK ? "ok" : pq_last_error());
    pq_gguf_close(g);
    if (s == PQ_OK) pq_gguf_writer_free(w2);
}

int main(void) {
    pq_test_seed();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/pq_test_gguf_write.XXXXXX");
    if (!mkdtemp(tmpdir)) return perror("mkdtemp"), 1;
    check_round_trip(32);
    check_round_trip(64);
    check_errors();
    check_resume();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (!getenv("PQ_KEEP_TMP") && system(cmd) != 0) return 1;
    return pq_test_failures ? 1 : 0;
}
