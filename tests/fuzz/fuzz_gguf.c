// libFuzzer target: a GGUF file on arbitrary bytes, as far as pq reads one.
// Whatever the reader accepts must be safe to walk: every metadata value
// and string, every tensor's byte range (touched at its first and last
// byte; ASan reports any range outside the input), every lookup by name.
// Then the Hugging Face view: config.json and tokenizer.json made from the
// metadata (and parsed by pq), a few words tokenized, the tensors mapped,
// un-permuted and dequantized.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/config.h"
#include "formats/gguf_hf.h"
#include "formats/tokenizer/tokenizer.h"
#include "kernels/ggml_blocks.h"

static volatile uint8_t sink;

static void touch(const void *p, size_t n, const uint8_t *data, size_t size) {
    if (!n) return;
    const uint8_t *b = p;
    if (b < data || b + n > data + size) abort();
    sink ^= b[0];
    sink ^= b[n - 1];
}

static void walk(const pq_gguf *g, const uint8_t *data, size_t size) {
    for (int i = 0; i < pq_gguf_kv_count(g); i++) {
        const pq_gguf_kv *kv = pq_gguf_kv_at(g, i);
        if (pq_gguf_find(g, kv->key) != kv) abort();
        for (uint64_t k = 0; kv->elem == PQ_GGUF_STRING && k < kv->n; k++)
            touch(kv->strs[k].p, kv->strs[k].len, data, size);
        if (kv->elem == PQ_GGUF_F32 || kv->elem == PQ_GGUF_F64) {
            for (uint64_t k = 0; k < kv->n; k++) sink ^= (uint8_t)(pq_gguf_kv_float(kv, k) > 0);
        } else if (kv->elem != PQ_GGUF_STRING) {
            for (uint64_t k = 0; k < kv->n; k++) sink ^= (uint8_t)pq_gguf_kv_int(kv, k);
        }
    }
    for (int i = 0; i < pq_gguf_tensor_count(g); i++) {
        const pq_gguf_tensor *t = pq_gguf_tensor_at(g, i);
        const pq_ggml_type_info *ti = pq_ggml_type_get(t->type);
        if (!ti || t->numel % ti->block || t->nbytes != (size_t)(t->numel / ti->block) * (size_t)ti->bytes) abort();
        touch(t->data, t->nbytes, data, size);
        if (pq_gguf_tensor_find(g, t->name) != t) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pq_gguf *g = NULL;
    if (pq_gguf_open_buffer(data, size, "fuzz.gguf", &g) != PQ_OK) {
        if (g || pq_last_error()[0] == '\0') abort(); // a failure must say why and return nothing
        return 0;
    }
    walk(g, data, size);
    char *cfg = NULL, *gen = NULL, *tj = NULL, *tc = NULL;
    if (pq_gguf_config_json(g, &cfg, &gen) == PQ_OK) {
        pq_config c;
        if (pq_config_parse(cfg, strlen(cfg), "fuzz.gguf", &c) == PQ_OK) sink ^= (uint8_t)c.hidden;
    }
    if (pq_gguf_tokenizer_json(g, &tj, &tc) == PQ_OK) {
        pq_tokenizer *tok = NULL;
        if (pq_tok_load_json(tj, strlen(tj), tc, strlen(tc), "fuzz.gguf", &tok) == PQ_OK) {
            static const char text[] = "Hello world 123 ab the <|endoftext|>";
            int32_t *ids = NULL;
            size_t n = 0;
            if (pq_tok_encode(tok, text, sizeof text - 1, 1, &ids, &n) == PQ_OK) sink ^= (uint8_t)n;
            free(ids);
        }
        pq_tok_free(tok);
    }
    free(cfg), free(gen), free(tj), free(tc);
    pq_gguf_hf *hf = NULL;
    if (pq_gguf_hf_from(g, &hf) == PQ_OK) { // hf owns g now (or closed it)
        const pq_st *st = pq_gguf_hf_st(hf);
        for (int i = 0; i < pq_st_count(st); i++) {
            const pq_tensor *t = pq_st_at(st, i);
            if (t->nbytes != (size_t)t->numel * pq_dtype_size(t->dtype)) abort();
            if (t->nbytes) sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->nbytes - 1];
        }
        pq_gguf_hf_free(hf);
    }
    return 0;
}
