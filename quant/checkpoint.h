// quant/checkpoint.h — the compressed-tensors checkpoint a pq quantize run
// writes into OUT's temporary directory (internal to quant/), or for a GGUF
// scheme the one .gguf file (eval/gguf_out.h: the linears as the method
// hands over their ggml blocks, the folded norms, everything else from the
// source; its pq.* metadata holds the provenance known up front, and no
// pq.json or side files are written): the streaming
// model.safetensors (every source tensor declared up front: the quantized
// linears as their packed tensors, everything else as it is), the blocks'
// quantized linears and rewritten norms and biases as the methods hand them
// over, the tensors copied unchanged, config.json with its
// quantization_config, the tokenizer and side files, and pq.json with the
// totals of the per-linear entries.
#ifndef PQ_CHECKPOINT_H
#define PQ_CHECKPOINT_H

#include <jansson.h>

#include "quant/method.h"

typedef struct {
    const pq_quantize_request *q;
    const pq_model *m;             // the source (or its rotation, quant/rotate.h)
    const pq_model *disk;          // the model as read from disk, whose side files are copied (m when not rotated)
    const pq_scheme *scheme;       // every linear's, or with mix lm_head's
    const pq_mix_plan *mix;        // --target-bpw: each decoder linear's scheme or none (unquantized); else NULL
    const char *method;            // the method as reported
    int folds;                     // the method rewrites the norms and biases its scales fold into
    int bf16;                      // calibrated with BF16 products (recorded in __metadata__)
    const char *source_sha256;
    const pq_calib_data *calib;    // calibrated runs: recorded in __metadata__
    pq_scales_file *scales;        // --scales: its provenance recorded
} pq_ckpt_params;

typedef struct pq_ckpt pq_ckpt;

// The files copied from the source directory when present (the tokenizer's
// and other side files), and their number.
#define PQ_CKPT_NSIDE_FILES 10
extern const char *const PQ_CKPT_SIDE_FILES[PQ_CKPT_NSIDE_FILES];

// Starts model.safetensors in directory dir: metadata, every tensor
// declared, the header written (resume: the interrupted run's temporary
// file reused, whose header must be identical), then every tensor that is
// neither quantized nor rewritten copied (a NaN or Inf in one is
// PQ_ERR_NUMERIC naming it). Errors name the file; on error nothing is
// returned and the temporary file is removed (kept on resume).
pq_status pq_ckpt_begin(const pq_ckpt_params *p, const char *dir, int resume, pq_ckpt **out);

// fsyncs model.safetensors' temporary file (before a journal counts a block).
pq_status pq_ckpt_sync(pq_ckpt *c);

// Writes block `layer`'s quantized linears and the norms and biases its
// scales folded into (in the source's dtype), and records its entries.
pq_status pq_ckpt_put_block(pq_ckpt *c, int layer, const pq_block_out *b);

// Writes one more quantized linear (lm_head) and records its entry (borrowed).
pq_status pq_ckpt_put_linear(pq_ckpt *c, const char *module, const pq_linear *src, const pq_qtensor *q,
                             json_t *entry);

// Records the entries of block `layer` (an earlier run wrote its tensors;
// its journal holds them), as put_block does. entries: 7, borrowed.
pq_status pq_ckpt_record_block(pq_ckpt *c, int layer, json_t *const *entries);

// Block `layer`'s mean ||W - W'||^2 / ||W||^2 and output error over its
// recorded entries (*out -1 when they carry none).
void pq_ckpt_block_errors(const pq_ckpt *c, int layer, double *rel, double *out);

// Every entry recorded so far, in order (borrowed: pq.json's "layers").
json_t *pq_ckpt_entries(const pq_ckpt *c);

// What to free after a block read back by pq_ckpt_load_block has run.
typedef struct {
    pq_packed_owned lin[PQ_NLINEAR];
    float *vec[PQ_NGROUPS];
} pq_ckpt_loaded;
void pq_ckpt_loaded_free(pq_ckpt_loaded *own); // leaves it zeroed

// Resume: installs block `layer`'s quantized linears read back from the
// temporary file into L (biases kept) and, with folded, the norms and
// biases written for it. Errors name the temporary file.
pq_status pq_ckpt_load_block(pq_ckpt *c, int layer, int folded, pq_layer *L, pq_ckpt_loaded *own);

// Finishes model.safetensors (+ .zst with zstd_level), writes config.json
// and copies the side files; fills the totals and measured sizes of res.
pq_status pq_ckpt_commit(pq_ckpt *c, pq_quantize_result *res);

// Writes pq.json: the provenance, the totals and sizes of res, the entries
// and every member of extra (the calibration, the method's object, ...):
// what the inputs determine, so it is byte-identical across runs of the same
// inputs, flags and paths on one machine; and pq-run.json with `record`
// (seconds, threads, memory: what varies). record and extra are stolen.
pq_status pq_ckpt_provenance(pq_ckpt *c, const pq_quantize_result *res, json_t *record, json_t *extra);

// The temporary file of model.safetensors (for messages).
const char *pq_ckpt_tmp_path(const pq_ckpt *c);

// Frees c; keep: leave the temporary file for a later --resume.
void pq_ckpt_free(pq_ckpt *c, int keep); // NULL-safe

#endif
