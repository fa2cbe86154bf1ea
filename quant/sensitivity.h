// quant/sensitivity.h — what `--target-bpw` measures before it chooses
// (quant/mixed.h): for every unit (an input group of a block: q/k/v, o,
// gate/up, down) and every menu item, how much the model's next-token
// distribution moves when only that unit is quantized with that item.
//
// Two measurements, combined:
//   output error  one pass of the calibration driver (calib/driver.h) over
//                 the unquantized model gives each input's X^T X; every
//                 linear is quantized with every item by the run's method
//                 (GPTQ from that X^T X, or RTN) and its output error
//                 e = ||W X - W' X||^2 = tr(dW X^T X dW^T) summed over the
//                 unit's linears (exact, for all items at the cost of the
//                 quantizations);
//   KL            the first kl_windows calibration windows run through the
//                 model with only unit u quantized, from u's block on (the
//                 earlier blocks' outputs are the unquantized model's,
//                 kept), and the mean over tokens of KL(p_fp || p_q) of the
//                 next-token distributions is the unit's loss.
// The KL is measured for the cheapest item of each unit (the most bits
// lost: the largest and least noisy signal) and the other items are
// predicted by scaling it with their output error:
//   loss(u, k) = KL(u, cheapest) * e(u, k) / e(u, cheapest)
// The argument: to second order, KL(p || q) = 1/2 d^T F d for a small
// change d of the unit's outputs (F the Fisher information the rest of the
// network puts on them), and quantization noise of a unit is close to
// isotropic within it, so the expected KL grows linearly with ||d||^2 =
// e with a per-unit constant: one KL measurement per unit fixes that
// constant, the output errors carry the rest. With measure_all every
// (unit, item) is measured instead (units x items passes: fine for small
// models, and how tests/test_mixed.c checks the prediction). "fp16" items
// cost nothing: loss 0.
//
// Memory: the quantized linears of every item (about the source's linears
// x the sum of the items' bits / 16), the block inputs of the KL windows
// (layers x windows x len x hidden f32) and their reference log-probs
// (windows x len x vocab f32).
#ifndef PQ_SENSITIVITY_H
#define PQ_SENSITIVITY_H

#include "calib/data.h"
#include "eval/model.h"
#include "quant/gptq.h"
#include "quant/mixed.h"

typedef struct {
    pq_model *m;                  // the model to quantize (dense); its linears are swapped while measured
    const pq_calib_data *calib;   // the calibration windows
    int gptq;                     // items quantized by GPTQ from X^T X (else RTN)
    pq_gptq_params gp;            // GPTQ's settings (bits, group and sym are each item's)
    int kl_windows;               // windows (the first ones) whose KL is measured, >= 1
    int measure_all;              // measure every (unit, item), not only the cheapest item of each unit
    pq_pool *pool;
    pq_device device;             // where the driver pass runs (X^T X)
    void (*note)(void *ud, const char *line); // progress lines
    void *note_ud;
} pq_sens_params;

typedef struct pq_sens pq_sens;

// Measures t (made by pq_mix_table_init for the menu and shaped by
// pq_mix_table_shape): fills err, kl and loss. *out holds the quantized
// linears for pq_sens_eval. Errors: those of the driver and the
// quantizers (naming the linear), PQ_ERR_NOMEM.
pq_status pq_sens_run(const pq_sens_params *p, pq_mix_table *t, pq_sens **out);

// The mean KL and the perplexity on the KL windows of the model with every
// unit u quantized as item choice[u] (the quantizers of pq_sens_run, from
// the unquantized inputs' X^T X), or with choice NULL the unquantized
// model (kl 0). For the report's plot.
pq_status pq_sens_eval(pq_sens *s, const pq_mix_table *t, const int *choice, double *kl, double *ppl);

void pq_sens_free(pq_sens *s); // NULL-safe

#endif
