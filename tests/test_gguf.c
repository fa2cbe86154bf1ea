// tests/test_gguf.c — formats/gguf: the GGUF reader on files built here byte
// by byte: every metadata value type (scalars and arrays), tensor infos of
// several ggml types, the alignment, and one broken file per validation rule
// (each refused with a message naming the file and the reason).
#include <unistd.h>

#include "formats/gguf.h"
#include "kernels/ggml_blocks.h"
#include "tests/test.h"

typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void u8(buf *b, uint8_t v) { put(b, &v, 1); }
static void u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void str(buf *b, const char *s) { u64(b, strlen(s)), put(b, s, strlen(s)); }
static void key(buf *b, const char *k, uint32_t type) { str(b, k), u32(b, type); }

// one tensor info: name, ne (n_dims of them), type, offset
static void tinfo(buf *b, const char *name, int nd, const uint64_t *ne, uint32_t type, uint64_t off) {
    str(b, name);
    u32(b, (uint32_t)nd);
    for (int i = 0; i < nd; i++) u64(b, ne[i]);
    u32(b, type);
    u64(b, off);
}

// magic, version, counts, the kv bytes, the tensor-info bytes, padding to
// align, then data
static buf assemble(uint32_t version, uint64_t n_t, uint64_t n_kv, const buf *kvs, const buf *infos, size_t align,
                    const void *data, size_t data_len) {
    buf f = {0};
    put(&f, "GGUF", 4);
    u32(&f, version);
    u64(&f, n_t);
    u64(&f, n_kv);
    if (kvs->n) put(&f, kvs->p, kvs->n);
    if (infos->n) put(&f, infos->p, infos->n);
    while (f.n % align) u8(&f, 0);
    if (data_len) put(&f, data, data_len);
    return f;
}

// The metadata of the valid file: one key per value type, arrays of each,
// an empty array, an array of strings. 16 keys.
static buf all_kvs(void) {
    buf b = {0};
    key(&b, "t.u8", 0), u8(&b, 200);
    key(&b, "t.i8", 1), u8(&b, (uint8_t)-5);
    key(&b, "t.u16", 2), u8(&b, 0x34), u8(&b, 0x12);
    key(&b, "t.i16", 3), u8(&b, 0xff), u8(&b, 0xff);
    key(&b, "t.u32", 4), u32(&b, 4000000000u);
    key(&b, "t.i32", 5), u32(&b, (uint32_t)-7);
    float f = 0.25f;
    key(&b, "t.f32", 6), put(&b, &f, 4);
    key(&b, "t.bool", 7), u8(&b, 1);
    key(&b, "t.str", 8), str(&b, "llama");
    key(&b, "t.u64", 10), u64(&b, 1ull << 40);
    key(&b, "t.i64", 11), u64(&b, (uint64_t)-3);
    double d = -1.5;
    key(&b, "t.f64", 12), put(&b, &d, 8);
    key(&b, "t.arr_i32", 9), u32(&b, 5), u64(&b, 3), u32(&b, 1), u32(&b, (uint32_t)-2), u32(&b, 3);
    key(&b, "t.arr_str", 9), u32(&b, 8), u64(&b, 3), str(&b, "a"), str(&b, ""), str(&b, "\xc4\xa0the");
    key(&b, "t.arr_empty", 9), u32(&b, 6), u64(&b, 0);
    key(&b, "t.arr_bool", 9), u32(&b, 7), u64(&b, 2), u8(&b, 0), u8(&b, 1);
    return b;
}

#define N_KV 16

// Three tensors: F32 [3] at 0, Q8_0 [32, 2] at 32, F16 [2, 2] at 128.
static buf valid_file(void) {
    buf kvs = all_kvs(), in = {0};
    uint64_t ne1[] = {3}, ne2[] = {32, 2}, ne3[] = {2, 2};
    tinfo(&in, "norm.weight", 1, ne1, PQ_GGML_F32, 0);
    tinfo(&in, "blk.0.attn_q.weight", 2, ne2, PQ_GGML_Q8_0, 32);
    tinfo(&in, "x", 2, ne3, PQ_GGML_F16, 128);
    uint8_t data[136];
    for (int i = 0; i < 136; i++) data[i] = (uint8_t)i;
    buf f = assemble(3, 3, N_KV, &kvs, &in, 32, data, sizeof data);
    free(kvs.p), free(in.p);
    return f;
}

static pq_status open_buf(const buf *b, pq_gguf **g) { return pq_gguf_open_buffer(b->p, b->n, "t.gguf", g); }

static void test_valid(void) {
    buf f = valid_file();
    pq_gguf *g = NULL;
    pq_status s = open_buf(&f, &g);
    PQ_CHECK(s == PQ_OK, "a valid v3 file with every value type and three tensors opens (%s)", pq_last_error());
    if (s != PQ_OK) return free(f.p);
    int64_t v = 0;
    double d = 0;
    int bo = 0;
    pq_gguf_str st;
    const pq_gguf_kv *kv = NULL;
    int ok = pq_gguf_kv_count(g) == N_KV && pq_gguf_version(g) == 3 && pq_gguf_alignment(g) == 32;
    ok &= pq_gguf_get_int(g, "t.u8", 0, 255, &v) == PQ_OK && v == 200;
    ok &= pq_gguf_get_int(g, "t.i8", -10, 10, &v) == PQ_OK && v == -5;
    ok &= pq_gguf_get_int(g, "t.u16", 0, 65535, &v) == PQ_OK && v == 0x1234;
    ok &= pq_gguf_get_int(g, "t.i16", -2, 0, &v) == PQ_OK && v == -1;
    ok &= pq_gguf_get_int(g, "t.u32", 0, INT64_MAX, &v) == PQ_OK && v == 4000000000ll;
    ok &= pq_gguf_get_int(g, "t.i32", -7, -7, &v) == PQ_OK && v == -7;
    ok &= pq_gguf_get_int(g, "t.u64", 0, INT64_MAX, &v) == PQ_OK && v == 1ll << 40;
    ok &= pq_gguf_get_int(g, "t.i64", INT64_MIN, 0, &v) == PQ_OK && v == -3;
    ok &= pq_gguf_get_float(g, "t.f32", &d) == PQ_OK && d == 0.25;
    ok &= pq_gguf_get_float(g, "t.f64", &d) == PQ_OK && d == -1.5;
    ok &= pq_gguf_get_bool(g, "t.bool", &bo) == PQ_OK && bo == 1;
    ok &= pq_gguf_get_str(g, "t.str", &st) == PQ_OK && st.len == 5 && memcmp(st.p, "llama", 5) == 0;
    PQ_CHECK(ok, "every scalar type reads back through its getter");
    ok = pq_gguf_get_array(g, "t.arr_i32", PQ_GGUF_I32, &kv) == PQ_OK && kv->n == 3 && pq_gguf_kv_int(kv, 1) == -2 &&
         pq_gguf_kv_int(kv, 2) == 3;
    ok &= pq_gguf_get_array(g, "t.arr_str", PQ_GGUF_STRING, &kv) == PQ_OK && kv->n == 3 && kv->strs[1].len == 0 &&
          kv->strs[2].len == 5 && memcmp(kv->strs[2].p, "\xc4\xa0the", 5) == 0;
    ok &= pq_gguf_get_array(g, "t.arr_empty", PQ_GGUF_F32, &kv) == PQ_OK && kv->n == 0;
    ok &= pq_gguf_get_array(g, "t.arr_bool", PQ_GGUF_BOOL, &kv) == PQ_OK && pq_gguf_kv_int(kv, 1) == 1;
    ok &= strcmp(pq_gguf_kv_at(g, 0)->key, "t.u8") == 0 && pq_gguf_kv_at(g, N_KV) == NULL && !pq_gguf_find(g, "t.nope");
    PQ_CHECK(ok, "arrays of integers, strings (one empty), bools, and an empty array read back; keys in file order");
    PQ_CHECK(pq_gguf_get_int(g, "t.u8", 0, 100, &v) == PQ_ERR_FORMAT && strstr(pq_last_error(), "t.gguf: ") &&
                 strstr(pq_last_error(), "'t.u8' = 200 is outside [0, 100]"),
             "an integer outside the asked range is refused: %s", pq_last_error());
    PQ_CHECK(pq_gguf_get_int(g, "t.str", 0, 1, &v) == PQ_ERR_FORMAT &&
                 strstr(pq_last_error(), "'t.str' holds a string value, expected an integer"),
             "a string asked as an integer is refused: %s", pq_last_error());
    PQ_CHECK(pq_gguf_get_str(g, "t.arr_str", &st) == PQ_ERR_FORMAT &&
                 strstr(pq_last_error(), "holds an array of string values, expected a string"),
             "an array asked as a scalar is refused: %s", pq_last_error());
    PQ_CHECK(pq_gguf_get_array(g, "t.arr_i32", PQ_GGUF_U32, &kv) == PQ_ERR_FORMAT &&
                 strstr(pq_last_error(), "expected an array of u32 values"),
             "an array of another element type is refused: %s", pq_last_error());
    PQ_CHECK(pq_gguf_get_float(g, "t.missing", &d) == PQ_ERR_FORMAT &&
                 strstr(pq_last_error(), "metadata key 't.missing' is missing"),
             "a missing key is refused by name: %s", pq_last_error());
    const pq_gguf_tensor *a = pq_gguf_tensor_find(g, "norm.weight"), *q = pq_gguf_tensor_find(g, "blk.0.attn_q.weight"),
                         *x = pq_gguf_tensor_find(g, "x");
    size_t data0 = f.n - 136;
    ok = pq_gguf_tensor_count(g) == 3 && a && q && x && a->n_dims == 1 && a->ne[0] == 3 && a->ne[1] == 1 &&
         a->nbytes == 12 && a->data == f.p + data0 && q->ne[0] == 32 && q->ne[1] == 2 && q->numel == 64 &&
         q->nbytes == 68 && q->type == PQ_GGML_Q8_0 && q->data == f.p + data0 + 32 && x->nbytes == 8 &&
         x->data == f.p + data0 + 128 && pq_gguf_tensor_at(g, 2) == x && !pq_gguf_tensor_find(g, "y");
    PQ_CHECK(ok, "tensor infos: shapes, ggml types, byte sizes, data at the aligned data section + offset");
    pq_gguf_close(g);

    char path[] = "/tmp/pq-test-gguf-XXXXXX";
    int fd = mkstemp(path);
    ok = fd >= 0 && write(fd, f.p, f.n) == (ssize_t)f.n;
    if (fd >= 0) close(fd);
    ok = ok && pq_gguf_is_file(path) && pq_gguf_open(path, &g) == PQ_OK && pq_gguf_tensor_count(g) == 3 &&
         pq_gguf_file_bytes(g) == f.n && strcmp(pq_gguf_path(g), path) == 0;
    pq_gguf_close(g);
    PQ_CHECK(ok && !pq_gguf_is_file("/tmp") && !pq_gguf_is_file("tests/test_gguf.c"),
             "pq_gguf_open maps the same file from disk; pq_gguf_is_file wants a regular file starting with GGUF");
    unlink(path);
    PQ_CHECK(pq_gguf_open("/nonexistent/x.gguf", &g) == PQ_ERR_IO && !g &&
                 strstr(pq_last_error(), "/nonexistent/x.gguf: cannot open"),
             "a missing file is an I/O error naming it");

    int all_fail = 1;
    size_t first_ok = 0;
    for (size_t n = 0; n < f.n && all_fail; n++) {
        pq_status r = pq_gguf_open_buffer(f.p, n, "t.gguf", &g);
        if (r == PQ_OK) all_fail = 0, first_ok = n, pq_gguf_close(g);
        else all_fail &= g == NULL && strncmp(pq_last_error(), "formats/gguf.c:", 15) == 0 && strstr(pq_last_error(), "t.gguf: ");
    }
    PQ_CHECK(all_fail, "each of the %zu truncations of the file is refused with a message naming it (first accepted: %zu)",
             f.n, first_ok);
    free(f.p);
}

// Opens b and checks it fails with a message holding want.
static void expect_bad(buf b, const char *want, const char *what) {
    pq_gguf *g = NULL;
    pq_status s = open_buf(&b, &g);
    PQ_CHECK(s == PQ_ERR_FORMAT && !g && strstr(pq_last_error(), "t.gguf: ") && strstr(pq_last_error(), want),
             "%s: %s", what, s == PQ_OK ? "accepted" : pq_last_error());
    pq_gguf_close(g);
    free(b.p);
}

static buf one_kv(uint32_t version, const buf *kv) {
    buf none = {0};
    return assemble(version, 0, 1, kv, &none, 32, NULL, 0);
}

static void test_bad_header(void) {
    buf none = {0}, kv = {0};
    buf f = valid_file();
    f.p[0] = 'g';
    expect_bad(f, "not a GGUF file", "a wrong magic");
    expect_bad(assemble(1, 0, 0, &none, &none, 1, NULL, 0), "GGUF version 1 is not supported", "version 1");
    expect_bad(assemble(4, 0, 0, &none, &none, 1, NULL, 0), "GGUF version 4 is not supported", "version 4");
    expect_bad(assemble(0x03000000, 0, 0, &none, &none, 1, NULL, 0), "big-endian", "a byte-swapped file");
    expect_bad(assemble(3, 0, 1ull << 60, &none, &none, 1, NULL, 0), "metadata pairs cannot fit",
               "a metadata count larger than the file");
    expect_bad(assemble(3, 1ull << 40, 0, &none, &none, 1, NULL, 0), "tensor infos cannot fit",
               "a tensor count larger than the file");
    key(&kv, "k", 8), u64(&kv, 1000), put(&kv, "abc", 3);
    expect_bad(one_kv(3, &kv), "string length 1000 at offset", "a string length past the end");
    kv.n = 0, u64(&kv, 1ull << 62), put(&kv, "k", 1), u32(&kv, 4), u32(&kv, 1);
    expect_bad(one_kv(3, &kv), "string length 4611686018427387904", "a key length past the end");
    kv.n = 0, key(&kv, "k", 9), u32(&kv, 4), u64(&kv, 1ull << 61), u32(&kv, 0);
    expect_bad(one_kv(3, &kv), "2305843009213693952 u32 values cannot fit", "an array count past the end");
    kv.n = 0, key(&kv, "k", 9), u32(&kv, 8), u64(&kv, 1ull << 40), u64(&kv, 0);
    expect_bad(one_kv(3, &kv), "string values cannot fit", "a string array count past the end");
    kv.n = 0, key(&kv, "k", 9), u32(&kv, 9), u64(&kv, 1), u32(&kv, 4), u64(&kv, 0);
    expect_bad(one_kv(3, &kv), "arrays of arrays are not supported", "a nested array");
    kv.n = 0, key(&kv, "k", 13), u32(&kv, 0);
    expect_bad(one_kv(3, &kv), "key 'k': unknown value type 13", "an unknown value type");
    kv.n = 0, key(&kv, "k", 9), u32(&kv, 77), u64(&kv, 0);
    expect_bad(one_kv(3, &kv), "unknown array element type 77", "an unknown array element type");
    kv.n = 0, key(&kv, "k", 7), u8(&kv, 2);
    expect_bad(one_kv(3, &kv), "bool value 2 is not 0 or 1", "a bool that is neither 0 nor 1");
    kv.n = 0, u64(&kv, 3), put(&kv, "a\0b", 3), u32(&kv, 4), u32(&kv, 1);
    expect_bad(one_kv(3, &kv), "contains a NUL byte", "a key with a NUL byte");
    kv.n = 0, key(&kv, "general.alignment", 4), u32(&kv, 48);
    expect_bad(one_kv(3, &kv), "general.alignment 48 is not a power of two", "an alignment that is no power of two");
    kv.n = 0, key(&kv, "general.alignment", 4), u32(&kv, 0);
    expect_bad(one_kv(3, &kv), "general.alignment 0 is not a power of two", "an alignment of 0");
    kv.n = 0, key(&kv, "general.alignment", 10), u64(&kv, 64);
    expect_bad(one_kv(3, &kv), "general.alignment is a u64, not a u32", "an alignment that is not a u32");
    kv.n = 0, key(&kv, "k", 4), u32(&kv, 1), key(&kv, "k", 5), u32(&kv, 2);
    expect_bad(assemble(3, 0, 2, &kv, &none, 32, NULL, 0), "metadata key 'k' appears twice", "a duplicate key");
    free(kv.p);
}

// A file with one kv (alignment al when al > 0), the given tensor infos, and
// data_len bytes of data.
static buf with_tensors(const buf *infos, uint64_t n_t, uint32_t al, size_t data_len) {
    buf kv = {0};
    if (al) key(&kv, "general.alignment", 4), u32(&kv, al);
    else key(&kv, "x", 4), u32(&kv, 0);
    uint8_t *data = calloc(data_len + 1, 1);
    buf f = assemble(3, n_t, 1, &kv, infos, al ? al : 32, data, data_len);
    free(data), free(kv.p);
    return f;
}

static void test_bad_tensors(void) {
    buf in = {0};
    uint64_t ne[5] = {32, 2, 1, 1, 1};
    tinfo(&in, "t", 0, ne, 0, 0);
    expect_bad(with_tensors(&in, 1, 0, 64), "tensor 't' has 0 dimensions", "n_dims 0");
    in.n = 0, tinfo(&in, "t", 5, ne, 0, 0);
    expect_bad(with_tensors(&in, 1, 0, 64), "tensor 't' has 5 dimensions", "n_dims 5");
    uint64_t zero[2] = {32, 0};
    in.n = 0, tinfo(&in, "t", 2, zero, 0, 0);
    expect_bad(with_tensors(&in, 1, 0, 64), "ne[1] = 0 is not >= 1", "a zero dimension");
    uint64_t huge[3] = {1ull << 32, 1ull << 32, 4};
    in.n = 0, tinfo(&in, "t", 3, huge, 0, 0);
    expect_bad(with_tensors(&in, 1, 0, 64), "the element count overflows", "dimensions whose product overflows");
    in.n = 0, tinfo(&in, "t", 2, ne, 4, 0);
    expect_bad(with_tensors(&in, 1, 0, 64), "tensor 't' has unknown ggml type 4", "a removed ggml type");
    in.n = 0, tinfo(&in, "t", 2, ne, 1000, 0);
    expect_bad(with_tensors(&in, 1, 0, 64), "unknown ggml type 1000", "an unknown ggml type");
    uint64_t odd[2] = {30, 2};
    in.n = 0, tinfo(&in, "t", 2, odd, PQ_GGML_Q4_0, 0);
    expect_bad(with_tensors(&in, 1, 0, 64), "a row of 30 values is not a whole number of Q4_0 blocks of 32",
               "a row that is not whole blocks");
    in.n = 0, tinfo(&in, "t", 2, ne, PQ_GGML_F32, 8);
    expect_bad(with_tensors(&in, 1, 0, 512), "offset 8 is not a multiple of the alignment 32", "a misaligned offset");
    in.n = 0, tinfo(&in, "t", 2, ne, PQ_GGML_F32, 64);
    expect_bad(with_tensors(&in, 1, 0, 256), "256 bytes at data offset 64 run past the end of the file",
               "data past the end of the file");
    in.n = 0, tinfo(&in, "t", 2, ne, PQ_GGML_F32, 1ull << 63);
    expect_bad(with_tensors(&in, 1, 0, 256), "run past the end of the file", "an offset near 2^64");
    in.n = 0, tinfo(&in, "a", 2, ne, PQ_GGML_F32, 0), tinfo(&in, "b", 1, ne, PQ_GGML_F32, 128);
    expect_bad(with_tensors(&in, 2, 0, 512), "tensor 'b' (data offset 128) overlaps tensor 'a' (offset 0, 256 bytes)",
               "two tensors that overlap");
    in.n = 0, tinfo(&in, "a", 1, ne, PQ_GGML_F32, 0), tinfo(&in, "a", 1, ne, PQ_GGML_F32, 128);
    expect_bad(with_tensors(&in, 2, 0, 512), "tensor 'a' appears twice", "a duplicate tensor name");
    in.n = 0, tinfo(&in, "", 1, ne, PQ_GGML_F32, 0);
    expect_bad(with_tensors(&in, 1, 0, 512), "an empty tensor name", "an empty tensor name");
    in.n = 0, tinfo(&in, "a", 1, ne, PQ_GGML_F32, 0);
    expect_bad(with_tensors(&in, 2, 0, 512), "an empty tensor name at offset", "a tensor count that lies by one (the data read as a name)");

    in.n = 0, tinfo(&in, "a", 2, ne, PQ_GGML_Q8_0, 0), tinfo(&in, "b", 1, ne, PQ_GGML_BF16, 128);
    buf f = with_tensors(&in, 2, 128, 192);
    pq_gguf *g = NULL;
    int ok = open_buf(&f, &g) == PQ_OK && pq_gguf_alignment(g) == 128 &&
             (size_t)((const uint8_t *)pq_gguf_tensor_find(g, "a")->data - f.p) % 128 == 0 &&
             (const uint8_t *)pq_gguf_tensor_find(g, "b")->data == (const uint8_t *)pq_gguf_tensor_find(g, "a")->data + 128;
    PQ_CHECK(ok, "general.alignment 128 places the data section and offsets on 128-byte boundaries");
    pq_gguf_close(g);
    free(f.p), free(in.p);
}

int main(void) {
    test_valid();
    test_bad_header();
    test_bad_tensors();
    return pq_test_done();
}
