// libFuzzer target: the safetensors header parser on arbitrary bytes.
// Whatever it accepts must be safe to walk: every tensor's bytes are its
// range of the input (ASan reports any range outside it), aligned to its
// dtype (copied when the input has them misaligned), every name must be
// found again, and metadata lookups must work.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pq_st *st = NULL;
    if (pq_st_open_buffer(data, size, "fuzz.safetensors", &st) != PQ_OK) {
        if (st || pq_last_error()[0] == '\0') abort(); // a failure must say why and return nothing
        return 0;
    }
    volatile uint8_t sink = 0;
    for (int i = 0; i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        if (t->nbytes != pq_dtype_size(t->dtype) * (size_t)t->numel) abort();
        if (t->nbytes) {
            // the bytes of its range in the input, at an address aligned to its dtype
            const uint8_t *p = t->data;
            if (t->offset > size || t->nbytes > size - t->offset) abort();
            if ((uintptr_t)p % pq_dtype_size(t->dtype) || memcmp(p, data + t->offset, t->nbytes)) abort();
            sink ^= p[0];
            sink ^= p[t->nbytes - 1];
        }
        if (pq_st_find(st, t->name) != t) abort();
    }
    (void)pq_st_metadata(st, "format");
    (void)sink;
    pq_st_close(st);
    return 0;
}
