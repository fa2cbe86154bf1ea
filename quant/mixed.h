// quant/mixed.h — `--target-bpw B`: one scheme per group of linears chosen
// from a menu so that the predicted loss is least under an average
// bits-per-weight budget (the knapsack), and the plan the methods and the
// checkpoint then follow.
//
// The unit of choice is an input group of one block (calib/driver.h's
// PQ_INPUT_GROUPS: q/k/v, o, gate/up, down): vLLM fuses q/k/v into
// qkv_proj and gate/up into gate_up_proj and requires every shard of a
// fused layer to have the same scheme (and the same ignore status), so a
// plan that split them would not load there.
//
// Menu items (comma separated): "wB" (B-bit integer weights, 2..8, one
// scale per output channel), "wBgN" (groups of N = 32, 64, 128 columns),
// either followed by "a" for asymmetric (zero points), and "fp16": the
// linear stays unquantized in the model's dtype (listed in the checkpoint's
// "ignore"). Every integer item is a pack-quantized weight-only scheme
// (w4a16 / w8a16), so a mixed checkpoint has one format.
//
// Bits of a unit under an item: what its tensors take in the file (codes,
// scales in the model's dtype, packed zero points, weight_shape, and a
// g_idx of 4 bytes per column with act-order: pq_scheme_matrix_bytes), or
// the dense weight; the budget is B times the weights of every decoder
// linear, as pq.json's bits_per_weight measures it.
#ifndef PQ_MIXED_H
#define PQ_MIXED_H

#include <jansson.h>
#include <stddef.h>

#include "calib/driver.h"
#include "eval/model.h"
#include "formats/scheme.h"

#define PQ_MIX_MAX_MENU 16
#define PQ_MIX_DEFAULT_MENU "w4g128,w4g64,w4g32,w4g128a,w4g64a,w4g32a,w8,fp16"

typedef struct {
    char name[16];      // "w4g32a", "fp16"
    int dense;          // "fp16": not quantized
    pq_scheme scheme;   // the integer items'
} pq_mix_option;

// Parses a menu ("w4g128,w8,fp16"); PQ_ERR_ARG naming a bad item, a repeated
// one, or more than PQ_MIX_MAX_MENU.
pq_status pq_mix_menu_parse(const char *s, pq_mix_option *out, int *n);

// One unit (block l, input group g) of a plan or table.
typedef struct {
    int layer, group;
} pq_mix_unit;

// What the choice is made from: per unit and menu item, the predicted loss
// increase (the sensitivity measurement's, quant/sensitivity.h) and the
// bits it costs.
typedef struct {
    int n_units, n_opts;
    pq_mix_option opt[PQ_MIX_MAX_MENU];
    pq_mix_unit *unit;     // [n_units]
    long long *weights;    // [n_units] weights of the unit's linears
    double *bits;          // [n_units][n_opts]
    double *loss;          // [n_units][n_opts] predicted KL increase (0 for fp16)
    double *err;           // [n_units][n_opts] output error ||W X - W' X||^2 summed over the unit's linears
    double *kl;            // [n_units][n_opts] measured KL (NAN where not measured)
} pq_mix_table;

// A table for n_units units and n_opts items (arrays allocated; kl NAN,
// the rest 0; pq_mix_table_shape fills units, weights and bits). Free with
// pq_mix_table_free.
pq_status pq_mix_table_init(pq_mix_table *t, int n_units, const pq_mix_option *opt, int n_opts);
void pq_mix_table_free(pq_mix_table *t); // NULL-safe; leaves it zeroed

// The choice: choice[u] indexes t->opt, minimizing sum loss[u][choice[u]]
// under sum bits[u][choice[u]] <= target_bpw * sum weights[u]: a
// multiple-choice knapsack solved exactly by dynamic programming over the
// budget left above every unit's cheapest item, in PQ_MIX_STEPS steps, each
// item's bits above its unit's cheapest rounded up to a step (so the result
// never exceeds the budget, and it is optimal for a budget smaller by at
// most one step per unit). Ties prefer fewer bits. PQ_ERR_ARG when even the
// cheapest item of every unit exceeds the budget (the message gives the
// least achievable bits per weight). *bpw, *loss: the plan's bits per
// weight and predicted loss.
#define PQ_MIX_STEPS 20000
pq_status pq_mix_choose(const pq_mix_table *t, double target_bpw, int *choice, double *bpw, double *loss);

// The units of model m (block l's input group g at l * PQ_NGROUPS + g), their
// weights and the bits of every item (scales in the model's dtype; with
// g_idx, 4 bytes per column more for grouped items: GPTQ's act-order).
void pq_mix_table_shape(pq_mix_table *t, const pq_model *m, int g_idx);

// The least bits per weight the menu allows (every unit on its cheapest item).
double pq_mix_least_bpw(const pq_mix_table *t);

// Bits per weight and predicted loss of the plan that puts every unit on
// item k (a "uniform" point of the report's Pareto plot).
void pq_mix_uniform(const pq_mix_table *t, int k, double *bpw, double *loss);

// The per-linear plan the run follows: [n_layers][PQ_NLINEAR] options.
typedef struct {
    int n_layers;
    const pq_mix_option **linear;  // borrowed from the table's menu
} pq_mix_plan;

// The plan of choice (every member of a unit gets the unit's item).
pq_status pq_mix_plan_make(const pq_mix_table *t, const int *choice, int n_layers, pq_mix_plan *out);
void pq_mix_plan_free(pq_mix_plan *p); // NULL-safe

// pq.json's "mixed" object: the menu, the table, the choice and totals (a new reference).
json_t *pq_mix_json(const pq_mix_table *t, const int *choice, double target_bpw, double bpw, double loss);

#endif
