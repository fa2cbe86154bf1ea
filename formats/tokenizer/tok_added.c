#include "formats/tokenizer/tok_added.h"

#include <stdlib.h>
#include <string.h>

#include "formats/tokenizer/unicode.h"

typedef struct {
    const char *pat; // points into the arena once built
    size_t off, len, order;
    const pq_added_token *tok;
} pattern;

struct pq_added_matcher {
    pq_tbuf arena;
    pattern *p; // sorted by (first byte, length descending, order) when built
    size_t n, cap;
    size_t bucket[257]; // patterns whose first byte is b: p[bucket[b] .. bucket[b+1])
};

pq_status pq_added_matcher_new(pq_added_matcher **out) {
    *out = calloc(1, sizeof **out);
    PQ_FAIL_IF(!*out, PQ_ERR_NOMEM, "out of memory allocating the added-token matcher");
    return PQ_OK;
}

void pq_added_matcher_free(pq_added_matcher *m) {
    if (!m) return;
    pq_tbuf_free(&m->arena);
    free(m->p);
    free(m);
}

int pq_added_matcher_empty(const pq_added_matcher *m) { return m->n == 0; }

static int cmp_pattern(const void *a, const void *b) {
    const pattern *x = a, *y = b;
    unsigned char fx = (unsigned char)x->pat[0], fy = (unsigned char)y->pat[0];
    if (fx != fy) return fx < fy ? -1 : 1;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

void pq_added_matcher_finish(pq_added_matcher *m) {
    for (size_t i = 0; i < m->n; i++) m->p[i].pat = m->arena.p + m->p[i].off;
    if (m->n) qsort(m->p, m->n, sizeof *m->p, cmp_pattern);
    size_t i = 0;
    for (int b = 0; b < 256; b++) {
        m->bucket[b] = i;
        while (i < m->n && (unsigned char)m->p[i].pat[0] == b) i++;
    }
    m->bucket[256] = m->n;
}

pq_status pq_added_matcher_add(pq_added_matcher *m, const char *pat, size_t len, const pq_added_token *tok) {
    PQ_FAIL_IF(len == 0, PQ_ERR_ARG, "empty added-token pattern");
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 16;
        pattern *p = realloc(m->p, cap * sizeof *p);
        PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "out of memory adding an added token");
        m->p = p;
        m->cap = cap;
    }
    size_t off = m->arena.len;
    PQ_TRY(pq_tbuf_append(&m->arena, pat, len));
    m->p[m->n] = (pattern){NULL, off, len, m->n, tok};
    m->n++;
    return PQ_OK;
}

static pq_status push(pq_added_segs *out, size_t start, size_t end, int32_t id) {
    if (out->n == out->cap) {
        size_t cap = out->cap ? 2 * out->cap : 16;
        pq_added_seg *p = realloc(out->p, cap * sizeof *p);
        PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "out of memory splitting added tokens");
        out->p = p;
        out->cap = cap;
    }
    out->p[out->n++] = (pq_added_seg){start, end, id};
    return PQ_OK;
}

// The leftmost-longest match at or after *pos; NULL if none.
static const pattern *find(const pq_added_matcher *m, const char *s, size_t n, size_t *pos) {
    for (size_t i = *pos; i < n; i++) {
        unsigned char b = (unsigned char)s[i];
        for (size_t k = m->bucket[b]; k < m->bucket[b + 1]; k++) {
            const pattern *p = &m->p[k];
            if (p->len <= n - i && memcmp(s + i, p->pat, p->len) == 0) {
                *pos = i;
                return p;
            }
        }
    }
    return NULL;
}

static int is_word_before(const char *s, size_t at) { // \w$ on s[0..at)
    if (at == 0) return 0;
    size_t c = at - 1;
    while (c > 0 && ((unsigned char)s[c] & 0xC0) == 0x80) c--;
    uint32_t cp;
    return pq_utf8_next(s + c, at - c, &cp) > 0 && (pq_uni_class(cp) & PQ_UNI_WORD);
}

static int is_word_at(const char *s, size_t n, size_t at) { // ^\w on s[at..n)
    uint32_t cp;
    return at < n && pq_utf8_next(s + at, n - at, &cp) > 0 && (pq_uni_class(cp) & PQ_UNI_WORD);
}

static int is_space_at(const char *s, size_t n, size_t at, size_t *len) {
    uint32_t cp;
    int k = pq_utf8_next(s + at, n - at, &cp);
    *len = k > 0 ? (size_t)k : 1;
    return k > 0 && (pq_uni_class(cp) & PQ_UNI_SPACE);
}

pq_status pq_added_split(const pq_added_matcher *m, const char *s, size_t n, pq_added_segs *out) {
    out->n = 0;
    size_t start_offset = 0, pos = 0;
    const pattern *p;
    while (pos < n && (p = find(m, s, n, &pos)) != NULL) {
        size_t start = pos, stop = pos + p->len;
        pos = stop; // the next search starts after this match, used or not
        const pq_added_token *t = p->tok;
        if (t->single_word && (is_word_before(s, start) || is_word_at(s, n, stop))) continue;
        if (t->lstrip) { // the whitespace run that ends at start, not reaching into the last split
            size_t a = start;
            while (a > start_offset) {
                size_t c = a - 1, len;
                while (c > 0 && ((unsigned char)s[c] & 0xC0) == 0x80) c--;
                if (!is_space_at(s, a, c, &len)) break;
                a = c;
            }
            start = a > start_offset ? a : start_offset; // (a < start_offset only after an rstrip overlap)
        }
        if (t->rstrip) {
            size_t len;
            while (stop < n && is_space_at(s, n, stop, &len)) stop += len;
        }
        if (start_offset < start) PQ_TRY(push(out, start_offset, start, -1));
        PQ_TRY(push(out, start, stop, t->id));
        start_offset = stop;
    }
    if (start_offset < n) PQ_TRY(push(out, start_offset, n, -1));
    return PQ_OK;
}
