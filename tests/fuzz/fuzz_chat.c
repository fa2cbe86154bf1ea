// libFuzzer target: chat template recognition and rendering (eval/chat.h).
// The template is untrusted text (tokenizer_config.json, a GGUF's
// tokenizer.chat_template). Any input must give PQ_ERR_ARG, or a format
// whose rendering of a user message ends with the generation prompt; never
// a crash or an out-of-bounds read.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eval/chat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *t = malloc(size + 1);
    if (!t) return 0;
    memcpy(t, data, size);
    t[size] = '\0';
    pq_chat_format f;
    if (pq_chat_detect(t, "fuzz", &f) == PQ_OK) {
        char *out = NULL;
        if (pq_chat_render(&f, "<s>", " hello ", 1700000000, &out) != PQ_OK) abort();
        const char *tail = f.kind == PQ_CHAT_CHATML ? "<|im_start|>assistant\n"
                                                    : "<|start_header_id|>assistant<|end_header_id|>\n\n";
        size_t n = strlen(out), k = strlen(tail);
        if (n < k || strcmp(out + n - k, tail) != 0) abort();
        free(out);
    }
    free(t);
    return 0;
}
