// quant/method.h — the quantization methods as one table (internal to
// quant/): what each one takes, how it checks and describes its
// parameters, how it quantizes a decoder block, what it records in pq.json
// and which source tensors it rewrites.
//
// One entry per method, each in its own file (quant/method_rtn.c,
// method_gptq.c, method_awq.c, method_awq_gptq.c, method_smoothquant.c,
// method_fp8.c); the smoothing methods share their family's code
// (quant/smooth_method.h), and awq+gptq composes the algorithms of both
// (quant/smooth.h, quant/gptq.h). A
// method reaches only the algorithms below it (quant/rtn.h, gptq.h, smooth.h,
// scales.h, ...) and this header, never another method; quant/run.c is the
// one loop that drives any of them.
//
// A block is quantized in one of two ways:
//   uncalibrated  block(state, layer, out) quantizes block `layer` of the
//                 source (rtn; a smoothing method applying a --scales file)
//   calibrated    the method plugs into the calibration driver
//                 (calib/driver.h): hooks() fills its statistics, memory and
//                 quantize_group or quantize_block callback, which installs
//                 what the block's final pass runs; after that pass
//                 result(state, layer, out) hands the block over
// Either way the run writes the block's result (pq_block_out) to its output
// (the checkpoint, or for pq calibrate the scales file) and then calls
// done(state): until then what out points to stays valid.
#ifndef PQ_METHOD_H
#define PQ_METHOD_H

#include <jansson.h>
#include <stdio.h>

#include "calib/driver.h"
#include "eval/model.h"
#include "formats/qtensor.h"
#include "formats/scheme.h"
#include "quant/gptq.h"
#include "quant/mixed.h"
#include "quant/quantize.h"
#include "quant/scales.h"
#include "quant/smooth.h"

// What a method gets for a run (all borrowed for the run's length).
typedef struct {
    const pq_quantize_request *q;
    const pq_model *m;            // the source (dense linears)
    const pq_scheme *scheme;      // resolved (actorder set)
    pq_dtype dt;                  // the model's dtype: scales, folded norms and biases are stored in it
    const pq_calib_data *calib;   // calibrated runs: the windows; else NULL
    pq_scales_file *scales;       // a smoothing method applying a --scales file; else NULL
    pq_pool *pool;
    void (*note)(void *ud, const char *line); // a warning for the user (a raised dampening)
    void *note_ud;
    const pq_mix_plan *mix;       // --target-bpw: each linear's scheme (rtn, gptq); else NULL
    int bf16;                     // calibrated runs: the block passes multiply in BF16 (pq_resolved.bf16)
} pq_method_ctx;

// The scheme of block `layer`'s linear `slot`: the plan's (NULL: it stays
// unquantized, and the method hands over no tensor for it), else the run's.
static inline const pq_scheme *pq_method_scheme(const pq_method_ctx *c, int layer, pq_linear_slot slot) {
    if (!c->mix) return c->scheme;
    const pq_mix_option *o = c->mix->linear[(size_t)layer * PQ_NLINEAR + slot];
    return o->dense ? NULL : &o->scheme;
}

// One block's result.
typedef struct {
    const pq_qtensor *q[PQ_NLINEAR];  // the quantized linears, slot order (NULL: one a plan keeps unquantized)
    json_t *entry[PQ_NLINEAR];        // their pq.json entries: "name", PQ_JSON_REL_ERR (||W - W'||^2 / ||W||^2),
                                      // PQ_JSON_OUT_ERR when measured, the method's own fields; borrowed
    const float *folded[PQ_NGROUPS];  // the norm or bias group g's scale folded into (pq_fold_producer),
                                      // exact in the model dtype; NULL: unchanged
    const pq_block_scales *scales;    // the smoothing family: the block's calibration (what pq calibrate writes)
    int damp_raised;                  // input groups whose Hessian needed more dampening (GPTQ)
} pq_block_out;

// What pq.json's method object may report about the whole run.
typedef struct {
    const pq_calib_report *report;    // calibrated runs: the driver's report
    int damp_raised;                  // summed over every block, resumed ones included
} pq_method_summary;

typedef struct pq_method pq_method;
struct pq_method {
    const char *name;          // "gptq"
    const char *scheme;        // the default scheme
    const char *work;          // what the memory estimate calls its memory ("GPTQ", "awq search")
    uint32_t takes;            // PQ_ARG_* of its own parameters (beyond the calibration's)
    int kind;                  // the smoothing family: its pq_smooth_kind (PQ_SMOOTH_NONE otherwise)
    int smoothing;             // a smoothing method: pq calibrate writes its search, --scales applies it
    int folds;                 // its scales fold into norms and biases, which it rewrites
    int source_propagates;     // a resumed block's final pass runs the unquantized block (AWQ), not
                               // its quantized linears (and folded vectors) read back
    int auto_f32;              // --calib-precision auto keeps f32 for it (BF16 products cost it accuracy)
    // Whether a run with scheme s calibrates (runs the driver).
    int (*calibrates)(const pq_scheme *s);
    // Checks the request's parameters of this method against scheme s (and
    // may complete s: GPTQ's act-order); PQ_ERR_ARG naming the flag.
    pq_status (*check)(const pq_method *self, const pq_quantize_request *q, pq_scheme *s, int calibrated);
    // ", damp 0.01, block 128" / "" into buf: the parameters, for the first line.
    void (*describe)(const pq_method *self, const pq_quantize_request *q, char *buf, size_t cap);
    // A run's state; on error nothing is left.
    pq_status (*create)(const pq_method *self, const pq_method_ctx *c, void **state);
    // Calibrated: the driver callbacks (stats, work_bytes, quantize_group or quantize_block, ud).
    pq_status (*hooks)(void *state, pq_calib_method *drv);
    // Uncalibrated: quantizes block `layer`.
    pq_status (*block)(void *state, int layer, pq_block_out *out);
    // Calibrated: block `layer`'s result, after its final pass.
    pq_status (*result)(void *state, int layer, pq_block_out *out);
    // The block's result is written: release what out pointed to. NULL: nothing to release.
    void (*done)(void *state);
    // pq.json's object named after the method (a new reference), or NULL.
    json_t *(*provenance)(void *state, const pq_method_summary *s);
    void (*free)(void *state); // NULL-safe
};

extern const pq_method PQ_METHOD_RTN, PQ_METHOD_GPTQ, PQ_METHOD_AWQ, PQ_METHOD_AWQ_GPTQ, PQ_METHOD_SMOOTHQUANT,
    PQ_METHOD_FP8;

// "model.layers.L.<slot>" into buf.
static inline void pq_method_module(char *buf, size_t cap, int layer, pq_linear_slot slot) {
    snprintf(buf, cap, "model.layers.%d.%s", layer, pq_linear_slot_name(slot));
}

// The GPTQ parameters of a run (gptq, awq+gptq): the scheme's grid and the
// request's --damp, --block-size, --act-order, --static-groups.
static inline pq_gptq_params pq_method_gptq_params(const pq_method_ctx *c) {
    const pq_gptq_args *a = &c->q->gptq;
    return (pq_gptq_params){.bits = c->scheme->bits, .group = c->scheme->group, .sym = c->scheme->sym,
                            .damp = a->damp, .block_size = a->block_size, .act_order = a->act_order,
                            .static_groups = a->static_groups, .observer = c->scheme->observer};
}

// After preparing the Hessian of input `name` with dampening `damp`: when
// it needed more (h->retries), counts it in *raised and tells the user.
static inline void pq_method_note_damp(const pq_method_ctx *c, const char *name, double damp, const pq_gptq_hessian *h,
                                       int *raised) {
    if (!h->retries) return;
    char line[512];
    (*raised)++;
    snprintf(line, sizeof line, "warning: %s: the Hessian is not positive definite with damp %g; raised to %g", name,
             damp, h->damp);
    if (c->note) c->note(c->note_ud, line);
}

#endif
