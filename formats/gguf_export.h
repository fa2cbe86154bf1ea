// formats/gguf_export.h — what a GGUF file pq writes holds besides the
// bytes of the format (formats/gguf_write.h), chosen as llama.cpp's own
// tools would: convert_hf_to_gguf.py for the names, metadata and tokenizer,
// llama-quantize (src/llama-quant.cpp) for the tensor types.
//
// Tensor types for a target type T (pq_gguf_tensor_type):
//   norms, biases (1-D)       F32
//   linears (attn_q/k/v/output, ffn_gate/up/down)
//                             T
//   output.weight, and token_embd.weight when it is also the output (tied):
//                             F16 for T = F16; Q8_0 for T = Q8_0 or when the
//                             rows are not whole blocks of T; else Q6_K
//   token_embd.weight (untied) T
// A chosen type whose block does not divide the row length is what
// llama-quantize replaces (tensor_type_fallback): Q4_K -> Q5_0, Q6_K ->
// Q8_0, a 32-value type -> F16, and a fallback that still does not fit ->
// F16. For the embeddings and the head that is part of llama.cpp's choice
// and pq makes it too; for a linear pq does it only when asked (fallback
// set), otherwise such a tensor is an error naming it, its type, and what
// llama.cpp would use: the file would not hold the type asked for.
//
// Metadata (pq_gguf_write_model_meta): general.architecture ("llama" for
// LlamaForCausalLM and MistralForCausalLM without a sliding window,
// "qwen2"), general.type, general.name, general.file_type (llama.cpp's
// LLAMA_FTYPE of T: F16 1, Q4_0 2, Q4_1 3, Q8_0 7, Q5_0 8, Q4_K 14
// (Q4_K_S), Q6_K 18), general.quantization_version 2, and {arch}.block_count,
// context_length, embedding_length, feed_forward_length,
// attention.head_count, attention.head_count_kv, attention.key_length,
// attention.value_length, attention.layer_norm_rms_epsilon, rope.freq_base,
// rope.dimension_count, vocab_size. Refused by name: Llama 3 rope scaling
// (llama.cpp needs a rope_freqs tensor), a sliding window.
//
// Tokenizer (pq_gguf_write_tokenizer_meta, formats/tokenizer/gguf_tok_write.c):
//   SentencePiece-style BPE (byte_fallback, "▁" for spaces through the
//   normalizer or a Metaspace pre-tokenizer): tokenizer.ggml.model "llama",
//   pre "default", scores from the merges (the token the merge of rank r
//   makes scores -r; tokens no merge makes score 0, so llama.cpp's
//   score-ordered merging follows the merge list), token types NORMAL,
//   UNKNOWN, CONTROL (special added tokens), USER_DEFINED (other added
//   tokens), BYTE (<0xXX>), add_space_prefix;
//   byte-level BPE: model "gpt2", the merges, and the pre-tokenizer named by
//   its structure: ByteLevel alone "gpt-2", Digits (one per digit) +
//   ByteLevel "smollm", Split with Llama 3's regex + ByteLevel "llama-bpe",
//   NFC + Split with Qwen2's regex + ByteLevel "qwen2" (others refused: pq
//   would have to guess which llama.cpp pre-tokenizer splits alike);
//   both: tokens padded to the model's vocab_size with "[PAD<id>]"
//   (UNUSED), bos/eos/unknown/padding_token_id, add_bos_token and
//   add_eos_token (tokenizer_config.json's, else what the post-processor
//   adds), tokenizer.chat_template.
#ifndef PQ_GGUF_EXPORT_H
#define PQ_GGUF_EXPORT_H

#include <stdint.h>

#include "formats/config.h"
#include "formats/gguf_write.h"
#include "kernels/ggml_blocks.h"

// "f16", "q8_0", "q4_0", "q4_1", "q5_0", "q4_k", "q6_k" -> a target type;
// anything else is PQ_ERR_ARG naming the choices.
pq_status pq_gguf_parse_type(const char *name, pq_ggml_type *out);
// The lower-case name of a target type ("q4_k").
const char *pq_gguf_type_name(pq_ggml_type t);

typedef enum { PQ_GGUF_ROLE_VECTOR, PQ_GGUF_ROLE_EMBED, PQ_GGUF_ROLE_OUTPUT, PQ_GGUF_ROLE_LINEAR } pq_gguf_role;

// The role of GGUF tensor `name` with n_dims dimensions.
pq_gguf_role pq_gguf_role_of(const char *name, int n_dims);

// The type of a tensor of `role` whose rows hold `cols` values in a file of
// target T (the table above; tied: token_embd is also the output). For a
// linear, with fallback 0 a type whose block does not divide cols is
// PQ_ERR_ARG naming `name`, the type and llama.cpp's replacement; with
// fallback 1 that replacement is the type and *fell_back is set.
pq_status pq_gguf_tensor_type(pq_ggml_type target, pq_gguf_role role, int tied, int64_t cols, int fallback,
                              const char *name, pq_ggml_type *type, int *fell_back);

// general.* and {arch}.* for the model cfg describes, named `name`, target T.
pq_status pq_gguf_write_model_meta(pq_gguf_writer *w, const pq_config *cfg, const char *name, pq_ggml_type target);

// 1 when llama.cpp permutes the rows of q_proj / k_proj for this
// architecture (llama; not qwen2): GGUF row k of a head of hd rows is
// Hugging Face row pq_gguf_hf_row(k, hd) of that head.
int pq_gguf_permutes_qk(const pq_config *cfg);
static inline int64_t pq_gguf_hf_row(int64_t k, int64_t hd) { return (k % 2) * (hd / 2) + k / 2; }

// tokenizer.ggml.* from the model's tokenizer.json text (required),
// tokenizer_config.json text (NULL if absent) and a chat template from a
// chat_template.jinja file (NULL: tokenizer_config.json's, if any); cfg
// gives vocab_size and the bos/eos ids config.json names. Errors
// (PQ_ERR_FORMAT naming `what`, the model): a tokenizer of another kind, a
// pre-tokenizer without a llama.cpp name, more tokens than vocab_size, a
// special token that is not in the vocabulary, a merge that is not two
// tokens.
pq_status pq_gguf_write_tokenizer_meta(pq_gguf_writer *w, const pq_config *cfg, const char *tokenizer_json,
                                       const char *tokenizer_config_json, const char *chat_template, const char *what);

#endif
