// libFuzzer target: Unicode normalization (formats/tokenizer/unicode_nfc.c). The input
// is the text. Invalid UTF-8 must fail with a format error and leave the
// buffer as it was; valid text must normalize to valid UTF-8 with
// NFC(NFC(x)) == NFC(x), NFD(NFD(x)) == NFD(x), NFC(NFD(x)) == NFC(x) and
// NFD(NFC(x)) == NFD(x).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/tokenizer/unicode.h"

static int same(const pq_tbuf *a, const pq_tbuf *b) { return a->len == b->len && memcmp(a->p, b->p, a->len) == 0; }

static void form(int nfc, const char *s, size_t n, pq_tbuf *out) {
    out->len = 0;
    if ((nfc ? pq_uni_nfc(s, n, out) : pq_uni_nfd(s, n, out)) != PQ_OK) abort();
    if (pq_utf8_check(out->p, out->len) != out->len) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *s = (const char *)data;
    pq_tbuf c = {0}, d = {0}, t = {0};
    if (pq_utf8_check(s, size) < size) {
        pq_tbuf_append(&c, "x", 1);
        if (pq_uni_nfc(s, size, &c) != PQ_ERR_FORMAT || pq_uni_nfd(s, size, &c) != PQ_ERR_FORMAT) abort();
        if (c.len != 1 || c.p[0] != 'x' || pq_last_error()[0] == '\0') abort();
    } else {
        form(1, s, size, &c);
        form(0, s, size, &d);
        form(1, c.p, c.len, &t);
        if (!same(&t, &c)) abort();
        form(0, d.p, d.len, &t);
        if (!same(&t, &d)) abort();
        form(1, d.p, d.len, &t);
        if (!same(&t, &c)) abort();
        form(0, c.p, c.len, &t);
        if (!same(&t, &d)) abort();
    }
    pq_tbuf_free(&c);
    pq_tbuf_free(&d);
    pq_tbuf_free(&t);
    return 0;
}
