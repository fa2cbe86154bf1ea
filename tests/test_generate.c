// pq generate's pieces: the sampler against a full-sort reference, the chat
// template renderer, the streaming detokenizer on split UTF-8, and
// generation itself on the fixture and on random SmolLM2-shaped models (F16
// and W4A16): deterministic across runs and thread counts, decode logits
// equal to a prefill's, stops at EOS / -n / the context.
#include <jansson.h>

#include "common/sys.h"
#include "eval/chat.h"
#include "eval/generate.h"
#include "formats/tokenizer/pretok.h"
#include "formats/tokenizer/tok_stream.h"
#include "formats/tokenizer/unicode.h"
#include "tests/quant_model.h"
#include "tests/lib/model_random.h"
#include "tests/test.h"

// ---- sampling --------------------------------------------------------------------

static const float *g_logits; // for qsort's comparator

static int by_order(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (g_logits[x] != g_logits[y]) return g_logits[x] > g_logits[y] ? -1 : 1;
    return x < y ? -1 : 1;
}

// eval/sample.h's specification with a full sort, for one uniform draw u.
static int32_t ref_pick(const float *l, int V, const pq_sample_params *p, double u) {
    int32_t *ord = malloc((size_t)V * sizeof *ord);
    for (int i = 0; i < V; i++) ord[i] = i;
    g_logits = l;
    qsort(ord, (size_t)V, sizeof *ord, by_order);
    int32_t pick = ord[0];
    double mx = l[ord[0]];
    if (p->temp > 0) {
        int k = p->top_k > 0 && p->top_k < V ? p->top_k : V, walk_ids = k == V && p->top_p >= 1;
        double total = 0, cum = 0;
        for (int i = 0; i < k; i++) total += exp(((double)l[walk_ids ? i : ord[i]] - mx) / p->temp);
        int kept = k;
        if (!walk_ids)
            for (kept = 0; kept < k && (kept == 0 || cum < p->top_p * total); kept++)
                cum += exp(((double)l[ord[kept]] - mx) / p->temp);
        else cum = total;
        double target = u * cum, run = 0;
        for (int i = 0; i < kept; i++) {
            int32_t id = walk_ids ? i : ord[i];
            run += exp(((double)l[id] - mx) / p->temp);
            pick = id;
            if (run > target) break;
        }
    }
    free(ord);
    return pick;
}

// n draws of the sampler vs the reference fed the same uniform numbers.
static void check_sampler_vs_ref(const char *what, const float *l, int V, pq_sample_params p, int n) {
    pq_sampler *s;
    pq_status st = pq_sampler_create(&p, V, &s);
    pq_rng r;
    pq_rng_seed(&r, p.seed);
    int bad = -1;
    for (int i = 0; st == PQ_OK && i < n && bad < 0; i++) {
        int32_t got;
        st = pq_sampler_pick(s, l, &got);
        double u = p.temp > 0 ? pq_rng_uniform(&r) : 0;
        if (st == PQ_OK && got != ref_pick(l, V, &p, u)) bad = i;
    }
    PQ_CHECK(st == PQ_OK && bad < 0, "sampler == full-sort reference, %s (temp %g, top-k %d, top-p %g): %d draws%s",
             what, p.temp, p.top_k, p.top_p, n, bad >= 0 ? " (a draw differs)" : "");
    pq_sampler_free(s);
}

// Counts of each id over n draws.
static void histogram(const float *l, int V, pq_sample_params p, int n, int *count) {
    pq_sampler *s;
    memset(count, 0, (size_t)V * sizeof *count);
    if (pq_sampler_create(&p, V, &s) != PQ_OK) return;
    for (int i = 0; i < n; i++) {
        int32_t id;
        if (pq_sampler_pick(s, l, &id) == PQ_OK) count[id]++;
    }
    pq_sampler_free(s);
}

static void check_sampling(void) {
    enum { V = 1000, VB = 5000 };
    float *l = malloc(V * sizeof *l), *flat = malloc(VB * sizeof *flat);
    pq_test_fill(l, V, 2.0f);
    for (int i = 0; i < VB; i++) flat[i] = 0.01f * pq_test_uniform();
    pq_sample_params cases[] = {{0.7, 0, 1.0, 1}, {1.0, 50, 1.0, 2}, {1.3, 0, 0.9, 3}, {0.5, 20, 0.5, 4},
                                {1.0, 1, 1.0, 5}, {2.0, 999, 0.99, 6}, {0, 40, 0.95, 7}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_sampler_vs_ref("random logits", l, V, cases[i], 300);
    // nearly flat: top-p 0.95 needs ~4750 candidates, past several doublings of the first selection
    check_sampler_vs_ref("5000 nearly equal logits", flat, VB, (pq_sample_params){1.0, 0, 0.95, 8}, 50);

    // greedy: the highest logit, the lowest id among equals; top-k 1 is greedy
    float tie[8] = {0, 1, 2, 5, 1, 5, -3, 5};
    int32_t id = -1;
    pq_sampler *s;
    pq_sample_params g = {0, 40, 0.95, 0};
    pq_sampler_create(&g, 8, &s);
    pq_sampler_pick(s, tie, &id);
    pq_sampler_free(s);
    PQ_CHECK(id == 3, "greedy picks the lowest id among equal maxima (%d, want 3)", id);
    int diff = 0;
    pq_sample_params k1 = {1.5, 1, 1.0, 11};
    pq_sampler_create(&k1, 8, &s);
    for (int i = 0; i < 200; i++) {
        pq_sampler_pick(s, tie, &id);
        diff += id != 3;
    }
    pq_sampler_free(s);
    PQ_CHECK(diff == 0, "top-k 1 at temperature 1.5 always gives the greedy id (%d of 200 differ)", diff);

    // top-p edges on p = (0.5, 0.3, 0.2)
    float three[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    int cnt[VB];
    histogram(three, 3, (pq_sample_params){1.0, 0, 0.49, 21}, 2000, cnt);
    PQ_CHECK(cnt[0] == 2000, "top-p 0.49 of (0.5, 0.3, 0.2): only the first (%d/%d/%d)", cnt[0], cnt[1], cnt[2]);
    histogram(three, 3, (pq_sample_params){1.0, 0, 0.51, 22}, 2000, cnt);
    PQ_CHECK(cnt[2] == 0 && fabs(cnt[0] / 2000.0 - 0.625) < 0.05,
             "top-p 0.51: the first two, renormalized (%d/%d/%d; want 62.5%% / 37.5%%)", cnt[0], cnt[1], cnt[2]);
    histogram(three, 3, (pq_sample_params){1.0, 0, 0.81, 23}, 4000, cnt);
    PQ_CHECK(fabs(cnt[0] / 4000.0 - 0.5) < 0.04 && fabs(cnt[2] / 4000.0 - 0.2) < 0.04,
             "top-p 0.81: all three at their probabilities (%d/%d/%d of 4000)", cnt[0], cnt[1], cnt[2]);
    histogram(three, 3, (pq_sample_params){1.0, 0, 1e-12, 24}, 500, cnt);
    PQ_CHECK(cnt[0] == 500, "top-p 1e-12 keeps one candidate: the most likely (%d/500)", cnt[0]);
    float eq[4] = {1, 1, 1, 1};
    histogram(eq, 4, (pq_sample_params){1.0, 0, 0.5, 25}, 1000, cnt);
    PQ_CHECK(cnt[0] > 400 && cnt[1] > 400 && cnt[2] == 0 && cnt[3] == 0,
             "top-p 0.5 over 4 equal logits: ids 0 and 1, the total order's first two (%d/%d/%d/%d)", cnt[0], cnt[1],
             cnt[2], cnt[3]);
    histogram(eq, 4, (pq_sample_params){1.0, 3, 1.0, 26}, 1000, cnt);
    PQ_CHECK(cnt[3] == 0 && cnt[0] > 250 && cnt[2] > 250, "top-k 3 over 4 equal logits: ids 0..2 (%d/%d/%d/%d)",
             cnt[0], cnt[1], cnt[2], cnt[3]);

    // a seed repeats a run; another seed does not
    int32_t a[100], b[100], c[100];
    pq_sample_params sp = {1.0, 0, 1.0, 1234};
    for (int run = 0; run < 3; run++) {
        sp.seed = run < 2 ? 1234 : 1235;
        pq_sampler_create(&sp, V, &s);
        for (int i = 0; i < 100; i++) pq_sampler_pick(s, l, run == 0 ? &a[i] : run == 1 ? &b[i] : &c[i]);
        pq_sampler_free(s);
    }
    PQ_CHECK(memcmp(a, b, sizeof a) == 0 && memcmp(a, c, sizeof a) != 0,
             "the same seed draws the same 100 ids, another seed other ids");

    // bad logits and flags
    float bad[4] = {0, NAN, 1, 2};
    pq_sampler_create(&g, 4, &s);
    pq_status st = pq_sampler_pick(s, bad, &id);
    PQ_CHECK(st == PQ_ERR_NUMERIC && strstr(pq_last_error(), "token 1"), "a NaN logit is refused (%s)", pq_last_error());
    float inf[2] = {-INFINITY, -INFINITY};
    pq_sampler_free(s);
    pq_sampler_create(&g, 2, &s);
    st = pq_sampler_pick(s, inf, &id);
    PQ_CHECK(st == PQ_ERR_NUMERIC, "no finite logit is refused (%s)", pq_last_error());
    pq_sampler_free(s);
    pq_sample_params badp[] = {{-1, 0, 1, 0}, {NAN, 0, 1, 0}, {1, -1, 1, 0}, {1, 0, 0, 0}, {1, 0, 1.5, 0}};
    const char *flag[] = {"--temp", "--temp", "--top-k", "--top-p", "--top-p"};
    for (int i = 0; i < 5; i++) {
        st = pq_sampler_create(&badp[i], 10, &s);
        PQ_CHECK(st == PQ_ERR_ARG && strstr(pq_last_error(), flag[i]), "bad %s refused (%s)", flag[i], pq_last_error());
    }
    free(l);
    free(flat);
}

// ---- chat templates ------------------------------------------------------------------

// The templates as tokenizer_config.json holds them (after JSON decoding):
// SmolLM2-Instruct's and Qwen2-Instruct's write real newlines inside their
// string literals, the multi-line ones (Qwen2.5, Llama 3.1/3.2) the escape \n.
static const char *SMOLLM2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' "
    "+ message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";
static const char *QWEN2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' "
    "}}{% endif %}";
static const char *QWEN25 =
    "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n    {%- else %}\n        {{- 'You are Qwen, created by Alibaba Cloud. "
    "You are a helpful assistant.' }}\n    {%- endif %}\n{%- else %}\n    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n    {%- else %}\n"
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
    "assistant.<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}\n{%- for message in messages %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n";
static const char *CHATML_PLAIN =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
    "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
static const char *LLAMA3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
static const char *LLAMA31 =
    "{{- bos_token }}\n{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul 2024\" %}\n{%- endif %}\n"
    "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content']|trim %}\n"
    "{%- else %}\n    {%- set system_message = \"\" %}\n{%- endif %}\n"
    "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n"
    "{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n{{- system_message }}\n{{- \"<|eot_id|>\" }}\n"
    "{%- for message in messages %}\n    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
    "message['content'] | trim + '<|eot_id|>' }}\n{%- endfor %}\n{%- if add_generation_prompt %}\n"
    "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n";
static const char *LLAMA32_DATE =
    "{{- bos_token }}\n{%- if not date_string is defined %}\n    {%- if strftime_now is defined %}\n"
    "        {%- set date_string = strftime_now(\"%d %b %Y\") %}\n    {%- else %}\n"
    "        {%- set date_string = \"26 Jul 2024\" %}\n    {%- endif %}\n{%- endif %}\n"
    "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n"
    "{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n{{- \"<|eot_id|>\" }}\n"
    "{%- for message in messages %}\n    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
    "message['content'] | trim + '<|eot_id|>' }}\n{%- endfor %}\n{%- if add_generation_prompt %}\n"
    "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n";
static const char *MISTRAL =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + "
    "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}";

static void check_render(const char *what, const char *tmpl, const char *user, time_t now, const char *want) {
    pq_chat_format f;
    char *got = NULL;
    pq_status s = pq_chat_detect(tmpl, "m", &f);
    if (s == PQ_OK) s = pq_chat_render(&f, "<|begin_of_text|>", user, now, &got);
    PQ_CHECK(s == PQ_OK && strcmp(got, want) == 0, "chat template %s renders what apply_chat_template gives%s%s",
             what, s == PQ_OK ? "" : ": ", s == PQ_OK ? "" : pq_last_error());
    if (s == PQ_OK && strcmp(got, want) != 0) printf("    got:  %s\n    want: %s\n", got, want);
    free(got);
}

static void check_chat(void) {
    const char *q = "What is 2 + 2?";
    check_render("SmolLM2-Instruct (ChatML, default system prompt)", SMOLLM2, q, 0,
                 "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                 "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n");
    check_render("Qwen2-Instruct (ChatML)", QWEN2, q, 0,
                 "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2 + 2?"
                 "<|im_end|>\n<|im_start|>assistant\n");
    check_render("Qwen2.5-Instruct (ChatML, escaped newlines, tools branch first)", QWEN25, q, 0,
                 "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
                 "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n");
    check_render("ChatML without a default system prompt, text not trimmed", CHATML_PLAIN, "  hi \n", 0,
                 "<|im_start|>user\n  hi \n<|im_end|>\n<|im_start|>assistant\n");
    check_render("Llama 3 (BOS, trimmed text)", LLAMA3, " \tWhat is 2 + 2?\n", 0,
                 "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2 + 2?<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n");
    check_render("Llama 3.1 (system block, date_string default)", LLAMA31, q, 0,
                 "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
                 "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2 + 2?"
                 "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    setenv("TZ", "UTC", 1);
    tzset();
    check_render("Llama 3.2 (strftime_now: today)", LLAMA32_DATE, q, 1700000000, // 2023-11-14 22:13 UTC
                 "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
                 "Today Date: 14 Nov 2023\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2 + 2?"
                 "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    pq_chat_format f;
    pq_status s = pq_chat_detect(MISTRAL, "mistral-dir", &f);
    PQ_CHECK(s == PQ_ERR_ARG && strstr(pq_last_error(), "mistral-dir") && strstr(pq_last_error(), "not one pq knows"),
             "an [INST] template is refused, naming the model (%s)", pq_last_error());
    s = pq_chat_detect(NULL, "fixture-dir", &f);
    PQ_CHECK(s == PQ_ERR_ARG && strstr(pq_last_error(), "no chat template"), "no template is refused (%s)",
             pq_last_error());
    PQ_CHECK(pq_chat_detect(SMOLLM2, "m", &f) == PQ_OK && strcmp(f.end_token, "<|im_end|>") == 0 &&
                 pq_chat_detect(LLAMA3, "m", &f) == PQ_OK && strcmp(f.end_token, "<|eot_id|>") == 0,
             "the end-of-turn tokens: <|im_end|>, <|eot_id|>");
    char *out = NULL;
    pq_chat_detect(LLAMA3, "m", &f);
    s = pq_chat_render(&f, NULL, q, 0, &out);
    PQ_CHECK(s == PQ_ERR_ARG && !out, "a template that needs BOS with a tokenizer without one is refused (%s)",
             pq_last_error());
}

// ---- tokenizer: the template getter and a byte-level tokenizer -------------------------

// A byte-level BPE without merges (one token per byte, ids 0..255 = the
// bytes) plus the special token <|im_end|> (id 256).
static pq_status byte_tokenizer(const char *config, pq_tokenizer **tok) {
    json_t *vocab = json_object();
    pq_tbuf b = {0};
    for (int i = 0; i < 256; i++) {
        char c = (char)i;
        b.len = 0;
        pq_bytelevel_map(&c, 1, &b);
        char key[8] = {0};
        memcpy(key, b.p, b.len);
        json_object_set_new(vocab, key, json_integer(i));
    }
    pq_tbuf_free(&b);
    json_t *root = json_pack("{s:{s:s, s:o, s:[]}, s:{s:s, s:b}, s:{s:s}, s:[{s:i, s:s, s:b}]}", "model", "type", "BPE",
                             "vocab", vocab, "merges", "pre_tokenizer", "type", "ByteLevel", "add_prefix_space", 0,
                             "decoder", "type", "ByteLevel", "added_tokens", "id", 256, "content", "<|im_end|>",
                             "special", 1);
    char *js = json_dumps(root, 0);
    pq_status s = pq_tok_load_json(js, strlen(js), config, config ? strlen(config) : 0, "bytes.json", tok);
    free(js);
    json_decref(root);
    return s;
}

static void check_tokenizer_template(void) {
    pq_tokenizer *tok;
    pq_status s = byte_tokenizer("{\"chat_template\": \"{{ '<|im_start|>' }}<|im_end|>\", \"eos_token\": \"<|im_end|>\"}",
                                 &tok);
    PQ_CHECK(s == PQ_OK && strcmp(pq_tok_chat_template(tok), "{{ '<|im_start|>' }}<|im_end|>") == 0 &&
                 pq_tok_token_id(tok, "<|im_end|>") == 256 && pq_tok_token_id(tok, "<|im_start|>") == -1 &&
                 pq_tok_eos(tok) == 256,
             "tokenizer_config.json chat_template read; token ids by text (%s)", s ? pq_last_error() : "");
    pq_tok_free(tok);
    s = byte_tokenizer("{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}, "
                       "{\"name\": \"default\", \"template\": \"D\"}]}", &tok);
    PQ_CHECK(s == PQ_OK && strcmp(pq_tok_chat_template(tok), "D") == 0, "a list of named templates: the default one");
    pq_tok_free(tok);
    s = byte_tokenizer("{\"model_max_length\": 1000000000000000019884624838656, \"chat_template\": \"X\"}", &tok);
    PQ_CHECK(s == PQ_OK && strcmp(pq_tok_chat_template(tok), "X") == 0,
             "tokenizer_config.json with transformers' model_max_length 1e30 (an integer past int64) loads (%s)",
             s ? pq_last_error() : "");
    pq_tok_free(tok);
    s = byte_tokenizer("{}", &tok);
    PQ_CHECK(s == PQ_OK && pq_tok_chat_template(tok) == NULL, "no chat_template: NULL");
    pq_tok_free(tok);
    s = byte_tokenizer("{\"chat_template\": 3}", &tok);
    PQ_CHECK(s == PQ_ERR_FORMAT && strstr(pq_last_error(), "chat_template"), "a chat_template that is a number is "
             "refused (%s)", pq_last_error());
}

// Pushes ids one at a time: every piece valid UTF-8, the text released as
// soon as a character is complete, the whole equal to the decode.
static void check_stream(const char *what, const pq_tokenizer *tok, const int32_t *ctx, int nctx, const int32_t *ids,
                         int n, int prompt_complete) {
    pq_tok_stream *ts;
    pq_status s = pq_tok_stream_create(tok, ctx, (size_t)nctx, &ts);
    char all[4096] = "";
    size_t len = 0;
    int broken = 0, late = 0;
    for (int i = 0; s == PQ_OK && i < n; i++) {
        const char *t;
        size_t tl;
        s = pq_tok_stream_push(ts, ids[i], &t, &tl);
        if (s != PQ_OK) break;
        broken += pq_utf8_check(t, tl) != tl || (tl >= 3 && memcmp(t + tl - 3, "\xEF\xBF\xBD", 3) == 0);
        memcpy(all + len, t, tl);
        len += tl;
        if (prompt_complete) { // what the ids so far spell, complete characters only
            char *d;
            size_t dl;
            pq_tok_decode(tok, ids, (size_t)i + 1, 1, &d, &dl);
            size_t want = dl;
            while (want >= 3 && memcmp(d + want - 3, "\xEF\xBF\xBD", 3) == 0) want -= 3;
            late += len != want;
            free(d);
        }
    }
    const char *t;
    size_t tl;
    if (s == PQ_OK) s = pq_tok_stream_flush(ts, &t, &tl);
    if (s == PQ_OK) {
        memcpy(all + len, t, tl);
        len += tl;
    }
    // the decode of context + ids, past the context's own text
    int32_t seq[256];
    if (nctx) memcpy(seq, ctx, (size_t)nctx * sizeof *seq);
    memcpy(seq + nctx, ids, (size_t)n * sizeof *seq);
    char *want, *head;
    size_t wl, hl;
    pq_tok_decode(tok, seq, (size_t)(nctx + n), 1, &want, &wl);
    pq_tok_decode(tok, seq, (size_t)nctx, 1, &head, &hl);
    int ok = hl <= wl && memcmp(want, head, hl) == 0 && len == wl - hl && memcmp(all, want + hl, len) == 0;
    free(head);
    PQ_CHECK(s == PQ_OK && !broken && !late && ok,
             "streamed text, %s: %d pieces never split a character, released as soon as complete, whole == decode "
             "(%zu bytes)", what, n, len);
    free(want);
    pq_tok_stream_free(ts);
}

static void check_streaming(void) {
    pq_tokenizer *tok;
    if (byte_tokenizer(NULL, &tok) != PQ_OK) { PQ_CHECK(0, "byte-level tokenizer loads (%s)", pq_last_error()); return; }
    const char *text = "na\xC3\xAFve \xE2\x82\xAC 5 \xF0\x9F\x98\x80!\xE6\x97\xA5\xE6\x9C\xAC"; // naïve € 5 😀!日本
    int32_t *ids;
    size_t n;
    pq_tok_encode(tok, text, strlen(text), 0, &ids, &n);
    PQ_CHECK(n == strlen(text), "byte-level tokenizer: one id per byte (%zu ids, %zu bytes)", n, strlen(text));
    check_stream("byte-level, 2-, 3- and 4-byte characters", tok, NULL, 0, ids, (int)n, 1);
    int32_t sp[] = {'a', 256, 0xE2, 0x82, 256, 0xAC, 'b'}; // a special token inside a character is skipped
    check_stream("byte-level with a special token inside a character", tok, NULL, 0, sp, 7, 1);
    int32_t broken[] = {'x', 0x82, 'y', 0xE2, 0x82}; // a stray continuation byte, then a cut character
    check_stream("byte-level, invalid and truncated sequences (U+FFFD)", tok, NULL, 0, broken, 5, 0);
    free(ids);
    pq_tok_free(tok);

    if (pq_tok_load(pq_test_path("fixtures/stories260K"), &tok) != PQ_OK) {
        PQ_CHECK(0, "fixture tokenizer loads (%s)", pq_last_error());
        return;
    }
    const char *t2 = "Once upon a time Zo\xC3\xAB paid \xE2\x82\xAC" "5 \xF0\x9F\x98\x80.";
    pq_tok_encode(tok, t2, strlen(t2), 1, &ids, &n);
    int split = 6; // the first ids are the prompt: its last PQ_TOK_STREAM_CONTEXT the stream's context
    check_stream("SentencePiece byte fallback after a prompt", tok, ids + split - PQ_TOK_STREAM_CONTEXT,
                 PQ_TOK_STREAM_CONTEXT, ids + split, (int)n - split, 0);
    // with the prompt as context, a generated "▁upon" keeps its space
    pq_tok_stream *ts;
    const char *t;
    size_t tl;
    int32_t *p2;
    size_t n2;
    pq_tok_encode(tok, "Once upon", 9, 1, &p2, &n2);
    pq_tok_stream_create(tok, p2, n2 - 1, &ts);
    pq_tok_stream_push(ts, p2[n2 - 1], &t, &tl);
    PQ_CHECK(tl == 5 && memcmp(t, " upon", 5) == 0, "a generated SentencePiece word keeps its leading space ('%.*s')",
             (int)tl, t);
    pq_tok_stream_free(ts);
    free(p2);
    free(ids);
    pq_tok_free(tok);
}

// ---- generation ------------------------------------------------------------------------

typedef struct {
    char buf[8192];
    size_t n;
    int bad;
} sink;

static void collect(void *ud, const char *text, size_t len) {
    sink *k = ud;
    k->bad += pq_utf8_check(text, len) != len;
    if (k->n + len < sizeof k->buf) memcpy(k->buf + k->n, text, len);
    k->n += len;
}

static pq_engine *engine(const pq_model *m, int threads, int ctx) {
    pq_engine_params p = pq_engine_default_params();
    p.device = PQ_DEVICE_CPU;
    p.nthreads = threads;
    p.max_ctx = ctx;
    pq_engine *e = NULL;
    if (pq_engine_create(m, &p, &e) != PQ_OK) printf("# engine: %s\n", pq_last_error());
    return e;
}

// Logits of every decode step vs a prefill of the same tokens: the step that
// feeds token t (after a prefill of n0) must give the last row of a prefill
// of t + 1 tokens. The prefill runs the GEMM path (T > PQ_GEMV_MAX_T), the
// step the GEMV: fp32 sums in another order, ~1e-6 relative.
static void check_decode_vs_prefill(const char *what, pq_engine *e, const int32_t *tok, int n0, int n) {
    int V = pq_engine_vocab(e);
    float *step = malloc((size_t)V * 4), *full = malloc((size_t)V * 4);
    double worst = 0;
    pq_status s = pq_engine_forward(e, tok, n0, 0);
    for (int t = n0; s == PQ_OK && t < n; t++) {
        s = pq_engine_forward(e, tok, t, 0); // the cache holds t tokens, as if decoded so far
        if (s == PQ_OK) s = pq_engine_forward(e, tok + t, 1, t);
        if (s == PQ_OK) s = pq_engine_logits(e, 0, 1, step);
        if (s == PQ_OK) s = pq_engine_forward(e, tok, t + 1, 0);
        if (s == PQ_OK) s = pq_engine_logits(e, t, 1, full);
        double err = pq_rel_l2(step, full, (size_t)V);
        if (!(err <= worst)) worst = err;
    }
    PQ_CHECK(s == PQ_OK && worst < 1e-4, "%s: decode logits == prefill logits at positions %d..%d (worst rel L2 %.2e, "
             "limit 1e-4)", what, n0, n - 1, worst);
    free(step);
    free(full);
}

static pq_generate_result gen(pq_engine *e, const pq_tokenizer *tok, const int32_t *prompt, int np,
                              pq_generate_params *gp, sink *k) {
    pq_generate_result r;
    if (k) memset(k, 0, sizeof *k);
    if (pq_generate(e, tok, prompt, np, gp, k ? collect : NULL, k, &r) != PQ_OK) {
        printf("# generate: %s\n", pq_last_error());
        memset(&r, 0, sizeof r);
    }
    return r;
}

static int same_ids(const pq_generate_result *a, const pq_generate_result *b) {
    return a->n_generated == b->n_generated && a->n_generated > 0 &&
           memcmp(a->ids, b->ids, (size_t)a->n_generated * sizeof(int32_t)) == 0;
}

static void check_fixture_generation(void) {
    pq_model *m;
    pq_tokenizer *tok;
    if (pq_model_open(pq_test_path("fixtures/stories260K"), &m) != PQ_OK ||
        pq_tok_load(pq_test_path("fixtures/stories260K"), &tok) != PQ_OK) {
        PQ_CHECK(0, "fixture opens (%s)", pq_last_error());
        return;
    }
    pq_engine *e1 = engine(m, 1, 256), *e2 = engine(m, 2, 256);
    int32_t *prompt;
    size_t np;
    pq_tok_encode(tok, "Once upon a time", 16, 1, &prompt, &np);
    pq_generate_params gp = {.max_new = 60, .sample = pq_sample_default_params()};
    sink k1, k2;
    pq_generate_result a = gen(e1, tok, prompt, (int)np, &gp, &k1), b = gen(e2, tok, prompt, (int)np, &gp, &k2),
                       c = gen(e2, tok, prompt, (int)np, &gp, NULL);
    PQ_CHECK(same_ids(&a, &b) && same_ids(&a, &c) && a.n_generated == 60 && a.stop == PQ_STOP_LENGTH &&
                 a.n_decode == 59 && a.n_prompt == (int)np,
             "fixture greedy: 60 tokens, identical ids on 1 and 2 threads and on a rerun");
    char *text;
    size_t tl;
    pq_tok_decode(tok, a.ids, (size_t)a.n_generated, 1, &text, &tl);
    PQ_CHECK(!k1.bad && k1.n == tl && memcmp(k1.buf, text, tl) == 0 && strncmp(text, ", there was", 11) == 0,
             "streamed pieces are valid UTF-8 and make up the decoded text: '%.40s...'", text);
    free(text);

    // a stop id ends the generation before it is output
    int cut = 2;
    while (cut < a.n_generated) {
        int seen = 0;
        for (int i = 0; i < cut; i++) seen |= a.ids[i] == a.ids[cut];
        if (!seen) break;
        cut++;
    }
    pq_generate_params stop = gp;
    stop.stop[stop.n_stop++] = a.ids[cut];
    pq_generate_result r = gen(e2, tok, prompt, (int)np, &stop, NULL);
    PQ_CHECK(r.stop == PQ_STOP_EOS && r.n_generated == cut && memcmp(r.ids, a.ids, (size_t)cut * 4) == 0,
             "a stop id (EOS) ends generation after %d tokens, not output", cut);
    pq_generate_result_free(&r);
    // the context limit
    pq_engine *es = engine(m, 2, (int)np + 5);
    r = gen(es, tok, prompt, (int)np, &gp, NULL);
    PQ_CHECK(r.stop == PQ_STOP_CONTEXT && r.n_generated == 6 && r.n_decode == 5 &&
                 memcmp(r.ids, a.ids, 6 * 4) == 0,
             "a full KV cache of prompt + 5 stops after 6 tokens (%d, stop %s)", r.n_generated,
             pq_stop_reason_name(r.stop));
    pq_generate_result_free(&r);
    pq_engine_free(es);
    // top-k 1 is greedy whatever the temperature; a seed repeats a sampled run
    pq_generate_params k1p = gp;
    k1p.sample = (pq_sample_params){1.5, 1, 1.0, 99};
    r = gen(e2, tok, prompt, (int)np, &k1p, NULL);
    PQ_CHECK(same_ids(&r, &a), "top-k 1 at temperature 1.5 generates the greedy ids");
    pq_generate_result_free(&r);
    pq_generate_params sp = gp;
    sp.sample = (pq_sample_params){1.0, 0, 1.0, 42};
    pq_generate_result s1 = gen(e1, tok, prompt, (int)np, &sp, NULL), s2 = gen(e2, tok, prompt, (int)np, &sp, NULL);
    sp.sample.seed = 43;
    pq_generate_result s3 = gen(e2, tok, prompt, (int)np, &sp, NULL);
    PQ_CHECK(same_ids(&s1, &s2) && !same_ids(&s1, &s3), "temperature 1: seed 42 repeats its ids (1 and 2 threads), "
             "seed 43 gives others");
    pq_generate_result_free(&s1);
    pq_generate_result_free(&s2);
    pq_generate_result_free(&s3);
    // bad calls
    pq_generate_params bad = gp;
    bad.max_new = 0;
    pq_generate_result br;
    PQ_CHECK(pq_generate(e2, tok, prompt, (int)np, &bad, NULL, NULL, &br) == PQ_ERR_ARG, "-n 0 refused (%s)",
             pq_last_error());
    pq_engine *tiny = engine(m, 1, 3);
    PQ_CHECK(pq_generate(tiny, tok, prompt, (int)np, &gp, NULL, NULL, &br) == PQ_ERR_ARG &&
                 strstr(pq_last_error(), "does not fit"),
             "a prompt longer than the context refused (%s)", pq_last_error());
    pq_engine_free(tiny);

    // decode == prefill over the greedy text
    int32_t seq[80];
    memcpy(seq, prompt, np * 4);
    memcpy(seq + np, a.ids, 40 * 4);
    check_decode_vs_prefill("fixture", e2, seq, (int)np, (int)np + 40);
    pq_generate_result_free(&a);
    pq_generate_result_free(&b);
    pq_generate_result_free(&c);
    free(prompt);
    pq_engine_free(e1);
    pq_engine_free(e2);
    pq_tok_free(tok);
    pq_model_free(m);
}

// A random model of SmolLM2-135M's widths (4 of its 30 layers) in F16 and
// quantized to W4A16 g64 sym in memory: greedy ids identical on 1 and 2
// threads, decode == prefill.
static void check_smollm2_shaped(void) {
    pq_config c = pq_test_smollm2_config(4);
    pq_scheme w4 = {PQ_SCHEME_W4A16, 4, 0, 64, 1, PQ_ACT_NONE, PQ_ACTORDER_NONE, PQ_OBSERVER_MINMAX, 0};
    pq_model *m;
    pq_qtensor *q = NULL;
    if (pq_model_random(&c, PQ_DENSE_F16, 7, &m) != PQ_OK) {
        PQ_CHECK(0, "random SmolLM2-shaped model (%s)", pq_last_error());
        return;
    }
    for (int quant = 0; quant < 2; quant++) {
        const char *what = quant ? "SmolLM2-shaped W4A16 g64" : "SmolLM2-shaped F16";
        if (quant && pq_test_quantize_model(m, &w4, &q) != PQ_OK) {
            PQ_CHECK(0, "%s model (%s)", what, pq_last_error());
            break;
        }
        pq_engine *e1 = engine(m, 1, 64), *e2 = engine(m, 2, 64);
        int32_t prompt[12];
        for (int i = 0; i < 12; i++) prompt[i] = (int32_t)(pq_test_u64() % (uint64_t)c.vocab);
        pq_generate_params gp = {.max_new = 12, .sample = pq_sample_default_params()};
        pq_generate_result a = gen(e1, NULL, prompt, 12, &gp, NULL), b = gen(e2, NULL, prompt, 12, &gp, NULL);
        PQ_CHECK(same_ids(&a, &b) && a.n_generated == 12, "%s greedy: identical ids on 1 and 2 threads", what);
        int32_t seq[24];
        memcpy(seq, prompt, sizeof prompt);
        memcpy(seq + 12, a.ids, 12 * 4);
        check_decode_vs_prefill(what, e2, seq, 12, 22);
        pq_generate_result_free(&a);
        pq_generate_result_free(&b);
        pq_engine_free(e1);
        pq_engine_free(e2);
    }
    pq_model_free(m);
    pq_test_free_quantized(q, c.n_layers * PQ_NLINEAR);
}

int main(void) {
    pq_test_seed();
    check_sampling();
    check_chat();
    check_tokenizer_template();
    check_streaming();
    check_fixture_generation();
    check_smollm2_shaped();
    return pq_test_done();
}
