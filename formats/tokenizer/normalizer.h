// formats/tokenizer/normalizer.h — the normalizers of tokenizer.json that BPE
// checkpoints use: Prepend, Replace (string patterns) (the Llama 2 /
// SentencePiece family), NFC (Qwen2), NFD, and Sequence of them. NFKC, NFKD,
// Lowercase, regex patterns and the rest are refused by name.
// Internal to formats/ (the tokenizer).
//
// NFC and NFD use Unicode 14.0 (formats/tokenizer/unicode_nfc.c). The tokenizers
// library's crate (unicode-normalization-alignments) has Unicode 9.0 tables:
// both give the same result on every text made of code points assigned by
// 9.0, and on every single code point; they differ only on text holding the
// ~100 combining marks assigned since (which the library treats as
// starters) or the one composite since (U+11938).
#ifndef PQ_NORMALIZER_H
#define PQ_NORMALIZER_H

#include <jansson.h>
#include <stddef.h>

#include "common/status.h"
#include "formats/tokenizer/unicode.h"

typedef struct pq_norm pq_norm;

// Parses the "normalizer" section (NULL or JSON null: the identity).
// PQ_ERR_FORMAT naming what is not supported.
pq_status pq_norm_parse(const json_t *j, pq_norm **out);
void pq_norm_free(pq_norm *n); // NULL-safe

// 1 if n leaves every text unchanged.
int pq_norm_is_identity(const pq_norm *n);

// A normalized text may be at most PQ_NORM_MAX_GROWTH x + PQ_NORM_SLACK
// bytes of the original (real normalizers: Replace " " -> "\u2581" is 3x);
// a chain that would grow it further (40 x Replace "a" -> "aa" doubles it 40
// times) is refused before the step allocates.
#define PQ_NORM_MAX_GROWTH 16
#define PQ_NORM_SLACK 1024

// Writes the normalized form of s[0..len) to out (replacing its contents).
// PQ_ERR_FORMAT naming the step if the result would exceed the bound above.
pq_status pq_norm_apply(const pq_norm *n, const char *s, size_t len, pq_tbuf *out);

#endif
