// formats/tokenizer/unicode_nfc.c — Unicode canonical normalization (NFC, NFD) of
// UTF-8 text, as Unicode section 3.11 and UAX #15 define it, with the tables
// of formats/tokenizer/unicode_nfc_tables.h (tools/gen_nfc_tables.py).
//
// The text is cut before every "stable" code point: for NFC a starter whose
// NFC_Quick_Check is Yes, for NFD a starter without a decomposition. Nothing
// before such a code point interacts with it or with what follows, so a run
// of stable code points is copied as it is, and only the pieces between them
// that hold something else are decomposed, reordered and (NFC) recomposed.
#include <stdlib.h>
#include <string.h>

#include "formats/tokenizer/unicode.h"
#include "formats/tokenizer/unicode_nfc_tables.h"

// Hangul syllables, composed and decomposed by arithmetic (Unicode 3.12)
enum {
    S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7,
    L_COUNT = 19, V_COUNT = 21, T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT,
};

// A decomposed code point in one word: the code point in bits 0..20, MAYBE
// (it may compose with a starter before it) in bit 23, its canonical
// combining class in bits 24..31.
#define CP_MASK 0x1FFFFFu
#define MAYBE (1u << 23)
#define CCC(e) ((e) >> 24)

// Sorting a run of non-starters switches from insertion to counting sort
// above this length, so that long runs stay linear.
#define SHORT_RUN 16

typedef struct {
    uint32_t *p;
    size_t n, cap;
} cpvec;

static pq_nfc_cls cls_of(uint32_t cp) {
    if (cp >= PQ_NFC_LIMIT) return pq_nfc_classes[0];
    unsigned block = pq_nfc_stage1[cp >> PQ_NFC_SHIFT];
    return pq_nfc_classes[pq_nfc_stage2[block << PQ_NFC_SHIFT | (cp & ((1u << PQ_NFC_SHIFT) - 1))]];
}

static uint32_t entry_of(uint32_t cp) {
    pq_nfc_cls c = cls_of(cp);
    return (uint32_t)c.ccc << 24 | (c.flags & PQ_NFC_QC_MAYBE ? MAYBE : 0) | cp;
}

static pq_status reserve(cpvec *v, size_t more) {
    if (v->cap - v->n >= more) return PQ_OK;
    size_t cap = v->cap ? v->cap : 64;
    while (cap - v->n < more) {
        PQ_FAIL_IF(cap > SIZE_MAX / 2 / sizeof *v->p, PQ_ERR_NOMEM, "normalization buffer too large");
        cap *= 2;
    }
    uint32_t *p = realloc(v->p, cap * sizeof *p);
    PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "out of memory normalizing %zu code points", cap);
    v->p = p;
    v->cap = cap;
    return PQ_OK;
}

// Appends the full canonical decomposition of cp (at most 4 code points).
static pq_status decompose(uint32_t cp, cpvec *v) {
    PQ_TRY(reserve(v, 4));
    uint32_t s = cp - S_BASE;
    if (s < S_COUNT) {
        v->p[v->n++] = L_BASE + s / N_COUNT;
        v->p[v->n++] = entry_of(V_BASE + s % N_COUNT / T_COUNT);
        if (s % T_COUNT) v->p[v->n++] = entry_of(T_BASE + s % T_COUNT);
        return PQ_OK;
    }
    if (!(cls_of(cp).flags & PQ_NFC_HAS_DECOMP)) {
        v->p[v->n++] = entry_of(cp);
        return PQ_OK;
    }
    size_t lo = 0, hi = sizeof pq_nfc_decomp_cp / sizeof pq_nfc_decomp_cp[0];
    while (hi - lo > 1) { // pq_nfc_decomp_cp[lo] <= cp < pq_nfc_decomp_cp[hi]
        size_t mid = lo + (hi - lo) / 2;
        if (pq_nfc_decomp_cp[mid] <= cp) lo = mid;
        else hi = mid;
    }
    PQ_ASSERT(pq_nfc_decomp_cp[lo] == cp); // the trie and the list come from the same data
    unsigned off = pq_nfc_decomp_off[lo];
    for (unsigned k = 0; k <= (off & 3); k++) v->p[v->n++] = entry_of(pq_nfc_pool[(off >> 2) + k]);
    return PQ_OK;
}

// Stable sort of r[0..n) by combining class (the canonical ordering of a run
// of non-starters); tmp holds n entries.
static void sort_run(uint32_t *r, size_t n, uint32_t *tmp) {
    if (n <= SHORT_RUN) {
        for (size_t i = 1; i < n; i++) {
            uint32_t e = r[i];
            size_t j = i;
            for (; j > 0 && CCC(r[j - 1]) > CCC(e); j--) r[j] = r[j - 1];
            r[j] = e;
        }
        return;
    }
    size_t start[257] = {0};
    for (size_t i = 0; i < n; i++) start[CCC(r[i]) + 1]++;
    for (int c = 0; c < 256; c++) start[c + 1] += start[c];
    for (size_t i = 0; i < n; i++) tmp[start[CCC(r[i])]++] = r[i];
    memcpy(r, tmp, n * sizeof *r);
}

static pq_status reorder(cpvec *v, cpvec *tmp) {
    for (size_t i = 0; i < v->n;) {
        if (CCC(v->p[i]) == 0) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < v->n && CCC(v->p[j]) != 0) j++;
        if (j - i > SHORT_RUN) PQ_TRY(reserve(tmp, j - i));
        sort_run(v->p + i, j - i, tmp->p);
        i = j;
    }
    return PQ_OK;
}

// The primary composite of starter a and b, or 0 if there is none.
static uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (a - L_BASE < L_COUNT && b - V_BASE < V_COUNT) return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a - S_BASE < S_COUNT && (a - S_BASE) % T_COUNT == 0 && b - T_BASE - 1 < T_COUNT - 1) return a + (b - T_BASE);
    uint64_t key = (uint64_t)a << 21 | b;
    size_t lo = 0, hi = sizeof pq_nfc_comp / sizeof pq_nfc_comp[0];
    while (lo < hi) { // first entry with key >= the pair's
        size_t mid = lo + (hi - lo) / 2;
        if (pq_nfc_comp[mid] >> 21 < key) lo = mid + 1;
        else hi = mid;
    }
    if (lo < sizeof pq_nfc_comp / sizeof pq_nfc_comp[0] && pq_nfc_comp[lo] >> 21 == key)
        return (uint32_t)(pq_nfc_comp[lo] & CP_MASK);
    return 0;
}

// Canonical composition of v in place: each code point that is not blocked
// from the last starter (nothing between them, or everything kept between
// them has a lower combining class) and forms a primary composite with it
// is merged into it.
static void compose(cpvec *v) {
    size_t out = 0, starter = SIZE_MAX;
    for (size_t i = 0; i < v->n; i++) {
        uint32_t e = v->p[i];
        if (starter != SIZE_MAX && (e & MAYBE) && (out == starter + 1 || CCC(v->p[out - 1]) < CCC(e))) {
            uint32_t c = compose_pair(v->p[starter] & CP_MASK, e & CP_MASK);
            if (c) {
                v->p[starter] = c; // a composite is a starter
                continue;
            }
        }
        v->p[out++] = e;
        if (CCC(e) == 0) starter = out - 1;
    }
    v->n = out;
}

// Normalizes s[0..n) (valid UTF-8, cut at stable code points) and appends it.
static pq_status normalize_piece(const char *s, size_t n, int nfc, cpvec *v, cpvec *tmp, pq_tbuf *out) {
    v->n = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += (size_t)pq_utf8_next(s + i, n - i, &cp);
        PQ_TRY(decompose(cp, v));
    }
    PQ_TRY(reorder(v, tmp));
    if (nfc) compose(v);
    PQ_TRY(pq_tbuf_reserve(out, 4 * v->n));
    for (size_t i = 0; i < v->n; i++) out->len += (size_t)pq_utf8_encode(v->p[i] & CP_MASK, out->p + out->len);
    return PQ_OK;
}

static pq_status normalize(const char *s, size_t n, int nfc, pq_tbuf *out) {
    size_t bad = pq_utf8_check(s, n);
    PQ_FAIL_IF(bad < n, PQ_ERR_FORMAT, "normalization: text is not valid UTF-8 (bad byte 0x%02X at byte offset %zu)",
               (unsigned char)s[bad], bad);
    unsigned unstable = nfc ? PQ_NFC_QC_NO | PQ_NFC_QC_MAYBE : PQ_NFC_HAS_DECOMP;
    const unsigned char *u = (const unsigned char *)s;
    size_t len0 = out->len, copied = 0, cut = 0; // s[0..copied) is done; cut: the last stable code point
    cpvec v = {0}, tmp = {0};
    pq_status st = PQ_OK;
    for (size_t i = 0; i < n;) {
        if (u[i] < 0x80) {
            cut = i++;
            continue;
        }
        uint32_t cp;
        int k = pq_utf8_next(s + i, n - i, &cp);
        pq_nfc_cls c = cls_of(cp);
        if (c.ccc == 0 && !(c.flags & unstable)) {
            cut = i;
            i += (size_t)k;
            continue;
        }
        size_t end = i + (size_t)k; // the piece runs from cut to the next stable code point
        while (end < n && u[end] >= 0x80) {
            k = pq_utf8_next(s + end, n - end, &cp);
            c = cls_of(cp);
            if (c.ccc == 0 && !(c.flags & unstable)) break;
            end += (size_t)k;
        }
        PQ_TRY_GOTO(st, pq_tbuf_append(out, s + copied, cut - copied));
        PQ_TRY_GOTO(st, normalize_piece(s + cut, end - cut, nfc, &v, &tmp, out));
        copied = cut = i = end;
    }
    PQ_TRY_GOTO(st, pq_tbuf_append(out, s + copied, n - copied));
done:
    if (st != PQ_OK) out->len = len0;
    free(v.p);
    free(tmp.p);
    return st;
}

pq_status pq_uni_nfc(const char *s, size_t n, pq_tbuf *out) { return normalize(s, n, 1, out); }

pq_status pq_uni_nfd(const char *s, size_t n, pq_tbuf *out) { return normalize(s, n, 0, out); }
