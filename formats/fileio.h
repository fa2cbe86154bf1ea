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

// Opens path for reading if it is a regular file (after following links):
// a FIFO, a device (a link to /dev/zero), a socket or a directory is
// PQ_ERR_IO naming the path and what it is -- never read, never waited on
// (a FIFO is opened non-blocking to be looked at). *fd is then blocking.
pq_status pq_open_regular(const char *path, int *fd);

// Reads a whole regular file into a NUL-terminated malloc'd buffer (*len
// excludes the NUL). Fails with PQ_ERR_IO naming the file if it cannot be
// read, is not a regular file, or is larger than max_bytes. On error *data
// is NULL.
pq_status pq_file_read(const char *path, size_t max_bytes, char **data, size_t *len);

// pq_file_read for a text stream (--text, --calib): a FIFO is read too, as
// any Unix tool reads `<(zcat wiki.txt.gz)`, waiting for its writer; the cap
// bounds it. Devices, sockets and directories are refused as above.
pq_status pq_text_read(const char *path, size_t max_bytes, char **data, size_t *len);

// Writes data to path atomically (tmp + fsync + rename + fsync dir).
pq_status pq_file_write_atomic(const char *path, const void *data, size_t len);

// Copies the regular file src to dst atomically.
pq_status pq_file_copy_atomic(const char *src, const char *dst);

// fsyncs the directory dir, making a rename or create inside it durable.
pq_status pq_fsync_dir(const char *dir);

// A regular file / a directory (after following links) is at path.
int pq_file_exists(const char *path);
int pq_dir_exists(const char *path);
// Anything is at path: a file of any type, or a link (even a dangling
// one). For optional inputs: present but unreadable must be an error, not
// "absent".
int pq_path_exists(const char *path);

// Joins dir and name with one '/' into out (PQ_ERR_ARG if it does not fit).
pq_status pq_path_join(char *out, size_t cap, const char *dir, const char *name);

// ---- building blocks for streaming writers (safetensors, zstd) ----------

// The directory part of path into out: "." when it has none, "/" for a
// file in the root (PQ_ERR_ARG if it does not fit).
pq_status pq_path_dir(char *out, size_t cap, const char *path);

// Writes "<path>.tmp" into out (PQ_ERR_ARG if it does not fit).
pq_status pq_tmp_path(char *out, size_t cap, const char *path);

// Writes all len bytes to fd at its position / at byte offset off, retrying
// short writes and EINTR. PQ_ERR_IO naming path and the reason (a full disk,
// a file size limit) on failure.
pq_status pq_fd_write_all(int fd, const void *data, size_t len, const char *path);
pq_status pq_fd_pwrite_all(int fd, const void *data, size_t len, uint64_t off, const char *path);

// Reopens tmp, the temporary file of an interrupted writer, for writing
// (O_RDWR) into *fd: it must be no longer than total bytes and begin with
// header[0..n) (the same declared tensors and metadata); otherwise a
// "cannot resume" error naming tmp.
pq_status pq_file_reopen_tmp(const char *tmp, const void *header, size_t n, uint64_t total, int *fd);

// Finishes an atomic write: fsyncs and closes fd (always closed), renames
// tmp over final, fsyncs final's directory. PQ_ERR_IO naming the file on
// failure; a failure before the rename removes tmp and leaves final untouched.
pq_status pq_file_commit_tmp(int fd, const char *tmp, const char *final);

#endif
