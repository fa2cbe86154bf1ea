// formats/sha256.h — SHA-256 (FIPS 180-4), for the provenance of packed
// checkpoints (the hash of the source weights in pq.json).
#ifndef PQ_SHA256_H
#define PQ_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

typedef struct {
    uint32_t h[8];
    uint64_t len;      // bytes hashed so far
    uint8_t buf[64];
    size_t n;          // bytes in buf
} pq_sha256;

void pq_sha256_init(pq_sha256 *s);
void pq_sha256_update(pq_sha256 *s, const void *data, size_t len);
// Finishes the hash into 64 lowercase hex digits + NUL.
void pq_sha256_hex(pq_sha256 *s, char out[65]);

// nblocks 64-byte blocks into the state h with the SHA extensions
// (formats/sha256_shani.c; pq_sha256_update uses it where kernels/cpu.h's
// pq_cpu_sha says so); K: the 64 round constants.
void pq_sha256_blocks_shani(uint32_t h[8], const uint8_t *p, size_t nblocks, const uint32_t K[64]);

// Hashes the bytes of the file at path into s (streamed, 1 MiB at a time).
// PQ_ERR_IO naming the file if it cannot be read.
pq_status pq_sha256_file(pq_sha256 *s, const char *path);

#endif
