// tests/ubsan_tokenizer.c — built against a libpq compiled with
// -fsanitize=undefined -fno-sanitize-recover (build/tests/test_ubsan_tokenizer,
// see the Makefile). A word that encodes to no ids (a BPE model without an
// unk_token drops the characters it has no piece for) goes into the
// encoder's word cache as an empty entry; formats/tokenizer/bpe.c copied that
// entry from the still-empty output vector's null pointer (memcpy from NULL
// is undefined even for 0 bytes), which aborts this binary.
#include <string.h>

#include "formats/tokenizer/tokenizer.h"
#include "tests/lib/tok_expect.h"
#include "tests/test.h"

// A BPE model with no unk_token, no pre-tokenizer (the whole text is one
// word): "y" and "z" have no piece and are dropped.
static const char JSON[] =
    "{\"version\":\"1.0\",\"added_tokens\":[],\"normalizer\":null,\"pre_tokenizer\":null,"
    "\"post_processor\":null,\"decoder\":null,\"model\":{\"type\":\"BPE\",\"dropout\":null,"
    "\"unk_token\":null,\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":false,"
    "\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[[\"a\",\"b\"]]}}";

int main(void) {
    pq_tokenizer *tok = NULL;
    pq_status st = pq_tok_load_json(JSON, strlen(JSON), NULL, 0, "no-unk", &tok);
    PQ_CHECK(st == PQ_OK, "a BPE model without unk_token loads%s%s", st == PQ_OK ? "" : ": ",
             st == PQ_OK ? "" : pq_last_error());
    if (st != PQ_OK) return pq_test_done();
    const int32_t ab[] = {2};
    PQ_CHECK(pq_test_encodes_to(tok, "yz", NULL, 0) && pq_test_encodes_to(tok, "yz", NULL, 0),
             "a word of unknown characters: no ids, twice (the second from the word cache), under UBSan");
    PQ_CHECK(pq_test_encodes_to(tok, "ayzb", ab, 1), "unknown characters inside a word dropped: \"ayzb\" -> [ab]");
    pq_tok_free(tok);
    return pq_test_done();
}
