// tests/lib/tok_expect.h — a tokenizer check shared by tests/test_tokenizer.c
// and tests/ubsan_tokenizer.c (header-only: the UBSan binaries link the
// UBSan libpq alone, not libpq_test.a).
#ifndef PQ_TEST_TOK_EXPECT_H
#define PQ_TEST_TOK_EXPECT_H

#include <stdlib.h>
#include <string.h>

#include "formats/tokenizer/tokenizer.h"

// Whether text encodes (no special tokens added) to exactly want[0..nwant).
static inline int pq_test_encodes_to(const pq_tokenizer *tok, const char *text, const int32_t *want, size_t nwant) {
    int32_t *ids = NULL;
    size_t n = 0;
    int ok = pq_tok_encode(tok, text, strlen(text), 0, &ids, &n) == PQ_OK && n == nwant &&
             (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
    free(ids);
    return ok;
}

#endif
