// quant/sensitivity.c — the sensitivity table of --target-bpw (see sensitivity.h).
#include "quant/sensitivity.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/driver.h"
#include "common/sys.h"
#include "eval/block_cpu.h"
#include "kernels/blas.h"
#include "kernels/ops.h"
#include "quant/rtn.h"

struct pq_sens {
    pq_sens_params p;
    const pq_config *c;
    int K;                   // menu items
    pq_mix_option opt[PQ_MIX_MAX_MENU];
    pq_qtensor *qt;          // [layers][PQ_NLINEAR][K] every linear quantized with every integer item
    int len, nw;             // tokens per window, KL windows
    float *X;                // [layers][nw][len][hidden] the unquantized block inputs of the KL windows
    float *logp;             // [nw][len][vocab] the unquantized model's log-probs
    double fp_nll;           // its summed NLL of the next tokens
    pq_block_scratch s;
    size_t lin_ws;
    float *x, *kc, *vc, *logits;
    double *inv_freq;
    // the driver pass
    pq_mix_table *t;
    float *w;                // one widened weight
    void *hws, *sws, *ews;   // GPTQ Hessian and solve, output error workspaces
};

static void note(const pq_sens *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const pq_sens *s, const char *fmt, ...) {
    if (!s->p.note) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    s->p.note(s->p.note_ud, line);
}

static pq_qtensor *qt_at(const pq_sens *s, int layer, int slot, int k) {
    return &s->qt[((size_t)layer * PQ_NLINEAR + slot) * s->K + k];
}

// ---- the driver pass: every linear with every item, its output error ------------

// The GPTQ parameters of item o.
static pq_gptq_params item_gptq(const pq_sens *s, const pq_mix_option *o) {
    pq_gptq_params gp = s->p.gp;
    gp.bits = o->scheme.bits, gp.group = o->scheme.group, gp.sym = o->scheme.sym;
    return gp;
}

// Linear `slot` of block `layer` (its weight widened in s->w) with item k
// into its qtensor; *err its output error.
static pq_status quantize_item(pq_sens *s, int layer, int slot, int k, const pq_linear *src, const pq_act_stats *st,
                               const pq_gptq_hessian *h, double *err) {
    const pq_mix_option *o = &s->opt[k];
    pq_dtype dt = pq_linear_dtype(src);
    *err = 0;
    if (o->dense) return PQ_OK;
    char name[300];
    snprintf(name, sizeof name, "model.layers.%d.%s (%s)", layer, pq_linear_slot_name((pq_linear_slot)slot), o->name);
    pq_qtensor *q = qt_at(s, layer, slot, k);
    PQ_TRY(pq_qtensor_init(q, &o->scheme, src->rows, src->cols, dt));
    pq_gptq_params gp = item_gptq(s, o);
    int gidx = s->p.gptq && pq_gptq_has_g_idx(&gp, src->cols);
    if (gidx) {
        q->g_idx = pq_alloc((size_t)src->cols * sizeof(int32_t));
        PQ_FAIL_IF(!q->g_idx, PQ_ERR_NOMEM, "%s: out of memory", name);
    }
    if (s->p.gptq) PQ_TRY(pq_gptq_solve(s->w, src->rows, h, &gp, name, s->sws, s->p.pool, q, NULL));
    else PQ_TRY(pq_rtn_quantize(s->w, &o->scheme, name, s->p.pool, q, NULL));
    pq_linear view = pq_qtensor_linear(q);
    double energy;
    pq_act_stats_output_sq(st, s->w, &view, s->ews, s->p.pool, err, &energy);
    return PQ_OK;
}

static pq_status sens_group(void *ud, int layer, int g, pq_layer *L, const pq_act_stats *st) {
    pq_sens *s = ud;
    pq_mix_table *t = s->t;
    const pq_input_group *grp = &PQ_INPUT_GROUPS[g];
    int u = layer * PQ_NGROUPS + g;
    pq_gptq_hessian h;
    if (s->p.gptq) {
        char name[128];
        snprintf(name, sizeof name, "model.layers.%d %s input", layer, grp->name);
        PQ_TRY(pq_gptq_prepare(st->xtx, st->cols, &s->p.gp, name, s->hws, s->p.pool, &h));
    }
    for (int i = 0; i < grp->n; i++) {
        int slot = grp->members[i];
        const pq_linear *src = &L->lin[slot];
        PQ_FAIL_IF(src->fmt != PQ_W_DENSE, PQ_ERR_FORMAT, "model.layers.%d.%s is not a dense weight", layer,
                   pq_linear_slot_name((pq_linear_slot)slot));
        pq_linear_rows(src, 0, src->rows, s->w);
        for (int k = 0; k < s->K; k++) {
            double e;
            PQ_TRY(quantize_item(s, layer, slot, k, src, st, &h, &e));
            t->err[(size_t)u * s->K + k] += e;
        }
    }
    return PQ_OK;
}

static pq_status sens_block_done(void *ud, int layer, int resumed) {
    pq_sens *s = ud;
    note(s, "sensitivity: layer %d/%d quantized with every item of the menu", layer + 1, s->c->n_layers);
    return PQ_OK;
}

// Workspaces of the driver pass: the largest linear and input group.
static pq_status pass_workspaces(pq_sens *s) {
    size_t hb = 0, sb = 0, eb = 0, wb = 0;
    int nt = pq_pool_size(s->p.pool);
    pq_gptq_params most = s->p.gp;
    most.block_size = 65536; // a batch of every column: the most any grouping asks for
    for (int g = 0; g < PQ_NGROUPS; g++) {
        size_t b = pq_gptq_hessian_bytes(pq_input_group_cols(s->c, g));
        hb = b > hb ? b : hb;
    }
    for (int k = 0; k < PQ_NLINEAR; k++) {
        const pq_linear *L = pq_model_linear(s->p.m, 0, (pq_linear_slot)k);
        size_t b = pq_gptq_solve_bytes(L->rows, L->cols, &most), e = pq_act_stats_error_bytes(L->rows, L->cols, nt),
               w = (size_t)L->rows * L->cols * sizeof(float);
        sb = b > sb ? b : sb, eb = e > eb ? e : eb, wb = w > wb ? w : wb;
    }
    s->w = pq_alloc(wb);
    s->ews = pq_alloc(eb);
    if (s->p.gptq) s->hws = pq_alloc(hb), s->sws = pq_alloc(sb);
    PQ_FAIL_IF(!s->w || !s->ews || (s->p.gptq && (!s->hws || !s->sws)), PQ_ERR_NOMEM,
               "out of memory for the sensitivity workspaces");
    return PQ_OK;
}

// ---- forward passes of the KL windows ---------------------------------------------------

// The block scratch, with a linear workspace for every item's linears.
static pq_status forward_setup(pq_sens *s) {
    const pq_config *c = s->c;
    int nt = pq_pool_size(s->p.pool);
    size_t kvd = (size_t)c->n_kv_heads * c->head_dim;
    PQ_TRY(pq_block_scratch_init(&s->s, c, s->len, s->len, nt, s->p.m->layers, c->n_layers, &s->p.m->lm_head));
    size_t need = 0;
    for (size_t i = 0; i < (size_t)c->n_layers * PQ_NLINEAR * s->K; i++) {
        if (!s->qt[i].rows) continue; // fp16 items
        pq_linear v = pq_qtensor_linear(&s->qt[i]);
        size_t b = pq_linear_workspace_bytes(&v, nt);
        need = b > need ? b : need;
    }
    for (int l = 0; l < c->n_layers; l++)
        for (int k = 0; k < PQ_NLINEAR; k++) {
            size_t b = pq_linear_workspace_bytes(&s->p.m->layers[l].lin[k], nt);
            need = b > need ? b : need;
        }
    size_t head = pq_linear_workspace_bytes(&s->p.m->lm_head, nt);
    need = head > need ? head : need;
    pq_free(s->s.lin_ws);
    s->s.lin_ws = pq_alloc(need ? need : 64);
    s->x = pq_alloc((size_t)s->len * c->hidden * sizeof(float));
    s->kc = pq_alloc((size_t)s->len * kvd * sizeof(float));
    s->vc = pq_alloc((size_t)s->len * kvd * sizeof(float));
    s->logits = pq_alloc((size_t)s->len * c->vocab * sizeof(float));
    s->X = pq_alloc((size_t)c->n_layers * s->nw * s->len * c->hidden * sizeof(float));
    s->logp = pq_alloc((size_t)s->nw * s->len * c->vocab * sizeof(float));
    s->inv_freq = malloc((size_t)(c->head_dim / 2) * sizeof(double));
    PQ_FAIL_IF(!s->s.lin_ws || !s->x || !s->kc || !s->vc || !s->logits || !s->X || !s->logp || !s->inv_freq,
               PQ_ERR_NOMEM, "out of memory for the KL windows (%d x %d tokens)", s->nw, s->len);
    pq_rope_params rp = {c->rope_theta, c->rope_llama3, c->rope_factor, c->rope_low_freq_factor,
                         c->rope_high_freq_factor, c->rope_orig_max_pos};
    pq_rope_inv_freq(&rp, c->head_dim, s->inv_freq);
    pq_block_rope_prepare(&s->s, s->inv_freq, c->head_dim, 0, s->len);
    return PQ_OK;
}

static float *x_at(const pq_sens *s, int layer, int w) {
    return s->X + ((size_t)layer * s->nw + w) * s->len * s->c->hidden;
}

// The head over window w's last hidden states x: with ref, its log-probs
// become the reference; else *kl += the KL from the reference summed over
// tokens. *nll += the NLL of the window's next tokens.
static void head(pq_sens *s, int w, float *x, int ref, double *kl, double *nll) {
    const pq_config *c = s->c;
    const pq_model *m = s->p.m;
    int V = c->vocab;
    pq_rmsnorm_cpu(x, m->final_norm, s->len, c->hidden, c->rms_eps, x);
    pq_linear_forward(&m->lm_head, x, s->len, s->logits, s->s.lin_ws, s->p.pool);
    const int32_t *tok = s->p.calib->tokens + (size_t)w * s->p.calib->len;
    for (int t = 0; t < s->len; t++) {
        float *z = s->logits + (size_t)t * V, *lp = s->logp + ((size_t)w * s->len + t) * V;
        double mx = -INFINITY, sum = 0;
        for (int v = 0; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        for (int v = 0; v < V; v++) sum += exp(z[v] - mx);
        double lse = mx + log(sum);
        if (t + 1 < s->len) *nll += lse - z[tok[t + 1]];
        if (ref) {
            for (int v = 0; v < V; v++) lp[v] = (float)(z[v] - lse);
            continue;
        }
        double d = 0;
        for (int v = 0; v < V; v++) {
            double p = exp((double)lp[v]);
            d += p * ((double)lp[v] - (z[v] - lse));
        }
        *kl += d;
    }
}

// The KL windows through blocks l0.. of `layers` (the block inputs of l0
// are the unquantized model's): mean KL per token and summed NLL; with ref
// the reference log-probs are written (and blocks' inputs kept in X).
static pq_status run_from(pq_sens *s, int l0, const pq_layer *layers, int ref, double *kl, double *nll) {
    const pq_config *c = s->c;
    size_t win = (size_t)s->len * c->hidden;
    *kl = 0, *nll = 0;
    for (int w = 0; w < s->nw; w++) {
        memcpy(s->x, x_at(s, l0, w), win * sizeof(float));
        for (int l = l0; l < c->n_layers; l++) {
            if (ref && l > l0) memcpy(x_at(s, l, w), s->x, win * sizeof(float));
            pq_block_forward_cpu(c, &layers[l], l, s->x, s->len, 0, s->kc, s->vc, &s->s, s->p.pool, NULL);
        }
        for (size_t i = 0; i < win; i++)
            PQ_FAIL_IF(!isfinite(s->x[i]), PQ_ERR_NUMERIC, "sensitivity: the output of window %d is not finite", w);
        head(s, w, s->x, ref, kl, nll);
    }
    *kl /= (double)s->nw * s->len;
    return PQ_OK;
}

// layers (a copy of the model's) with unit u as item k (fp16: unchanged).
static void install(const pq_sens *s, pq_layer *layers, const pq_mix_unit *u, int k) {
    if (s->opt[k].dense) return;
    const pq_input_group *grp = &PQ_INPUT_GROUPS[u->group];
    for (int i = 0; i < grp->n; i++) {
        int slot = grp->members[i];
        pq_linear *L = &layers[u->layer].lin[slot];
        const float *bias = L->bias;
        *L = pq_qtensor_linear(qt_at(s, u->layer, slot, k));
        L->bias = bias;
    }
}

// The KL of unit u as item k alone.
static pq_status unit_kl(pq_sens *s, pq_layer *layers, const pq_mix_unit *u, int k, double *kl) {
    const pq_layer saved = layers[u->layer];
    install(s, layers, u, k);
    double nll;
    pq_status st = run_from(s, u->layer, layers, 0, kl, &nll);
    layers[u->layer] = saved;
    return st;
}

// ---- the table -------------------------------------------------------------------------

// The cheapest integer item of unit u (-1: none, a menu of fp16 only).
static int cheapest(const pq_mix_table *t, int u) {
    int best = -1;
    for (int k = 0; k < t->n_opts; k++)
        if (!t->opt[k].dense && (best < 0 || t->bits[(size_t)u * t->n_opts + k] < t->bits[(size_t)u * t->n_opts + best]))
            best = k;
    return best;
}

// KL measurements and the predicted losses of every unit.
static pq_status measure_kl(pq_sens *s, pq_mix_table *t) {
    const pq_config *c = s->c;
    pq_layer *layers = malloc((size_t)c->n_layers * sizeof *layers);
    PQ_FAIL_IF(!layers, PQ_ERR_NOMEM, "out of memory");
    memcpy(layers, s->p.m->layers, (size_t)c->n_layers * sizeof *layers);
    pq_status st = PQ_OK;
    double t0 = pq_now();
    for (int u = 0; u < t->n_units && st == PQ_OK; u++) {
        int ref = cheapest(t, u), K = t->n_opts;
        for (int k = 0; k < K && st == PQ_OK; k++) {
            size_t i = (size_t)u * K + k;
            if (t->opt[k].dense) t->kl[i] = 0;
            else if (k == ref || s->p.measure_all) st = unit_kl(s, layers, &t->unit[u], k, &t->kl[i]);
        }
        for (int k = 0; k < K && st == PQ_OK; k++) {
            size_t i = (size_t)u * K + k, r = (size_t)u * K + ref;
            if (t->opt[k].dense) t->loss[i] = 0;
            else if (s->p.measure_all) t->loss[i] = fmax(t->kl[i], 0);
            else t->loss[i] = t->err[r] > 0 ? fmax(t->kl[r], 0) * t->err[i] / t->err[r] : 0;
        }
        if (st == PQ_OK && (u + 1) % PQ_NGROUPS == 0)
            note(s, "sensitivity: layer %d/%d: KL of its cheapest item: q/k/v %.3g, o %.3g, gate/up %.3g, down %.3g "
                 "(%.1f s)", t->unit[u].layer + 1, c->n_layers, t->kl[(size_t)(u - 3) * K + cheapest(t, u - 3)],
                 t->kl[(size_t)(u - 2) * K + cheapest(t, u - 2)], t->kl[(size_t)(u - 1) * K + cheapest(t, u - 1)],
                 t->kl[(size_t)u * K + ref], pq_now() - t0);
    }
    free(layers);
    return st;
}

pq_status pq_sens_run(const pq_sens_params *p, pq_mix_table *t, pq_sens **out) {
    *out = NULL;
    const pq_config *c = &p->m->cfg;
    PQ_FAIL_IF(t->n_units != c->n_layers * PQ_NGROUPS, PQ_ERR_ARG, "sensitivity: the table has %d units, the model "
               "%d", t->n_units, c->n_layers * PQ_NGROUPS);
    PQ_FAIL_IF(p->kl_windows < 1, PQ_ERR_ARG, "sensitivity: no KL windows");
    int integer = 0;
    for (int k = 0; k < t->n_opts; k++) integer |= !t->opt[k].dense;
    PQ_FAIL_IF(!integer, PQ_ERR_ARG, "--menu: no integer item (only fp16)");
    pq_sens *s = calloc(1, sizeof *s);
    PQ_FAIL_IF(!s, PQ_ERR_NOMEM, "out of memory");
    s->p = *p, s->c = c, s->K = t->n_opts, s->t = t;
    memcpy(s->opt, t->opt, sizeof s->opt);
    s->len = p->calib->len;
    s->nw = p->kl_windows < p->calib->n ? p->kl_windows : p->calib->n;
    pq_status st;
    s->qt = calloc((size_t)c->n_layers * PQ_NLINEAR * s->K, sizeof *s->qt);
    PQ_CHECK_GOTO(!s->qt, st, PQ_ERR_NOMEM, "out of memory");
    PQ_TRY_GOTO(st, pass_workspaces(s));
    // every linear with every item, from its input's X^T X
    pq_calib_method meth = {.stats = PQ_STAT_XTX, .quantize_group = sens_group, .block_done = sens_block_done, .ud = s};
    pq_calib_run_params rp = {.pool = p->pool, .device = p->device};
    pq_calib_report rep;
    PQ_TRY_GOTO(st, pq_calib_run(p->m, p->calib, &meth, &rp, &rep));
    pq_free(s->w), pq_free(s->hws), pq_free(s->sws), pq_free(s->ews);
    s->w = s->hws = s->sws = s->ews = NULL;
    // the reference: the unquantized model on the KL windows, its block inputs kept
    PQ_TRY_GOTO(st, forward_setup(s));
    for (int w = 0; w < s->nw; w++)
        for (int i = 0; i < s->len; i++)
            pq_linear_rows(&p->m->embed, p->calib->tokens[(size_t)w * p->calib->len + i], 1,
                           x_at(s, 0, w) + (size_t)i * c->hidden);
    double kl;
    PQ_TRY_GOTO(st, run_from(s, 0, p->m->layers, 1, &kl, &s->fp_nll));
    PQ_TRY_GOTO(st, measure_kl(s, t));
    *out = s;
    return PQ_OK;
done:
    pq_sens_free(s);
    return st;
}

pq_status pq_sens_eval(pq_sens *s, const pq_mix_table *t, const int *choice, double *kl, double *ppl) {
    double n = (double)s->nw * (s->len - 1), nll = s->fp_nll;
    *kl = 0;
    if (choice) {
        pq_layer *layers = malloc((size_t)s->c->n_layers * sizeof *layers);
        PQ_FAIL_IF(!layers, PQ_ERR_NOMEM, "out of memory");
        memcpy(layers, s->p.m->layers, (size_t)s->c->n_layers * sizeof *layers);
        for (int u = 0; u < t->n_units; u++) install(s, layers, &t->unit[u], choice[u]);
        pq_status st = run_from(s, 0, layers, 0, kl, &nll);
        free(layers);
        PQ_TRY(st);
    }
    *ppl = exp(nll / n);
    return PQ_OK;
}

void pq_sens_free(pq_sens *s) {
    if (!s) return;
    for (size_t i = 0; s->qt && i < (size_t)s->c->n_layers * PQ_NLINEAR * s->K; i++) pq_qtensor_free(&s->qt[i]);
    free(s->qt);
    pq_block_scratch_free(&s->s);
    pq_free(s->x), pq_free(s->kc), pq_free(s->vc), pq_free(s->logits), pq_free(s->X), pq_free(s->logp);
    free(s->inv_freq);
    pq_free(s->w), pq_free(s->hws), pq_free(s->sws), pq_free(s->ews);
    free(s);
}
