// eval/model.h — a Hugging Face checkpoint directory opened for inference:
// config.json + the weights (mmap'd safetensors, single or sharded, or .zst),
// with every tensor the architecture needs located, shape-checked against the
// config and wrapped as a pq_linear.
//
// A GGUF file (llama.cpp's format) opens wherever a directory does: its
// Hugging Face view (formats/gguf_hf.h) supplies config.json and the
// tensors (block types dequantized to F32 in memory).
//
// A compressed-tensors checkpoint (what `pq quantize` writes; config.json
// has a quantization_config, formats/packed.h) opens the same way: its
// quantized linears become PQ_W_QPACK / PQ_W_INT8 / PQ_W_FP8 pq_linear's
// whose codes point into the mapped file; only scales and zero points are
// converted into small owned arrays.
#ifndef PQ_MODEL_H
#define PQ_MODEL_H

#include "formats/config.h"
#include "formats/gguf_hf.h"
#include "formats/packed.h"
#include "formats/safetensors.h"
#include "kernels/linear.h"

// The linear layers of one decoder block, in execution order.
typedef enum { PQ_Q, PQ_K, PQ_V, PQ_O, PQ_GATE, PQ_UP, PQ_DOWN, PQ_NLINEAR } pq_linear_slot;

// HF module name of a slot within a layer: "self_attn.q_proj", "mlp.down_proj", ...
const char *pq_linear_slot_name(pq_linear_slot s);

typedef struct {
    pq_linear lin[PQ_NLINEAR];
    float *attn_norm, *mlp_norm; // [hidden], f32 (owned)
    float *bias[PQ_NLINEAR];     // [rows] f32 or NULL (owned): q/k/v bias
} pq_layer;

typedef struct {
    char dir[4096];
    pq_config cfg;
    pq_st *st;                   // owned, or the GGUF view's
    pq_gguf_hf *gguf;            // a .gguf model: its Hugging Face view (else NULL)
    pq_linear embed;             // [vocab][hidden]; a token's row is its embedding
    pq_linear lm_head;           // the embedding itself when tied
    float *final_norm;           // [hidden] (owned)
    pq_layer *layers;            // [n_layers]
    size_t weight_bytes;         // bytes of all tensors as stored
    void *owned_weights;         // weights built in memory, freed with the model (NULL for files)
    pq_packed_info quant;        // quant.quantized: a compressed-tensors checkpoint, its scheme
    void **owned;                // scales / zero points of quantized linears (pq_free each)
    int n_owned, cap_owned;
    unsigned char *used;         // per tensor of st: part of the model (while opening)
} pq_model;

// Opens a model directory or a .gguf file (a regular file starting with
// "GGUF"). Missing config.json/weights, an unsupported
// architecture, a missing tensor or one whose dtype/shape disagrees with the
// config (or, packed, with its quantization_config) all fail with one line
// naming the file and tensor. So does a tensor the config does not account
// for (a layer past num_hidden_layers, an o_proj bias without
// attention_bias, any unknown name): pq would ignore it and quantize would
// copy it unquantized. Allowed and ignored, as transformers does: the
// rotary inv_freq buffers old checkpoints carry, and lm_head.weight beside
// tied embeddings (both shape-checked).
pq_status pq_model_open(const char *dir, pq_model **out);
void pq_model_free(pq_model *m); // NULL-safe

// PQ_ERR_NUMERIC naming the first tensor of m's files (in file order) that
// holds a NaN or Inf -- F32/F16/BF16/F64 weights, FP8 E4M3/E5M2 codes -- and
// the element; PQ_OK if all are finite. Reads every weight: for explaining a
// non-finite result, not for every open.
pq_status pq_model_check_finite(const pq_model *m);


// Layer l's linear in slot s (l < cfg.n_layers; borrowed, valid while m is).
static inline const pq_linear *pq_model_linear(const pq_model *m, int l, pq_linear_slot s) {
    return &m->layers[l].lin[s];
}

// The dtype a dense linear's weight is stored in (F16, BF16 or F32): what
// its quantization scales are stored in, as compressed-tensors does.
static inline pq_dtype pq_linear_dtype(const pq_linear *L) {
    return L->dense_type == PQ_DENSE_F16 ? PQ_DT_F16 : L->dense_type == PQ_DENSE_BF16 ? PQ_DT_BF16 : PQ_DT_F32;
}

// The dtype an unquantized model's weights are stored in (its first
// linear's): what the scales and rewritten norms and biases of a smoothing
// method are stored in.
static inline pq_dtype pq_model_dtype(const pq_model *m) { return pq_linear_dtype(&m->layers[0].lin[0]); }


#endif
