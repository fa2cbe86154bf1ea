#include "eval/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Reads a Jinja string literal's characters from s (inside the literal)
// into out (cap bytes, NUL-terminated) until `stop` has been read (it is
// kept when keep_stop) or, with stop == NULL, until the closing quote q.
// Escapes \n \t \\ \' \" are decoded; a quote before `stop` (the literal
// ends: the text is built from expressions) or the end of s fails.
// Returns 1 on success.
static int read_literal(const char *s, const char *stop, int keep_stop, char q, char *out, size_t cap) {
    size_t n = 0, slen = stop ? strlen(stop) : 0;
    for (;;) {
        if (stop && n >= slen && memcmp(out + n - slen, stop, slen) == 0) {
            if (!keep_stop) n -= slen;
            out[n] = '\0';
            return 1;
        }
        char c = *s++;
        if (c == '\0') return 0;
        if (c == '\'' || c == '"') {
            if (stop || c != q) return 0;
            out[n] = '\0';
            return 1;
        }
        if (c == '\\') {
            char e = *s++;
            c = e == 'n' ? '\n' : e == 't' ? '\t' : e;
            if (e != 'n' && e != 't' && e != '\\' && e != '\'' && e != '"') return 0;
        }
        if (n + 1 >= cap) return 0;
        out[n++] = c;
    }
}

// ChatML: the default system prompt, a literal '<|im_start|>system\n...<|im_end|>'.
static void chatml_system(const char *t, pq_chat_format *f) {
    const char *marker = "<|im_start|>system";
    for (const char *p = strstr(t, marker); p; p = strstr(p + 1, marker)) {
        const char *q = p + strlen(marker);
        if (*q == '\n') q++;
        else if (q[0] == '\\' && q[1] == 'n') q += 2;
        else continue;
        if (read_literal(q, "<|im_end|>", 0, 0, f->system_text, sizeof f->system_text)) {
            f->system = 1;
            return;
        }
    }
}

// Llama 3.1+: the knowledge-date line and the date.
static pq_status llama3_system(const char *t, const char *what, pq_chat_format *f) {
    const char *k = strstr(t, "Cutting Knowledge Date: ");
    if (!k) return PQ_OK;
    PQ_FAIL_IF(!strstr(t, "Today Date: ") || !read_literal(k, "\n", 1, 0, f->system_text, sizeof f->system_text),
               PQ_ERR_ARG, "%s: the Llama 3 chat template's system block is not one pq can render", what);
    f->system = 1;
    if (strstr(t, "strftime_now")) return PQ_OK; // today's date
    const char *d = strstr(t, "set date_string = ");
    if (d) {
        d += strlen("set date_string = ");
        if ((*d == '"' || *d == '\'') && read_literal(d + 1, NULL, 0, *d, f->date, sizeof f->date)) return PQ_OK;
    }
    return PQ_FAIL(PQ_ERR_ARG, "%s: the Llama 3 chat template's date_string default is not a plain string", what);
}

pq_status pq_chat_detect(const char *t, const char *what, pq_chat_format *out) {
    memset(out, 0, sizeof *out);
    PQ_FAIL_IF(!t, PQ_ERR_ARG, "%s: the tokenizer has no chat template (tokenizer_config.json chat_template), "
                               "so --chat cannot format the prompt", what);
    out->bos = strstr(t, "bos_token") != NULL;
    if (strstr(t, "<|im_start|>") && strstr(t, "<|im_end|>")) {
        out->kind = PQ_CHAT_CHATML;
        out->name = "ChatML";
        out->end_token = "<|im_end|>";
        out->trim = strstr(t, "| trim") || strstr(t, "|trim");
        chatml_system(t, out);
        return PQ_OK;
    }
    if (strstr(t, "<|start_header_id|>") && strstr(t, "<|end_header_id|>") && strstr(t, "<|eot_id|>")) {
        out->kind = PQ_CHAT_LLAMA3;
        out->name = "Llama 3";
        out->end_token = "<|eot_id|>";
        out->trim = 1;
        return llama3_system(t, what, out);
    }
    return PQ_FAIL(PQ_ERR_ARG, "%s: the chat template is not one pq knows (ChatML or Llama 3), so --chat cannot "
                               "format the prompt", what);
}

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

pq_status pq_chat_render(const pq_chat_format *f, const char *bos_text, const char *user, time_t now, char **out) {
    *out = NULL;
    PQ_FAIL_IF(f->bos && !bos_text, PQ_ERR_ARG, "the %s chat template starts with a BOS token the tokenizer lacks",
               f->name);
    size_t a = 0, z = strlen(user);
    if (f->trim) {
        while (a < z && is_space(user[a])) a++;
        while (z > a && is_space(user[z - 1])) z--;
    }
    sbuf b = {0};
    if (f->bos) puts_(&b, bos_text);
    if (f->kind == PQ_CHAT_CHATML) {
        if (f->system) {
            puts_(&b, "<|im_start|>system\n");
            puts_(&b, f->system_text);
            puts_(&b, "<|im_end|>\n");
        }
        puts_(&b, "<|im_start|>user\n");
        put(&b, user + a, z - a);
        puts_(&b, "<|im_end|>\n<|im_start|>assistant\n");
    } else {
        if (f->system) {
            char today[64];
            struct tm tm;
            if (!f->date[0]) strftime(today, sizeof today, "%d %b %Y", localtime_r(&now, &tm));
            puts_(&b, "<|start_header_id|>system<|end_header_id|>\n\n");
            puts_(&b, f->system_text);
            puts_(&b, "Today Date: ");
            puts_(&b, f->date[0] ? f->date : today);
            puts_(&b, "\n\n<|eot_id|>");
        }
        puts_(&b, "<|start_header_id|>user<|end_header_id|>\n\n");
        put(&b, user + a, z - a);
        puts_(&b, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    }
    if (b.oom) {
        free(b.p);
        return PQ_FAIL(PQ_ERR_NOMEM, "out of memory rendering the chat prompt");
    }
    *out = b.p;
    return PQ_OK;
}
