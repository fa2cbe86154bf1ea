// formats/normalizer.h — the normalizers of tokenizer.json that BPE
// checkpoints use: Prepend, Replace (string patterns) and Sequence of them
// (the Llama 2 / SentencePiece family). Unicode normalization forms (NFC,
// NFKC, ...), Lowercase, regex patterns and the rest are refused by name.
// Internal to formats/ (the tokenizer).
#ifndef PQ_NORMALIZER_H
#define PQ_NORMALIZER_H

#include <jansson.h>
#include <stddef.h>

#include "common/status.h"
#include "formats/unicode.h"

typedef struct pq_norm pq_norm;

// Parses the "normalizer" section (NULL or JSON null: the identity).
// PQ_ERR_FORMAT naming what is not supported.
pq_status pq_norm_parse(const json_t *j, pq_norm **out);
void pq_norm_free(pq_norm *n); // NULL-safe

// 1 if n leaves every text unchanged.
int pq_norm_is_identity(const pq_norm *n);

// Writes the normalized form of s[0..len) to out (replacing its contents).
pq_status pq_norm_apply(const pq_norm *n, const char *s, size_t len, pq_tbuf *out);

#endif
