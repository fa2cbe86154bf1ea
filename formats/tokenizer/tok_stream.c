#include "formats/tokenizer/tok_stream.h"

#include <stdlib.h>
#include <string.h>

struct pq_tok_stream {
    const pq_tokenizer *tok;
    int32_t *ids;
    size_t n, cap;
    size_t prefix, read;  // the window starts at ids[prefix]; ids before `read` are emitted (or context)
    char *prefix_text;    // decode(ids[prefix:read])
    size_t prefix_len;
    char *text;           // the last decode of ids[prefix:n]; what push/flush return points into it
};

void pq_tok_stream_free(pq_tok_stream *s) {
    if (!s) return;
    free(s->ids);
    free(s->prefix_text);
    free(s->text);
    free(s);
}

static pq_status append(pq_tok_stream *s, int32_t id) {
    PQ_FAIL_IF(id < 0 || id >= pq_tok_vocab_size(s->tok), PQ_ERR_ARG, "token id %d is outside the vocabulary of %d",
               (int)id, pq_tok_vocab_size(s->tok));
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        int32_t *p = realloc(s->ids, cap * sizeof *p);
        PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "out of memory");
        s->ids = p;
        s->cap = cap;
    }
    s->ids[s->n++] = id;
    return PQ_OK;
}

static pq_status decode(const pq_tok_stream *s, size_t from, size_t to, char **text, size_t *len) {
    return pq_tok_decode(s->tok, s->ids + from, to - from, 1, text, len);
}

pq_status pq_tok_stream_create(const pq_tokenizer *tok, const int32_t *context, size_t n_context,
                               pq_tok_stream **out) {
    *out = NULL;
    pq_tok_stream *s = calloc(1, sizeof *s);
    PQ_FAIL_IF(!s, PQ_ERR_NOMEM, "out of memory");
    s->tok = tok;
    pq_status st = PQ_OK;
    size_t first = n_context > PQ_TOK_STREAM_CONTEXT ? n_context - PQ_TOK_STREAM_CONTEXT : 0;
    for (size_t i = first; i < n_context; i++) PQ_TRY_GOTO(st, append(s, context[i]));
    s->read = s->n;
    PQ_TRY_GOTO(st, decode(s, 0, s->n, &s->prefix_text, &s->prefix_len));
    *out = s;
    return PQ_OK;
done:
    pq_tok_stream_free(s);
    return st;
}

static int ends_incomplete(const char *t, size_t n) {
    return n >= 3 && memcmp(t + n - 3, "\xEF\xBF\xBD", 3) == 0;
}

pq_status pq_tok_stream_push(pq_tok_stream *s, int32_t id, const char **text, size_t *len) {
    *text = "";
    *len = 0;
    PQ_TRY(append(s, id));
    free(s->text);
    s->text = NULL;
    size_t n;
    PQ_TRY(decode(s, s->prefix, s->n, &s->text, &n));
    if (n <= s->prefix_len || memcmp(s->text, s->prefix_text, s->prefix_len) != 0 || ends_incomplete(s->text, n))
        return PQ_OK; // nothing new, or a character still incomplete: wait for more ids
    // the window moves to the ids just released
    char *pt;
    size_t plen;
    PQ_TRY(decode(s, s->read, s->n, &pt, &plen));
    *text = s->text + s->prefix_len;
    *len = n - s->prefix_len;
    free(s->prefix_text);
    s->prefix_text = pt;
    s->prefix_len = plen;
    s->prefix = s->read;
    s->read = s->n;
    return PQ_OK;
}

pq_status pq_tok_stream_flush(pq_tok_stream *s, const char **text, size_t *len) {
    *text = "";
    *len = 0;
    if (s->read == s->n) return PQ_OK;
    free(s->text);
    s->text = NULL;
    size_t n;
    PQ_TRY(decode(s, s->prefix, s->n, &s->text, &n));
    // what the window's text shares with the text already released, cut at a
    // character boundary (all of it unless a decoder rewrote earlier text)
    size_t keep = 0;
    while (keep < s->prefix_len && keep < n && s->text[keep] == s->prefix_text[keep]) keep++;
    while (keep > 0 && keep < n && ((unsigned char)s->text[keep] & 0xC0) == 0x80) keep--;
    *text = s->text + keep;
    *len = n - keep;
    s->read = s->n;
    return PQ_OK;
}
