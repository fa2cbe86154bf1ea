// formats/regex.h — regular expressions in time linear in the text, for the
// "re:" entries of a compressed-tensors quantization_config (its ignore and
// targets lists, which compressed-tensors matches with Python's re.match).
//
// A pattern is compiled into a Thompson NFA (a program of at most
// PQ_REGEX_MAX_PROGRAM instructions) and run as a set of states over the
// text, one step per character: O(len(text) x program) time and
// O(program) memory, whatever the pattern or the text -- no backtracking,
// so "(a+)+$" or "(x|x)*y" cost what "a" costs.
//
// The syntax is the subset of Python's `re` those lists use, with Python's
// meaning (re.match: anchored at the start, a match of any prefix counts):
//   literals and `\` + punctuation; `.` (not newline); classes `[...]`
//   with ranges, `^` negation and \d \w \s \D \W \S inside; `\d \w \s \D
//   \W \S`; `\a \f \n \r \t \v \xhh`; groups `(...)`, `(?:...)`,
//   `(?P<name>...)`, comments `(?#...)`; `|`; `* + ? {m} {m,} {,n} {m,n}`
//   and their lazy forms (`*?`, ...: the same for a yes/no answer); `^ $ \A
//   \Z \b \B`.
// Anything else -- backreferences, lookaround, atomic groups, possessive
// quantifiers, inline flags, conditionals, \N \u \U escapes -- is refused
// by name, as are Python's own syntax errors (nothing to repeat, multiple
// repeat, bad ranges, unbalanced parentheses). The text is read as UTF-8
// code points (an invalid byte is one character that only `.` and negated
// sets match); \d \w \s are exact on ASCII and use formats/tokenizer's
// Unicode classes beyond it (\d as \p{N}, where Python takes Nd).
#ifndef PQ_REGEX_H
#define PQ_REGEX_H

#include <stddef.h>

#include "common/status.h"

// Bounds what one pattern may cost: instructions once counted repetitions
// are expanded, and pattern bytes.
#define PQ_REGEX_MAX_PROGRAM 20000
#define PQ_REGEX_MAX_PATTERN 4096

typedef struct pq_regex pq_regex;

// Compiles pattern[0..len). Unsupported or invalid syntax, a pattern longer
// than PQ_REGEX_MAX_PATTERN or a program past PQ_REGEX_MAX_PROGRAM is
// PQ_ERR_FORMAT naming the construct and its byte offset; the caller adds
// the file and field. On error *out is NULL.
pq_status pq_regex_compile(const char *pattern, size_t len, pq_regex **out);

// 1 if the pattern matches a prefix of s[0..n) (Python's re.match), else 0.
// Uses workspace inside re: one re must not be matched from two threads at
// once. Never allocates.
int pq_regex_match(pq_regex *re, const char *s, size_t n);

void pq_regex_free(pq_regex *re); // NULL-safe

// Instructions in the compiled program (what one character of text costs,
// at most): for bounding the total of a list of patterns.
int pq_regex_size(const pq_regex *re);

#endif
