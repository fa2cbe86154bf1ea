// libFuzzer target: tokenizer.json loading, encoding and decoding.
// The input is a tokenizer.json; when it loads, a fixed text (added-token
// look-alikes, whitespace, non-ASCII) and the input itself (as text) are
// encoded, every id must be inside the vocabulary, and the ids decode with
// and without special tokens. A failure must leave a message and no output.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/tokenizer/tokenizer.h"

static void encode_decode(const pq_tokenizer *tok, const char *text, size_t len, int add_special) {
    int32_t *ids = NULL;
    size_t n = 0;
    if (pq_tok_encode(tok, text, len, add_special, &ids, &n) != PQ_OK) {
        if (ids || n || pq_last_error()[0] == '\0') abort();
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= pq_tok_vocab_size(tok)) abort();
    for (int skip = 0; skip < 2; skip++) {
        char *out = NULL;
        size_t out_len = 0;
        if (pq_tok_decode(tok, ids, n, skip, &out, &out_len) != PQ_OK) abort(); // ids in range always decode
        if (strlen(out) > out_len) abort();
        free(out);
    }
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char text[] = "<s>Hello  world's\t<unk>1234 </s>caf\xC3\xA9 \xE2\x96\x81x\r\n\n<|endoftext|> \xF0\x9F\x98\x80 [rs]  ";
    pq_tokenizer *tok = NULL;
    if (pq_tok_load_json((const char *)data, size, NULL, 0, "fuzz.json", &tok) != PQ_OK) {
        if (tok || pq_last_error()[0] == '\0') abort();
        return 0;
    }
    int vs = pq_tok_vocab_size(tok), bos = pq_tok_bos(tok), eos = pq_tok_eos(tok);
    if (vs < 0 || bos >= vs || eos >= vs || pq_tok_piece(tok, vs) || pq_tok_piece(tok, -1)) abort();
    encode_decode(tok, text, sizeof text - 1, 1);
    encode_decode(tok, (const char *)data, size, 0);
    pq_tok_free(tok);
    return 0;
}
