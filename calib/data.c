// calib/data.c — calibration text to token windows (see data.h).
#include "calib/data.h"

#include <stdlib.h>
#include <string.h>

#include "formats/fileio.h"
#include "formats/sha256.h"

#define MAX_TEXT_BYTES ((size_t)1 << 30)

pq_calib_params pq_calib_default_params(void) {
    return (pq_calib_params){.nsamples = 128, .seqlen = 2048, .seed = 0, .mode = PQ_CALIB_RANDOM};
}

pq_status pq_calib_parse_mode(const char *s, pq_calib_mode *out) {
    if (strcmp(s, "random") == 0) return *out = PQ_CALIB_RANDOM, PQ_OK;
    if (strcmp(s, "concat") == 0) return *out = PQ_CALIB_CONCAT, PQ_OK;
    return PQ_FAIL(PQ_ERR_ARG, "--calib-mode %s: expected random or concat", s);
}

const char *pq_calib_mode_name(pq_calib_mode m) { return m == PQ_CALIB_CONCAT ? "concat" : "random"; }

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Uniform in [0, n) without modulo bias.
static uint64_t uniform(uint64_t *s, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n, r;
    do r = splitmix64(s);
    while (r >= limit);
    return r % n;
}

static void add_note(pq_calib_data *d, const char *text) {
    size_t used = strlen(d->note);
    snprintf(d->note + used, sizeof d->note - used, "%s%s", used ? "; " : "", text);
}

pq_status pq_calib_windows(const int32_t *stream, size_t n, int bos, const pq_calib_params *p, int max_pos,
                           const char *name, pq_calib_data *out) {
    memset(out, 0, sizeof *out);
    PQ_FAIL_IF(p->nsamples < 1, PQ_ERR_ARG, "--nsamples %d: need at least one calibration window", p->nsamples);
    PQ_FAIL_IF(p->seqlen < (bos >= 0 ? 2 : 1), PQ_ERR_ARG, "--seqlen %d: a window needs %s", p->seqlen,
               bos >= 0 ? "a BOS and at least one text token" : "at least one token");
    char msg[160];
    int len = p->seqlen;
    if (len > max_pos) {
        snprintf(msg, sizeof msg, "--seqlen %d clamped to the model's max_position_embeddings %d", len, max_pos);
        add_note(out, msg);
        len = max_pos;
    }
    // a context of one position leaves no room for text after a BOS
    PQ_FAIL_IF(len < (bos >= 0 ? 2 : 1), PQ_ERR_FORMAT, "%s: max_position_embeddings %d leaves no room for a window "
               "of text after the BOS", name, max_pos);
    size_t text_len = (size_t)len - (bos >= 0), windows = (size_t)p->nsamples;
    PQ_FAIL_IF(n < text_len, PQ_ERR_FORMAT,
               "%s: %zu tokens of text, fewer than one calibration window of %zu (--seqlen %d%s); use a longer "
               "text or a smaller --seqlen", name, n, text_len, len, bos >= 0 ? " minus BOS" : "");
    if (p->mode == PQ_CALIB_CONCAT && n / text_len < windows) {
        snprintf(msg, sizeof msg, "the text holds %zu consecutive windows of %d tokens: using %zu, not --nsamples %d",
                 n / text_len, len, n / text_len, p->nsamples);
        add_note(out, msg);
        windows = n / text_len;
    }
    out->tokens = malloc(windows * (size_t)len * sizeof(int32_t));
    PQ_FAIL_IF(!out->tokens, PQ_ERR_NOMEM, "%s: out of memory for %zu windows of %d tokens", name, windows, len);
    uint64_t rng = p->seed;
    for (size_t w = 0; w < windows; w++) {
        size_t s = p->mode == PQ_CALIB_CONCAT ? w * text_len : (size_t)uniform(&rng, n - text_len + 1);
        int32_t *dst = out->tokens + w * (size_t)len;
        if (bos >= 0) *dst++ = bos;
        memcpy(dst, stream + s, text_len * sizeof(int32_t));
    }
    out->n = (int)windows;
    out->len = len;
    out->stream_tokens = n;
    return PQ_OK;
}

pq_status pq_calib_load(const pq_calib_params *p, const pq_tokenizer *tok, int max_pos, pq_calib_data *out) {
    memset(out, 0, sizeof *out);
    PQ_FAIL_IF(!p->path, PQ_ERR_ARG, "calibration needs a text file (--calib FILE)");
    char *text;
    size_t len, n_ids = 0;
    int32_t *ids = NULL;
    PQ_TRY(pq_text_read(p->path, MAX_TEXT_BYTES, &text, &len));
    pq_sha256 h;
    pq_sha256_init(&h);
    pq_sha256_update(&h, text, len);
    char sha[65];
    pq_sha256_hex(&h, sha);
    pq_status s = pq_tok_encode(tok, text, len, 0, &ids, &n_ids);
    free(text);
    if (s != PQ_OK) return pq_fail_context(s, "%s", p->path);
    s = pq_calib_windows(ids, n_ids, pq_tok_adds_bos(tok) ? pq_tok_bos(tok) : -1, p, max_pos, p->path, out);
    free(ids);
    if (s == PQ_OK) memcpy(out->sha256, sha, sizeof sha);
    return s;
}

void pq_calib_data_free(pq_calib_data *d) {
    if (!d) return;
    free(d->tokens);
    memset(d, 0, sizeof *d);
}

void pq_calib_describe(int n, int len, uint64_t seed, pq_calib_mode mode, int bf16, char *buf, size_t cap) {
    snprintf(buf, cap, "%d x %d tokens, seed %llu, %s%s", n, len, (unsigned long long)seed, pq_calib_mode_name(mode),
             bf16 ? ", bf16 products" : "");
}
