// quant/mixed.c — the menu, the table, the knapsack and the plan (see mixed.h).
#include "quant/mixed.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sys.h"

// ---- the menu ---------------------------------------------------------------------

// One item "w4g32a" / "w8" / "fp16" of length n.
static pq_status parse_item(const char *s, size_t n, pq_mix_option *o) {
    memset(o, 0, sizeof *o);
    PQ_FAIL_IF(n == 0 || n >= sizeof o->name, PQ_ERR_ARG, "--menu: empty or too long item '%.*s'", (int)n, s);
    memcpy(o->name, s, n);
    if (!strcmp(o->name, "fp16")) return o->dense = 1, PQ_OK;
    const char *p = o->name;
    int bits = 0, group = PQ_GROUP_CHANNEL, sym = 1, k = 0;
    PQ_FAIL_IF(*p++ != 'w' || sscanf(p, "%d%n", &bits, &k) != 1 || bits < 2 || bits > 8, PQ_ERR_ARG,
               "--menu: '%s' is not fp16 or w<bits 2..8>[g<32|64|128>][a]", o->name);
    p += k;
    if (*p == 'g') {
        k = 0;
        PQ_FAIL_IF(sscanf(p + 1, "%d%n", &group, &k) != 1 || (group != 32 && group != 64 && group != 128), PQ_ERR_ARG,
                   "--menu: '%s': groups are g32, g64 or g128", o->name);
        p += 1 + k;
    }
    if (*p == 'a') sym = 0, p++;
    PQ_FAIL_IF(*p, PQ_ERR_ARG, "--menu: '%s' is not fp16 or w<bits 2..8>[g<32|64|128>][a]", o->name);
    PQ_TRY(pq_scheme_make("w4a16", group, sym, &o->scheme));
    o->scheme.bits = bits;
    if (bits == 8) o->scheme.id = PQ_SCHEME_W8A16; // what a reader classifies 8-bit pack-quantized weights as
    return PQ_OK;
}

pq_status pq_mix_menu_parse(const char *s, pq_mix_option *out, int *n) {
    *n = 0;
    while (1) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        PQ_FAIL_IF(*n >= PQ_MIX_MAX_MENU, PQ_ERR_ARG, "--menu: more than %d items", PQ_MIX_MAX_MENU);
        PQ_TRY(parse_item(s, len, &out[*n]));
        for (int i = 0; i < *n; i++)
            PQ_FAIL_IF(!strcmp(out[i].name, out[*n].name), PQ_ERR_ARG, "--menu: '%s' twice", out[i].name);
        (*n)++;
        if (!e) return PQ_OK;
        s = e + 1;
    }
}

// ---- the table -----------------------------------------------------------------------

pq_status pq_mix_table_init(pq_mix_table *t, int n_units, const pq_mix_option *opt, int n_opts) {
    memset(t, 0, sizeof *t);
    t->n_units = n_units, t->n_opts = n_opts;
    memcpy(t->opt, opt, (size_t)n_opts * sizeof *opt);
    size_t cells = (size_t)n_units * n_opts;
    t->unit = calloc((size_t)n_units, sizeof *t->unit);
    t->weights = calloc((size_t)n_units, sizeof *t->weights);
    t->bits = calloc(cells, sizeof *t->bits);
    t->loss = calloc(cells, sizeof *t->loss);
    t->err = calloc(cells, sizeof *t->err);
    t->kl = malloc(cells * sizeof *t->kl);
    if (!t->unit || !t->weights || !t->bits || !t->loss || !t->err || !t->kl) {
        pq_mix_table_free(t);
        return PQ_FAIL(PQ_ERR_NOMEM, "out of memory for a %d x %d sensitivity table", n_units, n_opts);
    }
    for (size_t i = 0; i < cells; i++) t->kl[i] = NAN;
    return PQ_OK;
}

void pq_mix_table_free(pq_mix_table *t) {
    if (!t) return;
    free(t->unit), free(t->weights), free(t->bits), free(t->loss), free(t->err), free(t->kl);
    memset(t, 0, sizeof *t);
}

static double total_weights(const pq_mix_table *t) {
    double w = 0;
    for (int u = 0; u < t->n_units; u++) w += (double)t->weights[u];
    return w;
}

void pq_mix_table_shape(pq_mix_table *t, const pq_model *m, int g_idx) {
    int K = t->n_opts;
    for (int u = 0; u < t->n_units; u++) {
        int l = u / PQ_NGROUPS, g = u % PQ_NGROUPS;
        const pq_input_group *grp = &PQ_INPUT_GROUPS[g];
        t->unit[u] = (pq_mix_unit){l, g};
        t->weights[u] = 0;
        for (int k = 0; k < K; k++) t->bits[(size_t)u * K + k] = 0;
        for (int i = 0; i < grp->n; i++) {
            const pq_linear *L = pq_model_linear(m, l, grp->members[i]);
            long long n = (long long)L->rows * L->cols, es = (long long)pq_dtype_size(pq_linear_dtype(L));
            t->weights[u] += n;
            for (int k = 0; k < K; k++) {
                const pq_mix_option *o = &t->opt[k];
                long long bytes = o->dense ? n * es
                                           : pq_scheme_matrix_bytes(&o->scheme, L->rows, L->cols, (int)es) +
                                                 (g_idx && o->scheme.group > 0 && o->scheme.group < L->cols
                                                      ? 4LL * L->cols : 0);
                t->bits[(size_t)u * K + k] += 8.0 * (double)bytes;
            }
        }
    }
}

double pq_mix_least_bpw(const pq_mix_table *t) {
    double least = 0;
    for (int u = 0; u < t->n_units; u++) {
        double m = INFINITY;
        for (int k = 0; k < t->n_opts; k++) m = fmin(m, t->bits[(size_t)u * t->n_opts + k]);
        least += m;
    }
    return least / total_weights(t);
}

void pq_mix_uniform(const pq_mix_table *t, int k, double *bpw, double *loss) {
    double b = 0, l = 0;
    for (int u = 0; u < t->n_units; u++) b += t->bits[(size_t)u * t->n_opts + k], l += t->loss[(size_t)u * t->n_opts + k];
    *bpw = b / total_weights(t);
    *loss = l;
}

// ---- the knapsack ----------------------------------------------------------------------

pq_status pq_mix_choose(const pq_mix_table *t, double target_bpw, int *choice, double *bpw, double *loss) {
    int U = t->n_units, K = t->n_opts, S = PQ_MIX_STEPS;
    double budget = target_bpw * total_weights(t), least = pq_mix_least_bpw(t) * total_weights(t);
    PQ_FAIL_IF(least > budget, PQ_ERR_ARG, "--target-bpw %g: the menu's cheapest items take %.4f bits per weight",
               target_bpw, least / total_weights(t));
    // the budget above every unit's cheapest item, in S steps; an item costs its bits above the cheapest,
    // rounded up (so the all-cheapest plan is always within it, and no plan found exceeds it)
    // best[s]: least loss of units 0..u-1 in at most s steps; pick[u][s]: unit u's item there
    double spare = budget - least, step = spare > 0 ? spare / S : 1;
    double *best = malloc((size_t)(S + 1) * sizeof *best), *next = malloc((size_t)(S + 1) * sizeof *next);
    unsigned char *pick = malloc((size_t)U * (S + 1));
    int *cost = malloc((size_t)U * K * sizeof *cost);
    if (!best || !next || !pick || !cost) {
        free(best), free(next), free(pick), free(cost);
        return PQ_FAIL(PQ_ERR_NOMEM, "out of memory for the knapsack");
    }
    for (int u = 0; u < U; u++) {
        double m = INFINITY;
        for (int k = 0; k < K; k++) m = fmin(m, t->bits[(size_t)u * K + k]);
        for (int k = 0; k < K; k++) {
            double extra = t->bits[(size_t)u * K + k] - m, c = extra > 0 ? ceil(extra / step - 1e-9) : 0;
            cost[u * K + k] = spare > 0 ? (c > S ? S + 1 : (int)c) : extra > 0 ? S + 1 : 0;
        }
    }
    for (int s = 0; s <= S; s++) best[s] = 0;
    for (int u = 0; u < U; u++) {
        for (int s = 0; s <= S; s++) {
            double b = INFINITY;
            int bk = 0;
            for (int k = 0; k < K; k++) {
                int c = cost[u * K + k];
                if (c > s || !isfinite(best[s - c])) continue;
                double v = best[s - c] + t->loss[(size_t)u * K + k];
                // ties: the cheaper item
                if (v < b || (v == b && t->bits[(size_t)u * K + k] < t->bits[(size_t)u * K + bk])) b = v, bk = k;
            }
            next[s] = b;
            pick[(size_t)u * (S + 1) + s] = (unsigned char)bk;
        }
        memcpy(best, next, (size_t)(S + 1) * sizeof *best);
    }
    int s = S; // best[S] is finite: the all-cheapest plan costs 0 steps
    double b = 0, l = 0;
    for (int u = U - 1; u >= 0; u--) {
        int k = pick[(size_t)u * (S + 1) + s];
        choice[u] = k;
        s -= cost[u * K + k];
        b += t->bits[(size_t)u * K + k], l += t->loss[(size_t)u * K + k];
    }
    free(best), free(next), free(pick), free(cost);
    *bpw = b / total_weights(t);
    *loss = l;
    return PQ_OK;
}

// ---- the plan ------------------------------------------------------------------------------

pq_status pq_mix_plan_make(const pq_mix_table *t, const int *choice, int n_layers, pq_mix_plan *out) {
    out->n_layers = n_layers;
    out->linear = calloc((size_t)n_layers * PQ_NLINEAR, sizeof *out->linear);
    PQ_FAIL_IF(!out->linear, PQ_ERR_NOMEM, "out of memory");
    for (int u = 0; u < t->n_units; u++) {
        const pq_input_group *g = &PQ_INPUT_GROUPS[t->unit[u].group];
        for (int k = 0; k < g->n; k++)
            out->linear[(size_t)t->unit[u].layer * PQ_NLINEAR + g->members[k]] = &t->opt[choice[u]];
    }
    for (int i = 0; i < n_layers * PQ_NLINEAR; i++)
        if (!out->linear[i]) {
            pq_mix_plan_free(out);
            return PQ_FAIL(PQ_ERR_ARG, "the plan leaves linear %d of layer %d without a scheme", i % PQ_NLINEAR,
                           i / PQ_NLINEAR);
        }
    return PQ_OK;
}

void pq_mix_plan_free(pq_mix_plan *p) {
    if (!p) return;
    free(p->linear);
    memset(p, 0, sizeof *p);
}

// ---- pq.json ----------------------------------------------------------------------------------

json_t *pq_mix_json(const pq_mix_table *t, const int *choice, double target_bpw, double bpw, double loss) {
    json_t *menu = json_array(), *units = json_array(), *uniform = json_array();
    int K = t->n_opts;
    for (int k = 0; menu && uniform && k < K; k++) {
        double b, l;
        pq_mix_uniform(t, k, &b, &l);
        json_array_append_new(menu, json_string(t->opt[k].name));
        json_array_append_new(uniform, json_pack("{s:s, s:f, s:f}", "item", t->opt[k].name, "bits_per_weight", b,
                                                 "predicted_kl", l));
    }
    for (int u = 0; units && u < t->n_units; u++) {
        json_t *bits = json_array(), *pred = json_array(), *err = json_array(), *kl = json_array();
        for (int k = 0; bits && pred && err && kl && k < K; k++) {
            size_t i = (size_t)u * K + k;
            json_array_append_new(bits, json_real(t->bits[i]));
            json_array_append_new(pred, json_real(t->loss[i]));
            json_array_append_new(err, json_real(t->err[i]));
            json_array_append_new(kl, isnan(t->kl[i]) ? json_null() : json_real(t->kl[i]));
        }
        json_array_append_new(units, json_pack("{s:i, s:s, s:I, s:s, s:o, s:o, s:o, s:o}", "layer", t->unit[u].layer,
                                               "group", PQ_INPUT_GROUPS[t->unit[u].group].name, "weights",
                                               (json_int_t)t->weights[u], "choice", t->opt[choice[u]].name, "bits",
                                               bits, "predicted_kl", pred, "output_sq_error", err, "measured_kl", kl));
    }
    return json_pack("{s:f, s:f, s:f, s:o, s:o, s:o}", "target_bits_per_weight", target_bpw,
                     "planned_bits_per_weight", bpw, "predicted_kl", loss, "menu", menu, "uniform", uniform, "units",
                     units);
}
