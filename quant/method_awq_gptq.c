// quant/method_awq_gptq.c — AWQ then GPTQ (--method awq+gptq) as a method:
// one calibration pass per block measures mean |x| and X^T X of every input
// group; AWQ's search (quant/smooth.h, kind PQ_SMOOTH_AWQ: alpha per group
// judged by the block output, then clip values) picks the block's scales and
// clips; they are folded into the norms and producer linears and the clips
// applied (the same fold as --method awq); then GPTQ (quant/gptq.h) chooses
// the codes of each folded, clipped linear with the Hessian of its scaled
// input, diag(1/s) X^T X diag(1/s) (the linear now reads x / s). The
// quantized block (folded norms, GPTQ's linears) is what the final pass runs,
// so the next block is calibrated on the inputs the quantized model gives it,
// as GPTQ's sequential pass does. AWQ's search judges its candidates with
// RTN, as the reference AWQ does; GPTQ then improves on that rounding. Runs
// on the CPU (the search reads the block's input on the host).
#include <stdio.h>
#include <string.h>

#include "common/sys.h"
#include "quant/awq.h"
#include "quant/gptq.h"
#include "quant/method.h"

typedef struct {
    pq_method_ctx c;
    pq_gptq_params gp;
    pq_smooth *S;                     // AWQ's search
    const pq_block_scales *sc;        // its result for the current block (valid until the next)
    pq_fold_block b;                  // the current block, folded and clipped
    pq_qtensor q[PQ_NLINEAR];         // its quantized linears
    json_t *entry[PQ_NLINEAR];
    float *w;                         // [largest linear] a folded weight before its clip
    float *xtx;                       // [widest][widest] the Hessian of the scaled input
    void *hws, *sws, *ews;            // Hessian, solve and output-error workspaces
    size_t work;
    int damp_raised;                  // the current block's
} ag_state;

static int always(const pq_scheme *s) { return 1; }

static pq_status check(const pq_method *self, const pq_quantize_request *q, pq_scheme *s, int calibrated) {
    const pq_gptq_args *a = &q->gptq;
    PQ_FAIL_IF(pq_scheme_wformat(s) != PQ_W_QPACK || pq_scheme_ggml_type(s) >= 0, PQ_ERR_ARG,
               "--method awq+gptq --scheme %s: AWQ+GPTQ writes the compressed-tensors weight-only integer schemes "
               "(w4a16, w8a16)", pq_scheme_name(s->id));
    PQ_TRY(pq_smooth_check(PQ_SMOOTH_AWQ, &q->smooth, s));
    PQ_TRY(pq_gptq_check(a->damp, a->block_size));
    if (a->act_order && s->group > 0) s->actorder = a->static_groups ? PQ_ACTORDER_WEIGHT : PQ_ACTORDER_GROUP;
    return PQ_OK;
}

static void describe(const pq_method *self, const pq_quantize_request *q, char *buf, size_t cap) {
    const pq_gptq_args *a = &q->gptq;
    char awq[160];
    pq_smooth_describe(PQ_SMOOTH_AWQ, &q->smooth, awq, sizeof awq);
    snprintf(buf, cap, "%s, damp %g, block %d%s%s", awq, a->damp, a->block_size, a->act_order ? ", act-order" : "",
             a->static_groups ? ", static groups" : "");
}

static void done(void *state) {
    ag_state *g = state;
    for (int k = 0; k < PQ_NLINEAR; k++) {
        pq_qtensor_free(&g->q[k]);
        json_decref(g->entry[k]);
        g->entry[k] = NULL;
    }
    pq_fold_block_free(&g->b);
    g->sc = NULL;
    g->damp_raised = 0;
}

static void free_state(void *state) {
    ag_state *g = state;
    if (!g) return;
    done(g);
    pq_smooth_free(g->S);
    pq_free(g->w), pq_free(g->xtx), pq_free(g->hws), pq_free(g->sws), pq_free(g->ews);
    free(g);
}

static pq_status emit(void *ud, int layer, const pq_block_scales *sc, const pq_smooth_block *qb) {
    ((ag_state *)ud)->sc = sc;
    return PQ_OK;
}

// GPTQ's workspaces (the largest group and linear), the scaled Hessian, the
// weight copy; the estimate also counts one block's quantized tensors and
// the search's memory.
static pq_status create(const pq_method *self, const pq_method_ctx *c, void **state) {
    const pq_config *cfg = &c->m->cfg;
    ag_state *g = calloc(1, sizeof *g);
    PQ_FAIL_IF(!g, PQ_ERR_NOMEM, "out of memory");
    g->c = *c;
    g->gp = pq_method_gptq_params(c);
    size_t hb = 0, sb = 0, eb = 0, qb = 0, wb = 0, sw = 0;
    int widest = 0, nt = pq_pool_size(c->pool);
    for (int gi = 0; gi < PQ_NGROUPS; gi++) {
        int cols = pq_input_group_cols(cfg, gi);
        hb = pq_gptq_hessian_bytes(cols) > hb ? pq_gptq_hessian_bytes(cols) : hb;
        widest = cols > widest ? cols : widest;
    }
    for (int s = 0; s < PQ_NLINEAR; s++) {
        const pq_linear *L = pq_model_linear(c->m, 0, (pq_linear_slot)s);
        size_t b = pq_gptq_solve_bytes(L->rows, L->cols, &g->gp), e = pq_act_stats_error_bytes(L->rows, L->cols, nt);
        e = e > pq_gptq_errors_bytes(L->rows, L->cols, nt) ? e : pq_gptq_errors_bytes(L->rows, L->cols, nt);
        sb = b > sb ? b : sb;
        eb = e > eb ? e : eb;
        qb += (size_t)pq_scheme_matrix_bytes(c->scheme, L->rows, L->cols, 4) + (size_t)L->cols * 4;
        wb = (size_t)L->rows * L->cols * 4 > wb ? (size_t)L->rows * L->cols * 4 : wb;
    }
    // the search quantizes with RTN: the scheme without GPTQ's column order; it scores in f32 whatever
    // --calib-precision says (with BF16 products the scales it chose cost GPTQ 3.5-7% of PPL on SmolLM2,
    // seeds 0 and 1: docs/PERFORMANCE.md)
    pq_smooth_config sc = {.m = c->m, .kind = PQ_SMOOTH_AWQ, .scheme = *c->scheme, .dt = c->dt, .p = c->q->smooth,
                           .pool = c->pool, .emit = emit, .ud = g};
    sc.scheme.actorder = PQ_ACTORDER_NONE;
    pq_status s = pq_smooth_create(&sc, c->calib, &g->S, &sw);
    if (s != PQ_OK) {
        free(g);
        return s;
    }
    size_t xb = (size_t)widest * widest * sizeof(float);
    g->hws = pq_alloc(hb);
    g->sws = pq_alloc(sb);
    g->ews = pq_alloc(eb);
    g->w = pq_alloc(wb);
    g->xtx = pq_alloc(xb);
    g->work = sw + hb + sb + eb + qb + wb + xb;
    if (!g->hws || !g->sws || !g->ews || !g->w || !g->xtx) {
        free_state(g);
        return PQ_FAIL(PQ_ERR_NOMEM, "out of memory for the GPTQ workspaces (%.1f MiB)",
                       (hb + sb + eb + xb) / 1048576.0);
    }
    *state = g;
    return PQ_OK;
}

// GPTQ of member `slot` of the current block: its folded weight clipped,
// then solved with h; the errors measured against the folded weight before
// the clip, on the scaled inputs (st).
static pq_status quantize_linear(ag_state *g, int layer, pq_linear_slot slot, const pq_gptq_hessian *h,
                                 const pq_act_stats *st) {
    char module[256];
    pq_method_module(module, sizeof module, layer, slot);
    int rows = g->b.rows[slot], cols = g->b.cols[slot];
    float *w = g->b.w[slot];
    memcpy(g->w, w, (size_t)rows * cols * sizeof(float));
    if (g->sc->clip[slot]) pq_awq_clip_apply(w, rows, cols, g->c.scheme, g->sc->clip[slot]);
    pq_qtensor *q = &g->q[slot];
    PQ_TRY(pq_qtensor_init(q, g->c.scheme, rows, cols, g->c.dt));
    if (pq_gptq_has_g_idx(&g->gp, cols)) {
        q->g_idx = pq_alloc((size_t)cols * sizeof(int32_t));
        PQ_FAIL_IF(!q->g_idx, PQ_ERR_NOMEM, "%s: out of memory", module);
    }
    PQ_TRY(pq_gptq_solve(w, rows, h, &g->gp, module, g->sws, g->c.pool, q, NULL));
    pq_linear view = pq_qtensor_linear(q);
    double rel, out = pq_act_stats_output_error(st, g->w, &view, g->ews, g->c.pool);
    pq_gptq_errors(g->w, &view, NULL, 0, g->ews, g->c.pool, &rel, NULL); // not the clipped weight's loss
    int gi = pq_fold_group_of(slot);
    g->entry[slot] = json_pack("{s:s, s:f, s:f, s:f, s:i}", "name", module, PQ_JSON_REL_ERR, rel, PQ_JSON_OUT_ERR, out,
                               "damp", h->damp, "dead_columns", h->n_dead);
    PQ_FAIL_IF(!g->entry[slot], PQ_ERR_NOMEM, "out of memory");
    if (g->sc->alpha[gi] >= 0) json_object_set_new(g->entry[slot], "alpha", json_real(g->sc->alpha[gi]));
    return PQ_OK;
}

// Input group gi: its Hessian scaled by the group's AWQ scale, prepared
// once, then every member solved from it.
static pq_status quantize_group(ag_state *g, int layer, int gi, const pq_act_stats *st) {
    const pq_input_group *grp = &PQ_INPUT_GROUPS[gi];
    const float *s = g->sc->scale[gi];
    int n = st->cols;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            g->xtx[(size_t)i * n + j] = s ? (float)(st->xtx[(size_t)i * n + j] / ((double)s[i] * s[j]))
                                          : st->xtx[(size_t)i * n + j];
    pq_act_stats scaled = *st;
    scaled.xtx = g->xtx;
    char name[256];
    snprintf(name, sizeof name, "model.layers.%d %s input", layer, grp->name);
    pq_gptq_hessian h;
    PQ_TRY(pq_gptq_prepare(g->xtx, n, &g->gp, name, g->hws, g->c.pool, &h));
    pq_method_note_damp(&g->c, name, g->gp.damp, &h, &g->damp_raised);
    for (int k = 0; k < grp->n; k++) PQ_TRY(quantize_linear(g, layer, grp->members[k], &h, &scaled));
    return PQ_OK;
}

// The driver's quantize_block: AWQ's search (which leaves L the source
// block), the fold, GPTQ per group; the quantized block installed into L.
static pq_status quantize_block(void *ud, int layer, pq_layer *L, const pq_act_stats *st, const float *X) {
    ag_state *g = ud;
    done(g);
    PQ_TRY(pq_smooth_quantize_block(g->S, layer, L, st, X));
    PQ_FAIL_IF(!g->sc, PQ_ERR_ARG, "layer %d: no result from the AWQ search", layer);
    PQ_TRY(pq_fold_block_load(&g->c.m->cfg, L, layer, g->c.q->model, g->c.pool, &g->b));
    pq_smooth_fold(&g->b, g->sc, g->c.dt, g->c.pool);
    for (int gi = 0; gi < PQ_NGROUPS; gi++) PQ_TRY(quantize_group(g, layer, gi, &st[gi]));
    for (int k = 0; k < PQ_NLINEAR; k++) {
        const float *bias = L->lin[k].bias;
        L->lin[k] = pq_qtensor_linear(&g->q[k]);
        L->lin[k].bias = g->b.bias[k] ? g->b.bias[k] : bias;
    }
    L->attn_norm = g->b.attn_norm;
    L->mlp_norm = g->b.mlp_norm;
    return PQ_OK;
}

static pq_status hooks(void *state, pq_calib_method *drv) {
    ag_state *g = state;
    *drv = (pq_calib_method){.stats = PQ_STAT_ABS | PQ_STAT_XTX, .work_bytes = g->work,
                             .quantize_block = quantize_block, .ud = g};
    return PQ_OK;
}

static pq_status result(void *state, int layer, pq_block_out *out) {
    ag_state *g = state;
    PQ_FAIL_IF(!g->sc, PQ_ERR_ARG, "layer %d: no result from the AWQ search", layer);
    for (int k = 0; k < PQ_NLINEAR; k++) out->q[k] = &g->q[k], out->entry[k] = g->entry[k];
    for (int gi = 0; gi < PQ_NGROUPS; gi++) {
        const pq_input_group *G = &PQ_INPUT_GROUPS[gi];
        out->folded[gi] = !g->sc->scale[gi]              ? NULL
                          : G->from == PQ_FROM_ATTN_NORM ? g->b.attn_norm
                          : G->from == PQ_FROM_MLP_NORM  ? g->b.mlp_norm
                                                         : g->b.bias[G->from_slot];
    }
    out->damp_raised = g->damp_raised;
    return PQ_OK;
}

static json_t *provenance(void *state, const pq_method_summary *s) {
    ag_state *g = state;
    const pq_smooth_params *p = &g->c.q->smooth;
    return json_pack("{s:{s:i, s:i, s:i, s:s}, s:{s:i, s:f, s:i, s:b, s:b, s:i, s:s}}", "awq", "grid", p->grid,
                     "clip_grid", p->clip_grid, "search_tokens", p->search_tokens, "loss", "block output", "gptq",
                     "bits", g->gp.bits, "damp", g->gp.damp, "block_size", g->gp.block_size, "act_order",
                     g->gp.act_order, "static_groups", g->gp.static_groups, "damp_raised", s->damp_raised,
                     "hessian_device", "cpu");
}

const pq_method PQ_METHOD_AWQ_GPTQ = {
    .name = "awq+gptq", .scheme = "w4a16", .work = "awq search + GPTQ", .kind = PQ_SMOOTH_NONE, .folds = 1,
    .auto_f32 = 1, // BF16 passes moved its SmolLM2 PPL by -0.3% to +6.8% against f32 (docs/PERFORMANCE.md)
    .takes = PQ_ARG_AWQ_GRID | PQ_ARG_AWQ_CLIP_GRID | PQ_ARG_SEARCH_TOKENS | PQ_ARG_DAMP | PQ_ARG_BLOCK_SIZE |
             PQ_ARG_ACT_ORDER | PQ_ARG_STATIC_GROUPS,
    .calibrates = always, .check = check, .describe = describe, .create = create, .hooks = hooks,
    .result = result, .done = done, .provenance = provenance, .free = free_state,
};
