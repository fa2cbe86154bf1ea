// formats/tokenizer/gguf_tok.c — tokenizer.json and tokenizer_config.json
// from a GGUF file's tokenizer.ggml.* metadata, so that pq's one tokenizer
// (formats/tokenizer/tokenizer.h) and the Hugging Face tokenizers library
// load the same text.
//
// tokenizer.ggml.model:
//   "llama"  SentencePiece BPE (Llama 2, TinyLlama): the normalizer
//            Prepend("▁") (when tokenizer.ggml.add_space_prefix, default
//            true) + Replace(" " -> "▁"), no pre-tokenizer, byte fallback
//            over the <0xXX> tokens, unk fused, the decoder that undoes it.
//            The merges come from the scores as transformers' SentencePiece
//            converter makes them: every split of a token into two tokens,
//            ordered by the merged token's score (descending), then the
//            left and right parts' lengths in characters (descending), then
//            the parts' ids. BOS added by default (llama.cpp's default).
//   "gpt2"   byte-level BPE with tokenizer.ggml.merges, the pre-tokenizer
//            named by tokenizer.ggml.pre:
//              gpt-2                   ByteLevel with GPT-2's split regex
//              smollm, starcoder       Digits (one per digit) + ByteLevel
//              llama-bpe (llama3,      Split with Llama 3's regex + ByteLevel,
//                llama-v3)             ignore_merges, BOS added by default
//              qwen2                   NFC + Split with Qwen2's regex + ByteLevel
//            Any other name is refused ("default" too: llama.cpp's fallback
//            regexes for it have no tokenizer.json equivalent).
// tokenizer.ggml.token_type: CONTROL and UNKNOWN tokens become special added
// tokens, USER_DEFINED ones non-special added tokens (matched in the raw
// text, as llama.cpp does). bos/eos/unknown/padding_token_id name the
// special tokens; add_bos_token / add_eos_token override the defaults and
// become the post-processor's template; tokenizer.chat_template goes to
// tokenizer_config.json. An empty token is renamed "[EMPTY_<id>]" (as
// llama.cpp does); a token given twice is refused by name.
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf_hf.h"
#include "formats/tokenizer/bpe.h"
#include "formats/tokenizer/pretok.h"
#include "formats/tokenizer/unicode.h"

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

typedef enum { PRE_NONE, PRE_GPT2, PRE_DIGITS, PRE_LLAMA3, PRE_QWEN2 } pre_kind;

typedef struct {
    const pq_gguf *g;
    const char *file;
    int spm;
    pre_kind pre;
    const pq_gguf_kv *tokens, *types, *scores;
    char **text;        // token texts (NUL-terminated; an empty one renamed)
    json_t *vocab;      // text -> id
    int64_t bos, eos, unk, pad;
    int add_bos, add_eos, add_space_prefix;
} tok_src;

static const struct {
    const char *name;
    pre_kind kind;
} PRES[] = {
    {"gpt-2", PRE_GPT2}, {"smollm", PRE_DIGITS}, {"starcoder", PRE_DIGITS}, {"llama-bpe", PRE_LLAMA3},
    {"llama3", PRE_LLAMA3}, {"llama-v3", PRE_LLAMA3}, {"qwen2", PRE_QWEN2},
};

static json_t *obj_type(const char *type) { return json_pack("{s:s}", "type", type); }

static int type_of(const tok_src *s, int64_t id) { return s->types ? (int)pq_gguf_kv_int(s->types, (uint64_t)id) : TT_NORMAL; }

static pq_status opt_id(tok_src *s, const char *key, int64_t *out) {
    *out = -1;
    if (!pq_gguf_find(s->g, key)) return PQ_OK;
    return pq_gguf_get_int(s->g, key, 0, (int64_t)s->tokens->n - 1, out);
}

static pq_status opt_bool(const tok_src *s, const char *key, int dflt, int *out) {
    *out = dflt;
    return pq_gguf_find(s->g, key) ? pq_gguf_get_bool(s->g, key, out) : PQ_OK;
}

// The model, its token arrays and options, the pre-tokenizer by name.
static pq_status read_meta(tok_src *s) {
    pq_gguf_str model, pre = {"default", 7};
    PQ_TRY(pq_gguf_get_str(s->g, "tokenizer.ggml.model", &model));
    int gpt2 = model.len == 4 && memcmp(model.p, "gpt2", 4) == 0;
    s->spm = model.len == 5 && memcmp(model.p, "llama", 5) == 0;
    PQ_FAIL_IF(!gpt2 && !s->spm, PQ_ERR_FORMAT, "%s: tokenizer model '%.*s' is not supported (pq reads llama and gpt2)",
               s->file, (int)(model.len > 40 ? 40 : model.len), model.p);
    PQ_TRY(pq_gguf_get_array(s->g, "tokenizer.ggml.tokens", PQ_GGUF_STRING, &s->tokens));
    PQ_FAIL_IF(s->tokens->n == 0 || s->tokens->n > PQ_BPE_MAX_ID + 1ull, PQ_ERR_FORMAT,
               "%s: tokenizer.ggml.tokens holds %llu tokens", s->file, (unsigned long long)s->tokens->n);
    if (pq_gguf_find(s->g, "tokenizer.ggml.token_type")) {
        PQ_TRY(pq_gguf_get_array(s->g, "tokenizer.ggml.token_type", PQ_GGUF_I32, &s->types));
        PQ_FAIL_IF(s->types->n != s->tokens->n, PQ_ERR_FORMAT, "%s: %llu token types for %llu tokens", s->file,
                   (unsigned long long)s->types->n, (unsigned long long)s->tokens->n);
    }
    if (s->spm) {
        PQ_TRY(pq_gguf_get_array(s->g, "tokenizer.ggml.scores", PQ_GGUF_F32, &s->scores));
        PQ_FAIL_IF(s->scores->n != s->tokens->n, PQ_ERR_FORMAT, "%s: %llu token scores for %llu tokens", s->file,
                   (unsigned long long)s->scores->n, (unsigned long long)s->tokens->n);
    }
    if (pq_gguf_find(s->g, "tokenizer.ggml.pre")) PQ_TRY(pq_gguf_get_str(s->g, "tokenizer.ggml.pre", &pre));
    s->pre = PRE_NONE;
    for (size_t i = 0; gpt2 && i < sizeof PRES / sizeof PRES[0]; i++)
        if (pre.len == strlen(PRES[i].name) && memcmp(pre.p, PRES[i].name, pre.len) == 0) s->pre = PRES[i].kind;
    int spm_ok = s->spm && pre.len == 7 && memcmp(pre.p, "default", 7) == 0;
    PQ_FAIL_IF(!spm_ok && s->pre == PRE_NONE, PQ_ERR_FORMAT,
               "%s: pre-tokenizer '%.*s' is not supported for the %s tokenizer (pq reads %s)", s->file,
               (int)(pre.len > 40 ? 40 : pre.len), pre.p, s->spm ? "llama" : "gpt2",
               s->spm ? "default" : "gpt-2, smollm, starcoder, llama-bpe, qwen2");
    PQ_TRY(opt_id(s, "tokenizer.ggml.bos_token_id", &s->bos));
    PQ_TRY(opt_id(s, "tokenizer.ggml.eos_token_id", &s->eos));
    PQ_TRY(opt_id(s, "tokenizer.ggml.unknown_token_id", &s->unk));
    PQ_TRY(opt_id(s, "tokenizer.ggml.padding_token_id", &s->pad));
    PQ_TRY(opt_bool(s, "tokenizer.ggml.add_bos_token", s->spm || s->pre == PRE_LLAMA3, &s->add_bos));
    PQ_TRY(opt_bool(s, "tokenizer.ggml.add_eos_token", 0, &s->add_eos));
    PQ_TRY(opt_bool(s, "tokenizer.ggml.add_space_prefix", s->spm, &s->add_space_prefix));
    PQ_FAIL_IF(s->add_bos && s->bos < 0, PQ_ERR_FORMAT, "%s: add_bos_token is set but there is no bos_token_id", s->file);
    PQ_FAIL_IF(s->add_eos && s->eos < 0, PQ_ERR_FORMAT, "%s: add_eos_token is set but there is no eos_token_id", s->file);
    PQ_FAIL_IF(!s->spm && s->add_space_prefix, PQ_ERR_FORMAT, "%s: add_space_prefix with a gpt2 tokenizer is not supported",
               s->file);
    int extra_ws = 0;
    PQ_TRY(opt_bool(s, "tokenizer.ggml.remove_extra_whitespaces", 0, &extra_ws));
    PQ_FAIL_IF(extra_ws, PQ_ERR_FORMAT, "%s: tokenizer.ggml.remove_extra_whitespaces is not supported", s->file);
    return PQ_OK;
}

// Token texts (valid UTF-8, unique) and the vocab object.
static pq_status read_tokens(tok_src *s) {
    uint64_t n = s->tokens->n;
    s->text = calloc(n, sizeof *s->text);
    s->vocab = json_object();
    PQ_FAIL_IF(!s->text || !s->vocab, PQ_ERR_NOMEM, "%s: out of memory", s->file);
    for (uint64_t i = 0; i < n; i++) {
        pq_gguf_str t = s->tokens->strs[i];
        char empty[32];
        if (t.len == 0) t.p = empty, t.len = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%llu]", (unsigned long long)i);
        PQ_FAIL_IF(memchr(t.p, 0, t.len) || pq_utf8_check(t.p, t.len) < t.len, PQ_ERR_FORMAT,
                   "%s: token %llu is not valid UTF-8 text", s->file, (unsigned long long)i);
        PQ_FAIL_IF(s->types && (type_of(s, (int64_t)i) < TT_NORMAL || type_of(s, (int64_t)i) > TT_BYTE), PQ_ERR_FORMAT,
                   "%s: token %llu has unknown token type %d", s->file, (unsigned long long)i, type_of(s, (int64_t)i));
        s->text[i] = strndup(t.p, t.len);
        PQ_FAIL_IF(!s->text[i], PQ_ERR_NOMEM, "%s: out of memory", s->file);
        json_t *prev = json_object_get(s->vocab, s->text[i]);
        PQ_FAIL_IF(prev, PQ_ERR_FORMAT, "%s: token '%.64s' appears twice (ids %lld and %llu)", s->file, s->text[i],
                   (long long)json_integer_value(prev), (unsigned long long)i);
        PQ_FAIL_IF(json_object_set_new(s->vocab, s->text[i], json_integer((json_int_t)i)), PQ_ERR_NOMEM,
                   "%s: out of memory", s->file);
    }
    return PQ_OK;
}

// ---- SentencePiece merges from scores -------------------------------------------

typedef struct {
    int32_t l, r, lcp, rcp; // the parts' ids and lengths in code points
    float score;            // the merged token's
    uint32_t seq;           // position before sorting, for a stable order
} merge;

static int cmp_merge(const void *a, const void *b) {
    const merge *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->lcp != y->lcp) return x->lcp > y->lcp ? -1 : 1;
    if (x->rcp != y->rcp) return x->rcp > y->rcp ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_local(const void *a, const void *b) {
    const merge *x = a, *y = b;
    if (x->l != y->l) return x->l < y->l ? -1 : 1;
    return x->r < y->r ? -1 : x->r > y->r;
}

static int32_t lookup(const tok_src *s, const char *p, size_t n) {
    json_t *v = json_object_getn(s->vocab, p, n);
    return v ? (int32_t)json_integer_value(v) : -1;
}

static pq_status grow(merge **m, size_t *cap, size_t need, const char *file) {
    if (need <= *cap) return PQ_OK;
    size_t c = 2 * need + 256;
    merge *p = realloc(*m, c * sizeof *p);
    PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "%s: out of memory for merges", file);
    *m = p;
    *cap = c;
    return PQ_OK;
}

static int cps_of(const char *t, size_t len) {
    int n = 0;
    uint32_t cp;
    for (size_t off = 0; off < len; n++) off += (size_t)pq_utf8_next(t + off, len - off, &cp); // valid UTF-8
    return n;
}

// Every split of every token into two tokens, ordered as cmp_merge says.
static pq_status spm_merges(const tok_src *s, json_t *out) {
    merge *m = NULL, *local = NULL;
    size_t n = 0, cap = 0, lcap = 0;
    int pairs = 0;
    pq_status st = PQ_OK;
    for (uint64_t id = 0; id < s->tokens->n; id++) {
        const char *t = s->text[id];
        size_t len = strlen(t), nl = 0;
        int cps = cps_of(t, len), lcp = 0;
        uint32_t cp;
        PQ_TRY_GOTO(st, grow(&local, &lcap, (size_t)cps, s->file));
        for (size_t off = 0; off < len;) {
            off += (size_t)pq_utf8_next(t + off, len - off, &cp);
            lcp++;
            if (off == len) break;
            int32_t l = lookup(s, t, off), r = lookup(s, t + off, len - off);
            if (l >= 0 && r >= 0)
                local[nl++] = (merge){l, r, lcp, cps - lcp, (float)pq_gguf_kv_float(s->scores, id), 0};
        }
        qsort(local, nl, sizeof *local, cmp_local);
        PQ_TRY_GOTO(st, grow(&m, &cap, n + nl, s->file));
        for (size_t k = 0; k < nl; k++) local[k].seq = (uint32_t)n, m[n++] = local[k];
    }
    if (n) qsort(m, n, sizeof *m, cmp_merge);
    for (size_t i = 0; i < n && !pairs; i++) pairs = strchr(s->text[m[i].l], ' ') || strchr(s->text[m[i].r], ' ');
    for (size_t i = 0; i < n; i++) {
        const char *l = s->text[m[i].l], *r = s->text[m[i].r];
        json_t *e;
        if (pairs) e = json_pack("[ss]", l, r);
        else {
            size_t a = strlen(l), b = strlen(r);
            char *txt = malloc(a + b + 2);
            PQ_CHECK_GOTO(!txt, st, PQ_ERR_NOMEM, "%s: out of memory for merges", s->file);
            memcpy(txt, l, a), txt[a] = ' ', memcpy(txt + a + 1, r, b + 1);
            e = json_string(txt);
            free(txt);
        }
        PQ_CHECK_GOTO(json_array_append_new(out, e), st, PQ_ERR_NOMEM, "%s: out of memory for merges", s->file);
    }
done:
    free(m);
    free(local);
    return st;
}

// tokenizer.ggml.merges, each "left right" with exactly one space.
static pq_status bpe_merges(const tok_src *s, json_t *out) {
    const pq_gguf_kv *mg;
    PQ_TRY(pq_gguf_get_array(s->g, "tokenizer.ggml.merges", PQ_GGUF_STRING, &mg));
    for (uint64_t i = 0; i < mg->n; i++) {
        pq_gguf_str m = mg->strs[i];
        const char *sp = m.len > 1 ? memchr(m.p + 1, ' ', m.len - 1) : NULL;
        int ok = sp && sp + 1 < m.p + m.len && !memchr(sp + 1, ' ', (size_t)(m.p + m.len - sp - 1)) &&
                 !memchr(m.p, 0, m.len) && pq_utf8_check(m.p, m.len) == m.len;
        PQ_FAIL_IF(!ok, PQ_ERR_FORMAT, "%s: tokenizer.ggml.merges[%llu] '%.*s' is not two tokens separated by one space",
                   s->file, (unsigned long long)i, (int)(m.len > 60 ? 60 : m.len), m.p);
        PQ_FAIL_IF(json_array_append_new(out, json_stringn(m.p, m.len)), PQ_ERR_NOMEM, "%s: out of memory", s->file);
    }
    return PQ_OK;
}

// ---- the sections of tokenizer.json ---------------------------------------------

static json_t *bytelevel(int use_regex) {
    return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1,
                     "use_regex", use_regex);
}

static json_t *pre_tokenizer(const tok_src *s) {
    switch (s->pre) {
    case PRE_GPT2: return bytelevel(1);
    case PRE_DIGITS:
        return json_pack("{s:s, s:[{s:s, s:b}, o]}", "type", "Sequence", "pretokenizers", "type", "Digits",
                         "individual_digits", 1, bytelevel(1));
    case PRE_LLAMA3:
    case PRE_QWEN2:
        return json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, o]}", "type", "Sequence", "pretokenizers", "type", "Split",
                         "pattern", "Regex",
                         pq_split_pattern_regex(s->pre == PRE_LLAMA3 ? PQ_SPLIT_LLAMA3 : PQ_SPLIT_QWEN2), "behavior",
                         "Isolated", "invert", 0, bytelevel(0));
    default: return json_null();
    }
}

static json_t *replace(const char *from, const char *to) {
    return json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern", "String", from, "content", to);
}

static json_t *normalizer(const tok_src *s) {
    if (s->spm && s->add_space_prefix)
        return json_pack("{s:s, s:[{s:s, s:s}, o]}", "type", "Sequence", "normalizers", "type", "Prepend", "prepend",
                         "\xe2\x96\x81", replace(" ", "\xe2\x96\x81"));
    if (s->spm) return replace(" ", "\xe2\x96\x81");
    return s->pre == PRE_QWEN2 ? obj_type("NFC") : json_null();
}

static json_t *decoder(const tok_src *s) {
    if (!s->spm) return bytelevel(1);
    json_t *list = json_pack("[o, o, o]", replace("\xe2\x96\x81", " "), obj_type("ByteFallback"), obj_type("Fuse"));
    if (s->add_space_prefix)
        json_array_append_new(list, json_pack("{s:s, s:s, s:i, s:i}", "type", "Strip", "content", " ", "start", 1,
                                              "stop", 0));
    return json_pack("{s:s, s:o}", "type", "Sequence", "decoders", list);
}

// TemplateProcessing adding BOS / EOS as add_bos / add_eos say, or null.
static json_t *post_processor(const tok_src *s) {
    if (!s->add_bos && !s->add_eos) return json_null();
    json_t *single = json_array(), *pair = json_array(), *specials = json_object();
    for (int seq = 0; seq < 2; seq++) {
        const char *id = seq ? "B" : "A";
        if (s->add_bos) json_array_append_new(pair, json_pack("{s:{s:s, s:i}}", "SpecialToken", "id", s->text[s->bos], "type_id", seq));
        json_array_append_new(pair, json_pack("{s:{s:s, s:i}}", "Sequence", "id", id, "type_id", seq));
        if (s->add_eos) json_array_append_new(pair, json_pack("{s:{s:s, s:i}}", "SpecialToken", "id", s->text[s->eos], "type_id", seq));
    }
    if (s->add_bos) json_array_append_new(single, json_pack("{s:{s:s, s:i}}", "SpecialToken", "id", s->text[s->bos], "type_id", 0));
    json_array_append_new(single, json_pack("{s:{s:s, s:i}}", "Sequence", "id", "A", "type_id", 0));
    if (s->add_eos) json_array_append_new(single, json_pack("{s:{s:s, s:i}}", "SpecialToken", "id", s->text[s->eos], "type_id", 0));
    const int64_t ids[2] = {s->add_bos ? s->bos : -1, s->add_eos ? s->eos : -1};
    for (int k = 0; k < 2; k++)
        if (ids[k] >= 0)
            json_object_set_new(specials, s->text[ids[k]], json_pack("{s:s, s:[I], s:[s]}", "id", s->text[ids[k]], "ids",
                                                                    (json_int_t)ids[k], "tokens", s->text[ids[k]]));
    return json_pack("{s:s, s:o, s:o, s:o}", "type", "TemplateProcessing", "single", single, "pair", pair,
                     "special_tokens", specials);
}

static json_t *added_tokens(const tok_src *s) {
    json_t *list = json_array();
    for (uint64_t i = 0; s->types && i < s->tokens->n; i++) {
        int t = type_of(s, (int64_t)i);
        if (t != TT_CONTROL && t != TT_USER && t != TT_UNKNOWN) continue;
        json_array_append_new(list, json_pack("{s:I, s:s, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)i, "content",
                                              s->text[i], "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0,
                                              "special", t != TT_USER));
    }
    return list;
}

static int has_byte_tokens(const tok_src *s) { return lookup(s, "<0x00>", 6) >= 0 && lookup(s, "<0xFF>", 6) >= 0; }

static pq_status build_tokenizer(tok_src *s, json_t **out) {
    json_t *merges = json_array();
    PQ_FAIL_IF(!merges, PQ_ERR_NOMEM, "%s: out of memory", s->file);
    pq_status st = s->spm ? spm_merges(s, merges) : bpe_merges(s, merges);
    if (st != PQ_OK) {
        json_decref(merges);
        return st;
    }
    json_t *model = json_pack("{s:s, s:n, s:o, s:n, s:n, s:b, s:b, s:b, s:O, s:o}", "type", "BPE", "dropout", "unk_token",
                              s->unk >= 0 ? json_string(s->text[s->unk]) : json_null(), "continuing_subword_prefix",
                              "end_of_word_suffix", "fuse_unk", s->spm, "byte_fallback", s->spm && has_byte_tokens(s),
                              "ignore_merges", s->pre == PRE_LLAMA3, "vocab", s->vocab, "merges", merges);
    *out = json_pack("{s:s, s:n, s:n, s:o, s:o, s:o, s:o, s:o, s:o}", "version", "1.0", "truncation", "padding",
                     "added_tokens", added_tokens(s), "normalizer", normalizer(s), "pre_tokenizer", pre_tokenizer(s),
                     "post_processor", post_processor(s), "decoder", decoder(s), "model", model);
    PQ_FAIL_IF(!model || !*out, PQ_ERR_NOMEM, "%s: out of memory building tokenizer.json", s->file);
    return PQ_OK;
}

static json_t *token_or_null(const tok_src *s, int64_t id) { return id >= 0 ? json_string(s->text[id]) : json_null(); }

static pq_status build_config(tok_src *s, json_t **out) {
    json_t *cfg = json_pack("{s:b, s:b, s:o, s:o, s:o, s:o, s:b, s:s}", "add_bos_token", s->add_bos, "add_eos_token",
                            s->add_eos, "bos_token", token_or_null(s, s->bos), "eos_token", token_or_null(s, s->eos),
                            "unk_token", token_or_null(s, s->unk), "pad_token", token_or_null(s, s->pad),
                            "clean_up_tokenization_spaces", 0, "tokenizer_class", "PreTrainedTokenizerFast");
    PQ_FAIL_IF(!cfg, PQ_ERR_NOMEM, "%s: out of memory", s->file);
    *out = cfg;
    pq_gguf_str tmpl;
    if (pq_gguf_find(s->g, "tokenizer.chat_template")) {
        PQ_TRY(pq_gguf_get_str(s->g, "tokenizer.chat_template", &tmpl));
        PQ_FAIL_IF(memchr(tmpl.p, 0, tmpl.len) || pq_utf8_check(tmpl.p, tmpl.len) < tmpl.len, PQ_ERR_FORMAT,
                   "%s: tokenizer.chat_template is not valid UTF-8 text", s->file);
        json_object_set_new(cfg, "chat_template", json_stringn(tmpl.p, tmpl.len));
    }
    return PQ_OK;
}

pq_status pq_gguf_tokenizer_json(const pq_gguf *g, char **tokenizer, char **tokenizer_config) {
    *tokenizer = *tokenizer_config = NULL;
    tok_src s = {.g = g, .file = pq_gguf_path(g)};
    json_t *tj = NULL, *cj = NULL;
    pq_status st = PQ_OK;
    PQ_TRY_GOTO(st, read_meta(&s));
    PQ_TRY_GOTO(st, read_tokens(&s));
    PQ_TRY_GOTO(st, build_tokenizer(&s, &tj));
    PQ_TRY_GOTO(st, build_config(&s, &cj));
    *tokenizer = json_dumps(tj, JSON_COMPACT);
    *tokenizer_config = json_dumps(cj, JSON_INDENT(2));
    if (!*tokenizer || !*tokenizer_config) {
        free(*tokenizer), free(*tokenizer_config);
        *tokenizer = *tokenizer_config = NULL;
        st = PQ_FAIL(PQ_ERR_NOMEM, "%s: out of memory writing tokenizer.json", s.file);
    }
done:
    json_decref(tj);
    json_decref(cj);
    json_decref(s.vocab);
    for (uint64_t i = 0; s.text && i < s.tokens->n; i++) free(s.text[i]);
    free(s.text);
    return st;
}
