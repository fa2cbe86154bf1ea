// eval/convert.h — `pq convert`: a GGUF file written out as a Hugging Face
// checkpoint directory that transformers loads.
//
// The output holds config.json, generation_config.json (when the file names
// BOS or EOS), tokenizer.json, tokenizer_config.json and model.safetensors:
// the GGUF file's Hugging Face view (formats/gguf_hf.h) with every tensor in
// `dtype` ("f16", "bf16", "f32"; NULL keeps the view's: F16/BF16/F32 as
// stored, dequantized block types as F32, which is exact). The model is
// opened as pq_model_open would first, so what is written is a checkpoint
// pq itself loads (every tensor present, shapes as config.json says).
// Written through formats/outdir.h: a temporary sibling directory renamed
// into place; an existing output is replaced only with force. A NaN or an
// Inf in a tensor (after the dtype conversion, so F16 overflow too) is
// refused by tensor name and nothing is written.
#ifndef PQ_CONVERT_H
#define PQ_CONVERT_H

#include "common/status.h"

typedef struct {
    const char *gguf;  // input .gguf
    const char *out;   // output directory
    const char *dtype; // "f16" | "bf16" | "f32" | NULL (as stored)
    int force;         // replace an existing out
} pq_convert_params;

pq_convert_params pq_convert_default_params(void);

typedef struct {
    int tensors;
    long long params;
    unsigned long long bytes; // of model.safetensors
    char arch[64];            // "LlamaForCausalLM", ...
} pq_convert_result;

// Called after each tensor is written.
typedef void (*pq_convert_progress)(void *ud, int done, int total, const char *tensor);

// Converts p->gguf into p->out. PQ_ERR_ARG for a bad dtype or an existing
// out without force; PQ_ERR_FORMAT for what the GGUF file or its view
// refuses (naming the file and key or tensor); PQ_ERR_NUMERIC for a
// non-finite value (naming the tensor and element); PQ_ERR_IO for the disk.
pq_status pq_convert_gguf(const pq_convert_params *p, pq_convert_progress cb, void *ud, pq_convert_result *res);

#endif
