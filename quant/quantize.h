// quant/quantize.h — the quantize stage as two library calls:
//   pq_quantize   an FP16 / BF16 / F32 Hugging Face checkpoint in, a
//                 compressed-tensors checkpoint (formats/packed.h) out
//   pq_calibrate  a smoothing method's search (awq, smoothquant, fp8) run
//                 exactly as pq_quantize runs it, its result written to a
//                 scales file (quant/scales.h) instead of a checkpoint;
//                 pq_quantize with `scales` then applies it and writes the
//                 same model.safetensors as the inline run.
// Both are one loop (quant/run.c) over one table of methods (quant/method.h:
// rtn, gptq, awq, awq+gptq, smoothquant, fp8).
//
// Streaming: the source is mmap'd and one decoder block at a time is widened
// to f32, quantized and written through the streaming safetensors writer.
// Every decoder-layer linear (q/k/v/o, gate/up/down) is quantized;
// embeddings, norms, biases and (unless quantize_head) lm_head are copied
// unchanged in the source dtype, except the norms and biases a smoothing
// method folds its scales into.
//
// OUT is built in a temporary sibling directory and renamed into place
// (formats/outdir.h): config.json (the source's plus a quantization_config),
// model.safetensors (+ model.safetensors.zst with zstd_level > 0), the
// tokenizer files copied, pq.json with the provenance (pq version, method,
// scheme, source path and SHA-256, per-linear squared relative error
// ||W - W'||^2 / ||W||^2, measured bits per weight; calibrated methods also
// the calibration text's SHA-256, windows, seed, the method's parameters and
// per-linear output error ||WX - W'X||^2 / ||WX||^2 on the calibration
// inputs) and pq-run.json with what varies from run to run (seconds,
// threads, the memory estimate and measured peak). The safetensors
// __metadata__ carries "format": "pt" (which transformers requires) and the
// provenance known before the data is written. Every file but pq-run.json
// is byte-identical for the same inputs, flags and paths on the same
// machine and backend, for any thread count.
//
// Calibrated runs stream block by block through the calibration driver
// (calib/driver.h) and are resumable: OUT's temporary directory holds a
// journal (quant/journal.h) updated after every block once the block's
// tensors are fsync'd; a run killed at any point leaves that directory
// behind, and the same command with resume continues it to files
// byte-identical to an uninterrupted run. Without resume such a leftover is
// refused (force discards it); a resume whose inputs (the weights,
// config.json, the tokenizer files, the calibration text) or flags differ is
// refused. A runtime error once the journal exists keeps the directory for
// --resume and says so; errors before that leave nothing.
#ifndef PQ_QUANTIZE_H
#define PQ_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

#include "calib/data.h"
#include "common/status.h"
#include "kernels/cuda_host.h"
#include "quant/smooth.h"

// The parameters only some methods take. A request records which of them its
// caller set (`given`: the CLI sets a bit for every flag it saw); one the
// chosen method does not take is PQ_ERR_ARG naming the flag and the method.
#define PQ_ARG_CALIB (1u << 0)           // --calib
#define PQ_ARG_NSAMPLES (1u << 1)        // --nsamples
#define PQ_ARG_SEQLEN (1u << 2)          // --seqlen
#define PQ_ARG_SEED (1u << 3)            // --seed
#define PQ_ARG_CALIB_MODE (1u << 4)      // --calib-mode
#define PQ_ARG_RESUME (1u << 5)          // --resume
#define PQ_ARG_DEVICE (1u << 6)          // --device
#define PQ_ARG_DAMP (1u << 7)            // --damp
#define PQ_ARG_BLOCK_SIZE (1u << 8)      // --block-size
#define PQ_ARG_ACT_ORDER (1u << 9)       // --act-order
#define PQ_ARG_STATIC_GROUPS (1u << 10)  // --static-groups
#define PQ_ARG_TRUE_SEQUENTIAL (1u << 11) // --true-sequential
#define PQ_ARG_ALPHA (1u << 12)          // --alpha
#define PQ_ARG_AWQ_GRID (1u << 13)       // --awq-grid
#define PQ_ARG_AWQ_CLIP_GRID (1u << 14)  // --awq-clip-grid
#define PQ_ARG_SEARCH_TOKENS (1u << 15)  // --search-tokens
#define PQ_ARG_IMATRIX (1u << 16)        // --imatrix
#define PQ_ARG_CALIB_PRECISION (1u << 17) // --calib-precision
#define PQ_ARG_CALIBRATION (PQ_ARG_CALIB | PQ_ARG_NSAMPLES | PQ_ARG_SEQLEN | PQ_ARG_SEED | PQ_ARG_CALIB_MODE | \
                            PQ_ARG_CALIB_PRECISION)

// The names pq.json, the journal and --json give the two error figures,
// both squared ratios:
#define PQ_JSON_REL_ERR "rel_sq_error"        // ||W - W'||^2 / ||W||^2 of a linear's weight
#define PQ_JSON_OUT_ERR "output_rel_sq_error" // ||WX - W'X||^2 / ||WX||^2 on the calibration inputs

// The scheme asked for (formats/scheme.h builds it).
typedef struct {
    const char *name;   // "w4a16", "w8a16", "w8a8", "fp8", "fp8-dynamic", "fp8-static", "gguf-q4_k", ...;
                        // NULL: the method's
    int group;          // PQ_GROUP_DEFAULT, PQ_GROUP_CHANNEL or 32 / 64 / 128
    int sym;            // PQ_SYM_DEFAULT, 1 or 0
    int bits;           // 0: the scheme's; 2..8 for the weight-only integer schemes (w4a16, w8a16)
    int fp8_tensor;     // fp8 schemes: one scale per tensor instead of per channel
    int act_static;     // w8a8: static per-tensor activation scales (calibrated)
    int observer;       // pq_observer: how integer weight scales are chosen (minmax default)
    int gguf_fallback;  // GGUF schemes: llama.cpp's fallback type for rows that are not whole blocks
} pq_scheme_args;

// GPTQ's parameters (quant/gptq.h).
typedef struct {
    double damp;          // relative dampening of the Hessian (0.01), in [PQ_GPTQ_DAMP_MIN, PQ_GPTQ_DAMP_MAX]
    int block_size;       // lazy-batch columns (128), 1..65536
    int act_order;        // columns in descending order of the Hessian's diagonal
    int static_groups;    // group scales from the unmodified weights
    int true_sequential;  // q/k/v, o, gate/up, down in turn, each from the inputs of the quantized earlier ones
    int imatrix;          // GGUF K types: grids weighted by diag(X^T X), as llama.cpp's importance matrix
} pq_gptq_args;

typedef struct {
    const char *model;          // source checkpoint directory
    const char *out;            // pq_quantize: the output directory; pq_calibrate: the scales file
    const char *method;         // "rtn", "gptq", "awq", "awq+gptq", "smoothquant", "fp8"; NULL: rtn, or the
                                // scales file's
    const char *scales;         // pq_quantize: apply this pq_calibrate result instead of calibrating
    pq_scheme_args scheme;
    pq_calib_params calib;      // calibrated methods: the text, windows, seed
    pq_gptq_args gptq;
    pq_smooth_params smooth;    // awq, awq+gptq: grid, clip_grid, search_tokens; smoothquant: alpha, search_tokens
    int quantize_head;          // quantize lm_head too (models with an untied lm_head)
    const char *rotate;         // NULL or "none"; "hadamard": rotate the residual stream first (quant/rotate.h)
    uint64_t rotate_seed;       // the rotation's random signs
    double target_bpw;          // > 0: a scheme per group of linears from `menu` under this average (quant/mixed.h;
                                // rtn, gptq; needs the calibration text)
    const char *menu;           // NULL: PQ_MIX_DEFAULT_MENU
    int kl_windows;             // the calibration windows the sensitivity's KL is measured on (>= 1)
    int measure_all;            // measure the KL of every (unit, item) instead of predicting it (quant/sensitivity.h)
    const char *report;         // with target_bpw: also write this HTML report (or .svg: the plots only)
    int zstd_level;             // > 0: also write model.safetensors.zst at this level
    int force;                  // replace an existing OUT (only once the new one is complete)
    int resume;                 // continue an interrupted calibrated run into the same OUT
    int nthreads;               // 0 = all cores, else 1..PQ_MAX_THREADS
    pq_device device;           // calibrated methods: where X^T X and the block passes run (GPTQ)
    uint32_t given;             // PQ_ARG_* the caller set
} pq_quantize_request;

pq_quantize_request pq_quantize_default_request(void);

// "auto", "channel", "32" -> a group for pq_scheme_args.group: "auto" is
// PQ_GROUP_DEFAULT. Anything else is PQ_ERR_ARG.
pq_status pq_quantize_parse_group(const char *s, int *group);

// "auto" -> PQ_ALPHA_AUTO, a number in [0, 1] -> itself; anything else
// (not a number, outside [0, 1]) is PQ_ERR_ARG.
pq_status pq_quantize_parse_alpha(const char *s, double *alpha);

// One line describing the resolved configuration ("M -> OUT: rtn w4a16
// g128 sym (pack-quantized), ..."), or the error pq_quantize (calibrate 0)
// or pq_calibrate (calibrate 1) would fail with first: PQ_ERR_ARG naming
// what is wrong with the request (an unknown scheme or method, a
// combination the scheme does not allow, a parameter the method does not
// take, a value out of range, an existing output without force), or
// PQ_ERR_NO_DEVICE for device cuda without a GPU.
pq_status pq_quantize_describe(const pq_quantize_request *q, int calibrate, char *buf, size_t cap);

typedef struct {
    char method[32];              // the method run ("rtn", ..., or the --scales file's)
    char scheme[64];              // "w4a16 g128 sym"
    char format[32];              // "pack-quantized"
    int n_quantized;              // linears quantized
    int n_ragged;                 // of them, grouped with in_features not a multiple of the group
                                  // (a shorter last group: pq runs them; compressed-tensors'
                                  // decompression and vLLM's kernels require a multiple)
    int n_gguf_fallback;          // a GGUF scheme: linears in llama.cpp's fallback type (--fallback)
    long long n_weights;          // weights in them
    long long quant_bytes;        // bytes of their tensors in the output file
    double bits_per_weight;       // 8 * quant_bytes / n_weights, measured on the output
    double mean_rel_err, max_rel_err; // ||W - W'||^2 / ||W||^2 (a squared ratio)
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

typedef struct {
    char method[32];
    char scheme[64];                  // "w4a16 g128 sym"
    int blocks;
    double mean_out_err, max_out_err; // ||XW^T - Y||^2 / ||XW^T||^2 of the linears on the sampled tokens
    int calib_windows, calib_len;
    char source_sha256[65], calib_sha256[65];
    unsigned long long bytes;         // the scales file
    unsigned long long mem_estimate, peak_rss;
    double seconds;
} pq_calibrate_result;

// What the stage reports while it runs.
typedef struct {
    enum { PQ_QUANTIZE_NOTE, PQ_QUANTIZE_LAYER } kind;
    const char *note;       // NOTE: one line (memory estimate, an adjusted setting, raised dampening)
    int done, total;        // LAYER: decoder layers finished, in all
    double layer_rel_err;   // LAYER: mean ||W - W'||^2 / ||W||^2 of the layer's linears (pq_calibrate: -1)
    double layer_out_err;   // LAYER: mean ||WX - W'X||^2 / ||WX||^2 (calibrated methods), else -1
    int resumed;            // LAYER: finished by an earlier run (only re-run)
} pq_quantize_event;

typedef void (*pq_quantize_progress)(void *ud, const pq_quantize_event *e);

// Runs pq quantize. Errors: those of pq_quantize_describe first; an
// already-quantized or unsupported source, a NaN/Inf weight (the message
// names the tensor), I/O failures (a full disk, an unwritable OUT: the
// message names the file). On any error nothing is left at OUT (an existing OUT is
// untouched) and no temporary directory remains, except a calibrated run's
// once its journal exists (kept for --resume). A leftover of an interrupted
// run without resume, or with resume but other inputs or flags, is
// PQ_ERR_ARG; a too-short calibration text is PQ_ERR_FORMAT.
pq_status pq_quantize(const pq_quantize_request *q, pq_quantize_progress progress, void *ud,
                      pq_quantize_result *out);

// Runs pq calibrate: q->method must be awq, smoothquant or fp8 (scheme,
// group, sym, bits, act_static name the scheme searched for, which the file
// records and --scales checks); calib, smooth, nthreads, device as for
// pq_quantize. The file is written to a temporary name and renamed; an
// existing file is replaced only with force. progress gets NOTE events and one LAYER event per
// block. On error nothing is left at q->out.
pq_status pq_calibrate(const pq_quantize_request *q, pq_quantize_progress progress, void *ud,
                       pq_calibrate_result *out);

#endif
