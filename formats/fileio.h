// formats/fileio.h — whole-file reads and crash-safe writes.
//
// Every output pq writes goes through these: data lands in "<path>.tmp" in
// the same directory, is fsync'd, then renamed over the final path, and the
// directory is fsync'd, so an interrupted run never leaves a half-written
// file at the final path.
#ifndef PQ_FILEIO_H
#define PQ_FILEIO_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

// Reads a whole file into a NUL-terminated malloc'd buffer (*len excludes
// the NUL). Fails with PQ_ERR_IO naming the file if it cannot be read or is
// larger than max_bytes. On error *data is NULL.
pq_status pq_file_read(const char *path, size_t max_bytes, char **data, size_t *len);

// Writes data to path atomically (tmp + fsync + rename + fsync dir).
pq_status pq_file_write_atomic(const char *path, const void *data, size_t len);

// Copies src to dst atomically.
pq_status pq_file_copy_atomic(const char *src, const char *dst);

// fsync a file descriptor's data and then its directory entry's directory.
pq_status pq_fsync_dir(const char *dir);

int pq_file_exists(const char *path);
int pq_dir_exists(const char *path);

// Joins dir and name with one '/' into out (PQ_ERR_ARG if it does not fit).
pq_status pq_path_join(char *out, size_t cap, const char *dir, const char *name);

#endif
