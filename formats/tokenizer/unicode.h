// formats/tokenizer/unicode.h — UTF-8 decoding, the Unicode classes the tokenizer
// needs (\p{L}, \p{N}, \s, \w), canonical normalization (NFC, NFD), plus a
// growable byte buffer for building text. Internal to formats/ (the
// tokenizer); the tables come from tools/gen_unicode_tables.py and
// tools/gen_nfc_tables.py (the same Unicode version, 14.0.0).
#ifndef PQ_UNICODE_H
#define PQ_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

enum {
    PQ_UNI_L = 1,     // \p{L}: general category L*
    PQ_UNI_N = 2,     // \p{N}: general category N*
    PQ_UNI_SPACE = 4, // \s: the White_Space property
    PQ_UNI_WORD = 8,  // \w (approximately the Rust regex crate's; see the generator)
};

// The class mask of a code point (0 for none of the above).
unsigned pq_uni_class(uint32_t cp);

// Decodes the UTF-8 character at s[0..n) (n >= 1) strictly: no overlong
// forms, no surrogates, nothing above U+10FFFF. Returns its length (1..4) and
// stores the code point in *cp; or, if s starts with an invalid sequence,
// returns -k where k >= 1 is the length of its maximal invalid subpart (the
// bytes that one U+FFFD replaces, as Rust's from_utf8_lossy does).
int pq_utf8_next(const char *s, size_t n, uint32_t *cp);

// The byte offset of the first invalid UTF-8 sequence in s[0..n), or n if
// the whole text is valid.
size_t pq_utf8_check(const char *s, size_t n);

// Writes the UTF-8 form of cp (<= U+10FFFF) to out; returns its length.
int pq_utf8_encode(uint32_t cp, char out[4]);

// A growable byte buffer. Zero-initialise; free with pq_tbuf_free.
typedef struct {
    char *p;
    size_t len, cap;
} pq_tbuf;

// Appends n bytes (PQ_ERR_NOMEM on failure, leaving the buffer as it was).
pq_status pq_tbuf_append(pq_tbuf *b, const void *s, size_t n);
// Appends s[0..n) with each invalid UTF-8 subpart replaced by U+FFFD.
pq_status pq_tbuf_append_lossy(pq_tbuf *b, const char *s, size_t n);
// Appends s[0..n) with every non-overlapping occurrence (left to right) of
// the non-empty string pat replaced by rep.
pq_status pq_tbuf_append_replace(pq_tbuf *b, const char *s, size_t n, const char *pat, const char *rep);
// The length pq_tbuf_append_replace would append (counted, nothing allocated).
size_t pq_replace_len(const char *s, size_t n, const char *pat, const char *rep);
// Ensures room for n more bytes.
pq_status pq_tbuf_reserve(pq_tbuf *b, size_t n);
void pq_tbuf_free(pq_tbuf *b);

// Appends the Normalization Form C (canonical decomposition, canonical
// ordering, canonical composition; Hangul included) of the UTF-8 text
// s[0..n) to out, equal to Python's unicodedata.normalize('NFC', s) for the
// tables' Unicode version. Text that is already NFC (ASCII, most precomposed
// text) costs one scan and one copy; the rest is linear in its length.
// Invalid UTF-8 fails with PQ_ERR_FORMAT naming the byte offset, and out is
// left as it was on any error.
pq_status pq_uni_nfc(const char *s, size_t n, pq_tbuf *out);
// The same for Normalization Form D (canonical decomposition and ordering).
pq_status pq_uni_nfd(const char *s, size_t n, pq_tbuf *out);

#endif
