// formats/gguf.h — GGUF files (ggml / llama.cpp's model format): a validated
// mmap reader.
//
// Format (ggml's gguf.h and docs/gguf.md), everything little-endian:
//
//   magic     "GGUF" (4 bytes)
//   version   u32: 2 or 3 (1 had 32-bit counts and is refused, as is a
//             byte-swapped, big-endian file)
//   n_tensors u64
//   n_kv      u64
//   n_kv key/value pairs:   key (string), value type (u32), value
//   n_tensors tensor infos: name (string), n_dims (u32), ne[n_dims] (u64 each),
//                           ggml type (u32, kernels/ggml_blocks.h), offset (u64)
//   padding to the alignment (the u32 key "general.alignment", default 32)
//   data:     tensor i's bytes at data start + offset_i
//
//   string     u64 length + that many bytes of UTF-8 (no NUL)
//   value type 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool (1 byte,
//              0 or 1), 8 string, 9 array, 10 u64, 11 i64, 12 f64
//   array      element type (u32) + count (u64) + the elements; arrays of
//              arrays are refused (no model metadata uses them)
//
// ne[0] is the fastest-varying dimension: a Hugging Face [rows, cols] matrix
// is ne = {cols, rows}, and a block type packs each row of ne[0] values in
// ne[0] / block blocks.
//
// The reader validates before it trusts: counts against the bytes left
// (before anything is allocated), string and array lengths inside the file,
// keys and tensor names unique and without NUL bytes, value and tensor types
// known, bools 0 or 1, the alignment a power of two, 1 <= n_dims <= 4, every
// ne >= 1 and their product without overflow, ne[0] a multiple of the block
// size, offsets aligned, every tensor's bytes inside the file, no two
// tensors overlapping. Any failure is one message naming the file and what
// is wrong.
#ifndef PQ_GGUF_H
#define PQ_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

typedef enum {
    PQ_GGUF_U8, PQ_GGUF_I8, PQ_GGUF_U16, PQ_GGUF_I16, PQ_GGUF_U32, PQ_GGUF_I32, PQ_GGUF_F32,
    PQ_GGUF_BOOL, PQ_GGUF_STRING, PQ_GGUF_ARRAY, PQ_GGUF_U64, PQ_GGUF_I64, PQ_GGUF_F64,
    PQ_GGUF_NTYPES
} pq_gguf_vtype;

// "u32", "string", "array", ... ("?" for an unknown value).
const char *pq_gguf_vtype_name(pq_gguf_vtype t);

// A string in the file: len bytes at p, not NUL-terminated.
typedef struct {
    const char *p;
    size_t len;
} pq_gguf_str;

// One metadata pair. A scalar is an array of one element of type elem.
typedef struct {
    const char *key;       // NUL-terminated copy
    pq_gguf_vtype type;    // the value's type: a scalar type or PQ_GGUF_ARRAY
    pq_gguf_vtype elem;    // the element type (= type for a scalar)
    uint64_t n;            // number of elements (1 for a scalar)
    const uint8_t *data;   // fixed-size elements: their little-endian bytes in the file
    const pq_gguf_str *strs; // strings: the n strings
} pq_gguf_kv;

#define PQ_GGUF_MAX_DIMS 4

typedef struct {
    const char *name;      // NUL-terminated copy
    int n_dims;            // 1..4
    int64_t ne[PQ_GGUF_MAX_DIMS]; // ne[0] fastest; 1 past n_dims
    uint32_t type;         // a ggml type id (pq_ggml_type_get knows it)
    uint64_t offset;       // from the start of the data section
    int64_t numel;
    const void *data;      // inside the file; aligned as the file's alignment
    size_t nbytes;
} pq_gguf_tensor;

typedef struct pq_gguf pq_gguf;

// 1 if path is a regular file whose first 4 bytes are "GGUF".
int pq_gguf_is_file(const char *path);

// Maps and validates a GGUF file. On error *out is NULL and the message
// names the file.
pq_status pq_gguf_open(const char *path, pq_gguf **out);
// The same on bytes in memory (borrowed: they must outlive the pq_gguf);
// name is used in messages.
pq_status pq_gguf_open_buffer(const void *data, size_t len, const char *name, pq_gguf **out);
void pq_gguf_close(pq_gguf *g); // NULL-safe

const char *pq_gguf_path(const pq_gguf *g);  // the path or name it was opened with
uint32_t pq_gguf_version(const pq_gguf *g);
uint32_t pq_gguf_alignment(const pq_gguf *g);
uint64_t pq_gguf_file_bytes(const pq_gguf *g);

// Metadata, in file order. Pointers stay valid until pq_gguf_close.
int pq_gguf_kv_count(const pq_gguf *g);
const pq_gguf_kv *pq_gguf_kv_at(const pq_gguf *g, int i);  // NULL if out of range
const pq_gguf_kv *pq_gguf_find(const pq_gguf *g, const char *key); // NULL if absent

// Typed getters. Each fails with PQ_ERR_FORMAT naming the file and key when
// the key is absent or holds another type (pq_gguf_find tells absence
// first). get_int accepts any integer type and fails when the value is
// outside [lo, hi]; get_float accepts f32 and f64 (widened exactly).
pq_status pq_gguf_get_int(const pq_gguf *g, const char *key, int64_t lo, int64_t hi, int64_t *out);
pq_status pq_gguf_get_float(const pq_gguf *g, const char *key, double *out);
pq_status pq_gguf_get_bool(const pq_gguf *g, const char *key, int *out);
pq_status pq_gguf_get_str(const pq_gguf *g, const char *key, pq_gguf_str *out);
// An array whose elements have type elem.
pq_status pq_gguf_get_array(const pq_gguf *g, const char *key, pq_gguf_vtype elem, const pq_gguf_kv **out);

// Element i (< kv->n) of a kv holding integers, floats or bools, as the
// widest type; kv->elem must be of that family.
int64_t pq_gguf_kv_int(const pq_gguf_kv *kv, uint64_t i);
double pq_gguf_kv_float(const pq_gguf_kv *kv, uint64_t i);

// Tensors, in file order. Pointers stay valid until pq_gguf_close.
int pq_gguf_tensor_count(const pq_gguf *g);
const pq_gguf_tensor *pq_gguf_tensor_at(const pq_gguf *g, int i); // NULL if out of range
const pq_gguf_tensor *pq_gguf_tensor_find(const pq_gguf *g, const char *name); // NULL if absent

#endif
