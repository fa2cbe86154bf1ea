// libFuzzer target: tokenizer_config.json (bos/eos tokens, add_bos_token /
// add_eos_token) applied to a fixed tokenizer.json with <unk>, <s>, </s>
// and a BOS template. A config that loads must leave BOS/EOS inside the
// vocabulary, and add_special must prepend BOS exactly when the tokenizer
// says it adds one; a refused one leaves a message and no tokenizer.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/tokenizer/tokenizer.h"

static const char TOKENIZER[] =
    "{\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true},{\"id\":1,\"content\":\"<s>\",\"special\":true},"
    "{\"id\":2,\"content\":\"</s>\",\"special\":true}],\"normalizer\":null,\"pre_tokenizer\":null,"
    "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
    "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],\"tokens\":[\"<s>\"]}}},"
    "\"decoder\":null,\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"vocab\":{\"<unk>\":0,\"<s>\":1,\"</s>\":2,"
    "\"h\":3,\"i\":4,\"hi\":5},\"merges\":[\"h i\"]}}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pq_tokenizer *tok = NULL;
    if (pq_tok_load_json(TOKENIZER, sizeof TOKENIZER - 1, (const char *)data, size, "fuzz", &tok) != PQ_OK) {
        if (tok || pq_last_error()[0] == '\0') abort();
        return 0;
    }
    int vs = pq_tok_vocab_size(tok), bos = pq_tok_bos(tok), eos = pq_tok_eos(tok);
    if (bos >= vs || eos >= vs || (pq_tok_adds_bos(tok) && bos < 0)) abort();
    int32_t *ids = NULL;
    size_t n = 0;
    if (pq_tok_encode(tok, "hi", 2, 1, &ids, &n) != PQ_OK) abort();
    if (pq_tok_adds_bos(tok) != (n > 0 && ids[0] == bos && n >= 2)) abort();
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vs) abort();
    free(ids);
    pq_tok_free(tok);
    return 0;
}
