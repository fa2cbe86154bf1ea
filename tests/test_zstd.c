// tests/test_zstd.c — formats/zstd_io's streaming reader, and the .zst path
// of the safetensors reader against decompression bombs (issue 10 item 7):
// zstd frames are built here byte by byte (raw and RLE blocks, with and
// without a content size), so a 16 KB file can stand for 512 MB of zeros
// without compressing them. The process's peak resident memory
// (getrusage) must stay far below what a bomb would make pq hold.
#include <sys/resource.h>
#include <unistd.h>
#include <zstd.h>

#include "formats/safetensors.h"
#include "formats/zstd_io.h"
#include "tests/test.h"

static char tmpdir[256];

static const char *tp(const char *name) {
    static char buf[4][512];
    static int slot;
    char *b = buf[slot++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
    return b;
}

static long peak_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

typedef struct {
    uint8_t *p;
    size_t n, cap;
} bytes;

static void put(bytes *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

// A zstd frame header (RFC 8878 3.1.1.1): no checksum, a 128 KiB window,
// and an 8-byte content size when declared != UINT64_MAX.
static void frame_header(bytes *b, uint64_t declared) {
    uint8_t h[14] = {0x28, 0xB5, 0x2F, 0xFD, declared == UINT64_MAX ? 0x00 : 0xC0, 7 << 3};
    for (int i = 0; i < 8; i++) h[6 + i] = (uint8_t)(declared >> (8 * i));
    put(b, h, declared == UINT64_MAX ? 6 : 14);
}

// One block: type 0 raw (n bytes of src) or 1 RLE (n copies of src[0]).
static void block(bytes *b, int type, const void *src, size_t n, int last) {
    uint32_t h = (uint32_t)(n << 3 | (size_t)type << 1 | (size_t)last);
    uint8_t hb[3] = {(uint8_t)h, (uint8_t)(h >> 8), (uint8_t)(h >> 16)};
    put(b, hb, 3);
    put(b, src, type == 0 ? n : 1);
}

// A frame holding a safetensors image of one F32 [1] tensor (4 data bytes),
// then `zeros` more zero bytes (in 128 KiB RLE blocks).
static bytes bomb(uint64_t declared, size_t zeros) {
    const char *hdr = "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    uint8_t img[256];
    size_t hl = strlen(hdr), n = 8 + hl + 4;
    for (int i = 0; i < 8; i++) img[i] = (uint8_t)(hl >> (8 * i));
    memcpy(img + 8, hdr, hl);
    memcpy(img + 8 + hl, "\0\0\x80\x3f", 4); // 1.0f
    bytes b = {0};
    frame_header(&b, declared);
    block(&b, 0, img, n, zeros == 0);
    const uint8_t zero = 0;
    for (size_t done = 0; done < zeros; done += 128 << 10) {
        size_t k = zeros - done < (128 << 10) ? zeros - done : 128 << 10;
        block(&b, 1, &zero, k, done + k == zeros);
    }
    return b;
}

static void write_file(const char *path, const bytes *b) {
    FILE *f = fopen(path, "wb");
    if (f) fwrite(b->p, 1, b->n, f), fclose(f);
}

// Item 7: 512 MB of zeros after a 4-byte tensor, no content size in the
// frame (zstd --no-content-size). pq read the whole stream into memory
// before looking at the 8-byte length; now it reads the length, the header,
// the 4 bytes, and one byte more to find the stream too long.
static void test_bomb(void) {
    bytes b = bomb(UINT64_MAX, (size_t)512 << 20);
    write_file(tp("bomb.safetensors.zst"), &b);
    long before = peak_kb();
    pq_st *st = NULL;
    pq_status s = pq_st_open(tp("bomb.safetensors.zst"), &st);
    long grew = peak_kb() - before;
    PQ_CHECK(s == PQ_ERR_FORMAT && !st && strstr(pq_last_error(), "bomb.safetensors.zst") &&
                 strstr(pq_last_error(), "more than the 66 bytes its header accounts for"),
             "a %zu-byte .zst of 512 MB zeros after its only tensor is refused (%s)", b.n,
             s == PQ_OK ? "accepted" : pq_last_error());
    PQ_CHECK(grew < 64 * 1024, "... holding at most 64 MB while refusing it (peak grew by %ld KB)", grew);
    pq_st_close(st);
    free(b.p);

    // a content size of 2 TB in the frame header: nothing is allocated for it
    b = bomb((uint64_t)1 << 41, 1 << 20);
    write_file(tp("claims.safetensors.zst"), &b);
    before = peak_kb();
    s = pq_st_open(tp("claims.safetensors.zst"), &st);
    grew = peak_kb() - before;
    PQ_CHECK(s == PQ_ERR_FORMAT && !st && strstr(pq_last_error(), "claims.safetensors.zst") && grew < 64 * 1024,
             "a frame declaring 2 TB that holds 1 MB is a format error, peak +%ld KB (%s)", grew,
             s == PQ_OK ? "accepted" : pq_last_error());
    free(b.p);

    // a header whose tensor claims 48 MB over a stream that ends at once:
    // memory follows the bytes that arrive, not the claim; a claim of 1 GB
    // from a 90-byte file (past 1024x and 64 MB) is refused before reading on
    static const struct { const char *hdr, *needle; } claims[] = {
        {"{\"big\":{\"dtype\":\"U8\",\"shape\":[50331648],\"data_offsets\":[0,50331648]}}", "but its header's tensors need"},
        {"{\"big\":{\"dtype\":\"U8\",\"shape\":[1073741824],\"data_offsets\":[0,1073741824]}}", "more than 1024 x the"},
    };
    for (int k = 0; k < 2; k++) {
        uint8_t img[256];
        size_t hl = strlen(claims[k].hdr);
        for (int i = 0; i < 8; i++) img[i] = (uint8_t)(hl >> (8 * i));
        memcpy(img + 8, claims[k].hdr, hl);
        bytes c = {0};
        frame_header(&c, UINT64_MAX);
        block(&c, 0, img, 8 + hl, 1);
        write_file(tp("short.safetensors.zst"), &c);
        before = peak_kb();
        s = pq_st_open(tp("short.safetensors.zst"), &st);
        grew = peak_kb() - before;
        PQ_CHECK(s == PQ_ERR_FORMAT && strstr(pq_last_error(), claims[k].needle) && grew < 16 * 1024,
                 "a header claiming %s over an empty data region: refused, peak +%ld KB (%s)", k ? "1 GB" : "48 MB",
                 grew, pq_last_error());
        free(c.p);
    }

    // the same 4-byte image without the zeros opens, with or without a content size
    for (int declared = 0; declared < 2; declared++) {
        b = bomb(declared ? 66 : UINT64_MAX, 0);
        write_file(tp("ok.safetensors.zst"), &b);
        s = pq_st_open(tp("ok.safetensors.zst"), &st);
        const pq_tensor *t = s == PQ_OK ? pq_st_find(st, "x") : NULL;
        PQ_CHECK(t && *(const float *)t->data == 1.0f && pq_st_file_raw_bytes(st, 0) == 66 &&
                     pq_st_file_disk_bytes(st, 0) == b.n,
                 "the exact image opens (content size %s): %s", declared ? "declared" : "absent",
                 s ? pq_last_error() : "ok");
        pq_st_close(st);
        free(b.p);
    }
}

// The reader streams: pieces of any size add up to the content; several
// frames are one stream; a stream cut inside a frame is refused.
static void test_reader(void) {
    enum { N = 300000 };
    uint8_t *src = malloc(N), *got = malloc(N + 16);
    for (int i = 0; i < N; i++) src[i] = (uint8_t)(i * 2654435761u >> 13);
    size_t cap = ZSTD_compressBound(N), zn = ZSTD_compress(got, 0, src, 0, 1);
    uint8_t *z = malloc(2 * cap + 64);
    size_t z1 = ZSTD_compress(z, cap, src, N / 2, 3), z2 = ZSTD_compress(z + z1, cap, src + N / 2, N - N / 2, 3);
    (void)zn;
    FILE *f = fopen(tp("two.zst"), "wb");
    fwrite(z, 1, z1 + z2, f);
    fclose(f);
    pq_zstd_reader *r = NULL;
    size_t total = 0, step = 1, n;
    int ok = pq_zstd_reader_open(tp("two.zst"), &r) == PQ_OK && pq_zstd_reader_declared(r) == N / 2;
    while (ok) {
        ok = pq_zstd_reader_read(r, got + total, step, &n) == PQ_OK;
        total += n;
        if (n < step) break;
        step = step * 3 + 1;
    }
    PQ_CHECK(ok && total == N && memcmp(got, src, N) == 0 && pq_zstd_reader_disk_bytes(r) == z1 + z2,
             "two frames read in growing pieces give the content (%zu of %d bytes)", total, N);
    pq_zstd_reader_free(r);
    f = fopen(tp("cut.zst"), "wb");
    fwrite(z, 1, z1 / 2, f);
    fclose(f);
    ok = pq_zstd_reader_open(tp("cut.zst"), &r) == PQ_OK;
    pq_status s = ok ? pq_zstd_reader_read(r, got, N, &n) : PQ_ERR_IO;
    PQ_CHECK(s == PQ_ERR_FORMAT && strstr(pq_last_error(), "ends inside a frame") && strstr(pq_last_error(), "cut.zst"),
             "a stream cut inside its frame is refused: %s", pq_last_error());
    pq_zstd_reader_free(r);
    PQ_CHECK(pq_zstd_reader_open(tmpdir, &r) == PQ_ERR_IO && !r && strstr(pq_last_error(), "not a regular file"),
             "a directory is not read as a stream: %s", pq_last_error());
    free(src);
    free(got);
    free(z);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "%s/pq-zstd.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) return printf("FAIL - mkdtemp\n"), 1;
    test_bomb(); // first: the peak-memory checks need a small process
    test_reader();
    const char *names[] = {"bomb.safetensors.zst", "claims.safetensors.zst", "short.safetensors.zst",
                           "ok.safetensors.zst", "two.zst", "cut.zst"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(tp(names[i]));
    rmdir(tmpdir);
    return pq_test_done();
}
