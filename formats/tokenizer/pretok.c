// The pre-tokenizer pipeline: parsing the "pre_tokenizer" section and
// running its stages over a segment of text.
#include "formats/tokenizer/pretok.h"

#include <stdlib.h>
#include <string.h>

typedef enum { ST_SPLIT, ST_BYTELEVEL, ST_METASPACE, ST_DIGITS } stage_kind;
typedef enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER } prepend_scheme;

typedef struct {
    stage_kind kind;
    pq_split_pattern pattern;         // ST_SPLIT
    int add_prefix_space, use_regex;  // ST_BYTELEVEL
    char repl[4];                     // ST_METASPACE: the replacement character
    size_t repl_len;
    prepend_scheme scheme;
    int split;
    int individual;                   // ST_DIGITS
} stage;

struct pq_pretok {
    stage *st;
    size_t n;
};

pq_status pq_pieces_add_range(pq_pieces *ps, size_t off, size_t len, int first) {
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? 2 * ps->cap : 64;
        pq_piece *p = realloc(ps->p, cap * sizeof *p);
        PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "out of memory growing a list of %zu pre-tokens", cap);
        ps->p = p;
        ps->cap = cap;
    }
    ps->p[ps->n++] = (pq_piece){off, len, first};
    return PQ_OK;
}

pq_status pq_pieces_add(pq_pieces *ps, const char *s, size_t len, int first) {
    size_t off = ps->text.len;
    PQ_TRY(pq_tbuf_append(&ps->text, s, len));
    return pq_pieces_add_range(ps, off, len, first);
}

// The pre-tokenizers' way to add a piece: the library drops empty splits.
static pq_status add_range(pq_pieces *ps, size_t off, size_t len, int first) {
    return len ? pq_pieces_add_range(ps, off, len, first) : PQ_OK;
}

static pq_status add_text(pq_pieces *ps, const char *s, size_t len, int first) {
    return len ? pq_pieces_add(ps, s, len, first) : PQ_OK;
}

void pq_pieces_free(pq_pieces *ps) {
    pq_tbuf_free(&ps->text);
    free(ps->p);
    memset(ps, 0, sizeof *ps);
}

void pq_pretok_ws_free(pq_pretok_ws *ws) {
    pq_pieces_free(&ws->a);
    pq_pieces_free(&ws->b);
    pq_tbuf_free(&ws->tmp);
}

// ---- parsing -----------------------------------------------------------------

static int get_bool(const json_t *o, const char *key, int dflt) {
    const json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static pq_status push_stage(pq_pretok *pt, stage s) {
    stage *p = realloc(pt->st, (pt->n + 1) * sizeof *p);
    PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "out of memory parsing the pre-tokenizer");
    pt->st = p;
    pt->st[pt->n++] = s;
    return PQ_OK;
}

static pq_status parse_split(const json_t *j, stage *s) {
    const json_t *pat = json_object_get(j, "pattern");
    const char *re = json_string_value(json_object_get(pat, "Regex"));
    const char *behavior = json_string_value(json_object_get(j, "behavior"));
    PQ_FAIL_IF(!re, PQ_ERR_FORMAT, "pre_tokenizer Split: only a \"Regex\" pattern is supported");
    s->kind = ST_SPLIT;
    int p = pq_split_pattern_of(re);
    PQ_FAIL_IF(p < 0, PQ_ERR_FORMAT, "pre_tokenizer Split: unsupported regex '%.80s'", re);
    s->pattern = (pq_split_pattern)p;
    PQ_FAIL_IF(!behavior || strcmp(behavior, "Isolated") != 0, PQ_ERR_FORMAT,
               "pre_tokenizer Split: behavior '%s' is not supported (only Isolated)", behavior ? behavior : "?");
    PQ_FAIL_IF(get_bool(j, "invert", 0), PQ_ERR_FORMAT, "pre_tokenizer Split: invert is not supported");
    return PQ_OK;
}

static pq_status parse_metaspace(const json_t *j, stage *s) {
    const char *repl = json_string_value(json_object_get(j, "replacement"));
    const char *scheme = json_string_value(json_object_get(j, "prepend_scheme"));
    uint32_t cp;
    size_t n = repl ? strlen(repl) : 0;
    PQ_FAIL_IF(n == 0 || pq_utf8_next(repl, n, &cp) != (int)n, PQ_ERR_FORMAT,
               "pre_tokenizer Metaspace: replacement must be one character");
    s->kind = ST_METASPACE;
    memcpy(s->repl, repl, n);
    s->repl_len = n;
    s->split = get_bool(j, "split", 1);
    if (!scheme) // the legacy form: add_prefix_space
        s->scheme = get_bool(j, "add_prefix_space", 1) ? PREPEND_ALWAYS : PREPEND_NEVER;
    else if (strcmp(scheme, "always") == 0) s->scheme = PREPEND_ALWAYS;
    else if (strcmp(scheme, "first") == 0) s->scheme = PREPEND_FIRST;
    else if (strcmp(scheme, "never") == 0) s->scheme = PREPEND_NEVER;
    else return PQ_FAIL(PQ_ERR_FORMAT, "pre_tokenizer Metaspace: unknown prepend_scheme '%.40s'", scheme);
    return PQ_OK;
}

static pq_status parse_into(const json_t *j, pq_pretok *pt, int depth) {
    PQ_FAIL_IF(depth > 8, PQ_ERR_FORMAT, "pre_tokenizer: Sequence nested too deeply");
    const char *type = json_string_value(json_object_get(j, "type"));
    PQ_FAIL_IF(!type, PQ_ERR_FORMAT, "pre_tokenizer: missing \"type\"");
    stage s = {0};
    if (strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(j, "pretokenizers");
        PQ_FAIL_IF(!json_is_array(list), PQ_ERR_FORMAT, "pre_tokenizer Sequence: \"pretokenizers\" is not a list");
        for (size_t i = 0; i < json_array_size(list); i++) PQ_TRY(parse_into(json_array_get(list, i), pt, depth + 1));
        return PQ_OK;
    }
    if (strcmp(type, "ByteLevel") == 0) {
        s.kind = ST_BYTELEVEL;
        s.add_prefix_space = get_bool(j, "add_prefix_space", 1);
        s.use_regex = get_bool(j, "use_regex", 1);
    } else if (strcmp(type, "Split") == 0) {
        PQ_TRY(parse_split(j, &s));
    } else if (strcmp(type, "Metaspace") == 0) {
        PQ_TRY(parse_metaspace(j, &s));
    } else if (strcmp(type, "Digits") == 0) {
        s.kind = ST_DIGITS;
        s.individual = get_bool(j, "individual_digits", 0);
    } else {
        return PQ_FAIL(PQ_ERR_FORMAT, "pre_tokenizer type '%.40s' is not supported", type);
    }
    return push_stage(pt, s);
}

pq_status pq_pretok_parse(const json_t *j, pq_pretok **out) {
    *out = NULL;
    pq_pretok *pt = calloc(1, sizeof *pt);
    PQ_FAIL_IF(!pt, PQ_ERR_NOMEM, "out of memory parsing the pre-tokenizer");
    if (j && !json_is_null(j)) {
        pq_status st = json_is_object(j) ? parse_into(j, pt, 0)
                                         : PQ_FAIL(PQ_ERR_FORMAT, "pre_tokenizer is not an object");
        if (st != PQ_OK) {
            pq_pretok_free(pt);
            return st;
        }
    }
    *out = pt;
    return PQ_OK;
}

void pq_pretok_free(pq_pretok *pt) {
    if (!pt) return;
    free(pt->st);
    free(pt);
}

int pq_pretok_is_identity(const pq_pretok *pt) { return pt->n == 0; }

// ---- running -------------------------------------------------------------------

static pq_status run_split(const stage *st, const char *s, size_t n, int first, pq_pieces *out) {
    for (size_t i = 0; i < n;) {
        size_t m = pq_split_match(st->pattern, s + i, n - i);
        PQ_TRY(add_text(out, s + i, m, first && i == 0));
        i += m;
    }
    return PQ_OK;
}

static pq_status run_bytelevel(const stage *st, const char *s, size_t n, int first, pq_tbuf *tmp,
                               pq_pieces *out) {
    if (st->add_prefix_space && s[0] != ' ') {
        tmp->len = 0;
        PQ_TRY(pq_tbuf_append(tmp, " ", 1));
        PQ_TRY(pq_tbuf_append(tmp, s, n));
        s = tmp->p;
        n = tmp->len;
    }
    for (size_t i = 0; i < n;) {
        size_t m = st->use_regex ? pq_split_match(PQ_SPLIT_GPT2, s + i, n - i) : n - i;
        size_t off = out->text.len;
        PQ_TRY(pq_bytelevel_map(s + i, m, &out->text));
        PQ_TRY(add_range(out, off, out->text.len - off, first && i == 0));
        i += m;
    }
    return PQ_OK;
}

static pq_status run_metaspace(const stage *st, const char *s, size_t n, int first, pq_pieces *out) {
    size_t start = out->text.len, rl = st->repl_len;
    // the library replaces first, then looks for the replacement at the start
    int starts_with = s[0] == ' ' || (n >= rl && memcmp(s, st->repl, rl) == 0);
    if (!starts_with && (st->scheme == PREPEND_ALWAYS || (st->scheme == PREPEND_FIRST && first)))
        PQ_TRY(pq_tbuf_append(&out->text, st->repl, rl));
    for (size_t i = 0; i < n; i++)
        PQ_TRY(s[i] == ' ' ? pq_tbuf_append(&out->text, st->repl, rl) : pq_tbuf_append(&out->text, s + i, 1));
    size_t end = out->text.len;
    if (!st->split) return add_range(out, start, end - start, first);
    // MergedWithNext: a new piece starts at every replacement character
    size_t piece = start;
    for (size_t i = start + 1; i + rl <= end; i++) {
        if (memcmp(out->text.p + i, st->repl, rl) != 0) continue;
        PQ_TRY(add_range(out, piece, i - piece, first && piece == start));
        piece = i;
    }
    return add_range(out, piece, end - piece, first && piece == start);
}

static pq_status run_digits(const stage *st, const char *s, size_t n, int first, pq_pieces *out) {
    size_t piece = 0;
    int piece_digits = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp = (unsigned char)s[i];
        int k = pq_utf8_next(s + i, n - i, &cp);
        size_t len = k > 0 ? (size_t)k : (size_t)-k;
        int digit = k > 0 && (pq_uni_class(cp) & PQ_UNI_N);
        if (i > piece && (digit != piece_digits || (digit && st->individual))) {
            PQ_TRY(add_text(out, s + piece, i - piece, first && piece == 0));
            piece = i;
        }
        piece_digits = digit;
        i += len;
    }
    return add_text(out, s + piece, n - piece, first && piece == 0);
}

pq_status pq_pretok_run(const pq_pretok *pt, const char *s, size_t n, int first, pq_pretok_ws *ws,
                        const pq_pieces **words) {
    pq_pieces *cur = &ws->a, *nxt = &ws->b;
    cur->n = 0;
    cur->text.len = 0;
    PQ_TRY(add_text(cur, s, n, first));
    for (size_t k = 0; k < pt->n; k++) {
        const stage *st = &pt->st[k];
        nxt->n = 0;
        nxt->text.len = 0;
        for (size_t i = 0; i < cur->n; i++) {
            const pq_piece *p = &cur->p[i];
            const char *t = cur->text.p + p->off;
            switch (st->kind) {
            case ST_SPLIT: PQ_TRY(run_split(st, t, p->len, p->first, nxt)); break;
            case ST_BYTELEVEL: PQ_TRY(run_bytelevel(st, t, p->len, p->first, &ws->tmp, nxt)); break;
            case ST_METASPACE: PQ_TRY(run_metaspace(st, t, p->len, p->first, nxt)); break;
            case ST_DIGITS: PQ_TRY(run_digits(st, t, p->len, p->first, nxt)); break;
            }
        }
        pq_pieces *tmp = cur;
        cur = nxt;
        nxt = tmp;
    }
    *words = cur;
    return PQ_OK;
}
