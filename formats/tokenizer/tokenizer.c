// formats/tokenizer/tokenizer.c — loading tokenizer.json (+ tokenizer_config.json) and
// the encode/decode drivers. The pieces live in bpe.c (the model),
// normalizer.c, pretok*.c, tok_added.c and tok_decoder.c.
#include "formats/tokenizer/tokenizer.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "formats/tokenizer/bpe.h"
#include "formats/fileio.h"
#include "formats/gguf_hf.h"
#include "formats/tokenizer/normalizer.h"
#include "formats/tokenizer/pretok.h"
#include "formats/tokenizer/tok_added.h"
#include "formats/tokenizer/tok_decoder.h"

#define MAX_TEMPLATE 8        // special tokens before/after the text in a template
#define MAX_FILE (1u << 30)   // tokenizer.json of real models are < 20 MB

struct pq_tokenizer {
    pq_bpe *bpe;
    pq_norm *norm;
    pq_pretok *pretok;
    pq_tokdec *dec;
    pq_added_token *added;
    size_t n_added;
    int32_t *by_content;            // open-addressing index of added by content (-1: empty)
    size_t by_content_cap;          // a power of two, >= 2 x n_added
    pq_added_matcher *raw, *normed; // added tokens matched before / after normalization
    int32_t *added_of_id;           // id -> index in added, or -1
    int32_t vocab_size;
    int32_t prefix[MAX_TEMPLATE], suffix[MAX_TEMPLATE];
    int n_prefix, n_suffix;
    int32_t bos, eos;
    char *chat_template;            // tokenizer_config.json "chat_template" (or chat_template.jinja), or NULL
};

void pq_tok_free(pq_tokenizer *tok) {
    if (!tok) return;
    pq_bpe_free(tok->bpe);
    pq_norm_free(tok->norm);
    pq_pretok_free(tok->pretok);
    pq_tokdec_free(tok->dec);
    for (size_t i = 0; i < tok->n_added; i++) free(tok->added[i].content);
    free(tok->added);
    free(tok->by_content);
    pq_added_matcher_free(tok->raw);
    pq_added_matcher_free(tok->normed);
    free(tok->added_of_id);
    free(tok->chat_template);
    free(tok);
}

// ---- the model -------------------------------------------------------------

static int str_empty_or_null(const json_t *v) { return !v || json_is_null(v) || (json_is_string(v) && !*json_string_value(v)); }

static pq_status parse_merge(pq_bpe *bpe, const json_t *m, size_t i) {
    if (json_is_array(m)) {
        const char *l = json_string_value(json_array_get(m, 0)), *r = json_string_value(json_array_get(m, 1));
        PQ_FAIL_IF(json_array_size(m) != 2 || !l || !r, PQ_ERR_FORMAT, "model.merges[%zu] is not a pair of strings", i);
        return pq_bpe_add_merge(bpe, l, json_string_length(json_array_get(m, 0)), r,
                                json_string_length(json_array_get(m, 1)));
    }
    const char *s = json_string_value(m);
    PQ_FAIL_IF(!s, PQ_ERR_FORMAT, "model.merges[%zu] is neither a string nor a pair", i);
    size_t n = json_string_length(m);
    const char *sp = memchr(s, ' ', n);
    PQ_FAIL_IF(!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s)), PQ_ERR_FORMAT,
               "model.merges[%zu] '%.64s' is not two tokens separated by one space", i, s);
    return pq_bpe_add_merge(bpe, s, (size_t)(sp - s), sp + 1, n - (size_t)(sp + 1 - s));
}

static pq_status parse_model(const json_t *model, pq_bpe **out) {
    PQ_FAIL_IF(!json_is_object(model), PQ_ERR_FORMAT, "\"model\" is missing or not an object");
    const char *type = json_string_value(json_object_get(model, "type"));
    const json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    PQ_FAIL_IF(type && strcmp(type, "BPE") != 0, PQ_ERR_FORMAT, "model type '%.40s' is not supported (only BPE)", type);
    PQ_FAIL_IF(!type && !merges, PQ_ERR_FORMAT, "model has no \"type\" and no merges: not a BPE model");
    PQ_FAIL_IF(!json_is_object(vocab), PQ_ERR_FORMAT, "model.vocab is missing or not an object");
    PQ_FAIL_IF(!json_is_array(merges), PQ_ERR_FORMAT, "model.merges is missing or not a list");
    const json_t *dropout = json_object_get(model, "dropout");
    PQ_FAIL_IF(json_is_number(dropout) && json_number_value(dropout) != 0.0, PQ_ERR_FORMAT,
               "model.dropout is not supported (encoding would be random)");
    PQ_FAIL_IF(!str_empty_or_null(json_object_get(model, "continuing_subword_prefix")), PQ_ERR_FORMAT,
               "model.continuing_subword_prefix is not supported");
    PQ_FAIL_IF(!str_empty_or_null(json_object_get(model, "end_of_word_suffix")), PQ_ERR_FORMAT,
               "model.end_of_word_suffix is not supported");
    const json_t *unk = json_object_get(model, "unk_token");
    PQ_FAIL_IF(unk && !json_is_null(unk) && !json_is_string(unk), PQ_ERR_FORMAT, "model.unk_token is not a string");

    pq_bpe *bpe = NULL;
    pq_status st = PQ_OK;
    PQ_TRY_GOTO(st, pq_bpe_new(&bpe));
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)vocab, key, val) {
        PQ_CHECK_GOTO(!json_is_integer(val), st, PQ_ERR_FORMAT, "model.vocab['%.64s'] is not an integer", key);
        json_int_t id = json_integer_value(val);
        PQ_CHECK_GOTO(id < 0 || id > PQ_BPE_MAX_ID, st, PQ_ERR_FORMAT, "model.vocab['%.64s'] = %lld is out of range",
                      key, (long long)id);
        PQ_TRY_GOTO(st, pq_bpe_add_piece(bpe, key, strlen(key), (int32_t)id));
    }
    for (size_t i = 0, rank = 0; i < json_array_size(merges); i++) {
        const json_t *m = json_array_get(merges, i);
        if (json_is_string(m) && strncmp(json_string_value(m), "#version", 8) == 0) continue;
        PQ_TRY_GOTO(st, parse_merge(bpe, m, rank++));
    }
    const json_t *bf = json_object_get(model, "byte_fallback"), *fu = json_object_get(model, "fuse_unk"),
                 *im = json_object_get(model, "ignore_merges");
    PQ_TRY_GOTO(st, pq_bpe_set_options(bpe, json_is_true(bf), json_is_true(fu), json_is_true(im), json_string_value(unk)));
    *out = bpe;
    bpe = NULL;
done:
    pq_bpe_free(bpe);
    return st;
}

// ---- added tokens ------------------------------------------------------------

static uint64_t content_hash(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 32);
}

// The slot of content s[0..n) in the index: where it is, or the empty slot
// where it would go.
static size_t content_slot(const pq_tokenizer *tok, const char *s, size_t n) {
    size_t mask = tok->by_content_cap - 1;
    for (size_t i = content_hash(s, n) & mask;; i = (i + 1) & mask) {
        int32_t a = tok->by_content[i];
        if (a < 0 || (tok->added[a].len == n && memcmp(tok->added[a].content, s, n) == 0)) return i;
    }
}

// The added token whose content is s[0..n), or -1.
static int32_t added_index(const pq_tokenizer *tok, const char *s, size_t n) {
    return tok->by_content_cap ? tok->by_content[content_slot(tok, s, n)] : -1;
}

static pq_status index_content(pq_tokenizer *tok, size_t a) {
    if (2 * (tok->n_added + 1) > tok->by_content_cap) {
        size_t cap = tok->by_content_cap ? 2 * tok->by_content_cap : 64;
        int32_t *p = malloc(cap * sizeof *p);
        PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "out of memory indexing added tokens");
        for (size_t i = 0; i < cap; i++) p[i] = -1;
        free(tok->by_content);
        tok->by_content = p;
        tok->by_content_cap = cap;
        for (size_t k = 0; k < a; k++) tok->by_content[content_slot(tok, tok->added[k].content, tok->added[k].len)] = (int32_t)k;
    }
    tok->by_content[content_slot(tok, tok->added[a].content, tok->added[a].len)] = (int32_t)a;
    return PQ_OK;
}

static int32_t token_to_id(const pq_tokenizer *tok, const char *s, size_t n) {
    int32_t a = added_index(tok, s, n);
    return a >= 0 ? tok->added[a].id : pq_bpe_lookup(tok->bpe, s, n);
}

static int same_token(const pq_added_token *a, const pq_added_token *b) {
    return a->len == b->len && memcmp(a->content, b->content, a->len) == 0 && a->special == b->special &&
           a->lstrip == b->lstrip && a->rstrip == b->rstrip && a->single_word == b->single_word &&
           a->normalized == b->normalized;
}

// Adds one token as AddedVocabulary::add_tokens does: its id is that of its
// content in the vocabulary when there is one (the "id" in the file is only
// a hint the library checks), otherwise the next free id. Takes ownership of
// t.content (freed when t is not kept). Constant time per token (the
// content index), so 100,000 added tokens load in linear time.
static pq_status add_token(pq_tokenizer *tok, pq_added_token t, int32_t *max_added) {
    pq_status st = PQ_OK;
    int32_t a = added_index(tok, t.content, t.len);
    if (a >= 0 && same_token(&tok->added[a], &t)) goto done; // an exact duplicate is ignored
    int32_t id = a >= 0 ? tok->added[a].id : pq_bpe_lookup(tok->bpe, t.content, t.len);
    if (id < 0) {
        int32_t nv = (int32_t)pq_bpe_n_pieces(tok->bpe);
        id = *max_added < 0 ? nv : (*max_added >= nv || nv == 0 ? *max_added + 1 : nv);
        PQ_CHECK_GOTO(id > PQ_BPE_MAX_ID, st, PQ_ERR_FORMAT, "added token '%.64s' gets id %d, out of range", t.content,
                      (int)id);
    }
    if (id > *max_added) *max_added = id;
    t.id = id;
    if (a >= 0) { // the same content again: the newer flags win
        free(tok->added[a].content);
        tok->added[a] = t;
        return PQ_OK;
    }
    if ((tok->n_added & (tok->n_added - 1)) == 0) { // capacity doubles at powers of two
        pq_added_token *p = realloc(tok->added, (tok->n_added ? 2 * tok->n_added : 1) * sizeof *p);
        PQ_CHECK_GOTO(!p, st, PQ_ERR_NOMEM, "out of memory adding added tokens");
        tok->added = p;
    }
    tok->added[tok->n_added] = t;
    st = index_content(tok, tok->n_added);
    if (st != PQ_OK) goto done;
    tok->n_added++;
    return PQ_OK;
done:
    free(t.content);
    return st;
}

static pq_status parse_added(pq_tokenizer *tok, const json_t *list) {
    if (!list || json_is_null(list)) return PQ_OK;
    PQ_FAIL_IF(!json_is_array(list), PQ_ERR_FORMAT, "\"added_tokens\" is not a list");
    int32_t max_added = -1;
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *e = json_array_get(list, i), *c = json_object_get(e, "content");
        PQ_FAIL_IF(!json_is_string(c), PQ_ERR_FORMAT, "added_tokens[%zu].content is not a string", i);
        pq_added_token t = {0};
        t.len = json_string_length(c);
        if (t.len == 0) continue; // the library ignores empty tokens
        static const char *const FLAGS[] = {"special", "lstrip", "rstrip", "single_word", "normalized"};
        for (int k = 0; k < 5; k++) {
            const json_t *f = json_object_get(e, FLAGS[k]);
            PQ_FAIL_IF(f && !json_is_boolean(f), PQ_ERR_FORMAT, "added_tokens[%zu].%s must be true or false", i, FLAGS[k]);
        }
        t.special = json_is_true(json_object_get(e, "special"));
        t.lstrip = json_is_true(json_object_get(e, "lstrip"));
        t.rstrip = json_is_true(json_object_get(e, "rstrip"));
        t.single_word = json_is_true(json_object_get(e, "single_word"));
        const json_t *nz = json_object_get(e, "normalized");
        t.normalized = nz ? json_is_true(nz) : !t.special;
        t.content = malloc(t.len + 1);
        PQ_FAIL_IF(!t.content, PQ_ERR_NOMEM, "out of memory reading added tokens");
        memcpy(t.content, json_string_value(c), t.len + 1);
        PQ_TRY(add_token(tok, t, &max_added));
    }
    return PQ_OK;
}

// Builds the two matchers (raw text / normalized text) and the id index.
static pq_status index_added(pq_tokenizer *tok) {
    PQ_TRY(pq_added_matcher_new(&tok->raw));
    PQ_TRY(pq_added_matcher_new(&tok->normed));
    pq_tbuf norm = {0};
    pq_status st = PQ_OK;
    for (int pass = 0; pass < 2; pass++) // special tokens first, then the others, as the library orders them
        for (size_t i = 0; i < tok->n_added; i++) {
            const pq_added_token *t = &tok->added[i];
            if (t->special != (pass == 0)) continue;
            if (!t->normalized) {
                PQ_TRY_GOTO(st, pq_added_matcher_add(tok->raw, t->content, t->len, t));
                continue;
            }
            PQ_TRY_GOTO(st, pq_norm_apply(tok->norm, t->content, t->len, &norm));
            if (norm.len) PQ_TRY_GOTO(st, pq_added_matcher_add(tok->normed, norm.p, norm.len, t));
        }
    PQ_TRY_GOTO(st, pq_added_matcher_finish(tok->raw));
    PQ_TRY_GOTO(st, pq_added_matcher_finish(tok->normed));
    int32_t vs = pq_bpe_vocab_size(tok->bpe);
    for (size_t i = 0; i < tok->n_added; i++)
        if (tok->added[i].id >= vs) vs = tok->added[i].id + 1;
    tok->vocab_size = vs;
    tok->added_of_id = malloc((size_t)(vs ? vs : 1) * sizeof *tok->added_of_id);
    PQ_CHECK_GOTO(!tok->added_of_id, st, PQ_ERR_NOMEM, "out of memory indexing %d ids", (int)vs);
    for (int32_t i = 0; i < vs; i++) tok->added_of_id[i] = -1;
    for (size_t i = 0; i < tok->n_added; i++) tok->added_of_id[tok->added[i].id] = (int32_t)i;
done:
    pq_tbuf_free(&norm);
    return st;
}

// ---- BOS / EOS -------------------------------------------------------------------

static pq_status parse_template(pq_tokenizer *tok, const json_t *pp) {
    const json_t *single = json_object_get(pp, "single"), *specials = json_object_get(pp, "special_tokens");
    PQ_FAIL_IF(!json_is_array(single), PQ_ERR_FORMAT, "post_processor TemplateProcessing: \"single\" is not a list");
    int seen_seq = 0;
    tok->n_prefix = tok->n_suffix = 0;
    for (size_t i = 0; i < json_array_size(single); i++) {
        const json_t *item = json_array_get(single, i), *sp = json_object_get(item, "SpecialToken");
        if (json_object_get(item, "Sequence")) {
            seen_seq = 1;
            continue;
        }
        const char *name = json_string_value(json_object_get(sp, "id"));
        PQ_FAIL_IF(!name, PQ_ERR_FORMAT, "post_processor TemplateProcessing: single[%zu] is not understood", i);
        const json_t *ids = json_object_get(json_object_get(specials, name), "ids");
        PQ_FAIL_IF(!json_is_array(ids), PQ_ERR_FORMAT, "post_processor: special token '%.40s' has no ids", name);
        for (size_t k = 0; k < json_array_size(ids); k++) {
            json_int_t id = json_integer_value(json_array_get(ids, k));
            PQ_FAIL_IF(!json_is_integer(json_array_get(ids, k)) || id < 0 || id > PQ_BPE_MAX_ID, PQ_ERR_FORMAT,
                       "post_processor: special token '%.40s' has a bad id", name);
            int *n = seen_seq ? &tok->n_suffix : &tok->n_prefix;
            PQ_FAIL_IF(*n == MAX_TEMPLATE, PQ_ERR_FORMAT, "post_processor: more than %d special tokens", MAX_TEMPLATE);
            (seen_seq ? tok->suffix : tok->prefix)[(*n)++] = (int32_t)id;
        }
    }
    PQ_FAIL_IF(!seen_seq, PQ_ERR_FORMAT, "post_processor TemplateProcessing: \"single\" has no Sequence");
    return PQ_OK;
}

static pq_status parse_post(pq_tokenizer *tok, const json_t *pp, int depth) {
    if (!pp || json_is_null(pp)) return PQ_OK;
    PQ_FAIL_IF(depth > 8, PQ_ERR_FORMAT, "post_processor: Sequence nested too deeply");
    const char *type = json_string_value(json_object_get(pp, "type"));
    PQ_FAIL_IF(!type, PQ_ERR_FORMAT, "post_processor: missing \"type\"");
    if (strcmp(type, "TemplateProcessing") == 0) return parse_template(tok, pp);
    if (strcmp(type, "ByteLevel") == 0) return PQ_OK; // offsets only
    if (strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(pp, "processors");
        PQ_FAIL_IF(!json_is_array(list), PQ_ERR_FORMAT, "post_processor Sequence: \"processors\" is not a list");
        for (size_t i = 0; i < json_array_size(list); i++) PQ_TRY(parse_post(tok, json_array_get(list, i), depth + 1));
        return PQ_OK;
    }
    return PQ_FAIL(PQ_ERR_FORMAT, "post_processor type '%.40s' is not supported", type);
}

// bos_token / eos_token of tokenizer_config.json: a string, {"content": ...}
// or null/absent (*id -1). A token it names must exist (transformers would
// add it with an id the model has no embedding for).
static pq_status config_token(const pq_tokenizer *tok, const json_t *cfg, const char *key, int32_t *id) {
    const json_t *v = json_object_get(cfg, key);
    *id = -1;
    if (!v || json_is_null(v)) return PQ_OK;
    if (json_is_object(v)) v = json_object_get(v, "content");
    PQ_FAIL_IF(!json_is_string(v), PQ_ERR_FORMAT, "tokenizer_config.json: \"%s\" must be a string, "
               "{\"content\": string} or null", key);
    *id = token_to_id(tok, json_string_value(v), json_string_length(v));
    PQ_FAIL_IF(*id < 0, PQ_ERR_FORMAT, "tokenizer_config.json: %s '%.64s' is not in the vocabulary", key,
               json_string_value(v));
    return PQ_OK;
}

// add_bos_token / add_eos_token: true, false, or null/absent (-1).
static pq_status config_flag(const json_t *cfg, const char *key, int *out) {
    const json_t *v = json_object_get(cfg, key);
    *out = -1;
    if (!v || json_is_null(v)) return PQ_OK;
    PQ_FAIL_IF(!json_is_boolean(v), PQ_ERR_FORMAT, "tokenizer_config.json: \"%s\" must be true, false or null", key);
    *out = json_is_true(v);
    return PQ_OK;
}

static pq_status set_chat_template(pq_tokenizer *tok, const char *t, size_t n) {
    char *c = malloc(n + 1);
    PQ_FAIL_IF(!c, PQ_ERR_NOMEM, "out of memory reading the chat template");
    memcpy(c, t, n);
    c[n] = '\0';
    free(tok->chat_template);
    tok->chat_template = c;
    return PQ_OK;
}

// "chat_template": a string, or (older files with several) a list of
// {"name", "template"} objects of which transformers uses "default".
static pq_status parse_chat_template(pq_tokenizer *tok, const json_t *ct) {
    if (!ct || json_is_null(ct)) return PQ_OK;
    if (json_is_string(ct)) return set_chat_template(tok, json_string_value(ct), json_string_length(ct));
    PQ_FAIL_IF(!json_is_array(ct), PQ_ERR_FORMAT, "tokenizer_config.json: chat_template is neither a string nor a list");
    for (size_t i = 0; i < json_array_size(ct); i++) {
        const json_t *e = json_array_get(ct, i), *name = json_object_get(e, "name"), *t = json_object_get(e, "template");
        PQ_FAIL_IF(!json_is_string(name) || !json_is_string(t), PQ_ERR_FORMAT,
                   "tokenizer_config.json: chat_template[%zu] is not a {name, template} pair of strings", i);
        if (strcmp(json_string_value(name), "default") == 0)
            return set_chat_template(tok, json_string_value(t), json_string_length(t));
    }
    return PQ_OK;
}

// tokenizer_config.json: add_bos_token / add_eos_token, when present, decide
// what add_special adds (as transformers' Llama tokenizers rebuild the
// template from them); bos_token / eos_token name the ids.
static pq_status apply_config(pq_tokenizer *tok, const json_t *cfg) {
    tok->bos = tok->n_prefix ? tok->prefix[0] : -1;
    tok->eos = tok->n_suffix ? tok->suffix[tok->n_suffix - 1] : -1;
    if (!cfg) return PQ_OK;
    PQ_FAIL_IF(!json_is_object(cfg), PQ_ERR_FORMAT, "tokenizer_config.json is not an object");
    int32_t b, e;
    int ab, ae;
    PQ_TRY(config_token(tok, cfg, "bos_token", &b));
    PQ_TRY(config_token(tok, cfg, "eos_token", &e));
    PQ_TRY(config_flag(cfg, "add_bos_token", &ab));
    PQ_TRY(config_flag(cfg, "add_eos_token", &ae));
    // the BOS the template prepends is the BOS; a config naming another one
    // without add_bos_token (which would rebuild the template) contradicts it
    PQ_FAIL_IF(b >= 0 && ab < 0 && tok->n_prefix > 0 && tok->prefix[0] != b, PQ_ERR_FORMAT,
               "tokenizer_config.json: bos_token is id %d, but the post_processor prepends id %d", (int)b,
               (int)tok->prefix[0]);
    PQ_FAIL_IF(e >= 0 && ae < 0 && tok->n_suffix > 0 && tok->suffix[tok->n_suffix - 1] != e, PQ_ERR_FORMAT,
               "tokenizer_config.json: eos_token is id %d, but the post_processor appends id %d", (int)e,
               (int)tok->suffix[tok->n_suffix - 1]);
    if (b >= 0) tok->bos = b;
    if (e >= 0) tok->eos = e;
    PQ_TRY(parse_chat_template(tok, json_object_get(cfg, "chat_template")));
    if (ab >= 0) {
        PQ_FAIL_IF(ab && tok->bos < 0, PQ_ERR_FORMAT, "add_bos_token is true but bos_token is unknown");
        tok->n_prefix = ab;
        tok->prefix[0] = tok->bos;
    }
    if (ae >= 0) {
        PQ_FAIL_IF(ae && tok->eos < 0, PQ_ERR_FORMAT, "add_eos_token is true but eos_token is unknown");
        tok->n_suffix = ae;
        tok->suffix[0] = tok->eos;
    }
    return PQ_OK;
}

// ---- loading ---------------------------------------------------------------------

static pq_status load_parsed(const json_t *root, const json_t *cfg, pq_tokenizer *tok) {
    PQ_FAIL_IF(!json_is_object(root), PQ_ERR_FORMAT, "tokenizer.json is not a JSON object");
    PQ_TRY(parse_model(json_object_get(root, "model"), &tok->bpe));
    PQ_TRY(pq_norm_parse(json_object_get(root, "normalizer"), &tok->norm));
    PQ_TRY(pq_pretok_parse(json_object_get(root, "pre_tokenizer"), &tok->pretok));
    PQ_TRY(pq_tokdec_parse(json_object_get(root, "decoder"), &tok->dec));
    PQ_TRY(parse_added(tok, json_object_get(root, "added_tokens")));
    PQ_TRY(index_added(tok));
    PQ_TRY(parse_post(tok, json_object_get(root, "post_processor"), 0));
    const int32_t *ids[2] = {tok->prefix, tok->suffix};
    const int ns[2] = {tok->n_prefix, tok->n_suffix};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < ns[k]; i++)
            PQ_FAIL_IF(ids[k][i] >= tok->vocab_size, PQ_ERR_FORMAT, "post_processor: id %d is not in the vocabulary",
                       (int)ids[k][i]);
    return apply_config(tok, cfg);
}

pq_status pq_tok_load_json(const char *json, size_t len, const char *config_json, size_t config_len,
                           const char *name, pq_tokenizer **out) {
    *out = NULL;
    json_error_t err;
    json_t *root = NULL, *cfg = NULL;
    pq_tokenizer *tok = NULL;
    pq_status st = PQ_OK;
    if (!name) name = "tokenizer.json";
    root = json_loadb(json, len, 0, &err);
    PQ_CHECK_GOTO(!root, st, PQ_ERR_FORMAT, "%s: invalid JSON at line %d column %d: %s", name, err.line, err.column,
                  err.text);
    if (config_json) {
        // integers as reals: transformers writes model_max_length = 1e30 as an
        // integer literal, too big for jansson's integers; no integer is read here
        cfg = json_loadb(config_json, config_len, JSON_DECODE_INT_AS_REAL, &err);
        PQ_CHECK_GOTO(!cfg, st, PQ_ERR_FORMAT, "%s: tokenizer_config.json: invalid JSON at line %d column %d: %s",
                      name, err.line, err.column, err.text);
    }
    tok = calloc(1, sizeof *tok);
    PQ_CHECK_GOTO(!tok, st, PQ_ERR_NOMEM, "%s: out of memory", name);
    st = load_parsed(root, cfg, tok);
    if (st != PQ_OK) {
        pq_fail_context(st, "%s", name);
        goto done;
    }
    *out = tok;
    tok = NULL;
done:
    pq_tok_free(tok);
    json_decref(root);
    json_decref(cfg);
    return st;
}

pq_status pq_tok_load_files(const char *tokenizer_json, const char *config_path, pq_tokenizer **out) {
    *out = NULL;
    char *json = NULL, *cfg = NULL;
    size_t len = 0, cfg_len = 0;
    pq_status st = PQ_OK;
    PQ_TRY_GOTO(st, pq_file_read(tokenizer_json, MAX_FILE, &json, &len));
    if (config_path) PQ_TRY_GOTO(st, pq_file_read(config_path, MAX_FILE, &cfg, &cfg_len));
    st = pq_tok_load_json(json, len, cfg, cfg_len, tokenizer_json, out);
done:
    free(json);
    free(cfg);
    return st;
}

// A .gguf file: tokenizer.json and tokenizer_config.json made from its
// tokenizer.ggml.* metadata (formats/tokenizer/gguf_tok.c).
static pq_status load_gguf(const char *path, pq_tokenizer **out) {
    pq_gguf *g;
    PQ_TRY(pq_gguf_open(path, &g));
    char *json = NULL, *cfg = NULL;
    pq_status st = pq_gguf_tokenizer_json(g, &json, &cfg);
    if (st == PQ_OK) st = pq_tok_load_json(json, strlen(json), cfg, strlen(cfg), path, out);
    free(json);
    free(cfg);
    pq_gguf_close(g);
    return st;
}

pq_status pq_tok_load(const char *model_dir, pq_tokenizer **out) {
    *out = NULL;
    if (pq_gguf_is_file(model_dir)) return load_gguf(model_dir, out);
    char tj[4096], tc[4096], jt[4096];
    PQ_TRY(pq_path_join(tj, sizeof tj, model_dir, "tokenizer.json"));
    PQ_TRY(pq_path_join(tc, sizeof tc, model_dir, "tokenizer_config.json"));
    PQ_TRY(pq_path_join(jt, sizeof jt, model_dir, "chat_template.jinja"));
    PQ_TRY(pq_tok_load_files(tj, pq_path_exists(tc) ? tc : NULL, out));
    if ((*out)->chat_template || !pq_path_exists(jt)) return PQ_OK;
    // transformers >= 4.50 saves the template as its own file
    char *t = NULL;
    size_t n = 0;
    pq_status st = pq_file_read(jt, MAX_FILE, &t, &n);
    if (st == PQ_OK) st = set_chat_template(*out, t, n);
    free(t);
    if (st != PQ_OK) {
        pq_tok_free(*out);
        *out = NULL;
    }
    return st;
}

// ---- queries ------------------------------------------------------------------------

int pq_tok_vocab_size(const pq_tokenizer *tok) { return tok->vocab_size; }
int pq_tok_bos(const pq_tokenizer *tok) { return tok->bos; }
int pq_tok_eos(const pq_tokenizer *tok) { return tok->eos; }
int pq_tok_adds_bos(const pq_tokenizer *tok) { return tok->n_prefix > 0; }

const char *pq_tok_chat_template(const pq_tokenizer *tok) { return tok->chat_template; }

int pq_tok_token_id(const pq_tokenizer *tok, const char *text) {
    int32_t id = token_to_id(tok, text, strlen(text));
    return id >= 0 && id < tok->vocab_size ? id : -1;
}

const char *pq_tok_piece(const pq_tokenizer *tok, int id) {
    if (id < 0 || id >= tok->vocab_size) return NULL;
    if (tok->added_of_id[id] >= 0) return tok->added[tok->added_of_id[id]].content;
    size_t len;
    return pq_bpe_piece(tok->bpe, id, &len);
}

// ---- encoding ---------------------------------------------------------------------

typedef struct {
    pq_ivec ids;
    pq_bpe_scratch bpe;
    pq_pretok_ws pretok;
    pq_tbuf norm;
    pq_added_segs raw, normed;
} encoder;

static void encoder_free(encoder *e) {
    free(e->ids.p);
    pq_bpe_scratch_free(&e->bpe);
    pq_pretok_ws_free(&e->pretok);
    pq_tbuf_free(&e->norm);
    pq_added_segs_free(&e->raw);
    pq_added_segs_free(&e->normed);
}

// Text without added tokens: pre-tokenizer, then the model on each word.
static pq_status encode_plain(const pq_tokenizer *tok, encoder *e, const char *s, size_t n, int first) {
    if (pq_pretok_is_identity(tok->pretok)) return pq_bpe_encode_word(tok->bpe, s, n, &e->bpe, &e->ids);
    const pq_pieces *words;
    PQ_TRY(pq_pretok_run(tok->pretok, s, n, first, &e->pretok, &words));
    for (size_t i = 0; i < words->n; i++)
        PQ_TRY(pq_bpe_encode_word(tok->bpe, words->text.p + words->p[i].off, words->p[i].len, &e->bpe, &e->ids));
    return PQ_OK;
}

// AddedVocabulary::extract_and_normalize, then the model: added tokens are
// found in the raw text, each remaining segment is normalized on its own,
// normalized added tokens are found in that, and the rest is tokenized.
static pq_status encode_text(const pq_tokenizer *tok, encoder *e, const char *text, size_t len) {
    PQ_TRY(pq_added_split(tok->raw, text, len, &e->raw));
    for (size_t i = 0; i < e->raw.n; i++) {
        pq_added_seg g = e->raw.p[i];
        if (g.id >= 0) {
            PQ_TRY(pq_ivec_push(&e->ids, g.id));
            continue;
        }
        const char *s = text + g.start;
        size_t n = g.end - g.start;
        if (!pq_norm_is_identity(tok->norm)) {
            PQ_TRY(pq_norm_apply(tok->norm, s, n, &e->norm));
            s = e->norm.p;
            n = e->norm.len;
        }
        if (pq_added_matcher_empty(tok->normed)) {
            if (n) PQ_TRY(encode_plain(tok, e, s, n, g.start == 0));
            continue;
        }
        PQ_TRY(pq_added_split(tok->normed, s, n, &e->normed));
        for (size_t k = 0; k < e->normed.n; k++) {
            pq_added_seg h = e->normed.p[k];
            if (h.id >= 0) PQ_TRY(pq_ivec_push(&e->ids, h.id));
            else PQ_TRY(encode_plain(tok, e, s + h.start, h.end - h.start, g.start == 0 && h.start == 0));
        }
    }
    return PQ_OK;
}

pq_status pq_tok_encode(const pq_tokenizer *tok, const char *text, size_t len, int add_special, int32_t **ids,
                        size_t *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    size_t bad = pq_utf8_check(text, len);
    PQ_FAIL_IF(bad < len, PQ_ERR_FORMAT, "text is not valid UTF-8: bad byte 0x%02X at byte offset %zu",
               (unsigned char)text[bad], bad);
    encoder e = {0};
    pq_status st = PQ_OK;
    for (int i = 0; add_special && i < tok->n_prefix; i++) PQ_TRY_GOTO(st, pq_ivec_push(&e.ids, tok->prefix[i]));
    PQ_TRY_GOTO(st, encode_text(tok, &e, text, len));
    for (int i = 0; add_special && i < tok->n_suffix; i++) PQ_TRY_GOTO(st, pq_ivec_push(&e.ids, tok->suffix[i]));
    if (!e.ids.p) { // a valid pointer for 0 ids
        PQ_TRY_GOTO(st, pq_ivec_push(&e.ids, 0));
        e.ids.n = 0;
    }
    *ids = e.ids.p;
    *n_ids = e.ids.n;
    e.ids.p = NULL;
done:
    encoder_free(&e);
    return st;
}

// ---- decoding ---------------------------------------------------------------------

pq_status pq_tok_decode(const pq_tokenizer *tok, const int32_t *ids, size_t n, int skip_special, char **text,
                        size_t *len) {
    *text = NULL;
    *len = 0;
    pq_pieces pieces = {0}, tmp = {0};
    pq_tbuf out = {0};
    pq_status st = PQ_OK;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        PQ_CHECK_GOTO(id < 0 || id >= tok->vocab_size, st, PQ_ERR_ARG, "decode: id %d at position %zu is out of range [0, %d)",
                      (int)id, i, (int)tok->vocab_size);
        int32_t a = tok->added_of_id[id];
        if (a >= 0 && skip_special && tok->added[a].special) continue;
        const char *p = a >= 0 ? tok->added[a].content : NULL;
        size_t plen = a >= 0 ? tok->added[a].len : 0;
        if (!p) p = pq_bpe_piece(tok->bpe, id, &plen);
        if (!p) continue; // an unused id: the library skips it
        PQ_TRY_GOTO(st, pq_pieces_add(&pieces, p, plen, 0));
    }
    PQ_TRY_GOTO(st, pq_tokdec_run(tok->dec, &pieces, &tmp, &out));
    PQ_TRY_GOTO(st, pq_tbuf_append(&out, "", 1));
    *text = out.p;
    *len = out.len - 1;
    out.p = NULL;
done:
    pq_pieces_free(&pieces);
    pq_pieces_free(&tmp);
    pq_tbuf_free(&out);
    return st;
}
