// quant/report.h — the report of a `--target-bpw` run, for a person: an
// HTML page (or with a .svg path, the plots alone as one SVG image) drawn by
// pq itself, no scripts, fonts or styles from elsewhere, that any browser
// shows:
//   1. PPL against bits per weight on the KL windows for the unquantized
//      model (a dashed line), every uniform integer item of the menu (the
//      Pareto front of them joined) and the mixed plan, with the target;
//   2. the sensitivity: each unit's measured KL with its cheapest item, per
//      layer (log scale);
//   3. the choice: the item of every unit, layers by input groups, coloured
//      by its bits per weight;
//   4. (HTML) the numbers as a table.
#ifndef PQ_REPORT_H
#define PQ_REPORT_H

#include "quant/mixed.h"

// One measured plan (quant/sensitivity.h's pq_sens_eval).
typedef struct {
    char name[24];      // "unquantized", a menu item ("w4g32"), "mixed"
    double bpw, kl, ppl;
} pq_report_point;

typedef struct {
    const char *model, *method, *menu;
    const char *rotation;        // the rotation's description, or NULL
    double target_bpw;
    double plan_bpw, plan_loss;  // the plan's bits per weight and predicted KL
    double written_bpw;          // bits per weight measured on the written checkpoint
    int kl_windows, kl_len;      // the KL windows
    const pq_mix_table *t;
    const int *choice;           // [t->n_units]
    const pq_report_point *pts;  // the unquantized model first, then the items, the plan last
    int n_pts;
} pq_report_input;

// Writes the report to path (a temporary name renamed into place; .svg: the
// plots only). PQ_ERR_IO naming the file, PQ_ERR_NOMEM.
pq_status pq_report_write(const char *path, const pq_report_input *in);

#endif
