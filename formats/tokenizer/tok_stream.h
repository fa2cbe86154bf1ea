// formats/tokenizer/tok_stream.h — decoding ids to text one id at a time,
// as a generator produces them, without ever cutting a UTF-8 character.
//
// A byte-level or byte-fallback token may hold part of a character (a
// 3-byte "€" can come as three tokens); decoding it alone gives U+FFFD. The
// stream decodes a window of ids that starts at the last point where the
// text was complete, compares it with the same window minus the new id,
// and releases the new suffix only when it does not end in U+FFFD (the
// method of Hugging Face text-generation-inference). Context ids given at
// creation (the end of the prompt) are decoded but never emitted, so a
// decoder that treats the first token specially (SentencePiece's leading
// space) sees the generated text as the continuation it is. Special tokens
// are skipped (skip_special). The pieces concatenated equal the decode of
// the generated ids with context, past the context's own text.
#ifndef PQ_TOK_STREAM_H
#define PQ_TOK_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "formats/tokenizer/tokenizer.h"

typedef struct pq_tok_stream pq_tok_stream;

// A stream over tok (borrowed; must outlive it) after n_context context ids
// (at most the last PQ_TOK_STREAM_CONTEXT are kept). Ids out of range are
// PQ_ERR_ARG.
#define PQ_TOK_STREAM_CONTEXT 4
pq_status pq_tok_stream_create(const pq_tokenizer *tok, const int32_t *context, size_t n_context,
                               pq_tok_stream **out);
void pq_tok_stream_free(pq_tok_stream *s); // NULL-safe

// Appends id. *text receives the text it completes (valid UTF-8, possibly
// empty: *len == 0), borrowed until the next call on s.
pq_status pq_tok_stream_push(pq_tok_stream *s, int32_t id, const char **text, size_t *len);

// The text still held back at the end of generation (an incomplete
// character decodes as U+FFFD, as a full decode would give it). The last
// call on s: only pq_tok_stream_free may follow.
pq_status pq_tok_stream_flush(pq_tok_stream *s, const char **text, size_t *len);

#endif
