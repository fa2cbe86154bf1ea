// quant/quantize.h — the `pq quantize` stage as one library call: an
// FP16 / BF16 / F32 Hugging Face checkpoint in, a compressed-tensors
// checkpoint (formats/packed.h) out.
//
// Streaming: the source is mmap'd and one linear at a time is widened to
// f32, quantized and written through the streaming safetensors writer, so
// memory is about one weight matrix in f32. Every decoder-layer linear
// (q/k/v/o, gate/up/down) is quantized; embeddings, norms, biases and (unless
// quantize_head) lm_head are copied unchanged in the source dtype.
//
// OUT is built in a temporary sibling directory and renamed into place
// (formats/outdir.h): it holds config.json (the source's plus a
// quantization_config), model.safetensors (+ model.safetensors.zst with
// zstd_level > 0), the tokenizer files copied, and pq.json with the
// provenance: pq version, method, scheme, source path and SHA-256 of the
// source safetensors files, per-linear relative error ||W - W'||^2 / ||W||^2,
// measured bits per weight, timings. The safetensors __metadata__ carries
// "format": "pt" (which transformers requires) and the provenance known
// before the data is written (method, scheme, source hash, pq version).
//
// AWQ, SmoothQuant and the static activation schemes (quant/smooth.h,
// quant/quantize_smooth.c) are calibrated methods too: per block they fold
// per-channel scales into the norms / linears producing each group's input
// (rewriting those norms in OUT), clip (AWQ), calibrate static activation
// scales (M.input_scale) and quantize with RTN. With `scales` they apply a
// `pq calibrate` result instead (quant/scales.h: refused if it was made for
// another model or scheme) without calibration data, block by block, and
// write the same model.safetensors as the inline run.
//
// GPTQ (quant/quantize_gptq.c) streams block by block
// through the calibration driver (calib/driver.h) instead: the source's
// tokenizer cuts the calibration text into windows (calib/data.h), each
// block's linears are quantized from the Hessian of their inputs, and pq.json
// also records the calibration (text SHA-256, windows, seed), the GPTQ
// parameters, each linear's output error ||WX - W'X||^2 / ||WX||^2 on the
// calibration inputs and the dampening it needed, and the memory estimate
// and measured peak. They are resumable: OUT's temporary directory holds a
// journal (pq-journal.json) updated after every block once the block's
// tensors are fsync'd; a run killed at any point leaves that directory
// behind, and the same command with resume set continues it (re-running the
// finished blocks from their quantized weights in the temporary file to
// regenerate the next block's input) and writes files byte-identical to an
// uninterrupted run (pq.json's "seconds", "memory" and "threads" aside).
// Without resume, such a leftover is refused (force discards it); a resume
// whose inputs or flags differ is refused. A runtime error once the journal
// exists (a full disk, a NaN weight) also keeps the directory for --resume
// and says so; errors before that leave nothing, as for every method.
#ifndef PQ_QUANTIZE_H
#define PQ_QUANTIZE_H

#include <stddef.h>

#include "calib/data.h"
#include "common/status.h"
#include "eval/engine.h"
#include "quant/smooth.h"

typedef struct {
    const char *model;       // source checkpoint directory
    const char *out;         // output directory
    const char *scheme;      // "w4a16", "w8a16", "w8a8", "fp8", "fp8-dynamic", "fp8-static"; NULL: the
                             // method's (w4a16; smoothquant: w8a8; fp8: fp8-static)
    const char *method;      // "rtn", "gptq", "awq", "smoothquant", "fp8" (static activation scales,
                             // no smoothing); NULL: rtn, or the scales file's
    int act_static;          // static per-tensor activation scales for w8a8 (calibrated)
    const char *scales;      // apply this `pq calibrate` result (awq, smoothquant, fp8) instead of calibrating
    pq_smooth_params smooth; // awq / smoothquant: alpha, grids, search tokens (kind: from the method)
    int group;               // PQ_GROUP_DEFAULT, PQ_GROUP_CHANNEL or 32 / 64 / 128
    int sym;                 // PQ_SYM_DEFAULT, 1 or 0
    int fp8_tensor;          // fp8 schemes: one scale per tensor instead of per channel
    int quantize_head;       // quantize lm_head too (models with an untied lm_head)
    int zstd_level;          // > 0: also write model.safetensors.zst at this level
    int force;               // replace an existing OUT (only once the new one is complete)
    int nthreads;            // 0 = all cores
    int bits;                // 0: the scheme's; 2..8 for the weight-only integer schemes (w4a16, w8a16)
    // calibrated methods (gptq)
    pq_calib_params calib;   // calibration text, windows, seed (calib.path is required)
    double damp;             // relative dampening of the Hessian (0.01)
    int block_size;          // GPTQ lazy-batch columns (128)
    int act_order;           // columns in descending order of the Hessian's diagonal
    int static_groups;       // group scales from the unmodified weights
    int true_sequential;     // quantize q/k/v, o, gate/up, down in turn, each from inputs of the quantized ones
    int resume;              // continue an interrupted run into the same OUT
    pq_device device;        // where X^T X is accumulated (AUTO: the GPU when present)
} pq_quantize_params;

pq_quantize_params pq_quantize_default_params(void);

// "auto", "channel", "32" -> a group for pq_quantize_params.group: "auto"
// is PQ_GROUP_DEFAULT. Anything else is PQ_ERR_ARG.
pq_status pq_quantize_parse_group(const char *s, int *group);

// "auto" -> PQ_ALPHA_AUTO, a number in [0, 1] -> itself; anything else
// (not a number, outside [0, 1]) is PQ_ERR_ARG.
pq_status pq_quantize_parse_alpha(const char *s, double *alpha);

// One line describing the resolved configuration ("model M -> OUT: rtn
// w4a16 g128 sym (pack-quantized), ..."), or PQ_ERR_ARG naming what is
// wrong with the parameters (unknown scheme or method, a combination the
// scheme does not allow); the same checks pq_quantize makes first.
pq_status pq_quantize_describe(const pq_quantize_params *p, char *buf, size_t cap);

typedef struct {
    char method[32];              // the method run ("rtn", ..., or the --scales file's)
    char scheme[64];              // "w4a16 g128 sym"
    char format[32];              // "pack-quantized"
    int n_quantized;              // linears quantized
    int n_ragged;                 // of them, grouped with in_features not a multiple of the group
                                  // (a shorter last group: pq runs them; compressed-tensors'
                                  // decompression and vLLM's kernels require a multiple)
    long long n_weights;          // weights in them
    long long quant_bytes;        // bytes of their tensors in the output file
    double bits_per_weight;       // 8 * quant_bytes / n_weights, measured on the output
    double mean_rel_err, max_rel_err;
    unsigned long long out_bytes; // model.safetensors
    unsigned long long zst_bytes; // model.safetensors.zst (0 without zstd)
    double seconds;
    char source_sha256[65];
    // calibrated methods
    int calibrated;
    double mean_out_err, max_out_err; // ||WX - W'X||^2 / ||WX||^2 on the calibration inputs
    int calib_windows, calib_len;
    int resumed_blocks;               // blocks an interrupted run had finished
    int n_damp_raised;                // input groups whose Hessian needed more dampening
    unsigned long long mem_estimate, peak_rss; // bytes
} pq_quantize_result;

// What the stage reports while it runs.
typedef struct {
    enum { PQ_QUANTIZE_NOTE, PQ_QUANTIZE_LAYER } kind;
    const char *note;       // NOTE: one line (memory estimate, an adjusted setting, raised dampening)
    int done, total;        // LAYER: decoder layers finished, in all
    double layer_rel_err;   // LAYER: mean ||W - W'||^2 / ||W||^2 of the layer's linears
    double layer_out_err;   // LAYER: mean ||WX - W'X||^2 / ||WX||^2 (calibrated methods), else -1
    int resumed;            // LAYER: finished by an earlier run (only re-run)
} pq_quantize_event;

typedef void (*pq_quantize_progress)(void *ud, const pq_quantize_event *e);

// Runs the stage. Bad parameters and an existing OUT without force are
// PQ_ERR_ARG; an already-quantized or unsupported source, a NaN/Inf weight
// (the message names the tensor) and I/O failures (a full disk, an
// unwritable OUT: the message names the file) are other errors. On any
// error nothing is left at OUT (an existing OUT is untouched) and no
// temporary directory remains, except a calibrated run's once its journal
// exists (kept for --resume; one found at the start is only removed with
// force). Calibrated
// methods: a leftover of an interrupted run without resume, or with resume
// but other inputs or flags, is PQ_ERR_ARG; a too-short calibration text is
// PQ_ERR_FORMAT; --device cuda without a GPU is PQ_ERR_NO_DEVICE.
pq_status pq_quantize(const pq_quantize_params *p, pq_quantize_progress progress, void *ud,
                      pq_quantize_result *out);

#endif
