// formats/tokenizer/tok_added.h — the "added_tokens" of tokenizer.json: finding them in
// text before the model runs, as the tokenizers library's AddedVocabulary
// does (leftmost-longest matching, then the single_word, lstrip and rstrip
// rules). Internal to formats/ (the tokenizer).
//
// Matching is linear in the text and the patterns, whatever they are (tens
// of thousands of added tokens sharing a prefix, as chat models ship):
// an Aho-Corasick automaton over the reversed patterns, run backwards over
// the text a window at a time, gives the longest pattern starting at each
// position; the split then walks forward taking the leftmost of those.
#ifndef PQ_TOK_ADDED_H
#define PQ_TOK_ADDED_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

typedef struct {
    char *content;
    size_t len;
    int32_t id;
    int special, lstrip, rstrip, single_word, normalized;
} pq_added_token;

// A piece of text after splitting: [start, end) is an added token (id >= 0)
// or plain text (id -1).
typedef struct {
    size_t start, end;
    int32_t id;
} pq_added_seg;

// The segments of a split, and the scratch it reuses (zero-initialise;
// release with pq_added_segs_free).
typedef struct {
    pq_added_seg *p;
    size_t n, cap;
    int32_t *scratch;
    size_t scratch_cap;
} pq_added_segs;

void pq_added_segs_free(pq_added_segs *s);

typedef struct pq_added_matcher pq_added_matcher;

pq_status pq_added_matcher_new(pq_added_matcher **out);
void pq_added_matcher_free(pq_added_matcher *m); // NULL-safe

// Adds pattern pat[0..len) (len > 0) that stands for tok (borrowed: it must
// outlive m). Patterns added earlier win ties between identical patterns.
pq_status pq_added_matcher_add(pq_added_matcher *m, const char *pat, size_t len, const pq_added_token *tok);

// Builds the automaton; call once after the last pq_added_matcher_add and
// before pq_added_split. PQ_ERR_NOMEM on failure.
pq_status pq_added_matcher_finish(pq_added_matcher *m);

// 1 if m has no patterns.
int pq_added_matcher_empty(const pq_added_matcher *m);

// Splits s[0..n) into plain text and added tokens (out is overwritten) as
// AddedVocabulary::find_matches does; empty plain segments are left out.
pq_status pq_added_split(const pq_added_matcher *m, const char *s, size_t n, pq_added_segs *out);

#endif
