// eval/gguf_out.h — a model (pq_model: a Hugging Face checkpoint, a packed
// one, or a GGUF file) written as a GGUF file llama.cpp runs: the part of
// `pq export --to gguf` and of `pq quantize --scheme gguf-*` that is the
// same for both.
//
// The file holds the model's metadata and tokenizer (formats/gguf_export.h),
// then every tensor under its GGUF name in the type llama.cpp's quantizer
// would give it for the target type (formats/gguf_export.h), Q/K rows
// permuted for llama models. The caller supplies the decoder-layer linears
// (pq_gguf_out_put_linear: blocks of the planned type, rows in Hugging Face
// order); pq_gguf_out_begin writes everything else from the source:
// embeddings and the head quantized with ggml's round to nearest
// (kernels/ggml_quant.h), or copied block for block from a GGUF source
// that already holds them in that type; norms and biases as F32 (with
// defer_vectors the caller writes the per-layer ones instead:
// pq_gguf_out_put_vector, for methods that fold scales into them).
//
// The file is written to path through formats/gguf_write.h (a temporary
// file renamed at commit); the caller places path inside the output
// directory of formats/outdir.h.
#ifndef PQ_GGUF_OUT_H
#define PQ_GGUF_OUT_H

#include "common/threads.h"
#include "eval/model.h"
#include "formats/gguf_export.h"

typedef struct {
    const pq_model *m;
    const char *source;          // the model's path (messages, general.name)
    const char *path;            // the file to write
    pq_ggml_type target;         // F16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K or Q6_K
    int fallback;                // linears whose rows are not whole blocks: llama.cpp's fallback type
    int defer_vectors;           // the caller writes the per-layer norms and biases
    int resume;                  // reuse an interrupted run's temporary file (formats/gguf_write.h)
    const char *const *meta;     // extra string metadata: key, value, key, value, ... (pq's provenance)
    int n_meta;                  // pairs
    pq_pool *pool;               // may be NULL
} pq_gguf_out_params;

typedef struct pq_gguf_out pq_gguf_out;

// What the file holds, for reports.
typedef struct {
    int n_tensors;
    int n_fallback;              // linears in llama.cpp's fallback type
    int n_copied;                // tensors copied block for block from a GGUF source
    long long linear_weights;    // weights of the decoder-layer linears
    unsigned long long linear_bytes; // their bytes in the file
    unsigned long long file_bytes;
} pq_gguf_out_stats;

// Plans the file (every tensor declared with its type; errors name the
// tensor: a linear without --fallback whose rows are not whole blocks, a
// tokenizer or architecture GGUF cannot hold), writes the header and every
// tensor the caller does not supply. On error nothing is returned and the
// temporary file is removed (kept on resume).
pq_status pq_gguf_out_begin(const pq_gguf_out_params *p, pq_gguf_out **out);

// The type planned for linear `slot` of layer `layer` (*fell_back: llama.cpp's fallback).
pq_ggml_type pq_gguf_out_linear_type(const pq_gguf_out *g, int layer, pq_linear_slot slot, int *fell_back);

// Bytes of one row of that linear's blocks.
size_t pq_gguf_out_row_bytes(const pq_gguf_out *g, int layer, pq_linear_slot slot);

// Writes the linear: rows [out_features][row_bytes] of its planned type in
// Hugging Face row order (permuted here for q/k).
pq_status pq_gguf_out_put_linear(pq_gguf_out *g, int layer, pq_linear_slot slot, const void *rows);

// Writes a per-layer vector (defer_vectors): Hugging Face tensor `hf_name`
// (a norm or bias of a decoder layer) from n f32 values.
pq_status pq_gguf_out_put_vector(pq_gguf_out *g, const char *hf_name, const float *v, int n);

// Resume: linear `slot` of layer `layer` as the temporary file holds it,
// dequantized exactly (kernels/ggml_dequant.h) into out [rows][cols] in
// Hugging Face row order.
pq_status pq_gguf_out_read_linear(pq_gguf_out *g, int layer, pq_linear_slot slot, float *out);

pq_status pq_gguf_out_sync(pq_gguf_out *g);
pq_status pq_gguf_out_commit(pq_gguf_out *g, pq_gguf_out_stats *stats);
// The temporary file (messages).
const char *pq_gguf_out_tmp_path(const pq_gguf_out *g);
// Frees g; keep: leave the temporary file for a later resume.
void pq_gguf_out_free(pq_gguf_out *g, int keep); // NULL-safe

#endif
