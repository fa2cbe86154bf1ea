// formats/gguf_write.h — a streaming, atomic GGUF v3 writer (the format is
// described in formats/gguf.h).
//
// Metadata pairs of every value type are added first (in the order they
// will appear; keys unique), then every tensor is declared (name, dims,
// ggml type: ne[0] a whole number of the type's blocks); pq_gguf_writer_begin
// lays the tensors out in declaration order, each at an offset that is a
// multiple of the alignment (the u32 key "general.alignment" when it was
// added, else 32), and writes header, metadata and tensor infos into
// "<final>.tmp" in the target directory. pq_gguf_writer_put writes a
// tensor's bytes at its offset, in any order; pq_gguf_writer_commit checks
// that every tensor was written, pads the file to the alignment after the
// last tensor (as llama.cpp and the gguf package do), fsyncs and renames it
// to the final path. A writer freed before commit removes its temporary
// file, so the final path never holds a half-written file; a full disk or a
// file size limit fails the put or commit with PQ_ERR_IO naming the file.
// All numbers are written little-endian (the host order of the machines pq
// runs on, which the build asserts).
#ifndef PQ_GGUF_WRITE_H
#define PQ_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "formats/gguf.h"

typedef struct pq_gguf_writer pq_gguf_writer;

#define PQ_GGUF_DEFAULT_ALIGNMENT 32

pq_status pq_gguf_writer_create(const char *final_path, pq_gguf_writer **out);

// A scalar of a fixed-size type (everything but STRING and ARRAY; a bool is
// one byte, 0 or 1) read from value in host order. Errors (PQ_ERR_ARG naming
// the file and key): a key that is empty, too long (65535 bytes), not valid
// UTF-8 or given twice; a type that is not a fixed-size scalar; metadata
// added after begin; "general.alignment" not a u32 power of two.
pq_status pq_gguf_writer_kv(pq_gguf_writer *w, const char *key, pq_gguf_vtype type, const void *value);
pq_status pq_gguf_writer_kv_u32(pq_gguf_writer *w, const char *key, uint32_t v);
pq_status pq_gguf_writer_kv_i32(pq_gguf_writer *w, const char *key, int32_t v);
pq_status pq_gguf_writer_kv_f32(pq_gguf_writer *w, const char *key, float v);
pq_status pq_gguf_writer_kv_bool(pq_gguf_writer *w, const char *key, int v);
// A string value: len bytes of UTF-8 (NUL bytes allowed, as GGUF allows).
pq_status pq_gguf_writer_kv_str(pq_gguf_writer *w, const char *key, const char *s, size_t len);
// An array of n fixed-size elements of type elem (host order, packed).
pq_status pq_gguf_writer_kv_array(pq_gguf_writer *w, const char *key, pq_gguf_vtype elem, const void *data,
                                  uint64_t n);
// An array of n strings (strs[i], lens[i] bytes each; lens NULL: NUL-terminated).
pq_status pq_gguf_writer_kv_strs(pq_gguf_writer *w, const char *key, const char *const *strs, const size_t *lens,
                                 uint64_t n);

// Declares a tensor of ggml type `type` (one pq_ggml_type_get knows) with
// n_dims (1..4) dimensions ne[0..n_dims) (ne[0] fastest, each >= 1, ne[0] a
// multiple of the type's block). Errors: PQ_ERR_ARG naming the tensor (a
// name empty, too long or given twice, a bad shape or type, after begin).
pq_status pq_gguf_writer_declare(pq_gguf_writer *w, const char *name, int n_dims, const int64_t *ne, uint32_t type);

// The bytes tensor `name` takes (0 if it was not declared).
uint64_t pq_gguf_writer_tensor_bytes(const pq_gguf_writer *w, const char *name);

// Writes the header into the temporary file (created, or truncated).
pq_status pq_gguf_writer_begin(pq_gguf_writer *w);
// As begin, but reuses an existing "<final>.tmp" whose header is identical
// (an interrupted run being resumed); PQ_ERR_FORMAT if it differs, PQ_ERR_IO
// if there is none. Every tensor then counts as written (the caller's
// journal knows which are).
pq_status pq_gguf_writer_resume(pq_gguf_writer *w);
// Writes tensor `name`'s nbytes (exactly its size) at its offset.
pq_status pq_gguf_writer_put(pq_gguf_writer *w, const char *name, const void *data, size_t nbytes);
// Reads tensor `name`'s nbytes (exactly its size) back from the temporary
// file (a resumed run's finished tensors). PQ_ERR_IO naming the file.
pq_status pq_gguf_writer_read(pq_gguf_writer *w, const char *name, void *data, size_t nbytes);
// fsyncs the temporary file (before a journal records progress).
pq_status pq_gguf_writer_sync(pq_gguf_writer *w);
pq_status pq_gguf_writer_commit(pq_gguf_writer *w);
void pq_gguf_writer_free(pq_gguf_writer *w); // NULL-safe; removes an uncommitted temporary file
// Keeps the temporary file when the writer is freed (a resumable run).
void pq_gguf_writer_keep_tmp(pq_gguf_writer *w);
const char *pq_gguf_writer_tmp_path(const pq_gguf_writer *w);
// The final file size, known from begin / resume on.
uint64_t pq_gguf_writer_total_bytes(const pq_gguf_writer *w);

#endif
