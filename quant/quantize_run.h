// quant/quantize_run.h — internal to the `pq quantize` stage: the state of
// one run, shared by quant/quantize.c (the stage, RTN),
// quant/quantize_gptq.c (calibrated methods: GPTQ through the calibration
// driver, the resume journal) and quant/quantize_smooth.c (AWQ,
// SmoothQuant, static activation scales: inline or from --scales). Not a
// public interface.
#ifndef PQ_QUANTIZE_RUN_H
#define PQ_QUANTIZE_RUN_H

#include <jansson.h>

#include "calib/data.h"
#include "calib/driver.h"
#include "common/threads.h"
#include "eval/model.h"
#include "formats/outdir.h"
#include "formats/safetensors.h"
#include "quant/gptq.h"
#include "quant/quantize.h"
#include "quant/scales.h"
#include "formats/scheme.h"
#include "quant/smooth.h"

// The method and scheme parameters ask for, and how the run goes
// (quant/quantize.c; pq_calibrate uses it too).
typedef struct {
    pq_scheme scheme;
    const char *method;       // a static string
    int calibrated;           // through the calibration driver
    int smooth;               // awq, smoothquant, fp8, or static activation scales (quant/smooth.h)
    pq_smooth_kind kind;
} pq_qrun_resolved;

// Validates p (the checks pq_quantize makes first); PQ_ERR_ARG naming what
// is wrong.
pq_status pq_qrun_resolve(const pq_quantize_params *p, pq_qrun_resolved *o);

typedef struct {
    const pq_quantize_params *p;
    pq_scheme scheme;
    const char *method;       // resolved: p->method, or the --scales file's, or "rtn"
    int calibrated;           // the method runs through the calibration driver
    int smooth;               // quantize_smooth.c writes the blocks (inline or from --scales)
    pq_smooth_params sp;      // its parameters (kind from the method)
    pq_scales_file *scales;   // --scales
    pq_model *m;
    pq_pool *pool;
    pq_outdir dir;
    pq_st_writer *w;
    float *buf;               // one widened weight matrix
    json_t *layers;           // pq.json "layers": one entry per quantized linear, in order
    double err_sum, err_max, out_sum, out_max;
    int n_quantized, n_ragged, n_out;
    char sha[65];
    double t_hash, t_quant;
    pq_quantize_progress progress;
    void *ud;
    // calibrated methods (quantize_gptq.c)
    pq_calib_data calib;
    pq_gptq_params gptq;
    char inputs[65];          // SHA-256 of everything the output depends on (the journal's key)
    int adopted;              // continuing an interrupted run's temporary directory
    int keep;                 // the temporary directory holds a journal: an error leaves it for --resume
    int started;              // the run is past its start (an error then says where the blocks stay)
    int blocks_done;          // finished blocks (from the journal when adopted)
    int lock_fd;              // flock on the temporary directory, -1 if none
    int n_damp_raised;
    pq_calib_report mem;
    pq_st *tmp_st;            // resume: model.safetensors.tmp read back
    pq_packed_info tmp_info;
} pq_quantize_run;

// Reports a NOTE event (printf-style) to the caller's progress callback.
void pq_qrun_note(pq_quantize_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Appends a linear's pq.json entry (stolen) and adds its errors to the
// totals: rel_error always, output_rel_error when the entry has it.
pq_status pq_qrun_record(pq_quantize_run *r, const pq_linear *L, json_t *entry);

// The compressed-tensors dtype its scales are stored in (the source's).
pq_dtype pq_qrun_scale_dtype(const pq_linear *L);

// ---- quant/quantize_gptq.c ------------------------------------------------

// The calibration windows (the source's tokenizer) and the inputs hash.
pq_status pq_qrun_calib_prepare(pq_quantize_run *r);

// OUT's temporary directory for a calibrated run: a new one, or with resume
// the interrupted run's (its journal read back); locked either way.
pq_status pq_qrun_calib_outdir(pq_quantize_run *r);

// After the writer's header and the pass-through tensors: fsync, then the
// journal with the blocks done so far.
pq_status pq_qrun_calib_started(pq_quantize_run *r);

// Every decoder block through the calibration driver with GPTQ (or, for
// the smoothing methods, pq_qrun_smooth_blocks).
pq_status pq_qrun_calib_blocks(pq_quantize_run *r);

// Block `layer`'s tensors are written: fsync, then the journal counts it.
pq_status pq_qrun_block_journaled(pq_quantize_run *r, int layer);

// Resume: block `layer`'s quantized linears read back from the temporary
// model.safetensors.tmp into L (biases kept); their arrays in own.
pq_status pq_qrun_tmp_load(pq_quantize_run *r, int layer, pq_layer *L, pq_packed_owned own[PQ_NLINEAR]);

// Before OUT is committed: the journal and lock file leave the directory.
pq_status pq_qrun_calib_finish(pq_quantize_run *r);

// pq.json's "calibration", "gptq" and "memory" objects (new references).
json_t *pq_qrun_calib_provenance(const pq_quantize_run *r);

// On an error s of a run whose temporary directory holds a journal: keeps
// the directory (and the writer's temporary file) for --resume and says so
// in the message. Returns s.
pq_status pq_qrun_calib_failed(pq_quantize_run *r, pq_status s);

void pq_qrun_calib_free(pq_quantize_run *r);

// ---- quant/quantize_smooth.c -----------------------------------------------

// Whether tensor `name` of the source is rewritten by the smoothing method
// (a norm or bias a scale folds into), not copied.
int pq_qrun_smooth_rewrites(const pq_quantize_run *r, const char *name);

// Every decoder block calibrated inline through the driver (awq,
// smoothquant, fp8, static activation scales), or applied from --scales.
pq_status pq_qrun_smooth_blocks(pq_quantize_run *r);
pq_status pq_qrun_scales_blocks(pq_quantize_run *r);

// pq.json's object of the smoothing parameters (a new reference).
json_t *pq_qrun_smooth_provenance(const pq_quantize_run *r);

#endif
