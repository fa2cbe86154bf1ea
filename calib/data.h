// calib/data.h — calibration data: a text file cut into N windows of L
// tokens, the input of the calibration driver (calib/driver.h).
//
// The whole file is tokenized once, without special tokens, into one token
// stream (documents stay joined as the file has them, as the GPTQ
// reference does with its calibration sets). Each window is
//   [BOS] + stream[s .. s + L - 1)   when the tokenizer adds a BOS
//   stream[s .. s + L)               otherwise
// so that every calibration sequence starts the way the model sees text at
// inference (and the way `pq ppl --bos` scores it); the reference instead
// slices L tokens from the stream without a BOS, which is what a tokenizer
// without a BOS gives here.
//
// Window starts:
//   random  N starts drawn uniformly from [0, len(stream) - (L - bos)] with a
//           seeded generator (splitmix64; the same seed gives the same
//           windows on every machine); windows may overlap, as the
//           reference's do. Needs at least one window's worth of text.
//   concat  consecutive windows from the start of the stream: s = k (L - bos)
//           for k < N. A text too short for N windows gives fewer, with a
//           note (a warning for the caller to print).
// L is clamped to the model's max_position_embeddings (with a note). A text
// shorter than one window is an error (PQ_ERR_FORMAT naming the file and the
// counts); N or L below 1 (L below 2 with a BOS) is PQ_ERR_ARG.
#ifndef PQ_CALIB_DATA_H
#define PQ_CALIB_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "formats/tokenizer/tokenizer.h"

typedef enum { PQ_CALIB_RANDOM, PQ_CALIB_CONCAT } pq_calib_mode;

// The products of the CPU block passes (--calib-precision): auto is bf16 on
// a CPU with AMX tiles (where BF16 products run ~2.7x faster than f32's
// FMA), f32 elsewhere (without tiles BF16 dot products are no faster) and
// for a method that keeps f32 (quant/request.c resolves it: pq_resolved.bf16).
typedef enum { PQ_CALIB_PRECISION_AUTO, PQ_CALIB_PRECISION_F32, PQ_CALIB_PRECISION_BF16 } pq_calib_precision;

typedef struct {
    const char *path;     // the calibration text
    int nsamples;         // N windows (128)
    int seqlen;           // L tokens per window (2048)
    uint64_t seed;        // (0)
    pq_calib_mode mode;   // (PQ_CALIB_RANDOM)
    pq_calib_precision precision; // (PQ_CALIB_PRECISION_AUTO)
} pq_calib_params;

pq_calib_params pq_calib_default_params(void);

typedef struct {
    int n, len;             // windows and tokens per window, as used
    int32_t *tokens;        // [n][len] (owned)
    size_t stream_tokens;   // tokens in the text
    char sha256[65];        // SHA-256 of the file's bytes
    char note[320];         // what was adjusted (clamped L, fewer windows), "" if nothing
} pq_calib_data;

// Reads, hashes and tokenizes p->path and cuts the windows. On error *out
// holds nothing.
pq_status pq_calib_load(const pq_calib_params *p, const pq_tokenizer *tok, int max_pos, pq_calib_data *out);

// The windows of an already tokenized stream (bos < 0: none); what
// pq_calib_load does after tokenizing (out->sha256 is left empty). `name`
// prefixes messages.
pq_status pq_calib_windows(const int32_t *stream, size_t n, int bos, const pq_calib_params *p, int max_pos,
                           const char *name, pq_calib_data *out);

void pq_calib_data_free(pq_calib_data *d); // NULL-safe

// "N x L tokens, seed S, mode" (+ ", bf16 products"): the provenance line of
// a calibration.
void pq_calib_describe(int n, int len, uint64_t seed, pq_calib_mode mode, int bf16, char *buf, size_t cap);

// "random" / "concat"; PQ_ERR_ARG for anything else.
pq_status pq_calib_parse_mode(const char *s, pq_calib_mode *out);
const char *pq_calib_mode_name(pq_calib_mode m);

#endif
