#include "formats/tokenizer/bpe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/tokenizer/unicode.h"

#define EMPTY_KEY UINT64_MAX

typedef struct {
    uint64_t hash;
    uint32_t off, len; // the piece in the arena
    int32_t id;        // -1: empty slot
} vslot;

typedef struct {
    uint64_t key; // (left << 32) | right; EMPTY_KEY when empty
    uint32_t rank;
    int32_t new_id;
} mslot;

struct pq_bpe {
    pq_tbuf arena;
    vslot *vt; // open addressing, linear probing, power-of-two size
    size_t vt_cap, vt_n;
    int32_t *id_slot; // id -> slot in vt, or -1
    size_t id_cap;
    int32_t max_id;
    mslot *mt;
    size_t mt_cap, mt_n;
    uint32_t n_merges;
    int32_t byte_id[256]; // <0xXX> pieces, -1 when absent
    int byte_fallback, fuse_unk, ignore_merges;
    int has_unk;    // an unk_token was configured
    int32_t unk_id; // its id, -1 when it is not in the vocabulary
    char unk_name[64];
};

typedef struct {
    int32_t id, prev, next; // id -1: merged into its left neighbour
} sym;

typedef struct {
    uint32_t rank;
    int32_t pos, new_id;
} hent;

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static uint64_t hash_u64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

pq_status pq_ivec_push(pq_ivec *v, int32_t id) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        int32_t *p = realloc(v->p, cap * sizeof *p);
        PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "out of memory growing a token list to %zu ids", cap);
        v->p = p;
        v->cap = cap;
    }
    v->p[v->n++] = id;
    return PQ_OK;
}

void pq_bpe_scratch_free(pq_bpe_scratch *s) {
    free(s->sym);
    free(s->init);
    free(s->heap);
    free(s->cache);
    memset(s, 0, sizeof *s);
}

// ---- the word cache ----------------------------------------------------------------

#define CACHE_SLOTS 16384 // a power of two
#define CACHE_WORD 24     // the longest word cached, bytes
#define CACHE_IDS 8       // the most ids a cached word has

typedef struct {
    uint8_t len, n; // len 0: empty
    char word[CACHE_WORD];
    int32_t ids[CACHE_IDS];
} cache_slot;

static cache_slot *cache_slot_of(pq_bpe_scratch *s, const char *word, size_t len) {
    if (len == 0 || len > CACHE_WORD) return NULL;
    if (!s->cache && !(s->cache = calloc(CACHE_SLOTS, sizeof(cache_slot)))) return NULL; // no memory: no cache
    uint32_t h = 2166136261u; // FNV-1a
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)word[i]) * 16777619u;
    return (cache_slot *)s->cache + (h & (CACHE_SLOTS - 1));
}

pq_status pq_bpe_new(pq_bpe **out) {
    *out = NULL;
    pq_bpe *b = calloc(1, sizeof *b);
    PQ_FAIL_IF(!b, PQ_ERR_NOMEM, "out of memory allocating a BPE model");
    b->max_id = -1;
    b->unk_id = -1;
    for (int i = 0; i < 256; i++) b->byte_id[i] = -1;
    *out = b;
    return PQ_OK;
}

void pq_bpe_free(pq_bpe *b) {
    if (!b) return;
    pq_tbuf_free(&b->arena);
    free(b->vt);
    free(b->id_slot);
    free(b->mt);
    free(b);
}

static size_t vfind(const pq_bpe *b, const char *s, size_t n, uint64_t h) {
    size_t mask = b->vt_cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const vslot *v = &b->vt[i];
        if (v->id < 0) return i;
        if (v->hash == h && v->len == n && memcmp(b->arena.p + v->off, s, n) == 0) return i;
    }
}

static pq_status vgrow(pq_bpe *b) {
    size_t cap = b->vt_cap ? b->vt_cap * 2 : 1024;
    vslot *nt = malloc(cap * sizeof *nt);
    PQ_FAIL_IF(!nt, PQ_ERR_NOMEM, "out of memory growing the vocabulary table");
    for (size_t i = 0; i < cap; i++) nt[i].id = -1;
    for (size_t i = 0; i < b->vt_cap; i++) {
        if (b->vt[i].id < 0) continue;
        size_t j = b->vt[i].hash & (cap - 1);
        while (nt[j].id >= 0) j = (j + 1) & (cap - 1);
        nt[j] = b->vt[i];
        b->id_slot[b->vt[i].id] = (int32_t)j;
    }
    free(b->vt);
    b->vt = nt;
    b->vt_cap = cap;
    return PQ_OK;
}

pq_status pq_bpe_add_piece(pq_bpe *b, const char *piece, size_t len, int32_t id) {
    PQ_FAIL_IF(id < 0 || id > PQ_BPE_MAX_ID, PQ_ERR_FORMAT, "token id %d out of range [0, %d]", (int)id,
               PQ_BPE_MAX_ID);
    PQ_FAIL_IF(b->arena.len + len >= UINT32_MAX, PQ_ERR_FORMAT, "vocabulary text larger than 4 GiB");
    if ((size_t)id >= b->id_cap) {
        size_t cap = b->id_cap ? b->id_cap : 1024;
        while (cap <= (size_t)id) cap *= 2;
        int32_t *p = realloc(b->id_slot, cap * sizeof *p);
        PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "out of memory growing the vocabulary to %zu ids", cap);
        for (size_t i = b->id_cap; i < cap; i++) p[i] = -1;
        b->id_slot = p;
        b->id_cap = cap;
    }
    if (2 * (b->vt_n + 1) > b->vt_cap) PQ_TRY(vgrow(b));
    uint64_t h = hash_bytes(piece, len);
    size_t i = vfind(b, piece, len, h);
    vslot *v = &b->vt[i];
    if (v->id >= 0) { // the same piece again: the last id wins
        if (b->id_slot[v->id] == (int32_t)i) b->id_slot[v->id] = -1;
    } else {
        v->hash = h;
        v->off = (uint32_t)b->arena.len;
        v->len = (uint32_t)len;
        PQ_TRY(pq_tbuf_append(&b->arena, piece, len));
        PQ_TRY(pq_tbuf_append(&b->arena, "", 1)); // NUL-terminated for pq_bpe_piece
        b->vt_n++;
    }
    v->id = id;
    b->id_slot[id] = (int32_t)i;
    if (id > b->max_id) b->max_id = id;
    return PQ_OK;
}

int32_t pq_bpe_lookup(const pq_bpe *b, const char *piece, size_t len) {
    if (!b->vt_cap) return -1;
    return b->vt[vfind(b, piece, len, hash_bytes(piece, len))].id;
}

const char *pq_bpe_piece(const pq_bpe *b, int32_t id, size_t *len) {
    if (id < 0 || id > b->max_id || b->id_slot[id] < 0) return NULL;
    const vslot *v = &b->vt[b->id_slot[id]];
    *len = v->len;
    return b->arena.p + v->off;
}

int32_t pq_bpe_vocab_size(const pq_bpe *b) { return b->max_id + 1; }

size_t pq_bpe_n_pieces(const pq_bpe *b) { return b->vt_n; }

static const mslot *merge_get(const pq_bpe *b, int32_t left, int32_t right) {
    if (!b->mt_cap) return NULL;
    uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    size_t mask = b->mt_cap - 1;
    for (size_t i = hash_u64(key) & mask;; i = (i + 1) & mask) {
        if (b->mt[i].key == key) return &b->mt[i];
        if (b->mt[i].key == EMPTY_KEY) return NULL;
    }
}

static pq_status merge_put(pq_bpe *b, uint64_t key, uint32_t rank, int32_t new_id) {
    if (2 * (b->mt_n + 1) > b->mt_cap) {
        size_t cap = b->mt_cap ? b->mt_cap * 2 : 1024;
        mslot *nt = malloc(cap * sizeof *nt);
        PQ_FAIL_IF(!nt, PQ_ERR_NOMEM, "out of memory growing the merge table");
        for (size_t i = 0; i < cap; i++) nt[i].key = EMPTY_KEY;
        for (size_t i = 0; i < b->mt_cap; i++) {
            if (b->mt[i].key == EMPTY_KEY) continue;
            size_t j = hash_u64(b->mt[i].key) & (cap - 1);
            while (nt[j].key != EMPTY_KEY) j = (j + 1) & (cap - 1);
            nt[j] = b->mt[i];
        }
        free(b->mt);
        b->mt = nt;
        b->mt_cap = cap;
    }
    size_t mask = b->mt_cap - 1, i = hash_u64(key) & mask;
    while (b->mt[i].key != EMPTY_KEY && b->mt[i].key != key) i = (i + 1) & mask;
    if (b->mt[i].key == EMPTY_KEY) b->mt_n++;
    b->mt[i] = (mslot){key, rank, new_id};
    return PQ_OK;
}

pq_status pq_bpe_add_merge(pq_bpe *b, const char *left, size_t llen, const char *right, size_t rlen) {
    int32_t l = pq_bpe_lookup(b, left, llen), r = pq_bpe_lookup(b, right, rlen);
    PQ_FAIL_IF(l < 0, PQ_ERR_FORMAT, "merge %u: token '%.*s' is not in the vocabulary", (unsigned)b->n_merges,
               (int)(llen > 64 ? 64 : llen), left);
    PQ_FAIL_IF(r < 0, PQ_ERR_FORMAT, "merge %u: token '%.*s' is not in the vocabulary", (unsigned)b->n_merges,
               (int)(rlen > 64 ? 64 : rlen), right);
    char stack[256];
    char *cat = llen + rlen <= sizeof stack ? stack : malloc(llen + rlen);
    PQ_FAIL_IF(!cat, PQ_ERR_NOMEM, "out of memory joining a merge");
    memcpy(cat, left, llen);
    memcpy(cat + llen, right, rlen);
    int32_t m = pq_bpe_lookup(b, cat, llen + rlen);
    if (cat != stack) free(cat);
    PQ_FAIL_IF(m < 0, PQ_ERR_FORMAT, "merge %u: merged token '%.*s%.*s' is not in the vocabulary",
               (unsigned)b->n_merges, (int)(llen > 64 ? 64 : llen), left, (int)(rlen > 64 ? 64 : rlen), right);
    PQ_TRY(merge_put(b, ((uint64_t)(uint32_t)l << 32) | (uint32_t)r, b->n_merges, m));
    b->n_merges++;
    return PQ_OK;
}

pq_status pq_bpe_set_options(pq_bpe *b, int byte_fallback, int fuse_unk, int ignore_merges, const char *unk_token) {
    b->byte_fallback = byte_fallback;
    b->fuse_unk = fuse_unk;
    b->ignore_merges = ignore_merges;
    b->has_unk = unk_token != NULL;
    b->unk_id = unk_token ? pq_bpe_lookup(b, unk_token, strlen(unk_token)) : -1;
    snprintf(b->unk_name, sizeof b->unk_name, "%s", unk_token ? unk_token : "");
    for (int i = 0; i < 256; i++) {
        char piece[8];
        snprintf(piece, sizeof piece, "<0x%02X>", i);
        b->byte_id[i] = pq_bpe_lookup(b, piece, 6);
    }
    return PQ_OK;
}

// ---- the merge loop ------------------------------------------------------

static int hless(const hent *a, const hent *b) { return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos; }

static void sift_down(hent *h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && hless(&h[l], &h[m])) m = l;
        if (l + 1 < n && hless(&h[l + 1], &h[m])) m = l + 1;
        if (m == i) return;
        hent t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static pq_status heap_push(pq_bpe_scratch *s, size_t *n, hent e) {
    if (*n == s->heap_cap) {
        size_t cap = s->heap_cap ? s->heap_cap * 2 : 256;
        hent *p = realloc(s->heap, cap * sizeof *p);
        PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "out of memory growing the BPE merge queue");
        s->heap = p;
        s->heap_cap = cap;
    }
    hent *h = s->heap;
    size_t i = (*n)++;
    h[i] = e;
    while (i > 0 && hless(&h[i], &h[(i - 1) / 2])) {
        hent t = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
    return PQ_OK;
}

static pq_status push_pair(const pq_bpe *b, pq_bpe_scratch *s, size_t *n, int32_t pos) {
    const sym *y = s->sym;
    const mslot *m = merge_get(b, y[pos].id, y[y[pos].next].id);
    return m ? heap_push(s, n, (hent){m->rank, pos, m->new_id}) : PQ_OK;
}

// Sorts e[0..n) by (rank, pos) given that it is sorted by pos: insertion
// sort for short words, else a stable LSD radix sort on the rank (11 bits a
// pass) through tmp.
static void sort_initial(hent *e, hent *tmp, size_t n) {
    if (n <= 64) {
        for (size_t i = 1; i < n; i++) {
            hent x = e[i];
            size_t j = i;
            for (; j > 0 && e[j - 1].rank > x.rank; j--) e[j] = e[j - 1];
            e[j] = x;
        }
        return;
    }
    uint32_t max_rank = 0;
    for (size_t i = 0; i < n; i++)
        if (e[i].rank > max_rank) max_rank = e[i].rank;
    for (unsigned shift = 0; shift < 32 && (max_rank >> shift) != 0; shift += 11) {
        size_t count[2049] = {0};
        for (size_t i = 0; i < n; i++) count[((e[i].rank >> shift) & 2047) + 1]++;
        for (int k = 0; k < 2048; k++) count[k + 1] += count[k];
        for (size_t i = 0; i < n; i++) tmp[count[(e[i].rank >> shift) & 2047]++] = e[i];
        memcpy(e, tmp, n * sizeof *e);
    }
}

// merge_all of the library: repeatedly apply the lowest-ranked (then
// leftmost) merge until none applies. The pairs of the initial word are
// sorted once (init, consumed in order); the pairs that merges create go
// to the heap; each step takes the smaller of the two heads, which is the
// order of the library's single heap.
static pq_status merge_all(const pq_bpe *b, pq_bpe_scratch *s, int32_t n_sym) {
    sym *y = s->sym;
    hent *init = s->init, *tmp = init + s->sym_cap;
    size_t ni = 0, ii = 0, nh = 0;
    for (int32_t p = 0; p + 1 < n_sym; p++) {
        const mslot *m = merge_get(b, y[p].id, y[p + 1].id);
        if (m) init[ni++] = (hent){m->rank, p, m->new_id};
    }
    sort_initial(init, tmp, ni);
    while (ii < ni || nh > 0) {
        hent *h = s->heap, top;
        if (nh == 0 || (ii < ni && hless(&init[ii], &h[0]))) {
            top = init[ii++];
        } else {
            top = h[0];
            h[0] = h[--nh];
            sift_down(h, nh, 0);
        }
        int32_t pos = top.pos, nx = y[pos].next;
        if (y[pos].id < 0 || nx < 0) continue;
        const mslot *m = merge_get(b, y[pos].id, y[nx].id);
        if (!m || m->new_id != top.new_id) continue; // a stale entry
        int32_t nn = y[nx].next;
        y[pos].id = top.new_id;
        y[pos].next = nn;
        y[nx].id = -1;
        if (nn >= 0) y[nn].prev = pos;
        if (y[pos].prev >= 0) PQ_TRY(push_pair(b, s, &nh, y[pos].prev));
        if (nn >= 0) PQ_TRY(push_pair(b, s, &nh, pos));
    }
    return PQ_OK;
}

static void add_sym(sym *y, int32_t *n, int32_t id) {
    y[*n] = (sym){id, *n - 1, -1};
    if (*n > 0) y[*n - 1].next = *n;
    (*n)++;
}

pq_status pq_bpe_encode_word(const pq_bpe *b, const char *word, size_t len, pq_bpe_scratch *s, pq_ivec *out) {
    if (b->ignore_merges) {
        int32_t id = pq_bpe_lookup(b, word, len);
        if (id >= 0) return pq_ivec_push(out, id);
    }
    PQ_FAIL_IF(len > INT32_MAX, PQ_ERR_ARG, "a pre-token of %zu bytes is too long", len);
    cache_slot *c = cache_slot_of(s, word, len);
    if (c && c->len == len && memcmp(c->word, word, len) == 0) {
        for (int i = 0; i < c->n; i++) PQ_TRY(pq_ivec_push(out, c->ids[i]));
        return PQ_OK;
    }
    size_t first = out->n;
    if (len > s->sym_cap) { // at most one symbol per byte; init holds 2 x len pairs
        sym *p = realloc(s->sym, len * sizeof *p);
        PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "out of memory for a word of %zu bytes", len);
        s->sym = p;
        hent *q = realloc(s->init, 2 * len * sizeof *q);
        PQ_FAIL_IF(!q, PQ_ERR_NOMEM, "out of memory for a word of %zu bytes", len);
        s->init = q;
        s->sym_cap = len;
    }
    sym *y = s->sym;
    int32_t n = 0;
    int unk_pending = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int k = pq_utf8_next(word + i, len - i, &cp);
        size_t clen = k > 0 ? (size_t)k : (size_t)-k; // invalid bytes: one symbol each subpart
        int32_t id = pq_bpe_lookup(b, word + i, clen);
        if (id >= 0) {
            if (unk_pending) add_sym(y, &n, b->unk_id);
            unk_pending = 0;
            add_sym(y, &n, id);
        } else {
            size_t j = 0;
            while (b->byte_fallback && j < clen && b->byte_id[(unsigned char)word[i + j]] >= 0) j++;
            if (b->byte_fallback && j == clen) { // the library adds these without flushing a pending unk
                for (j = 0; j < clen; j++) add_sym(y, &n, b->byte_id[(unsigned char)word[i + j]]);
            } else if (b->has_unk) {
                PQ_FAIL_IF(b->unk_id < 0, PQ_ERR_FORMAT, "unk_token '%s' is not in the vocabulary", b->unk_name);
                if (unk_pending && !b->fuse_unk) add_sym(y, &n, b->unk_id);
                unk_pending = 1;
            }
        }
        i += clen;
    }
    if (unk_pending) add_sym(y, &n, b->unk_id);
    PQ_TRY(merge_all(b, s, n));
    for (int32_t p = 0; p < n; p++)
        if (y[p].id >= 0) PQ_TRY(pq_ivec_push(out, y[p].id));
    if (c && out->n - first <= CACHE_IDS) {
        c->len = (uint8_t)len, c->n = (uint8_t)(out->n - first);
        memcpy(c->word, word, len);
        if (out->n > first) memcpy(c->ids, out->p + first, (out->n - first) * sizeof(int32_t));
    }
    return PQ_OK;
}
