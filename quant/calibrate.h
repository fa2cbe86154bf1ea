// quant/calibrate.h — the `pq calibrate` stage as one library call: the
// search of a calibrated smoothing method (awq, smoothquant; fp8: static
// activation scales only; quant/smooth.h) run block by block through the
// calibration driver exactly as `pq quantize --method M` runs it, with the
// result written to a scales file (quant/scales.h) instead of a checkpoint.
// `pq quantize --scales FILE` then applies it and writes the same
// model.safetensors as the inline run.
//
// The parameters are pq_quantize_params (quant/quantize.h): out is the
// scales file; method must be awq, smoothquant or fp8; scheme, group, sym,
// bits, act_static name the scheme searched for (the file records it and
// --scales refuses another); calib, smooth, nthreads, device as for
// quantize. The file is written to a temporary name and renamed; an
// existing file is replaced only with force.
#ifndef PQ_CALIBRATE_H
#define PQ_CALIBRATE_H

#include "quant/quantize.h"

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

// Runs the stage; progress gets NOTE events and one LAYER event per block.
// Errors as pq_quantize's calibrated path: bad parameters (another method,
// --scales, an existing file without force) are PQ_ERR_ARG; a too-short
// text PQ_ERR_FORMAT; I/O failures name the file. On error nothing is left
// at out.
pq_status pq_calibrate(const pq_quantize_params *p, pq_quantize_progress progress, void *ud, pq_calibrate_result *out);

#endif
