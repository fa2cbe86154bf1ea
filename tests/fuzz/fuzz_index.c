// libFuzzer target: a sharded checkpoint's model.safetensors.index.json. The
// input is the index; the scratch directory holds three shards (two plain,
// one only as .zst). What opens must hold exactly the weight_map's tensors,
// each in the shard the index names, with its bytes.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/safetensors.h"
#include "formats/zstd_io.h"
#include "tests/fuzz/fuzz_files.h"

static void write_shard(const char *name, const char *header, size_t data_len) {
    uint8_t buf[512];
    size_t hl = strlen(header);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(hl >> (8 * i));
    memcpy(buf + 8, header, hl);
    for (size_t i = 0; i < data_len; i++) buf[8 + hl + i] = (uint8_t)(i * 37 + 11);
    fuzz_write(name, buf, 8 + hl + data_len);
}

static void make_shards(void) {
    static int done;
    if (done++) return;
    write_shard("s1.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                "\"b\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[8,14]}}", 14);
    write_shard("s2.safetensors", "{\"__metadata__\":{\"format\":\"pt\"},\"c\":{\"dtype\":\"I8\",\"shape\":[5],"
                "\"data_offsets\":[0,5]}}", 5);
    write_shard("s3.tmp", "{\"d\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]}}", 8);
    if (pq_zstd_compress_file(fuzz_path("s3.tmp"), fuzz_path("s3.safetensors.zst"), 1) != PQ_OK) abort();
    unlink(fuzz_path("s3.tmp"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    make_shards();
    const char *idx = fuzz_write("model.safetensors.index.json", data, size);
    pq_st *st = NULL;
    if (pq_st_open(idx, &st) != PQ_OK) {
        if (st || pq_last_error()[0] == '\0') abort();
        return 0;
    }
    volatile uint8_t sink = 0;
    for (int i = 0; i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        if (pq_st_find(st, t->name) != t || t->file < 0 || t->file >= pq_st_file_count(st)) abort();
        if ((uintptr_t)t->data % pq_dtype_size(t->dtype)) abort();
        for (size_t k = 0; k < t->nbytes; k++) sink ^= ((const uint8_t *)t->data)[k];
    }
    (void)sink;
    pq_st_close(st);
    return 0;
}
