#include "formats/tokenizer/unicode.h"

#include <stdlib.h>
#include <string.h>

#include "formats/tokenizer/unicode_tables.h"

unsigned pq_uni_class(uint32_t cp) {
    if (cp < 256) return pq_uni_latin1[cp];
    size_t lo = 0, hi = sizeof pq_uni_ranges / sizeof pq_uni_ranges[0];
    while (lo < hi) { // first range with hi >= cp
        size_t mid = lo + (hi - lo) / 2;
        if (pq_uni_ranges[mid].hi < cp) lo = mid + 1;
        else hi = mid;
    }
    if (lo < sizeof pq_uni_ranges / sizeof pq_uni_ranges[0] && pq_uni_ranges[lo].lo <= cp)
        return pq_uni_ranges[lo].mask;
    return 0;
}

int pq_utf8_next(const char *s, size_t n, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned c = u[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int len;
    unsigned lo2 = 0x80, hi2 = 0xBF; // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo2 = 0xA0;      // overlong
        else if (c == 0xED) hi2 = 0x9F; // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo2 = 0x90;      // overlong
        else if (c == 0xF4) hi2 = 0x8F; // above U+10FFFF
    } else return -1;
    uint32_t v = c & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) return -i;
        unsigned b = u[i];
        unsigned lo = i == 1 ? lo2 : 0x80, hi = i == 1 ? hi2 : 0xBF;
        if (b < lo || b > hi) return -i;
        v = (v << 6) | (b & 0x3F);
    }
    *cp = v;
    return len;
}

size_t pq_utf8_check(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) { // ASCII runs are the common case
            i++;
            continue;
        }
        uint32_t cp;
        int k = pq_utf8_next(s + i, n - i, &cp);
        if (k < 0) return i;
        i += (size_t)k;
    }
    return n;
}

int pq_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

pq_status pq_tbuf_reserve(pq_tbuf *b, size_t n) {
    if (b->cap - b->len > n) return PQ_OK; // keep one byte spare for a NUL
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len <= n) {
        PQ_FAIL_IF(cap > SIZE_MAX / 2, PQ_ERR_NOMEM, "text buffer of %zu bytes too large", b->len + n);
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "out of memory growing a text buffer to %zu bytes", cap);
    b->p = p;
    b->cap = cap;
    return PQ_OK;
}

pq_status pq_tbuf_append(pq_tbuf *b, const void *s, size_t n) {
    PQ_TRY(pq_tbuf_reserve(b, n));
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    return PQ_OK;
}

pq_status pq_tbuf_append_lossy(pq_tbuf *b, const char *s, size_t n) {
    static const char fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
    size_t i = 0;
    while (i < n) {
        size_t ok = i + pq_utf8_check(s + i, n - i);
        PQ_TRY(pq_tbuf_append(b, s + i, ok - i));
        if (ok == n) break;
        uint32_t cp;
        int k = pq_utf8_next(s + ok, n - ok, &cp);
        PQ_TRY(pq_tbuf_append(b, fffd, 3));
        i = ok + (size_t)-k;
    }
    return PQ_OK;
}

pq_status pq_tbuf_append_replace(pq_tbuf *b, const char *s, size_t n, const char *pat, const char *rep) {
    size_t pl = strlen(pat), rl = strlen(rep), done = 0;
    for (size_t i = 0; i + pl <= n;) {
        const char *hit = memchr(s + i, pat[0], n - i - pl + 1);
        if (!hit) break;
        i = (size_t)(hit - s);
        if (memcmp(hit, pat, pl) != 0) {
            i++;
            continue;
        }
        PQ_TRY(pq_tbuf_append(b, s + done, i - done));
        PQ_TRY(pq_tbuf_append(b, rep, rl));
        i += pl;
        done = i;
    }
    return pq_tbuf_append(b, s + done, n - done);
}

size_t pq_replace_len(const char *s, size_t n, const char *pat, const char *rep) {
    size_t pl = strlen(pat), rl = strlen(rep), hits = 0;
    for (size_t i = 0; i + pl <= n;) {
        const char *hit = memchr(s + i, pat[0], n - i - pl + 1);
        if (!hit) break;
        i = (size_t)(hit - s);
        if (memcmp(hit, pat, pl) == 0) hits++, i += pl;
        else i++;
    }
    return n - hits * pl + hits * rl;
}

void pq_tbuf_free(pq_tbuf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}
