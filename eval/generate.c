#include "eval/generate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/sys.h"
#include "eval/chat.h"
#include "formats/tokenizer/tok_stream.h"

const char *pq_stop_reason_name(pq_stop_reason r) {
    return r == PQ_STOP_EOS ? "eos" : r == PQ_STOP_LENGTH ? "length" : "context";
}

void pq_generate_result_free(pq_generate_result *r) {
    if (!r) return;
    free(r->ids);
    r->ids = NULL;
}

static int is_stop(const pq_generate_params *p, int32_t id) {
    for (int i = 0; i < p->n_stop; i++)
        if (p->stop[i] == id) return 1;
    return 0;
}

// Streams id's text; ids the tokenizer does not have (a model vocabulary
// padded past it) have none.
static pq_status emit(pq_tok_stream *ts, const pq_tokenizer *tok, int32_t id, pq_generate_text_fn on_text, void *ud) {
    if (!ts || id >= pq_tok_vocab_size(tok)) return PQ_OK;
    const char *t;
    size_t n;
    PQ_TRY(pq_tok_stream_push(ts, id, &t, &n));
    if (n && on_text) on_text(ud, t, n);
    return PQ_OK;
}

pq_status pq_generate(pq_engine *e, const pq_tokenizer *tok, const int32_t *prompt, int n_prompt,
                      const pq_generate_params *p, pq_generate_text_fn on_text, void *ud, pq_generate_result *out) {
    memset(out, 0, sizeof *out);
    int ctx = pq_engine_max_ctx(e), V = pq_engine_vocab(e);
    PQ_FAIL_IF(p->max_new < 1, PQ_ERR_ARG, "-n %d: at least one token must be generated", p->max_new);
    PQ_FAIL_IF(n_prompt < 1, PQ_ERR_ARG, "the prompt is empty (no tokens, and the tokenizer adds no BOS)");
    PQ_FAIL_IF(n_prompt > ctx, PQ_ERR_ARG, "the prompt of %d tokens does not fit the context of %d", n_prompt, ctx);
    pq_sampler *smp = NULL;
    pq_tok_stream *ts = NULL;
    float *logits = pq_alloc((size_t)V * sizeof(float));
    int32_t *ids = malloc((size_t)p->max_new * sizeof(int32_t));
    pq_status s = PQ_OK;
    PQ_CHECK_GOTO(!logits || !ids, s, PQ_ERR_NOMEM, "out of memory");
    PQ_TRY_GOTO(s, pq_sampler_create(&p->sample, V, &smp));
    if (tok) {
        // the stream's context: prompt ids the tokenizer knows
        int first = n_prompt > PQ_TOK_STREAM_CONTEXT ? n_prompt - PQ_TOK_STREAM_CONTEXT : 0, nc = 0;
        int32_t ctx_ids[PQ_TOK_STREAM_CONTEXT];
        for (int i = first; i < n_prompt; i++)
            if (prompt[i] < pq_tok_vocab_size(tok)) ctx_ids[nc++] = prompt[i];
        PQ_TRY_GOTO(s, pq_tok_stream_create(tok, ctx_ids, (size_t)nc, &ts));
    }
    double t0 = pq_now(), c0 = pq_cpu_seconds();
    PQ_TRY_GOTO(s, pq_engine_forward(e, prompt, n_prompt, 0));
    PQ_TRY_GOTO(s, pq_engine_logits(e, n_prompt - 1, 1, logits));
    int32_t id;
    PQ_TRY_GOTO(s, pq_sampler_pick(smp, logits, &id));
    double t1 = pq_now(), c1 = pq_cpu_seconds();
    out->n_prompt = n_prompt;
    out->prompt_seconds = t1 - t0;
    out->prompt_cpu_seconds = c1 - c0;
    for (;;) {
        if (is_stop(p, id)) { out->stop = PQ_STOP_EOS; break; }
        ids[out->n_generated++] = id;
        PQ_TRY_GOTO(s, emit(ts, tok, id, on_text, ud));
        if (out->n_generated == p->max_new) { out->stop = PQ_STOP_LENGTH; break; }
        int pos = n_prompt + out->n_generated - 1; // where id goes
        if (pos >= ctx) { out->stop = PQ_STOP_CONTEXT; break; }
        PQ_TRY_GOTO(s, pq_engine_forward(e, &id, 1, pos));
        PQ_TRY_GOTO(s, pq_engine_logits(e, 0, 1, logits));
        out->n_decode++;
        PQ_TRY_GOTO(s, pq_sampler_pick(smp, logits, &id));
    }
    if (ts) {
        const char *t;
        size_t n;
        PQ_TRY_GOTO(s, pq_tok_stream_flush(ts, &t, &n));
        if (n && on_text) on_text(ud, t, n);
    }
    out->decode_seconds = pq_now() - t1;
    out->decode_cpu_seconds = pq_cpu_seconds() - c1;
    out->prompt_tps = out->prompt_seconds > 0 ? n_prompt / out->prompt_seconds : 0;
    out->decode_tps = out->decode_seconds > 0 ? out->n_decode / out->decode_seconds : 0;
    out->ids = ids;
    ids = NULL;
done:
    if (s != PQ_OK) memset(out, 0, sizeof *out);
    free(ids);
    pq_free(logits);
    pq_sampler_free(smp);
    pq_tok_stream_free(ts);
    return s;
}

// ---- the stage ------------------------------------------------------------

pq_generate_job pq_generate_default_job(void) {
    return (pq_generate_job){.max_new = 128, .sample = pq_sample_default_params(), .device = PQ_DEVICE_AUTO};
}

void pq_generate_report_free(pq_generate_report *r) {
    if (!r) return;
    pq_generate_result_free(&r->r);
    free(r->text);
    free(r->prompt_ids);
    r->text = NULL;
    r->prompt_ids = NULL;
}

static void add_stop(pq_generate_params *gp, int id) {
    if (id < 0 || gp->n_stop == PQ_GENERATE_MAX_STOP) return;
    for (int i = 0; i < gp->n_stop; i++)
        if (gp->stop[i] == id) return;
    gp->stop[gp->n_stop++] = id;
}

// The prompt's ids: the chat text as is, or the text with the tokenizer's BOS rule.
static pq_status encode_prompt(const pq_generate_job *job, const pq_tokenizer *tok, const pq_chat_format *chat,
                               int32_t **ids, size_t *n) {
    if (!job->chat) return pq_tok_encode(tok, job->prompt, strlen(job->prompt), 1, ids, n);
    int bos = pq_tok_bos(tok);
    char *text;
    PQ_TRY(pq_chat_render(chat, bos >= 0 ? pq_tok_piece(tok, bos) : NULL, job->prompt, time(NULL), &text));
    pq_status s = pq_tok_encode(tok, text, strlen(text), 0, ids, n);
    free(text);
    return s;
}

pq_status pq_generate_run(const pq_generate_job *job, pq_generate_text_fn on_text, void *ud, pq_generate_report *out) {
    memset(out, 0, sizeof *out);
    pq_model *m = NULL;
    pq_tokenizer *tok = NULL;
    pq_engine *e = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0, len;
    pq_status s;
    PQ_TRY_GOTO(s, pq_sample_check(&job->sample));
    PQ_CHECK_GOTO(job->max_new < 1, s, PQ_ERR_ARG, "-n %d: at least one token must be generated", job->max_new);
    PQ_CHECK_GOTO(job->max_ctx < 0, s, PQ_ERR_ARG, "--max-ctx %d: must be >= 0 (0 = prompt + -n)", job->max_ctx);
    PQ_TRY_GOTO(s, pq_model_open(job->model, &m));
    PQ_TRY_GOTO(s, pq_tok_load(job->model, &tok));
    pq_generate_params gp = {.max_new = job->max_new, .sample = job->sample};
    add_stop(&gp, pq_tok_eos(tok));
    add_stop(&gp, m->cfg.eos_id);
    pq_chat_format chat;
    pq_status cs = pq_chat_detect(pq_tok_chat_template(tok), job->model, &chat);
    if (job->chat && cs != PQ_OK) { s = cs; goto done; }
    if (cs == PQ_OK) add_stop(&gp, pq_tok_token_id(tok, chat.end_token));
    if (job->chat) snprintf(out->chat, sizeof out->chat, "%s", chat.name);
    s = encode_prompt(job, tok, &chat, &ids, &n_ids);
    if (s != PQ_OK) { pq_fail_context(s, "--prompt"); goto done; }
    int max_pos = m->cfg.max_pos;
    PQ_CHECK_GOTO(job->max_ctx > max_pos, s, PQ_ERR_ARG,
                  "--max-ctx %d: the model allows at most max_position_embeddings = %d", job->max_ctx, max_pos);
    int ctx = job->max_ctx;
    if (ctx == 0) ctx = (long long)n_ids + job->max_new < max_pos ? (int)n_ids + job->max_new : max_pos;
    PQ_CHECK_GOTO(n_ids > (size_t)ctx, s, PQ_ERR_ARG, "the prompt of %zu tokens does not fit the context of %d",
                  n_ids, ctx);
    pq_engine_params ep = pq_engine_default_params();
    ep.max_ctx = ctx;
    ep.nthreads = job->nthreads;
    ep.device = job->device;
    PQ_TRY_GOTO(s, pq_engine_create(m, &ep, &e));
    out->max_ctx = ctx;
    snprintf(out->engine, sizeof out->engine, "%s", pq_engine_describe(e));
    PQ_TRY_GOTO(s, pq_generate(e, tok, ids, (int)n_ids, &gp, on_text, ud, &out->r));
    out->prompt_ids = ids;
    ids = NULL;
    // the whole text, from the ids the tokenizer knows
    int32_t *known = malloc((size_t)(out->r.n_generated ? out->r.n_generated : 1) * sizeof(int32_t));
    PQ_CHECK_GOTO(!known, s, PQ_ERR_NOMEM, "out of memory");
    int nk = 0;
    for (int i = 0; i < out->r.n_generated; i++)
        if (out->r.ids[i] < pq_tok_vocab_size(tok)) known[nk++] = out->r.ids[i];
    s = pq_tok_decode(tok, known, (size_t)nk, 1, &out->text, &len);
    free(known);
done:
    if (s != PQ_OK) pq_generate_report_free(out);
    pq_engine_free(e);
    free(ids);
    pq_tok_free(tok);
    pq_model_free(m);
    return s;
}
