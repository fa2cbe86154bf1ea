// libFuzzer target: the .zst reader (formats/zstd_io.c) and the .zst path of
// the safetensors reader. The input is a file holding a zstd stream: read
// through pq_zstd_reader in odd-sized pieces (at most 4 MiB), then opened
// as model.safetensors.zst, where whatever opens must be safe to walk and
// whatever fails must say why. Bombs cost the bytes a header accounts for.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/safetensors.h"
#include "formats/zstd_io.h"
#include "tests/fuzz/fuzz_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("in.safetensors.zst", data, size);
    pq_zstd_reader *r = NULL;
    if (pq_zstd_reader_open(path, &r) == PQ_OK) {
        static uint8_t buf[1 << 16];
        size_t total = 0, got = 0, step = 1 + (size ? data[0] : 0) * 97;
        while (total < ((size_t)4 << 20) && pq_zstd_reader_read(r, buf, step % sizeof buf + 1, &got) == PQ_OK &&
               got == step % sizeof buf + 1) {
            total += got;
            step = step * 31 + 7;
        }
        if (pq_zstd_reader_disk_bytes(r) > size) abort();
        pq_zstd_reader_free(r);
    } else if (r || pq_last_error()[0] == '\0') {
        abort();
    }
    pq_st *st = NULL;
    if (pq_st_open(path, &st) != PQ_OK) {
        if (st || pq_last_error()[0] == '\0') abort();
        return 0;
    }
    volatile uint8_t sink = 0;
    for (int i = 0; i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        if (t->offset + t->nbytes > pq_st_file_raw_bytes(st, 0) || (uintptr_t)t->data % pq_dtype_size(t->dtype)) abort();
        if (t->nbytes) sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->nbytes - 1];
    }
    (void)sink;
    pq_st_close(st);
    return 0;
}
