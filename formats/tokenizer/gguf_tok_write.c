// formats/tokenizer/gguf_tok_write.c — tokenizer.ggml.* from a Hugging Face
// tokenizer.json (formats/gguf_export.h describes the mapping): the inverse
// of formats/tokenizer/gguf_tok.c, so that a GGUF pq writes tokenizes as the
// model it came from, in llama.cpp and when pq reads it back.
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf_export.h"
#include "formats/tokenizer/pretok.h"

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

#define SPACE_MARK "\xe2\x96\x81" // "▁"

typedef struct {
    const char *what;
    json_t *tj, *cj;       // tokenizer.json, tokenizer_config.json (or NULL)
    json_t *vocab;         // model.vocab: text -> id
    int spm, add_space_prefix;
    const char *pre;
    int64_t n;             // tokens written: the model's vocab_size
    char **text;           // [n] (owned; padding made here)
    int32_t *type;         // [n]
    float *score;          // [n] (SentencePiece)
    int64_t bos, eos, unk, pad;
    int add_bos, add_eos;
} tok_out;

static const char *str_of(json_t *o, const char *key) { return json_string_value(json_object_get(o, key)); }
static int is_type(json_t *o, const char *type) { return o && json_is_object(o) && str_of(o, "type") && strcmp(str_of(o, "type"), type) == 0; }

// A Replace normalizer of " " by "▁".
static int is_space_replace(json_t *o) {
    return is_type(o, "Replace") && str_of(json_object_get(o, "pattern"), "String") &&
           strcmp(str_of(json_object_get(o, "pattern"), "String"), " ") == 0 && str_of(o, "content") &&
           strcmp(str_of(o, "content"), SPACE_MARK) == 0;
}

// SentencePiece-style: spaces become "▁" through the normalizer (with an
// optional Prepend) or a Metaspace pre-tokenizer. 1 if recognized.
static int spm_spaces(tok_out *t) {
    json_t *norm = json_object_get(t->tj, "normalizer"), *pre = json_object_get(t->tj, "pre_tokenizer");
    if ((!pre || json_is_null(pre)) && is_space_replace(norm)) return t->add_space_prefix = 0, 1;
    if ((!pre || json_is_null(pre)) && is_type(norm, "Sequence")) {
        json_t *l = json_object_get(norm, "normalizers");
        json_t *a = json_array_get(l, 0), *b = json_array_get(l, 1);
        if (json_array_size(l) == 2 && is_type(a, "Prepend") && str_of(a, "prepend") &&
            strcmp(str_of(a, "prepend"), SPACE_MARK) == 0 && is_space_replace(b))
            return t->add_space_prefix = 1, 1;
    }
    if ((!norm || json_is_null(norm)) && is_type(pre, "Metaspace") && str_of(pre, "replacement") &&
        strcmp(str_of(pre, "replacement"), SPACE_MARK) == 0) {
        const char *scheme = str_of(pre, "prepend_scheme");
        json_t *legacy = json_object_get(pre, "add_prefix_space");
        t->add_space_prefix = scheme ? strcmp(scheme, "never") != 0 : legacy ? json_is_true(legacy) : 1;
        return 1;
    }
    return 0;
}

static int bytelevel_regex(json_t *o, int want) {
    json_t *r = json_object_get(o, "use_regex");
    return is_type(o, "ByteLevel") && (r ? json_is_true(r) : 1) == want;
}

// llama.cpp's name of a byte-level pre-tokenizer, or NULL.
static const char *bpe_pre(tok_out *t) {
    json_t *norm = json_object_get(t->tj, "normalizer"), *pre = json_object_get(t->tj, "pre_tokenizer");
    int no_norm = !norm || json_is_null(norm);
    if (no_norm && bytelevel_regex(pre, 1)) return "gpt-2";
    if (!is_type(pre, "Sequence")) return NULL;
    json_t *l = json_object_get(pre, "pretokenizers"), *a = json_array_get(l, 0), *b = json_array_get(l, 1);
    if (json_array_size(l) != 2) return NULL;
    if (no_norm && is_type(a, "Digits") && json_is_true(json_object_get(a, "individual_digits")) &&
        bytelevel_regex(b, 1))
        return "smollm";
    const char *rx = str_of(json_object_get(a, "pattern"), "Regex"), *beh = str_of(a, "behavior");
    if (!is_type(a, "Split") || !rx || !beh || strcmp(beh, "Isolated") != 0 || json_is_true(json_object_get(a, "invert")) ||
        !bytelevel_regex(b, 0))
        return NULL;
    int pat = pq_split_pattern_of(rx);
    if (no_norm && pat == PQ_SPLIT_LLAMA3) return "llama-bpe";
    if (is_type(norm, "NFC") && pat == PQ_SPLIT_QWEN2) return "qwen2";
    return NULL;
}

static int64_t id_of(const tok_out *t, const char *text) {
    for (int64_t i = 0; text && i < t->n; i++)
        if (t->text[i] && strcmp(t->text[i], text) == 0) return i;
    return -1;
}

// The vocabulary and the added tokens, their types, padding up to n.
static pq_status tokens(tok_out *t) {
    const char *k;
    json_t *v;
    t->text = calloc((size_t)t->n, sizeof *t->text);
    t->type = calloc((size_t)t->n, sizeof *t->type);
    t->score = calloc((size_t)t->n, sizeof *t->score);
    PQ_FAIL_IF(!t->text || !t->type || !t->score, PQ_ERR_NOMEM, "%s: out of memory", t->what);
    json_object_foreach(t->vocab, k, v) {
        json_int_t id = json_integer_value(v);
        PQ_FAIL_IF(!json_is_integer(v) || id < 0 || id >= t->n, PQ_ERR_FORMAT,
                   "%s: tokenizer.json: token '%.60s' has id %lld, outside the model's vocab_size %lld", t->what, k,
                   (long long)id, (long long)t->n);
        PQ_FAIL_IF(t->text[id], PQ_ERR_FORMAT, "%s: tokenizer.json: id %lld is given twice", t->what, (long long)id);
        PQ_FAIL_IF(!(t->text[id] = strdup(k)), PQ_ERR_NOMEM, "%s: out of memory", t->what);
        t->type[id] = TT_NORMAL;
        int byte = t->spm && strlen(k) == 6 && strncmp(k, "<0x", 3) == 0 && k[5] == '>';
        if (byte) t->type[id] = TT_BYTE;
    }
    size_t i;
    json_array_foreach(json_object_get(t->tj, "added_tokens"), i, v) {
        json_int_t id = json_integer_value(json_object_get(v, "id"));
        const char *c = str_of(v, "content");
        PQ_FAIL_IF(!c || id < 0 || id >= t->n, PQ_ERR_FORMAT,
                   "%s: tokenizer.json: added token %zu has no content or an id outside vocab_size %lld", t->what, i,
                   (long long)t->n);
        PQ_FAIL_IF(t->text[id] && strcmp(t->text[id], c) != 0, PQ_ERR_FORMAT,
                   "%s: tokenizer.json: added token '%.60s' has id %lld, which is '%.60s' in the vocabulary", t->what,
                   c, (long long)id, t->text[id]);
        if (!t->text[id]) PQ_FAIL_IF(!(t->text[id] = strdup(c)), PQ_ERR_NOMEM, "%s: out of memory", t->what);
        t->type[id] = json_is_true(json_object_get(v, "special")) ? TT_CONTROL : TT_USER;
    }
    for (int64_t id = 0; id < t->n; id++) {
        if (t->text[id]) continue;
        char pad[32];
        snprintf(pad, sizeof pad, "[PAD%lld]", (long long)id);
        PQ_FAIL_IF(!(t->text[id] = strdup(pad)), PQ_ERR_NOMEM, "%s: out of memory", t->what);
        t->type[id] = TT_UNUSED;
    }
    return PQ_OK;
}

// One merge as "left right" into a malloc'd string (NULL: not two tokens).
static char *merge_text(json_t *m) {
    if (json_is_string(m)) {
        const char *s = json_string_value(m), *sp = strchr(s, ' ');
        return sp && sp > s && sp[1] && !strchr(sp + 1, ' ') ? strdup(s) : NULL;
    }
    const char *a = json_string_value(json_array_get(m, 0)), *b = json_string_value(json_array_get(m, 1));
    if (json_array_size(m) != 2 || !a || !b || !*a || !*b || strchr(a, ' ') || strchr(b, ' ')) return NULL;
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 2);
    if (s) memcpy(s, a, la), s[la] = ' ', memcpy(s + la + 1, b, lb + 1);
    return s;
}

// SentencePiece scores: the token made by the merge of rank r scores -r.
static pq_status spm_scores(tok_out *t, json_t *merges) {
    size_t r;
    json_t *m;
    unsigned char *scored = calloc((size_t)t->n, 1);
    PQ_FAIL_IF(!scored, PQ_ERR_NOMEM, "%s: out of memory", t->what);
    json_array_foreach(merges, r, m) {
        char *s = merge_text(m);
        if (!s) {
            free(scored);
            return PQ_FAIL(PQ_ERR_FORMAT, "%s: tokenizer.json: merge %zu is not two tokens", t->what, r);
        }
        char *sp = strchr(s, ' ');
        memmove(sp, sp + 1, strlen(sp + 1) + 1); // "a b" -> "ab"
        json_t *id = json_object_get(t->vocab, s);
        free(s);
        if (!id || scored[json_integer_value(id)]) continue;
        scored[json_integer_value(id)] = 1;
        t->score[json_integer_value(id)] = -(float)r;
    }
    free(scored);
    return PQ_OK;
}

static pq_status bpe_merges(tok_out *t, pq_gguf_writer *w, json_t *merges) {
    size_t n = json_array_size(merges), r;
    char **s = calloc(n + 1, sizeof *s);
    PQ_FAIL_IF(!s, PQ_ERR_NOMEM, "%s: out of memory", t->what);
    pq_status st = PQ_OK;
    json_t *m;
    json_array_foreach(merges, r, m) {
        s[r] = merge_text(m);
        PQ_CHECK_GOTO(!s[r], st, PQ_ERR_FORMAT, "%s: tokenizer.json: merge %zu is not two tokens without spaces",
                      t->what, r);
    }
    st = pq_gguf_writer_kv_strs(w, "tokenizer.ggml.merges", (const char *const *)s, NULL, n);
done:
    for (size_t i = 0; i < n; i++) free(s[i]);
    free(s);
    return st;
}

// A special token named in tokenizer_config.json (a string or {"content"}).
static const char *config_token(const tok_out *t, const char *key) {
    json_t *v = json_object_get(t->cj, key);
    return json_is_string(v) ? json_string_value(v) : str_of(v, "content");
}

static pq_status special_ids(tok_out *t, const pq_config *cfg) {
    const char *names[4] = {config_token(t, "bos_token"), config_token(t, "eos_token"),
                            str_of(json_object_get(t->tj, "model"), "unk_token"), config_token(t, "pad_token")};
    if (!names[2]) names[2] = config_token(t, "unk_token");
    int64_t *ids[4] = {&t->bos, &t->eos, &t->unk, &t->pad};
    const char *keys[4] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    for (int i = 0; i < 4; i++) {
        *ids[i] = names[i] ? id_of(t, names[i]) : -1;
        PQ_FAIL_IF(names[i] && *ids[i] < 0, PQ_ERR_FORMAT, "%s: %s '%.60s' is not in the vocabulary", t->what, keys[i],
                   names[i]);
    }
    if (t->bos < 0 && cfg->bos_id >= 0 && cfg->bos_id < t->n) t->bos = cfg->bos_id;
    if (t->eos < 0 && cfg->eos_id >= 0 && cfg->eos_id < t->n) t->eos = cfg->eos_id;
    if (t->unk >= 0 && t->type[t->unk] == TT_NORMAL) t->type[t->unk] = TT_UNKNOWN;
    if (t->unk >= 0 && t->spm) t->type[t->unk] = TT_UNKNOWN;
    return PQ_OK;
}

// The TemplateProcessing of the post-processor (also inside a Sequence), or NULL.
static json_t *template_of(json_t *pp) {
    if (is_type(pp, "TemplateProcessing")) return pp;
    size_t i;
    json_t *p;
    if (is_type(pp, "Sequence")) json_array_foreach(json_object_get(pp, "processors"), i, p) if (is_type(p, "TemplateProcessing")) return p;
    return NULL;
}

// add_bos / add_eos: tokenizer_config.json's, else whether the template
// for one sequence starts / ends with the BOS / EOS token.
static void add_flags(tok_out *t) {
    json_t *single = json_object_get(template_of(json_object_get(t->tj, "post_processor")), "single");
    size_t n = json_array_size(single);
    const char *first = n ? str_of(json_object_get(json_array_get(single, 0), "SpecialToken"), "id") : NULL;
    const char *last = n ? str_of(json_object_get(json_array_get(single, n - 1), "SpecialToken"), "id") : NULL;
    t->add_bos = t->bos >= 0 && first && strcmp(first, t->text[t->bos]) == 0;
    t->add_eos = t->eos >= 0 && last && strcmp(last, t->text[t->eos]) == 0;
    json_t *ab = json_object_get(t->cj, "add_bos_token"), *ae = json_object_get(t->cj, "add_eos_token");
    if (json_is_boolean(ab)) t->add_bos = json_is_true(ab) && t->bos >= 0;
    if (json_is_boolean(ae)) t->add_eos = json_is_true(ae) && t->eos >= 0;
}

static pq_status write_all(tok_out *t, pq_gguf_writer *w, const pq_config *cfg, const char *chat_template) {
    json_t *model = json_object_get(t->tj, "model"), *merges = json_object_get(model, "merges");
    PQ_FAIL_IF(!is_type(model, "BPE") || !json_is_object(t->vocab) || !json_is_array(merges), PQ_ERR_FORMAT,
               "%s: tokenizer.json: the model is not BPE with a vocabulary and merges (pq writes BPE tokenizers to GGUF)",
               t->what);
    t->spm = json_is_true(json_object_get(model, "byte_fallback"));
    if (t->spm) {
        PQ_FAIL_IF(!spm_spaces(t), PQ_ERR_FORMAT,
                   "%s: tokenizer.json: byte_fallback BPE whose spaces are not turned into \"" SPACE_MARK "\" by a "
                   "Replace normalizer or a Metaspace pre-tokenizer has no llama.cpp equivalent", t->what);
        t->pre = "default";
    } else {
        t->pre = bpe_pre(t);
        PQ_FAIL_IF(!t->pre, PQ_ERR_FORMAT,
                   "%s: tokenizer.json: a byte-level pre-tokenizer pq cannot name for llama.cpp (it knows ByteLevel "
                   "(gpt-2), Digits + ByteLevel (smollm), Llama 3's and Qwen2's Split + ByteLevel)", t->what);
    }
    PQ_TRY(tokens(t));
    PQ_TRY(special_ids(t, cfg));
    add_flags(t);
    const char *model_name = t->spm ? "llama" : "gpt2";
    PQ_TRY(pq_gguf_writer_kv_str(w, "tokenizer.ggml.model", model_name, strlen(model_name)));
    PQ_TRY(pq_gguf_writer_kv_str(w, "tokenizer.ggml.pre", t->pre, strlen(t->pre)));
    PQ_TRY(pq_gguf_writer_kv_strs(w, "tokenizer.ggml.tokens", (const char *const *)t->text, NULL, (uint64_t)t->n));
    if (t->spm) {
        PQ_TRY(spm_scores(t, merges));
        PQ_TRY(pq_gguf_writer_kv_array(w, "tokenizer.ggml.scores", PQ_GGUF_F32, t->score, (uint64_t)t->n));
    }
    PQ_TRY(pq_gguf_writer_kv_array(w, "tokenizer.ggml.token_type", PQ_GGUF_I32, t->type, (uint64_t)t->n));
    if (!t->spm) PQ_TRY(bpe_merges(t, w, merges));
    const char *id_keys[4] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                              "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"};
    const int64_t ids[4] = {t->bos, t->eos, t->unk, t->pad};
    for (int i = 0; i < 4; i++)
        if (ids[i] >= 0) PQ_TRY(pq_gguf_writer_kv_u32(w, id_keys[i], (uint32_t)ids[i]));
    PQ_TRY(pq_gguf_writer_kv_bool(w, "tokenizer.ggml.add_bos_token", t->add_bos));
    PQ_TRY(pq_gguf_writer_kv_bool(w, "tokenizer.ggml.add_eos_token", t->add_eos));
    PQ_TRY(pq_gguf_writer_kv_bool(w, "tokenizer.ggml.add_space_prefix", t->spm && t->add_space_prefix));
    if (!chat_template) chat_template = str_of(t->cj, "chat_template");
    if (chat_template)
        PQ_TRY(pq_gguf_writer_kv_str(w, "tokenizer.chat_template", chat_template, strlen(chat_template)));
    return PQ_OK;
}

pq_status pq_gguf_write_tokenizer_meta(pq_gguf_writer *w, const pq_config *cfg, const char *tokenizer_json,
                                       const char *tokenizer_config_json, const char *chat_template, const char *what) {
    tok_out t = {.what = what, .n = cfg->vocab};
    json_error_t err;
    t.tj = json_loads(tokenizer_json, 0, &err);
    PQ_FAIL_IF(!t.tj, PQ_ERR_FORMAT, "%s: tokenizer.json: %s (line %d)", what, err.text, err.line);
    pq_status s = PQ_OK;
    if (tokenizer_config_json) {
        t.cj = json_loads(tokenizer_config_json, 0, &err);
        PQ_CHECK_GOTO(!t.cj, s, PQ_ERR_FORMAT, "%s: tokenizer_config.json: %s (line %d)", what, err.text, err.line);
    }
    t.vocab = json_object_get(json_object_get(t.tj, "model"), "vocab");
    s = write_all(&t, w, cfg, chat_template);
done:
    for (int64_t i = 0; t.text && i < t.n; i++) free(t.text[i]);
    free(t.text), free(t.type), free(t.score);
    json_decref(t.tj);
    json_decref(t.cj);
    return s;
}
