// formats/safetensors.h — safetensors files: validated mmap reader and a
// streaming, atomic writer.
//
// Format (https://github.com/huggingface/safetensors): 8-byte little-endian
// header length N, then N bytes of UTF-8 JSON
//   {"__metadata__": {"k": "v", ...},
//    "name": {"dtype": "F16", "shape": [r, c], "data_offsets": [begin, end]}, ...}
// then the data region; offsets are relative to the start of the data region.
// The reader validates before it trusts: N within the file, well-formed JSON
// object, known dtypes, dtype size x prod(shape) == end - begin, begin <= end,
// ranges inside the data region and not overlapping, unique names.
//
// Tensor data is aligned to its dtype's size for every reader: the format
// lets the header length (and so every offset) be odd, and a tensor whose
// bytes are misaligned in the file is copied once, at open, into aligned
// memory owned by the pq_st (files as the Hugging Face library and pq
// write them pad the header to 8 bytes and need no copy).
//
// A pq_st is a set of tensors opened together from
//   - a view:              tensors in memory (pq_st_open_view)
//   - one file:            model.safetensors (mmap'd)
//   - one zstd file:       model.safetensors.zst (streamed into memory: the
//                          8-byte length, then the header, then exactly the
//                          bytes the header's tensors account for; a stream
//                          that holds more is refused before it is read)
//   - a shard index:       model.safetensors.index.json ("weight_map"; a
//                          shard absent on disk is read from "<shard>.zst")
//   - a model directory:   the first of the above found in it.
#ifndef PQ_SAFETENSORS_H
#define PQ_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

typedef enum {
    PQ_DT_F64, PQ_DT_F32, PQ_DT_F16, PQ_DT_BF16,
    PQ_DT_F8_E4M3, PQ_DT_F8_E5M2,
    PQ_DT_I64, PQ_DT_I32, PQ_DT_I16, PQ_DT_I8,
    PQ_DT_U64, PQ_DT_U32, PQ_DT_U16, PQ_DT_U8, PQ_DT_BOOL,
    PQ_DT_COUNT
} pq_dtype;

size_t pq_dtype_size(pq_dtype dt);             // bytes per element
const char *pq_dtype_name(pq_dtype dt);        // safetensors spelling: "F16", "F8_E4M3", ...
// Parses a safetensors dtype string; PQ_ERR_FORMAT if unknown.
pq_status pq_dtype_parse(const char *name, pq_dtype *out);

#define PQ_MAX_DIMS 8

typedef struct {
    const char *name;          // borrowed; valid until pq_st_close
    pq_dtype dtype;
    int ndim;
    int64_t shape[PQ_MAX_DIMS];
    int64_t numel;
    const void *data;          // borrowed; valid until pq_st_close; aligned to the dtype's size
    size_t nbytes;
    uint64_t offset;           // where its bytes start in the file: 8 + header length + data_offsets[0]
    int file;                  // index of the file (shard) it came from
} pq_tensor;

typedef struct pq_st pq_st;

// Opens `path` (file, .zst file, index.json or directory, see above) and
// validates every header. On error *out is NULL and the message names the
// file and the problem.
pq_status pq_st_open(const char *path, pq_st **out);
// Parses a safetensors image already in memory (e.g. a fuzzer input). The
// bytes are borrowed (must outlive the pq_st); name is used in messages.
pq_status pq_st_open_buffer(const void *data, size_t len, const char *name, pq_st **out);
// Tensors already in memory (formats/gguf_hf.h's view of a GGUF file), kept
// in the given order. Names are copied; data is borrowed and must outlive
// the pq_st. `source` is the file they were read from, of source_bytes
// bytes: it is the pq_st's one file (its path and size), and pq_st_sha256
// hashes it. PQ_ERR_ARG if a tensor's shape, dtype and byte count disagree,
// PQ_ERR_FORMAT if a name appears twice.
pq_status pq_st_open_view(const char *source, uint64_t source_bytes, const pq_tensor *tensors, int n, pq_st **out);
void pq_st_close(pq_st *st); // NULL-safe

int pq_st_count(const pq_st *st);
// i in [0, count), else NULL; ordered by file, then by data offset
const pq_tensor *pq_st_at(const pq_st *st, int i);
const pq_tensor *pq_st_find(const pq_st *st, const char *name); // NULL if absent
// The i with pq_st_at(st, i) == t, or -1 if t is not one of st's tensors.
int pq_st_index(const pq_st *st, const pq_tensor *t);
// A shape as "[2<sep>3<sep>4]" ("[]" for a scalar) into buf; returns buf.
const char *pq_shape_str(char *buf, size_t cap, int ndim, const int64_t *shape, const char *sep);
// A string from the first file's __metadata__, or NULL. Borrowed.
const char *pq_st_metadata(const pq_st *st, const char *key);

int pq_st_file_count(const pq_st *st);
const char *pq_st_file_path(const pq_st *st, int file);
// Bytes on disk (compressed size for .zst) and bytes of the safetensors
// stream (header + data) of one file.
uint64_t pq_st_file_disk_bytes(const pq_st *st, int file);
uint64_t pq_st_file_raw_bytes(const pq_st *st, int file);

// SHA-256 of the weights (the provenance of everything made from them): the
// safetensors bytes of every file in order, a .zst file's decompressed
// bytes, so a model hashes the same stored plain or compressed. Plain files
// are read, not touched through the mapping (which would make them
// resident). hex: 64 hex digits + NUL. A read error is PQ_ERR_IO naming the file.
pq_status pq_st_sha256(const pq_st *st, char hex[65]);

// Looks `name` up and checks its dtype and shape: PQ_ERR_FORMAT naming the
// file and tensor if absent or different. shape has ndim entries.
pq_status pq_st_expect(const pq_st *st, const char *name, pq_dtype dtype, int ndim,
                       const int64_t *shape, const pq_tensor **out);

// ---- writer -------------------------------------------------------------
//
// Streaming and atomic: declare every tensor (name, dtype, shape) and the
// metadata first, then pq_st_writer_begin writes the header into
// "<final>.tmp" in the target directory; pq_st_writer_put writes each
// tensor's bytes at its offset in any order; pq_st_writer_commit checks that
// every tensor was written, fsyncs, and renames to the final path; with
// zstd_level > 0 it additionally writes "<final>.zst" (atomically too): a
// standard zstd frame with checksum of the same bytes. A writer freed before commit removes its
// temporary file, so the final path never holds a half-written file.
// Tensors are laid out in name order, 8-byte aligned header padded with
// spaces, as the Hugging Face library writes them.
typedef struct pq_st_writer pq_st_writer;

pq_status pq_st_writer_create(const char *final_path, pq_st_writer **out);
pq_status pq_st_writer_set_metadata(pq_st_writer *w, const char *key, const char *value);
pq_status pq_st_writer_declare(pq_st_writer *w, const char *name, pq_dtype dtype, int ndim,
                               const int64_t *shape);
pq_status pq_st_writer_begin(pq_st_writer *w);
// As begin, but reuses an existing "<final>.tmp" whose header is identical
// (an interrupted run being resumed); PQ_ERR_FORMAT if it differs,
// PQ_ERR_IO if there is none. Every tensor then counts as written (the
// caller's journal knows which are); commit still checks the file's size.
pq_status pq_st_writer_resume(pq_st_writer *w);
pq_status pq_st_writer_put(pq_st_writer *w, const char *name, const void *data, size_t nbytes);
// fsync the temporary file (call before recording progress in a journal).
pq_status pq_st_writer_sync(pq_st_writer *w);
pq_status pq_st_writer_commit(pq_st_writer *w, int zstd_level);
void pq_st_writer_free(pq_st_writer *w); // NULL-safe; removes an uncommitted temp file
// Keeps the temporary file of an uncommitted writer when it is freed (a
// resumable run that failed leaves it for --resume).
void pq_st_writer_keep_tmp(pq_st_writer *w);
const char *pq_st_writer_tmp_path(const pq_st_writer *w);
// The final file size (header + data), known from begin / resume on.
uint64_t pq_st_writer_total_bytes(const pq_st_writer *w);

#endif
