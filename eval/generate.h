// eval/generate.h — text generation: the prompt is prefilled in one forward
// pass, then tokens are decoded one at a time through the KV cache
// (pq_engine_forward with T = 1 at the next position: the batch-1 GEMV
// kernels of kernels/linear.h, quantized weights read as stored), each
// chosen by eval/sample.h and streamed as text (formats/tokenizer/tok_stream.h).
//
// Generation stops at a stop id (the tokenizer's EOS, the chat template's
// end of turn; not part of the output), after max_new tokens, or when the
// KV cache is full. Timing is wall clock: the prompt phase is the prefill,
// the logits of its last row and the first choice; the decode phase is
// every later step (forward, logits, choice, text).
#ifndef PQ_GENERATE_H
#define PQ_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "eval/engine.h"
#include "eval/sample.h"
#include "formats/tokenizer/tokenizer.h"

typedef enum { PQ_STOP_EOS, PQ_STOP_LENGTH, PQ_STOP_CONTEXT } pq_stop_reason;
const char *pq_stop_reason_name(pq_stop_reason r); // "eos", "length", "context"

#define PQ_GENERATE_MAX_STOP 8

typedef struct {
    int max_new;                          // at most this many tokens (>= 1)
    pq_sample_params sample;
    int32_t stop[PQ_GENERATE_MAX_STOP];   // ids that end the generation
    int n_stop;
} pq_generate_params;

// Receives each piece of text as soon as it is complete: valid UTF-8,
// never part of a character; the pieces concatenated are the decode of the
// generated ids (special tokens skipped).
typedef void (*pq_generate_text_fn)(void *ud, const char *text, size_t len);

typedef struct {
    int32_t *ids;                // the generated ids, stop id excluded (malloc'd)
    int n_prompt, n_generated;
    int n_decode;                // single-token forward passes
    pq_stop_reason stop;
    double prompt_seconds, decode_seconds;
    double prompt_cpu_seconds, decode_cpu_seconds; // CPU time of the process (all threads) over each
    double prompt_tps, decode_tps; // n_prompt / prompt_seconds, n_decode / decode_seconds (0 if no time)
} pq_generate_result;

void pq_generate_result_free(pq_generate_result *r); // frees ids; NULL-safe

// Generates after prompt[0..n_prompt) (1 <= n_prompt <= the engine's
// context). tok (may be NULL: no text, on_text never called) decodes the
// text; the last prompt ids are its context. on_text may be NULL. On error
// *out holds nothing to free.
pq_status pq_generate(pq_engine *e, const pq_tokenizer *tok, const int32_t *prompt, int n_prompt,
                      const pq_generate_params *p, pq_generate_text_fn on_text, void *ud, pq_generate_result *out);


// ---- the `pq generate` stage as one library call ------------------------

typedef struct {
    const char *model;        // what pq_model_open / pq_tok_load take (directory, packed checkpoint, ...)
    const char *prompt;       // UTF-8
    int chat;                 // wrap the prompt in the model's chat format (eval/chat.h)
    int max_new;              // default 128
    pq_sample_params sample;
    int max_ctx;              // KV cache positions; 0: prompt + max_new, at most max_position_embeddings
    int nthreads;             // 0 = all cores
    pq_device device;
} pq_generate_job;

pq_generate_job pq_generate_default_job(void);

typedef struct {
    pq_generate_result r;
    char *text;               // the decode of r.ids (special tokens skipped), malloc'd
    int32_t *prompt_ids;      // the prompt as fed (malloc'd, r.n_prompt)
    int max_ctx;
    char chat[16];            // the chat format used ("ChatML", "Llama 3"), "" without --chat
    char engine[512];         // pq_engine_describe
} pq_generate_report;

void pq_generate_report_free(pq_generate_report *r); // NULL-safe

// Opens the model and its tokenizer, tokenizes the prompt (with BOS as the
// tokenizer adds it; with --chat, the rendered chat text as is), and
// generates. A --chat model without a known template, a prompt longer than
// the context and bad sampling flags are PQ_ERR_ARG. On error *out holds
// nothing to free.
pq_status pq_generate_run(const pq_generate_job *job, pq_generate_text_fn on_text, void *ud, pq_generate_report *out);

#endif
