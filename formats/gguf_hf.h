// formats/gguf_hf.h — a GGUF file seen as a Hugging Face checkpoint.
//
// A .gguf (formats/gguf.h) is turned into what a model directory holds:
// config.json, generation_config.json, tokenizer.json and
// tokenizer_config.json as text, and the tensors under their Hugging Face
// names in a pq_st (formats/safetensors.h), so every path that reads a
// model directory (pq ppl, pq quantize, pq_tok_load, ...) reads a .gguf
// unchanged, and writing the view to disk is `pq convert`.
//
// Architectures: general.architecture "llama" (Llama 1-3, TinyLlama, SmolLM,
// and Mistral as llama.cpp stores it) -> LlamaForCausalLM, "qwen2" ->
// Qwen2ForCausalLM; anything else is refused by name, as are the features
// pq's engine lacks (experts, rope scaling, partial rotary, per-layer sizes).
// Keys read: {arch}.block_count, .context_length, .embedding_length,
// .feed_forward_length, .attention.head_count, .attention.head_count_kv,
// .attention.key_length / .value_length, .attention.layer_norm_rms_epsilon,
// .rope.freq_base, .rope.dimension_count, .vocab_size; tokenizer.ggml.*
// (formats/tokenizer/gguf_tok.c). Tied embeddings when there is no output.weight.
//
// Tensors: F32, F16 and BF16 stay as stored and are not copied (they point
// into the mapped file), except that the 2-D tensors of one model share a
// dtype, as a Hugging Face checkpoint's do (pq_gguf_matrix_dtype: a few F16
// matrices next to block types are widened to F32), and llama's attn_q /
// attn_k (weights and biases): llama.cpp's converter permutes their rows per head for its rope
// (rows reshaped (heads, 2, head_dim/2) and the two inner axes swapped);
// the view undoes that in a copy so the engine's Hugging Face rotate_half
// convention holds. Qwen2 files are not permuted (llama.cpp runs them with
// NEOX rope). The block types Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K,
// Q5_K and Q6_K are dequantized exactly (kernels/ggml_dequant.h) to F32 in
// memory the view owns: 4 bytes per parameter, so a 98 MB Q4_1 file of 135M
// parameters takes 540 MB. Other ggml types are refused by tensor name.
#ifndef PQ_GGUF_HF_H
#define PQ_GGUF_HF_H

#include "formats/gguf.h"
#include "formats/safetensors.h"

// config.json and generation_config.json text (malloc'd, NUL-terminated;
// *generation is NULL when the file names neither BOS nor EOS). Fails with
// PQ_ERR_FORMAT naming the file and the key or tensor that is missing,
// unsupported or inconsistent.
pq_status pq_gguf_config_json(const pq_gguf *g, char **config, char **generation);

// tokenizer.json and tokenizer_config.json text (malloc'd, NUL-terminated)
// from tokenizer.ggml.* (formats/tokenizer/gguf_tok.c describes the mapping).
pq_status pq_gguf_tokenizer_json(const pq_gguf *g, char **tokenizer, char **tokenizer_config);

// The dtype of the view's 2-D tensors (and config.json's torch_dtype): F16
// or BF16 when all of them are stored so, F32 otherwise.
pq_dtype pq_gguf_matrix_dtype(const pq_gguf *g);

// The GGUF name of Hugging Face tensor `hf` of a model of n_layers blocks
// (the inverse of the view's names) into out; *permute is 1 for q_proj, 2
// for k_proj (weights and biases: llama.cpp permutes their rows for llama
// models), else 0. A tensor without a GGUF name is PQ_ERR_FORMAT naming it.
pq_status pq_gguf_name_from_hf(const char *hf, int n_layers, char *out, size_t cap, int *permute);

typedef struct pq_gguf_hf pq_gguf_hf;

// Opens path (a GGUF file) and builds the whole view: side files, tensor
// names, un-permuted and dequantized tensors. On error *out is NULL and the
// message names the file.
pq_status pq_gguf_hf_open(const char *path, pq_gguf_hf **out);
// The same over an opened GGUF file, whose ownership passes to the view
// (closed with it, or at once on error).
pq_status pq_gguf_hf_from(pq_gguf *g, pq_gguf_hf **out);
void pq_gguf_hf_free(pq_gguf_hf *hf); // NULL-safe; frees the pq_st too

// The tensors under Hugging Face names, in the file's order. Owned by hf:
// valid until pq_gguf_hf_free (do not pq_st_close it). Its one "file" is the
// .gguf, so pq_st_sha256 hashes the GGUF file and the byte counts are its.
pq_st *pq_gguf_hf_st(const pq_gguf_hf *hf);
const pq_gguf *pq_gguf_hf_gguf(const pq_gguf_hf *hf);

// The side files a model directory would hold, in this order.
#define PQ_GGUF_HF_NFILES 4
extern const char *const pq_gguf_hf_file_names[PQ_GGUF_HF_NFILES];
// The text of side file `name` (one of pq_gguf_hf_file_names), or NULL when
// the view has none (generation_config.json without BOS/EOS). Borrowed.
const char *pq_gguf_hf_file(const pq_gguf_hf *hf, const char *name);

#endif
