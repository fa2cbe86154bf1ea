// eval/ppl.h — perplexity over a token stream, under two protocols.
//
// gptq (the GPTQ/AWQ papers' tables): consecutive non-overlapping windows of
//   ctx tokens, incomplete tail dropped. Without BOS each window is fed as is
//   and tokens 1..ctx-1 are scored; with BOS the window is fed as
//   [BOS] + w[0:ctx-1] and all ctx window tokens are scored (the protocol of
//   the stories260K goldens).
// llamacpp (llama.cpp's llama-perplexity): the stream is [BOS] + text when
//   BOS is used; windows of ctx tokens; the first token of every window is
//   replaced by BOS (when used); only the second half is scored: logits at
//   positions ctx/2 .. ctx-2 predict the tokens after them.
// NLL = logsumexp(logits) - logit[target] in double; PPL = exp(mean NLL), its
// standard error by the delta method: PPL * sd(NLL) / sqrt(n).
#ifndef PQ_PPL_H
#define PQ_PPL_H

#include <stddef.h>
#include <stdint.h>

#include "eval/engine.h"
#include "eval/kld.h"

typedef enum { PQ_PPL_GPTQ, PQ_PPL_LLAMACPP } pq_ppl_protocol;

typedef struct {
    pq_ppl_protocol protocol;
    int ctx;          // window length in tokens (as fed to the model)
    int bos;          // 1: use BOS as described above
    int bos_id;       // the tokenizer's BOS id (needed when bos)
    int max_windows;  // 0 = all
} pq_ppl_params;

typedef struct {
    double ppl, ppl_stderr;
    double nll_total, nll_mean;
    long long n_scored;
    int n_windows;
    double seconds, tokens_per_s; // tokens fed per second
    double cpu_seconds;           // CPU time of the process (all threads) over the windows
} pq_ppl_result;

// Called after each window: windows done, windows in all, running PPL.
typedef void (*pq_ppl_progress)(void *ud, int done, int total, double ppl);

// Scores `tokens` (the text's ids, no BOS) with the engine. Fails with
// PQ_ERR_ARG if the text is shorter than one window. window_nll (optional,
// n_windows entries, see pq_ppl_window_count) receives each window's total NLL.
// base and kl (both or neither): a second engine over the same vocabulary
// runs every window too, and each scored token's KL divergence of e's
// distribution from base's is added to kl (eval/kld.h): window by window,
// nothing but the per-token figures kept.
pq_status pq_ppl_run(pq_engine *e, pq_engine *base, pq_kld_acc *kl, int vocab, const int32_t *tokens,
                     size_t n_tokens, const pq_ppl_params *p, pq_ppl_progress progress, void *ud, double *window_nll,
                     pq_ppl_result *out);

// Windows the protocol makes of n_tokens text tokens (before max_windows).
int pq_ppl_window_count(size_t n_tokens, const pq_ppl_params *p);


// ---- the `pq ppl` stage as one library call ------------------------------

typedef struct {
    const char *model;        // model directory (FP16 or packed)
    const char *text;         // UTF-8 text file
    pq_ppl_protocol protocol;
    int ctx;                  // 0: 2048 (gptq) or 512 (llamacpp), clamped to the model's context
    int bos;                  // -1: the protocol's default (gptq: no, llamacpp: if the tokenizer adds BOS)
    int max_windows;          // 0 = all
    pq_device device;
    int nthreads;             // 0 = all cores
    const char *kl_base;      // NULL, or a model (FP16 or packed) to measure MODEL's KL divergence from
} pq_ppl_job;

pq_ppl_job pq_ppl_default_job(void);

typedef struct {
    pq_ppl_result r;
    size_t n_text_tokens;
    int ctx, bos;
    char engine[128];         // pq_engine_describe
    char arch[64];
    int has_kl;               // job->kl_base was given: kl holds the statistics
    pq_kld_result kl;
} pq_ppl_report;

// Opens the model and tokenizer, tokenizes the text, runs the protocol.
// An explicit ctx beyond the model's max_position_embeddings is PQ_ERR_ARG.
// With kl_base, that model runs the same windows on the same engine
// settings; its config must have MODEL's vocabulary size and context and its
// tokenizer must encode the text to the same ids (else PQ_ERR_ARG).
pq_status pq_ppl_eval(const pq_ppl_job *job, pq_ppl_progress progress, void *ud, pq_ppl_report *out);
#endif
