// formats/tokenizer/tokenizer.h — Hugging Face tokenizer.json BPE, encode and decode.
//
// Supports the two BPE families LLM checkpoints ship:
//   - SentencePiece style (Llama 2, TinyLlama, the stories260K fixture):
//     normalizer Prepend("▁") + Replace(" " -> "▁") (or the legacy Metaspace
//     pre-tokenizer), BPE with byte_fallback (<0xXX> pieces) and fuse_unk,
//     decoder that maps "▁" back to " ".
//   - byte level (GPT-2, Llama 3, Qwen2, SmolLM2): ByteLevel pre-tokenizer
//     (optionally after a Split with the model's regex), bytes mapped to
//     printable unicode, BPE over them, ByteLevel decoder.
// Added/special tokens in "added_tokens" are matched before the model runs,
// as the tokenizers library does. BOS/EOS come from tokenizer_config.json
// (add_bos_token, bos_token, ...) or the post_processor (TemplateProcessing).
// The ids equal those of the Hugging Face tokenizers library.
#ifndef PQ_TOKENIZER_H
#define PQ_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

typedef struct pq_tokenizer pq_tokenizer;

// Loads <dir>/tokenizer.json and, when present, <dir>/tokenizer_config.json
// (and <dir>/chat_template.jinja when the config holds no chat_template);
// given a .gguf file instead of a directory, the tokenizer its
// tokenizer.ggml.* metadata describes (formats/gguf_hf.h). Unsupported
// models, normalizers or pre-tokenizers are refused by name.
pq_status pq_tok_load(const char *model_dir, pq_tokenizer **out);
// Same from explicit paths (config_path may be NULL).
pq_status pq_tok_load_files(const char *tokenizer_json, const char *config_path, pq_tokenizer **out);
// Same from memory (name is used in error messages).
pq_status pq_tok_load_json(const char *json, size_t len, const char *config_json, size_t config_len,
                           const char *name, pq_tokenizer **out);
void pq_tok_free(pq_tokenizer *tok); // NULL-safe

int pq_tok_vocab_size(const pq_tokenizer *tok); // 1 + the largest id
int pq_tok_bos(const pq_tokenizer *tok);        // -1 if the model has none
int pq_tok_eos(const pq_tokenizer *tok);        // -1 if the model has none
int pq_tok_adds_bos(const pq_tokenizer *tok);   // 1 if add_special_tokens=True prepends BOS
// tokenizer_config.json's chat_template (the Jinja source; from a list of
// named templates, the one named "default"), NULL if there is none. Valid
// while tok is.
const char *pq_tok_chat_template(const pq_tokenizer *tok);
// The id whose token is exactly `text` (an added token's content or a
// vocabulary piece, e.g. "<|im_end|>"), -1 if there is none.
int pq_tok_token_id(const pq_tokenizer *tok, const char *text);
// The vocabulary string of an id (e.g. "▁Once", "<0x0A>"), NULL if out of range.
const char *pq_tok_piece(const pq_tokenizer *tok, int id);

// Encodes len bytes of UTF-8 text. With add_special, BOS (and EOS) are added
// as the tokenizer's post-processor would (add_special_tokens=True). Returns
// a malloc'd array in *ids (free with free()). Text that is not valid UTF-8
// fails with PQ_ERR_FORMAT naming the byte offset.
pq_status pq_tok_encode(const pq_tokenizer *tok, const char *text, size_t len, int add_special,
                        int32_t **ids, size_t *n_ids);

// Decodes ids to UTF-8 (malloc'd, NUL-terminated; *len excludes the NUL).
// Ids out of range fail with PQ_ERR_ARG.
pq_status pq_tok_decode(const pq_tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
                        char **text, size_t *len);

#endif
