#include "ppl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/sys.h"
#include "formats/fileio.h"
#include "formats/tokenizer/tokenizer.h"

int pq_ppl_window_count(size_t n_tokens, const pq_ppl_params *p) {
    size_t stream = n_tokens + (p->protocol == PQ_PPL_LLAMACPP && p->bos ? 1 : 0);
    return p->ctx > 0 ? (int)(stream / (size_t)p->ctx) : 0;
}

// logits rows compared per chunk under --kl-base: bounds each logits buffer
// to 64 x vocab floats
#define LOGIT_CHUNK 64

typedef struct {
    int32_t *feed;    // [ctx] tokens fed
    int32_t *target;  // [ctx] target of each fed position, -1 = not scored
    double *nll;      // [ctx] the loss of each position (pq_engine_nll)
    float *logits;    // [LOGIT_CHUNK][vocab] with a KL base: the model's logits
    float *blogits;   // [LOGIT_CHUNK][vocab] with a KL base: the base's logits
} window_buf;

// The KL divergence of the scored rows of the window from base's (both
// engines have run it), LOGIT_CHUNK rows at a time.
static pq_status add_kl(pq_engine *e, pq_engine *base, pq_kld_acc *kl, int vocab, const window_buf *b, int first,
                        int ctx, int w) {
    for (int r0 = first; r0 < ctx; r0 += LOGIT_CHUNK) {
        int rows = ctx - r0 < LOGIT_CHUNK ? ctx - r0 : LOGIT_CHUNK;
        PQ_TRY(pq_engine_logits(e, r0, rows, b->logits));
        PQ_TRY(pq_engine_logits(base, r0, rows, b->blogits));
        for (int r = 0; r < rows; r++) {
            int tgt = b->target[r0 + r];
            if (tgt < 0) continue;
            pq_status s = pq_kld_add(kl, b->blogits + (size_t)r * vocab, b->logits + (size_t)r * vocab, vocab, tgt);
            if (s != PQ_OK) return pq_fail_context(s, "window %d position %d", w, r0 + r);
        }
    }
    return PQ_OK;
}

// Token s of the llamacpp stream ([BOS] + tokens when bos).
static int32_t stream_at(const pq_ppl_params *p, const int32_t *tokens, size_t s) {
    if (!p->bos) return tokens[s];
    return s == 0 ? p->bos_id : tokens[s - 1];
}

// Builds window w's fed tokens and targets under the protocol.
static void make_window(const pq_ppl_params *p, const int32_t *tokens, int w, window_buf *b) {
    int C = p->ctx;
    for (int i = 0; i < C; i++) b->target[i] = -1;
    if (p->protocol == PQ_PPL_GPTQ) {
        const int32_t *win = tokens + (size_t)w * C;
        if (p->bos) {
            b->feed[0] = p->bos_id;
            for (int i = 1; i < C; i++) b->feed[i] = win[i - 1];
            for (int i = 0; i < C; i++) b->target[i] = win[i];
        } else {
            for (int i = 0; i < C; i++) b->feed[i] = win[i];
            for (int i = 0; i + 1 < C; i++) b->target[i] = win[i + 1];
        }
        return;
    }
    // llamacpp: the stream is [BOS] + tokens when bos; the window's first
    // token is replaced by BOS; the second half is scored
    size_t start = (size_t)w * C;
    for (int i = 0; i < C; i++) b->feed[i] = stream_at(p, tokens, start + (size_t)i);
    if (p->bos) b->feed[0] = p->bos_id;
    for (int i = C / 2; i + 1 < C; i++) b->target[i] = stream_at(p, tokens, start + (size_t)i + 1);
}

pq_status pq_ppl_run(pq_engine *e, pq_engine *base, pq_kld_acc *kl, int vocab, const int32_t *tokens,
                     size_t n_tokens, const pq_ppl_params *p, pq_ppl_progress progress, void *ud, double *window_nll,
                     pq_ppl_result *out) {
    memset(out, 0, sizeof *out);
    PQ_FAIL_IF(!base != !kl, PQ_ERR_ARG, "a KL base needs an accumulator and the other way round");
    PQ_FAIL_IF(p->ctx < 2, PQ_ERR_ARG, "--ctx %d: a window needs at least 2 tokens", p->ctx);
    PQ_FAIL_IF(p->bos && p->bos_id < 0, PQ_ERR_ARG, "--bos: the tokenizer has no BOS token");
    int nw = pq_ppl_window_count(n_tokens, p);
    PQ_FAIL_IF(nw < 1, PQ_ERR_ARG, "the text has %zu tokens, fewer than one window of %d", n_tokens, p->ctx);
    if (p->max_windows > 0 && nw > p->max_windows) nw = p->max_windows;
    window_buf b = {malloc((size_t)p->ctx * sizeof(int32_t)), malloc((size_t)p->ctx * sizeof(int32_t)),
                    malloc((size_t)p->ctx * sizeof(double)),
                    base ? pq_alloc((size_t)LOGIT_CHUNK * vocab * sizeof(float)) : NULL,
                    base ? pq_alloc((size_t)LOGIT_CHUNK * vocab * sizeof(float)) : NULL};
    pq_status s = PQ_OK;
    PQ_CHECK_GOTO(!b.feed || !b.target || !b.nll || (base && (!b.logits || !b.blogits)), s, PQ_ERR_NOMEM,
                  "out of memory");
    double sum = 0, sum2 = 0, t0 = pq_now(), c0 = pq_cpu_seconds();
    long long n = 0;
    for (int w = 0; w < nw; w++) {
        make_window(p, tokens, w, &b);
        PQ_TRY_GOTO(s, pq_engine_forward(e, b.feed, p->ctx, 0));
        if (base) PQ_TRY_GOTO(s, pq_engine_forward(base, b.feed, p->ctx, 0));
        double wsum = 0;
        int first = 0;
        while (first < p->ctx && b.target[first] < 0) first++;
        for (int r = first; r < p->ctx; r++)
            PQ_CHECK_GOTO(b.target[r] >= vocab, s, PQ_ERR_FORMAT, "token id %d outside the vocabulary of %d", b.target[r],
                          vocab);
        if (base) PQ_TRY_GOTO(s, add_kl(e, base, kl, vocab, &b, first, p->ctx, w));
        // the loss of the scored rows (on the GPU the logits stay on the device)
        PQ_TRY_GOTO(s, pq_engine_nll(e, first, p->ctx - first, b.target + first, b.nll + first));
        for (int r = first; r < p->ctx; r++) {
            if (b.target[r] < 0) continue;
            double nll = b.nll[r];
            PQ_CHECK_GOTO(!isfinite(nll), s, PQ_ERR_NUMERIC, "window %d position %d: non-finite logits", w, r);
            wsum += nll;
            sum2 += nll * nll;
            n++;
        }
        sum += wsum;
        if (window_nll) window_nll[w] = wsum;
        if (progress) progress(ud, w + 1, nw, exp(sum / (double)n));
    }
    out->n_windows = nw;
    out->n_scored = n;
    out->nll_total = sum;
    out->nll_mean = sum / (double)n;
    out->ppl = exp(out->nll_mean);
    double var = n > 1 ? (sum2 / (double)n - out->nll_mean * out->nll_mean) * (double)n / (double)(n - 1) : 0;
    out->ppl_stderr = out->ppl * sqrt(var > 0 ? var : 0) / sqrt((double)n);
    out->seconds = pq_now() - t0;
    out->cpu_seconds = pq_cpu_seconds() - c0;
    out->tokens_per_s = out->seconds > 0 ? (double)nw * p->ctx / out->seconds : 0;
done:
    free(b.feed);
    free(b.target);
    free(b.nll);
    pq_free(b.logits);
    pq_free(b.blogits);
    return s;
}

pq_ppl_job pq_ppl_default_job(void) {
    return (pq_ppl_job){.protocol = PQ_PPL_GPTQ, .ctx = 0, .bos = -1, .device = PQ_DEVICE_AUTO};
}

pq_status pq_ppl_eval(const pq_ppl_job *job, pq_ppl_progress progress, void *ud, pq_ppl_report *out) {
    memset(out, 0, sizeof *out);
    pq_model *m = NULL;
    pq_tokenizer *tok = NULL;
    pq_engine *e = NULL;
    pq_model *bm = NULL;
    pq_tokenizer *btok = NULL;
    pq_engine *be = NULL;
    pq_kld_acc kl = {0};
    char *text = NULL;
    int32_t *ids = NULL, *bids = NULL;
    size_t len = 0, n_ids = 0, n_bids = 0;
    pq_status s;
    PQ_TRY_GOTO(s, pq_model_open(job->model, &m));
    PQ_TRY_GOTO(s, pq_tok_load(job->model, &tok));
    int max_pos = m->cfg.max_pos;
    int ctx = job->ctx;
    PQ_CHECK_GOTO(ctx < 0 || ctx > max_pos, s, PQ_ERR_ARG,
                  "--ctx %d: %s/config.json allows at most max_position_embeddings = %d", ctx, job->model, max_pos);
    if (ctx == 0) ctx = job->protocol == PQ_PPL_GPTQ ? 2048 : 512;
    if (ctx > max_pos) ctx = max_pos;
    int bos = job->bos >= 0 ? job->bos : job->protocol == PQ_PPL_LLAMACPP ? pq_tok_adds_bos(tok) : 0;
    PQ_TRY_GOTO(s, pq_text_read(job->text, (size_t)1 << 32, &text, &len));
    s = pq_tok_encode(tok, text, len, 0, &ids, &n_ids);
    if (s != PQ_OK) { pq_fail_context(s, "%s", job->text); goto done; }
    // a tokenizer that maps text past the model's embedding rows belongs to
    // another model: a bad input (exit 1), not a bad argument
    for (size_t i = 0; i < n_ids; i++)
        PQ_CHECK_GOTO(ids[i] >= m->cfg.vocab, s, PQ_ERR_FORMAT, "%s/tokenizer.json: %s encodes to id %d ('%.40s'), "
                      "outside the %d rows of the model's embedding (config.json vocab_size)", job->model, job->text,
                      (int)ids[i], pq_tok_piece(tok, ids[i]) ? pq_tok_piece(tok, ids[i]) : "?", m->cfg.vocab);
    PQ_CHECK_GOTO(bos && pq_tok_bos(tok) >= m->cfg.vocab, s, PQ_ERR_FORMAT, "%s/tokenizer.json: BOS id %d is outside "
                  "the %d rows of the model's embedding (config.json vocab_size)", job->model, pq_tok_bos(tok),
                  m->cfg.vocab);
    pq_engine_params ep = pq_engine_default_params();
    ep.max_ctx = ctx;
    ep.device = job->device;
    ep.nthreads = job->nthreads;
    PQ_TRY_GOTO(s, pq_engine_create(m, &ep, &e));
    if (job->kl_base) {
        PQ_TRY_GOTO(s, pq_model_open(job->kl_base, &bm));
        PQ_TRY_GOTO(s, pq_tok_load(job->kl_base, &btok));
        PQ_CHECK_GOTO(bm->cfg.vocab != m->cfg.vocab || bm->cfg.max_pos < ctx, s, PQ_ERR_ARG,
                      "--kl-base %s: vocabulary %d and context %d, but %s has vocabulary %d and the windows are %d "
                      "tokens", job->kl_base, bm->cfg.vocab, bm->cfg.max_pos, job->model, m->cfg.vocab, ctx);
        s = pq_tok_encode(btok, text, len, 0, &bids, &n_bids);
        if (s != PQ_OK) { pq_fail_context(s, "%s", job->text); goto done; }
        PQ_CHECK_GOTO(n_bids != n_ids || memcmp(bids, ids, n_ids * sizeof *ids) != 0 ||
                          (bos && pq_tok_bos(btok) != pq_tok_bos(tok)), s, PQ_ERR_ARG,
                      "--kl-base %s: its tokenizer encodes %s differently from %s's", job->kl_base, job->text,
                      job->model);
        PQ_TRY_GOTO(s, pq_engine_create(bm, &ep, &be));
    }
    pq_ppl_params pp = {job->protocol, ctx, bos, pq_tok_bos(tok), job->max_windows};
    PQ_CHECK_GOTO(pq_ppl_window_count(n_ids, &pp) < 1, s, PQ_ERR_FORMAT,
                  "%s: the text has %zu tokens, fewer than one window of %d", job->text, n_ids, ctx);
    s = pq_ppl_run(e, be, be ? &kl : NULL, m->cfg.vocab, ids, n_ids, &pp, progress, ud, NULL, &out->r);
    // non-finite logits: a NaN or Inf weight is named; only finite weights
    // leave the activations (and the text) to blame
    if (s == PQ_ERR_NUMERIC && pq_model_check_finite(m) != PQ_OK) goto done;
    if (s == PQ_ERR_NUMERIC && bm && pq_model_check_finite(bm) != PQ_OK) goto done;
    if (s != PQ_OK) { pq_fail_context(s, "%s", job->text); goto done; }
    if (be) {
        PQ_TRY_GOTO(s, pq_kld_summarize(&kl, &out->kl));
        out->has_kl = 1;
    }
    out->n_text_tokens = n_ids;
    out->ctx = ctx;
    out->bos = bos;
    snprintf(out->engine, sizeof out->engine, "%s", pq_engine_describe(e));
    snprintf(out->arch, sizeof out->arch, "%s", m->cfg.arch_name);
done:
    pq_kld_free(&kl);
    pq_engine_free(be);
    pq_tok_free(btok);
    pq_model_free(bm);
    free(bids);
    pq_engine_free(e);
    free(ids);
    free(text);
    pq_tok_free(tok);
    pq_model_free(m);
    return s;
}
