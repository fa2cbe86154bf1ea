// formats/tokenizer/pretok.h — the pre-tokenizers of tokenizer.json: ByteLevel (GPT-2
// byte-to-unicode mapping and split regex), Split with the GPT-2, Llama 3 or
// Qwen2 regex (hand-written scanners, no regex library), Metaspace, Digits,
// and Sequence of these. Anything else is refused by name. Internal to
// formats/ (the tokenizer).
#ifndef PQ_PRETOK_H
#define PQ_PRETOK_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "formats/tokenizer/unicode.h"

// A list of pieces of text: piece i is text.p[p[i].off .. +p[i].len).
// first: the piece starts at offset 0 of the input (Metaspace's "first").
typedef struct {
    size_t off, len;
    int first;
} pq_piece;

typedef struct {
    pq_tbuf text;
    pq_piece *p;
    size_t n, cap;
} pq_pieces;

// Appends s[0..len) to ps->text as a new piece (empty ones too).
pq_status pq_pieces_add(pq_pieces *ps, const char *s, size_t len, int first);
// Adds the piece ps->text.p[off .. off+len) (text already appended).
pq_status pq_pieces_add_range(pq_pieces *ps, size_t off, size_t len, int first);
void pq_pieces_free(pq_pieces *ps);

// The split regexes pq knows (the only ones real checkpoints use).
typedef enum {
    PQ_SPLIT_GPT2,   // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    PQ_SPLIT_LLAMA3, // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|...
    PQ_SPLIT_QWEN2,  // the Llama 3 pattern with \p{N} for \p{N}{1,3}
} pq_split_pattern;

// The pattern whose regex source is exactly regex; -1 if none.
int pq_split_pattern_of(const char *regex);
// The regex source of a pattern, as tokenizer.json spells it.
const char *pq_split_pattern_regex(pq_split_pattern pat);

// The length in bytes of the match of pat at the start of s[0..n) (n > 0),
// as find_iter of Oniguruma would return it; >= 1, since every pattern
// matches any character. s should be valid UTF-8 (invalid bytes count as
// single punctuation characters).
size_t pq_split_match(pq_split_pattern pat, const char *s, size_t n);

// Appends the GPT-2 byte-to-unicode image of s[0..n) to out.
pq_status pq_bytelevel_map(const char *s, size_t n, pq_tbuf *out);
// The byte that code point cp stands for in the byte-level alphabet, -1 if none.
int pq_bytelevel_byte(uint32_t cp);

typedef struct pq_pretok pq_pretok;

// Parses the "pre_tokenizer" section (NULL or JSON null: none). Unknown types
// or unsupported settings fail with PQ_ERR_FORMAT naming them.
pq_status pq_pretok_parse(const json_t *j, pq_pretok **out);
void pq_pretok_free(pq_pretok *pt); // NULL-safe

// 1 if pt does nothing (no pre-tokenizer): the whole segment is one word.
int pq_pretok_is_identity(const pq_pretok *pt);

// Scratch for pq_pretok_run (zero-initialise; free with pq_pretok_ws_free).
typedef struct {
    pq_pieces a, b;
    pq_tbuf tmp;
} pq_pretok_ws;
void pq_pretok_ws_free(pq_pretok_ws *ws);

// Pre-tokenizes the segment s[0..n) (n > 0); first: it starts at offset 0 of
// the input text. On success *words points into ws (valid until the next
// call with ws) and holds the non-empty words, in order.
pq_status pq_pretok_run(const pq_pretok *pt, const char *s, size_t n, int first, pq_pretok_ws *ws,
                        const pq_pieces **words);

#endif
