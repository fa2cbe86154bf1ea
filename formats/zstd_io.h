// formats/zstd_io.h — whole files through streaming zstd.
//
// pq writes "<file>.zst" next to an output as one standard zstd frame with
// the content size in its header and a checksum at its end, so the zstd CLI
// and library read it. The reader takes any valid zstd stream (several
// frames, skippable frames, frames without a checksum); a checksum that is
// present is verified.
#ifndef PQ_ZSTD_IO_H
#define PQ_ZSTD_IO_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

// Decompresses the zstd file at path into a malloc'd buffer of *len bytes
// (free with free()); *disk_bytes (when not NULL) gets the compressed size.
// PQ_ERR_IO if the file cannot be read; PQ_ERR_FORMAT naming the file if it
// is not zstd, is corrupt (e.g. checksum mismatch), ends inside a frame, or
// decompresses to more than max_bytes; PQ_ERR_NOMEM if the output does not
// fit in memory. On error *out is NULL and *len is 0.
pq_status pq_zstd_read_file(const char *path, size_t max_bytes, uint8_t **out, size_t *len,
                            uint64_t *disk_bytes);

// Compresses the file src into dst atomically ("<dst>.tmp", fsync, rename,
// fsync of the directory): one frame at level (1..ZSTD_maxCLevel()), content
// size set, checksum on. PQ_ERR_ARG for a bad level, PQ_ERR_IO naming the
// file for read/write failures (e.g. a full disk); on error nothing is left
// at dst's temporary name and dst is untouched.
pq_status pq_zstd_compress_file(const char *src, const char *dst, int level);

#endif
