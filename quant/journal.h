// quant/journal.h — the resume journal of a calibrated pq quantize run
// (internal to quant/).
//
// The journal, pq-journal.json in OUT's temporary directory (replaced
// atomically), records the number of finished blocks, the pq.json entries
// of their linears, the dampening raised so far, and a key: the SHA-256 of
// everything the output depends on. The run writes it after a block's
// tensors are in the temporary model.safetensors.tmp and fsync'd, so a
// block the journal counts is on disk; a block cut short is simply redone.
// To rebuild the input of the first unfinished block, the finished blocks
// are re-run from their quantized weights read back from the .tmp file: one
// forward pass per finished block, nothing on an uninterrupted run (storing
// the activations instead, N x L x hidden f32 per block, would cost a large
// write per block). The weights read back are the values the uninterrupted
// run computed with (scales are exact in their stored dtype), so the re-run
// reproduces its activations bit for bit and the resumed output is
// byte-identical.
//
// The key binds every input that shapes the result: a canonical line of
// the run's parameters (method, scheme, every flag, the calibration text's
// SHA-256 and windows, the weights' SHA-256, the device X^T X runs on, pq's
// version) and the bytes of the source's config.json and of every tokenizer
// or side file the output copies. A resume with any of them changed is
// refused.
//
// Format: {"pq_journal": 2, "inputs": KEY, "blocks_done": N,
// "damp_raised": D, "layers": [7 N entries]}; each entry an object with
// "name" (the linear's module), PQ_JSON_REL_ERR and optionally
// PQ_JSON_OUT_ERR (reals, quant/quantize.h) and the method's own fields.
#ifndef PQ_JOURNAL_H
#define PQ_JOURNAL_H

#include <jansson.h>
#include <stddef.h>

#include "common/status.h"

#define PQ_JOURNAL_NAME "pq-journal.json"

typedef struct {
    char key[65];      // the inputs key
    int blocks_done;
    int damp_raised;
    json_t *layers;    // the finished blocks' entries, 7 per block in slot order (owned)
} pq_journal;

// The inputs key of a run: SHA-256 over `line` and, for each of the n files
// (paths), its name and content's SHA-256 (an absent file hashes as such).
// A file that exists but cannot be read is PQ_ERR_IO naming it.
pq_status pq_journal_key(const char *line, const char *const *files, int n, char key[65]);

// Writes j to path atomically.
pq_status pq_journal_write(const char *path, const pq_journal *j);

// Parses a journal's text for a model of n_layers blocks: every field
// checked (types, ranges, 7 entries per block whose names are the block's
// linears in order); anything else is PQ_ERR_FORMAT naming `name`. On error
// out holds nothing; free with pq_journal_free.
pq_status pq_journal_parse(const char *text, size_t len, const char *name, int n_layers, pq_journal *out);

// Reads and parses path (pq_journal_parse).
pq_status pq_journal_read(const char *path, int n_layers, pq_journal *out);

void pq_journal_free(pq_journal *j); // NULL-safe; leaves it zeroed

// Test hooks for tests/cli (kill -9 at a chosen point): raises SIGKILL when
// the environment variable `var` (PQ_TEST_KILL_AFTER_BLOCK: block k's
// tensors written, not yet fsync'd nor journaled; PQ_TEST_KILL_AFTER_JOURNAL:
// block k journaled) equals `blocks`.
void pq_journal_test_kill(const char *var, int blocks);

#endif
