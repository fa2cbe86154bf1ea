#include "formats/tokenizer/tok_added.h"

#include <stdlib.h>
#include <string.h>

#include "formats/tokenizer/unicode.h"

typedef struct {
    size_t off, len; // the pattern in the arena
    const pq_added_token *tok;
} pattern;

// The automaton: a trie of the reversed patterns (node 0 the root), its
// failure links, and for each node the longest pattern that is a suffix of
// the node's string -- in text terms, the longest pattern starting where the
// backward scan stands. Edges live in a hash table keyed (node, byte).
typedef struct {
    uint64_t key; // node << 8 | byte; EMPTY when unused
    int32_t child;
} edge;

#define EMPTY UINT64_MAX
#define WINDOW ((size_t)1 << 16) // positions resolved per backward scan (at least the longest pattern)

struct pq_added_matcher {
    pq_tbuf arena;
    pattern *p;
    size_t n, cap, maxlen;
    int32_t *fail, *best, *first_child, *next_sibling; // per node
    unsigned char *in_byte;                            // per node: the byte of the edge into it
    size_t nodes;
    edge *edges;
    size_t edge_cap; // a power of two
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
    free(m->fail);
    free(m->best);
    free(m->first_child);
    free(m->next_sibling);
    free(m->in_byte);
    free(m->edges);
    free(m);
}

void pq_added_segs_free(pq_added_segs *s) {
    free(s->p);
    free(s->scratch);
    memset(s, 0, sizeof *s);
}

int pq_added_matcher_empty(const pq_added_matcher *m) { return m->n == 0; }

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
    m->p[m->n++] = (pattern){off, len, tok};
    if (len > m->maxlen) m->maxlen = len;
    return PQ_OK;
}

static uint64_t edge_hash(uint64_t key) {
    key ^= key >> 31;
    key *= 0x9e3779b97f4a7c15ull;
    return key ^ (key >> 29);
}

static int32_t child(const pq_added_matcher *m, int32_t node, unsigned char b) {
    uint64_t key = (uint64_t)node << 8 | b;
    for (size_t i = edge_hash(key) & (m->edge_cap - 1);; i = (i + 1) & (m->edge_cap - 1)) {
        if (m->edges[i].key == key) return m->edges[i].child;
        if (m->edges[i].key == EMPTY) return -1;
    }
}

// The child of node for byte b, created if absent (the tables are sized for
// every byte of every pattern beforehand).
static int32_t add_child(pq_added_matcher *m, int32_t node, unsigned char b) {
    uint64_t key = (uint64_t)node << 8 | b;
    size_t i = edge_hash(key) & (m->edge_cap - 1);
    for (; m->edges[i].key != EMPTY; i = (i + 1) & (m->edge_cap - 1))
        if (m->edges[i].key == key) return m->edges[i].child;
    int32_t c = (int32_t)m->nodes++;
    m->edges[i] = (edge){key, c};
    m->in_byte[c] = b;
    m->best[c] = -1;
    m->first_child[c] = -1;
    m->next_sibling[c] = m->first_child[node];
    m->first_child[node] = c;
    return c;
}

pq_status pq_added_matcher_finish(pq_added_matcher *m) {
    size_t total = m->arena.len + 1, ec = 16;
    PQ_FAIL_IF(total > INT32_MAX / 2, PQ_ERR_FORMAT, "added tokens hold %zu bytes, too many", total);
    while (ec < 2 * total) ec *= 2;
    m->fail = malloc(total * sizeof *m->fail);
    m->best = malloc(total * sizeof *m->best);
    m->first_child = malloc(total * sizeof *m->first_child);
    m->next_sibling = malloc(total * sizeof *m->next_sibling);
    m->in_byte = malloc(total);
    m->edges = malloc(ec * sizeof *m->edges);
    int32_t *queue = malloc(total * sizeof *queue);
    pq_status st = PQ_OK;
    PQ_CHECK_GOTO(!m->fail || !m->best || !m->first_child || !m->next_sibling || !m->in_byte || !m->edges || !queue,
                  st, PQ_ERR_NOMEM, "out of memory indexing %zu added tokens", m->n);
    m->edge_cap = ec;
    for (size_t i = 0; i < ec; i++) m->edges[i].key = EMPTY;
    m->nodes = 1;
    m->best[0] = m->first_child[0] = m->next_sibling[0] = -1;
    m->fail[0] = 0;
    for (size_t k = 0; k < m->n; k++) { // each pattern backwards; the first added keeps a shared node
        const unsigned char *s = (const unsigned char *)m->arena.p + m->p[k].off;
        int32_t node = 0;
        for (size_t j = m->p[k].len; j-- > 0;) node = add_child(m, node, s[j]);
        if (m->best[node] < 0) m->best[node] = (int32_t)k;
    }
    // breadth first: failure links; best falls back to the longest proper
    // suffix's (a node's own pattern is longer than any of those)
    size_t head = 0, tail = 0;
    for (int32_t c = m->first_child[0]; c >= 0; c = m->next_sibling[c]) {
        m->fail[c] = 0;
        queue[tail++] = c;
    }
    while (head < tail) {
        int32_t u = queue[head++];
        for (int32_t c = m->first_child[u]; c >= 0; c = m->next_sibling[c]) {
            int32_t f = m->fail[u], g;
            while ((g = child(m, f, m->in_byte[c])) < 0 && f != 0) f = m->fail[f];
            m->fail[c] = g >= 0 ? g : 0;
            if (m->best[c] < 0) m->best[c] = m->best[m->fail[c]];
            queue[tail++] = c;
        }
    }
done:
    free(queue);
    return st;
}

// scratch[i - a] = the pattern (index) that is longest among those starting
// at i, or -1, for i in [a, b): the automaton reads s backwards from where
// the longest pattern starting before b could end.
static void longest_starting(const pq_added_matcher *m, const char *s, size_t n, size_t a, size_t b,
                             int32_t *scratch) {
    size_t from = b - 1 + m->maxlen - 1 < n ? b - 1 + m->maxlen - 1 : n - 1;
    int32_t node = 0;
    for (size_t j = from + 1; j-- > a;) {
        unsigned char c = (unsigned char)s[j];
        int32_t g;
        while ((g = child(m, node, c)) < 0 && node != 0) node = m->fail[node];
        node = g >= 0 ? g : 0;
        if (j < b) scratch[j - a] = m->best[node];
    }
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
    size_t start_offset = 0, win_a = 0, win_b = 0, win = WINDOW > m->maxlen ? WINDOW : m->maxlen;
    if (m->n && n) {
        size_t need = n < win ? n : win;
        if (out->scratch_cap < need) {
            int32_t *p = realloc(out->scratch, need * sizeof *p);
            PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "out of memory splitting added tokens");
            out->scratch = p;
            out->scratch_cap = need;
        }
    }
    for (size_t i = 0; m->n && i < n;) {
        if (i >= win_b) { // the next window of positions
            win_a = i;
            win_b = n - i < win ? n : i + win;
            longest_starting(m, s, n, win_a, win_b, out->scratch);
        }
        int32_t k = out->scratch[i - win_a];
        if (k < 0) {
            i++;
            continue;
        }
        const pattern *p = &m->p[k];
        size_t start = i, stop = i + p->len;
        i = stop; // the next search starts after this match, used or not
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
