#include "formats/tokenizer/tok_decoder.h"

#include "formats/tokenizer/normalizer.h"

#include <stdlib.h>
#include <string.h>

typedef enum { D_REPLACE, D_BYTEFALLBACK, D_FUSE, D_STRIP, D_BYTELEVEL, D_METASPACE } dkind;

typedef struct {
    dkind kind;
    char *pattern, *content; // D_REPLACE
    uint32_t ch;             // D_STRIP: the character stripped; D_METASPACE: the replacement
    size_t start, stop;      // D_STRIP
    int prepend;             // D_METASPACE: prepend_scheme is not "never"
} dstep;

struct pq_tokdec {
    dstep *st;
    size_t n;
    int none; // no decoder: join with " "
};

void pq_tokdec_free(pq_tokdec *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n; i++) {
        free(d->st[i].pattern);
        free(d->st[i].content);
    }
    free(d->st);
    free(d);
}

// The single character of s, or -1 when s is not exactly one character.
static int64_t one_char(const char *s) {
    uint32_t cp;
    size_t n = s ? strlen(s) : 0;
    return n > 0 && pq_utf8_next(s, n, &cp) == (int)n ? (int64_t)cp : -1;
}

static pq_status parse_step(const json_t *j, dstep *s) {
    const char *type = json_string_value(json_object_get(j, "type"));
    PQ_FAIL_IF(!type, PQ_ERR_FORMAT, "decoder: missing \"type\"");
    if (strcmp(type, "Replace") == 0) {
        const char *p = json_string_value(json_object_get(json_object_get(j, "pattern"), "String"));
        const char *c = json_string_value(json_object_get(j, "content"));
        PQ_FAIL_IF(!p || !*p || !c, PQ_ERR_FORMAT, "decoder Replace: only a non-empty \"String\" pattern is supported");
        s->kind = D_REPLACE;
        s->pattern = strdup(p);
        s->content = strdup(c);
        PQ_FAIL_IF(!s->pattern || !s->content, PQ_ERR_NOMEM, "out of memory parsing the decoder");
    } else if (strcmp(type, "ByteFallback") == 0) {
        s->kind = D_BYTEFALLBACK;
    } else if (strcmp(type, "Fuse") == 0) {
        s->kind = D_FUSE;
    } else if (strcmp(type, "Strip") == 0) {
        int64_t c = one_char(json_string_value(json_object_get(j, "content")));
        json_int_t a = json_integer_value(json_object_get(j, "start")), b = json_integer_value(json_object_get(j, "stop"));
        PQ_FAIL_IF(c < 0 || a < 0 || b < 0, PQ_ERR_FORMAT, "decoder Strip: bad content/start/stop");
        s->kind = D_STRIP;
        s->ch = (uint32_t)c;
        s->start = (size_t)a;
        s->stop = (size_t)b;
    } else if (strcmp(type, "ByteLevel") == 0) {
        s->kind = D_BYTELEVEL;
    } else if (strcmp(type, "Metaspace") == 0) {
        int64_t c = one_char(json_string_value(json_object_get(j, "replacement")));
        const char *scheme = json_string_value(json_object_get(j, "prepend_scheme"));
        const json_t *aps = json_object_get(j, "add_prefix_space");
        PQ_FAIL_IF(c < 0, PQ_ERR_FORMAT, "decoder Metaspace: replacement must be one character");
        s->kind = D_METASPACE;
        s->ch = (uint32_t)c;
        s->prepend = scheme ? strcmp(scheme, "never") != 0 : !json_is_false(aps);
    } else {
        return PQ_FAIL(PQ_ERR_FORMAT, "decoder type '%.40s' is not supported", type);
    }
    return PQ_OK;
}

static pq_status parse_into(const json_t *j, pq_tokdec *d, int depth) {
    PQ_FAIL_IF(depth > 8, PQ_ERR_FORMAT, "decoder: Sequence nested too deeply");
    PQ_FAIL_IF(!json_is_object(j), PQ_ERR_FORMAT, "decoder is not an object");
    const char *type = json_string_value(json_object_get(j, "type"));
    if (type && strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(j, "decoders");
        PQ_FAIL_IF(!json_is_array(list), PQ_ERR_FORMAT, "decoder Sequence: \"decoders\" is not a list");
        for (size_t i = 0; i < json_array_size(list); i++) PQ_TRY(parse_into(json_array_get(list, i), d, depth + 1));
        return PQ_OK;
    }
    dstep *p = realloc(d->st, (d->n + 1) * sizeof *p);
    PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "out of memory parsing the decoder");
    d->st = p;
    memset(&d->st[d->n], 0, sizeof *p);
    d->n++; // counted before parsing, so that pq_tokdec_free releases a partial step
    return parse_step(j, &d->st[d->n - 1]);
}

pq_status pq_tokdec_parse(const json_t *j, pq_tokdec **out) {
    *out = NULL;
    pq_tokdec *d = calloc(1, sizeof *d);
    PQ_FAIL_IF(!d, PQ_ERR_NOMEM, "out of memory parsing the decoder");
    d->none = !j || json_is_null(j);
    if (!d->none) {
        pq_status st = parse_into(j, d, 0);
        if (st != PQ_OK) {
            pq_tokdec_free(d);
            return st;
        }
    }
    *out = d;
    return PQ_OK;
}

// ---- the steps: each maps the token list in to the list out ----------------

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Flushes the pending <0xXX> bytes: one piece when they are valid UTF-8,
// else one U+FFFD piece per byte.
static pq_status flush_bytes(pq_tbuf *bytes, pq_pieces *out) {
    if (bytes->len == 0) return PQ_OK;
    if (pq_utf8_check(bytes->p, bytes->len) == bytes->len) PQ_TRY(pq_pieces_add(out, bytes->p, bytes->len, 0));
    else
        for (size_t i = 0; i < bytes->len; i++) PQ_TRY(pq_pieces_add(out, "\xEF\xBF\xBD", 3, 0));
    bytes->len = 0;
    return PQ_OK;
}

static pq_status byte_fallback(const pq_pieces *in, pq_pieces *out) {
    pq_tbuf bytes = {0};
    pq_status st = PQ_OK;
    for (size_t i = 0; i < in->n; i++) {
        const char *t = in->text.p + in->p[i].off;
        size_t n = in->p[i].len;
        int hi = n == 6 ? hexval(t[3]) : -1, lo = n == 6 ? hexval(t[4]) : -1;
        if (n == 6 && memcmp(t, "<0x", 3) == 0 && t[5] == '>' && hi >= 0 && lo >= 0) {
            char b = (char)(hi * 16 + lo);
            PQ_TRY_GOTO(st, pq_tbuf_append(&bytes, &b, 1));
            continue;
        }
        PQ_TRY_GOTO(st, flush_bytes(&bytes, out));
        PQ_TRY_GOTO(st, pq_pieces_add(out, t, n, 0));
    }
    st = flush_bytes(&bytes, out);
done:
    pq_tbuf_free(&bytes);
    return st;
}

// Strip: up to start leading and stop trailing copies of ch, per piece.
static pq_status strip(const dstep *s, const char *t, size_t n, pq_pieces *out) {
    size_t a = 0, b = n;
    for (size_t k = 0; k < s->start && a < b; k++) {
        uint32_t cp;
        int len = pq_utf8_next(t + a, b - a, &cp);
        if (len <= 0 || cp != s->ch) break;
        a += (size_t)len;
    }
    for (size_t k = 0; k < s->stop && b > a; k++) {
        size_t c = b - 1;
        while (c > a && ((unsigned char)t[c] & 0xC0) == 0x80) c--;
        uint32_t cp;
        int len = pq_utf8_next(t + c, b - c, &cp);
        if (len <= 0 || (size_t)len != b - c || cp != s->ch) break;
        b = c;
    }
    return pq_pieces_add(out, t + a, b - a, 0);
}

// ByteLevel: every piece whose characters are all byte-level characters
// becomes those bytes, any other piece its own bytes; the whole is then read
// as UTF-8 with U+FFFD for invalid sequences.
static pq_status bytelevel(const pq_pieces *in, pq_pieces *out) {
    pq_tbuf bytes = {0}, text = {0};
    pq_status st = PQ_OK;
    for (size_t i = 0; i < in->n; i++) {
        const char *t = in->text.p + in->p[i].off;
        size_t n = in->p[i].len, mark = bytes.len, j = 0;
        while (j < n) {
            uint32_t cp;
            int len = pq_utf8_next(t + j, n - j, &cp);
            int b = len > 0 ? pq_bytelevel_byte(cp) : -1;
            if (b < 0) break;
            char c = (char)b;
            PQ_TRY_GOTO(st, pq_tbuf_append(&bytes, &c, 1));
            j += (size_t)len;
        }
        if (j < n) { // not all byte-level characters: the piece as it is
            bytes.len = mark;
            PQ_TRY_GOTO(st, pq_tbuf_append(&bytes, t, n));
        }
    }
    PQ_TRY_GOTO(st, pq_tbuf_append_lossy(&text, bytes.p, bytes.len));
    st = pq_pieces_add(out, text.p, text.len, 0);
done:
    pq_tbuf_free(&bytes);
    pq_tbuf_free(&text);
    return st;
}

static pq_status metaspace(const dstep *s, size_t index, const char *t, size_t n, pq_pieces *out) {
    size_t off = out->text.len;
    for (size_t j = 0; j < n;) {
        uint32_t cp = 0;
        int len = pq_utf8_next(t + j, n - j, &cp);
        size_t l = len > 0 ? (size_t)len : (size_t)-len;
        if (len > 0 && cp == s->ch) {
            if (index != 0 || !s->prepend) PQ_TRY(pq_tbuf_append(&out->text, " ", 1));
        } else {
            PQ_TRY(pq_tbuf_append(&out->text, t + j, l));
        }
        j += l;
    }
    return pq_pieces_add_range(out, off, out->text.len - off, 0);
}

static pq_status run_step(const dstep *s, const pq_pieces *in, pq_pieces *out) {
    if (s->kind == D_BYTEFALLBACK) return byte_fallback(in, out);
    if (s->kind == D_BYTELEVEL) return bytelevel(in, out);
    if (s->kind == D_FUSE) {
        size_t off = out->text.len;
        for (size_t i = 0; i < in->n; i++) PQ_TRY(pq_tbuf_append(&out->text, in->text.p + in->p[i].off, in->p[i].len));
        return pq_pieces_add_range(out, off, out->text.len - off, 0);
    }
    for (size_t i = 0; i < in->n; i++) {
        const char *t = in->text.p + in->p[i].off;
        size_t n = in->p[i].len;
        if (s->kind == D_REPLACE) {
            size_t off = out->text.len;
            PQ_TRY(pq_tbuf_append_replace(&out->text, t, n, s->pattern, s->content));
            PQ_TRY(pq_pieces_add_range(out, off, out->text.len - off, 0));
        } else if (s->kind == D_STRIP) {
            PQ_TRY(strip(s, t, n, out));
        } else {
            PQ_TRY(metaspace(s, i, t, n, out));
        }
    }
    return PQ_OK;
}

pq_status pq_tokdec_run(const pq_tokdec *d, pq_pieces *tokens, pq_pieces *tmp, pq_tbuf *out) {
    pq_pieces *cur = tokens, *nxt = tmp;
    size_t limit = tokens->text.len < (SIZE_MAX - PQ_NORM_SLACK) / PQ_NORM_MAX_GROWTH
                       ? PQ_NORM_MAX_GROWTH * tokens->text.len + PQ_NORM_SLACK : SIZE_MAX;
    for (size_t k = 0; k < d->n; k++) {
        nxt->n = 0;
        nxt->text.len = 0;
        const dstep *s = &d->st[k];
        // Replace is the step that grows text without bound (the others
        // shrink it, or ByteLevel's U+FFFD once at most 3x)
        size_t want = cur->text.len;
        for (size_t i = 0; s->kind == D_REPLACE && i < cur->n; i++)
            want += pq_replace_len(cur->text.p + cur->p[i].off, cur->p[i].len, s->pattern, s->content) - cur->p[i].len;
        PQ_FAIL_IF(want > limit, PQ_ERR_FORMAT, "decoder step %zu (Replace '%.20s' -> '%.20s') would make %zu bytes of "
                   "tokens %zu bytes, more than %dx: the decoders expand without bound", k + 1, s->pattern, s->content,
                   tokens->text.len, want, PQ_NORM_MAX_GROWTH);
        PQ_TRY(run_step(s, cur, nxt));
        pq_pieces *t = cur;
        cur = nxt;
        nxt = t;
    }
    for (size_t i = 0; i < cur->n; i++) {
        if (d->none && i > 0) PQ_TRY(pq_tbuf_append(out, " ", 1));
        PQ_TRY(pq_tbuf_append(out, cur->text.p + cur->p[i].off, cur->p[i].len));
    }
    return PQ_OK;
}
