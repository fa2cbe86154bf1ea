// formats/tokenizer/tok_decoder.h — the "decoder" section of tokenizer.json: turns the
// pieces of decoded ids back into text. Supports ByteLevel, Metaspace,
// Replace (string patterns), ByteFallback, Fuse, Strip and Sequence of these,
// with the semantics of the Hugging Face tokenizers library; anything else is
// refused by name. Internal to formats/ (the tokenizer).
#ifndef PQ_TOK_DECODER_H
#define PQ_TOK_DECODER_H

#include <jansson.h>

#include "common/status.h"
#include "formats/tokenizer/pretok.h"

typedef struct pq_tokdec pq_tokdec;

// Parses the "decoder" section (NULL or JSON null: pieces joined with " ",
// as the library does without a decoder).
pq_status pq_tokdec_parse(const json_t *j, pq_tokdec **out);
void pq_tokdec_free(pq_tokdec *d); // NULL-safe

// Decodes the pieces in *tokens (consumed: its contents are clobbered; tmp is
// scratch) and appends the text to out. Invalid UTF-8 that byte-level or
// byte-fallback pieces spell becomes U+FFFD, as in the library. A Replace
// step that would grow the text past the normalizer bound
// (PQ_NORM_MAX_GROWTH x + PQ_NORM_SLACK) is PQ_ERR_FORMAT naming it.
pq_status pq_tokdec_run(const pq_tokdec *d, pq_pieces *tokens, pq_pieces *tmp, pq_tbuf *out);

#endif
