// libFuzzer target: calibration windowing (calib/data.c). The first 8 bytes
// choose the parameters (mode, a BOS or none, nsamples, seqlen, the model's
// max_position_embeddings, seed), the rest is the calibration text,
// tokenized with a fixed byte-fallback tokenizer (any UTF-8 encodes). Windows
// that come back must be n <= nsamples windows of len <= min(seqlen,
// max_pos) tokens, each [BOS] + a slice of the token stream (at k x (len -
// BOS) in concat mode); a refusal must say why and hold nothing.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "calib/data.h"
#include "formats/tokenizer/tokenizer.h"

static const char TOKENIZER[] =
    "{\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true},{\"id\":1,\"content\":\"<s>\",\"special\":true}],"
    "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"first\","
    "\"split\":true},\"decoder\":null,\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"byte_fallback\":true,"
    "\"vocab\":{\"<unk>\":0,\"<s>\":1,\"a\":2,\"b\":3,\"ab\":4,\"\\u2581\":5,\"\\u2581a\":6,"
    "\"<0x00>\":7,\"<0x01>\":8,\"<0x20>\":9,\"<0x41>\":10,\"<0x61>\":11,\"<0xC3>\":12,\"<0xA9>\":13,\"<0x0A>\":14},"
    "\"merges\":[\"a b\",\"\\u2581 a\"]}}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static pq_tokenizer *tok;
    if (!tok && pq_tok_load_json(TOKENIZER, sizeof TOKENIZER - 1, NULL, 0, "fuzz", &tok) != PQ_OK) abort();
    if (size < 8) return 0;
    pq_calib_params p = pq_calib_default_params();
    p.mode = data[0] & 1 ? PQ_CALIB_CONCAT : PQ_CALIB_RANDOM;
    int bos = data[0] & 2 ? 1 : -1;
    p.nsamples = (int)(data[1] % 40) - 1;                 // -1 .. 38
    p.seqlen = (int)((data[2] | data[3] << 8) % 300) - 1; // -1 .. 298
    int max_pos = (int)((data[4] | data[5] << 8) % 400);  // 0 .. 399
    p.seed = (uint64_t)data[6] << 8 | data[7];
    int32_t *ids = NULL;
    size_t n = 0;
    if (pq_tok_encode(tok, (const char *)data + 8, size - 8, 0, &ids, &n) != PQ_OK) return 0; // not UTF-8
    pq_calib_data d;
    if (pq_calib_windows(ids, n, bos, &p, max_pos, "fuzz.txt", &d) != PQ_OK) {
        if (d.tokens || d.n || pq_last_error()[0] == '\0') abort();
        free(ids);
        return 0;
    }
    int text = d.len - (bos >= 0);
    if (d.n < 1 || d.n > p.nsamples || d.len < 1 || d.len > p.seqlen || d.len > max_pos || text < 1 || (size_t)text > n)
        abort();
    for (int w = 0; w < d.n; w++) {
        const int32_t *win = d.tokens + (size_t)w * d.len;
        if (bos >= 0 && win[0] != bos) abort();
        if (p.mode == PQ_CALIB_CONCAT && memcmp(win + (bos >= 0), ids + (size_t)w * text, (size_t)text * 4)) abort();
        for (int i = 0; i < d.len; i++)
            if (win[i] < 0 || win[i] >= pq_tok_vocab_size(tok)) abort();
    }
    pq_calib_data_free(&d);
    free(ids);
    return 0;
}
