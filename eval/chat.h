// eval/chat.h — wrapping a prompt in a model's chat format.
//
// A Hugging Face chat template is Jinja source (tokenizer_config.json's
// chat_template). pq does not run Jinja: it recognizes the two families
// whose output it can reproduce by their distinctive markers, never by the
// model's name, and renders what transformers' apply_chat_template(
// [{"role": "user", "content": TEXT}], add_generation_prompt=True) gives:
//
//   ChatML (SmolLM2-Instruct, Qwen2): markers <|im_start|> and <|im_end|>
//     [<|im_start|>system\nDEFAULT<|im_end|>\n]<|im_start|>user\nTEXT<|im_end|>\n<|im_start|>assistant\n
//     DEFAULT: the default system prompt the template writes when the
//     conversation has none — a string literal that follows
//     '<|im_start|>system\n' up to '<|im_end|>' (e.g. SmolLM2's "You are a
//     helpful AI assistant named SmolLM, trained by Hugging Face").
//   Llama 3: markers <|start_header_id|>, <|end_header_id|> and <|eot_id|>
//     [BOS][<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: ...\nToday Date: DATE\n\n<|eot_id|>]
//     <|start_header_id|>user<|end_header_id|>\n\nTRIM(TEXT)<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n
//     The system block is written by the Llama 3.1+ templates (those with
//     "Cutting Knowledge Date"): DATE is the template's date_string default
//     ("26 Jul 2024"), or today ("%d %b %Y") when it calls strftime_now.
// BOS (the tokenizer's BOS token text) starts the text when the template
// uses bos_token; TRIM strips leading/trailing ASCII whitespace (Jinja's
// trim; ChatML templates trim only when they use the trim filter). The
// rendered text is then encoded without adding special tokens, as
// apply_chat_template does.
#ifndef PQ_CHAT_H
#define PQ_CHAT_H

#include <time.h>

#include "common/status.h"

typedef enum { PQ_CHAT_CHATML = 1, PQ_CHAT_LLAMA3 } pq_chat_kind;

typedef struct {
    pq_chat_kind kind;
    const char *name;       // "ChatML", "Llama 3"
    const char *end_token;  // the turn's end: "<|im_end|>", "<|eot_id|>" (generation stops there)
    int bos;                // the text starts with the BOS token
    int trim;               // the user text is trimmed
    int system;             // a system turn comes first
    char system_text[1024]; // ChatML: the default system prompt; Llama 3: the knowledge-date line, "\n"-terminated
    char date[64];          // Llama 3 system block: the date ("" = today, from strftime_now)
} pq_chat_format;

// Recognizes tmpl (NULL: no template). Anything else is PQ_ERR_ARG with one
// line saying what is missing or not recognized; `what` names the model in
// that message.
pq_status pq_chat_detect(const char *tmpl, const char *what, pq_chat_format *out);

// The text of one user message plus the generation prompt (malloc'd,
// NUL-terminated). bos_text is the tokenizer's BOS token (needed when f->bos;
// NULL otherwise is PQ_ERR_ARG); now is the date a template that asks for
// today gets.
pq_status pq_chat_render(const pq_chat_format *f, const char *bos_text, const char *user, time_t now, char **out);

#endif
