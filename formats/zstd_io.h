// formats/zstd_io.h — whole files through streaming zstd.
//
// pq writes "<file>.zst" next to an output as one standard zstd frame with
// the content size in its header and a checksum at its end, so the zstd CLI
// and library read it. The reader takes any valid zstd stream (several
// frames, skippable frames, frames without a checksum); a checksum that is
// present is verified. It streams: how much to decompress is the caller's
// decision (formats/safetensors.c reads the 8-byte length and the header
// first and then exactly the bytes the header accounts for).
#ifndef PQ_ZSTD_IO_H
#define PQ_ZSTD_IO_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

// A zstd file decompressed incrementally, so that a reader can learn from
// the first bytes how many to expect and never hold more than it asked for
// (a 125 KB file can decompress to terabytes). Errors name the file:
// PQ_ERR_IO if it cannot be read, PQ_ERR_FORMAT if it is not zstd or is
// corrupt (e.g. a checksum mismatch), PQ_ERR_NOMEM for the small buffers.
typedef struct pq_zstd_reader pq_zstd_reader;

// Opens path and reads its first compressed block. On error *out is NULL.
pq_status pq_zstd_reader_open(const char *path, pq_zstd_reader **out);
// The content size the first frame's header declares, or UINT64_MAX when
// it declares none (zstd --no-content-size, streamed output).
uint64_t pq_zstd_reader_declared(const pq_zstd_reader *r);
// Decompresses the next n bytes into buf. *got < n only when the stream
// ends first (then the last frame must be complete: a stream that ends
// inside a frame is PQ_ERR_FORMAT).
pq_status pq_zstd_reader_read(pq_zstd_reader *r, void *buf, size_t n, size_t *got);
// Compressed bytes read from the file so far, and the file's size.
uint64_t pq_zstd_reader_disk_bytes(const pq_zstd_reader *r);
uint64_t pq_zstd_reader_file_bytes(const pq_zstd_reader *r);
void pq_zstd_reader_free(pq_zstd_reader *r); // NULL-safe

// Compresses the file src into dst atomically ("<dst>.tmp", fsync, rename,
// fsync of the directory): one frame at level (1..ZSTD_maxCLevel()), content
// size set, checksum on. PQ_ERR_ARG for a bad level, PQ_ERR_IO naming the
// file for read/write failures (e.g. a full disk); on error nothing is left
// at dst's temporary name and dst is untouched.
pq_status pq_zstd_compress_file(const char *src, const char *dst, int level);

#endif
