#include "formats/tokenizer/normalizer.h"

#include <stdlib.h>
#include <string.h>

typedef enum { PREPEND, REPLACE, NFC, NFD } step_kind;

typedef struct {
    step_kind kind;
    char *pattern, *content; // Prepend(content), Replace(pattern -> content); NULL for NFC, NFD
} step;

struct pq_norm {
    step *st;
    size_t n;
};

static void free_steps(pq_norm *n) {
    for (size_t i = 0; i < n->n; i++) {
        free(n->st[i].pattern);
        free(n->st[i].content);
    }
    free(n->st);
}

void pq_norm_free(pq_norm *n) {
    if (!n) return;
    free_steps(n);
    free(n);
}

int pq_norm_is_identity(const pq_norm *n) { return n->n == 0; }

static pq_status push_step(pq_norm *n, step_kind kind, const char *pattern, const char *content) {
    step *p = realloc(n->st, (n->n + 1) * sizeof *p);
    PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "out of memory parsing the normalizer");
    n->st = p;
    step s = {kind, pattern ? strdup(pattern) : NULL, content ? strdup(content) : NULL};
    if ((content && !s.content) || (pattern && !s.pattern)) {
        free(s.pattern);
        free(s.content);
        return PQ_FAIL(PQ_ERR_NOMEM, "out of memory parsing the normalizer");
    }
    n->st[n->n++] = s;
    return PQ_OK;
}

static pq_status parse_into(const json_t *j, pq_norm *n, int depth) {
    PQ_FAIL_IF(depth > 8, PQ_ERR_FORMAT, "normalizer: Sequence nested too deeply");
    const char *type = json_string_value(json_object_get(j, "type"));
    PQ_FAIL_IF(!type, PQ_ERR_FORMAT, "normalizer: missing \"type\"");
    if (strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(j, "normalizers");
        PQ_FAIL_IF(!json_is_array(list), PQ_ERR_FORMAT, "normalizer Sequence: \"normalizers\" is not a list");
        for (size_t i = 0; i < json_array_size(list); i++) PQ_TRY(parse_into(json_array_get(list, i), n, depth + 1));
        return PQ_OK;
    }
    if (strcmp(type, "Prepend") == 0) {
        const char *c = json_string_value(json_object_get(j, "prepend"));
        PQ_FAIL_IF(!c, PQ_ERR_FORMAT, "normalizer Prepend: \"prepend\" is not a string");
        return push_step(n, PREPEND, NULL, c);
    }
    if (strcmp(type, "Replace") == 0) {
        const char *p = json_string_value(json_object_get(json_object_get(j, "pattern"), "String"));
        const char *c = json_string_value(json_object_get(j, "content"));
        PQ_FAIL_IF(!p || !*p, PQ_ERR_FORMAT, "normalizer Replace: only a non-empty \"String\" pattern is supported");
        PQ_FAIL_IF(!c, PQ_ERR_FORMAT, "normalizer Replace: \"content\" is not a string");
        return push_step(n, REPLACE, p, c);
    }
    if (strcmp(type, "NFC") == 0) return push_step(n, NFC, NULL, NULL);
    if (strcmp(type, "NFD") == 0) return push_step(n, NFD, NULL, NULL);
    return PQ_FAIL(PQ_ERR_FORMAT, "normalizer type '%.40s' is not supported", type);
}

pq_status pq_norm_parse(const json_t *j, pq_norm **out) {
    *out = NULL;
    pq_norm *n = calloc(1, sizeof *n);
    PQ_FAIL_IF(!n, PQ_ERR_NOMEM, "out of memory parsing the normalizer");
    if (j && !json_is_null(j)) {
        pq_status st = json_is_object(j) ? parse_into(j, n, 0) : PQ_FAIL(PQ_ERR_FORMAT, "normalizer is not an object");
        if (st != PQ_OK) {
            pq_norm_free(n);
            return st;
        }
    }
    *out = n;
    return PQ_OK;
}

static const char *step_name(step_kind k) {
    return k == PREPEND ? "Prepend" : k == REPLACE ? "Replace" : k == NFC ? "NFC" : "NFD";
}

pq_status pq_norm_apply(const pq_norm *n, const char *s, size_t len, pq_tbuf *out) {
    pq_tbuf tmp = {0};
    pq_status st = PQ_OK;
    size_t limit = len < (SIZE_MAX - PQ_NORM_SLACK) / PQ_NORM_MAX_GROWTH ? PQ_NORM_MAX_GROWTH * len + PQ_NORM_SLACK
                                                                         : SIZE_MAX;
    out->len = 0;
    PQ_TRY_GOTO(st, pq_tbuf_append(out, s, len));
    for (size_t k = 0; k < n->n; k++) {
        const step *p = &n->st[k];
        size_t want = p->kind == PREPEND   ? out->len + strlen(p->content)
                      : p->kind == REPLACE ? pq_replace_len(out->p, out->len, p->pattern, p->content)
                                           : 0; // NFC / NFD: at most 3x, checked after
        PQ_CHECK_GOTO(want > limit, st, PQ_ERR_FORMAT, "normalizer step %zu (%s%s%.20s%s%.20s%s) would make a %zu-byte "
                      "text %zu bytes, more than %dx its length: the normalizers expand without bound", k + 1,
                      step_name(p->kind), p->pattern ? " '" : p->content ? " '" : "", p->pattern ? p->pattern : "",
                      p->pattern ? "' -> '" : "", p->content ? p->content : "", p->content ? "'" : "", len, want,
                      PQ_NORM_MAX_GROWTH);
        tmp.len = 0;
        switch (p->kind) {
        case PREPEND:
            if (out->len == 0) continue; // Prepend leaves an empty text alone
            PQ_TRY_GOTO(st, pq_tbuf_append(&tmp, p->content, strlen(p->content)));
            PQ_TRY_GOTO(st, pq_tbuf_append(&tmp, out->p, out->len));
            break;
        case REPLACE:
            PQ_TRY_GOTO(st, pq_tbuf_append_replace(&tmp, out->p, out->len, p->pattern, p->content));
            break;
        case NFC:
            PQ_TRY_GOTO(st, pq_uni_nfc(out->p, out->len, &tmp));
            break;
        case NFD:
            PQ_TRY_GOTO(st, pq_uni_nfd(out->p, out->len, &tmp));
            break;
        }
        PQ_CHECK_GOTO(tmp.len > limit, st, PQ_ERR_FORMAT, "normalizer step %zu (%s) made a %zu-byte text %zu bytes, "
                      "more than %dx its length", k + 1, step_name(p->kind), len, tmp.len, PQ_NORM_MAX_GROWTH);
        pq_tbuf t = *out; // swap
        *out = tmp;
        tmp = t;
    }
done:
    pq_tbuf_free(&tmp);
    return st;
}
