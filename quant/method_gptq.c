// quant/method_gptq.c — GPTQ (quant/gptq.h) as a method: the calibration
// driver measures X^T X of each input group; each group's Hessian is
// prepared once (dampening raised with a note when it is not positive
// definite) and every linear reading that input is solved from it, its
// quantized weight installed into the block so that the final pass (and,
// with true_sequential, the next group's statistics) runs it. When the run
// is on the GPU (the driver's rule: GPTQ measures X^T X there whenever the
// device resolves to cuda) the Hessian is prepared and the linears solved
// there too (quant/gptq_cuda.h), except for a GGUF scheme's grids, which
// pq_ggml_gptq_solve chooses on the CPU.
#include <math.h>
#include <stdio.h>

#include "common/sys.h"
#include "kernels/ggml_blocks.h"
#include "kernels/ops.h"
#include "quant/ggml_grid.h"
#include "quant/gptq.h"
#include "quant/gptq_cuda.h"
#include "quant/method.h"

typedef struct {
    pq_method_ctx c;
    pq_gptq_params gp;
    pq_qtensor q[PQ_NLINEAR];          // the current block's quantized linears
    json_t *entry[PQ_NLINEAR];
    float *w;                          // [largest linear] the widened source weight
    float *diag;                       // [widest] diag(X^T X) of the current input (GGUF grids with --imatrix)
    void *hws, *sws, *ews;             // Hessian, solve (CPU) and output-error workspaces
    size_t work;                       // all of the above and one block's quantized tensors
    pq_gptq_cuda *dev;                 // the GPU's prepare and solve, or NULL: the CPU's
    size_t gpu_work;                   // device bytes dev holds at most
    int damp_raised;                   // the current block's
    int dense[PQ_NLINEAR];             // the current block's linears a plan keeps unquantized
} gptq_state;

static int always(const pq_scheme *s) { return 1; }

static pq_status check(const pq_method *self, const pq_quantize_request *q, pq_scheme *s, int calibrated) {
    const pq_gptq_args *a = &q->gptq;
    PQ_FAIL_IF(pq_scheme_wformat(s) != PQ_W_QPACK, PQ_ERR_ARG,
               "--method gptq --scheme %s: GPTQ writes the weight-only integer schemes (w4a16, w8a16)",
               pq_scheme_name(s->id));
    PQ_TRY(pq_gptq_check(a->damp, a->block_size));
    int gguf = pq_scheme_ggml_type(s);
    PQ_FAIL_IF(gguf >= 0 && a->act_order && !a->static_groups, PQ_ERR_ARG,
               "--act-order --scheme %s: GGUF blocks hold consecutive columns, so their grids must be chosen before "
               "the columns are reordered: add --static-groups", pq_scheme_name(s->id));
    PQ_FAIL_IF(a->imatrix && gguf != PQ_GGML_Q4_K, PQ_ERR_ARG,
               "--imatrix: weights the grids of the GGUF K types (--scheme gguf-q4_k), not %s", pq_scheme_name(s->id));
    if (gguf >= 0) return PQ_OK;
    if (a->act_order && s->group > 0) s->actorder = a->static_groups ? PQ_ACTORDER_WEIGHT : PQ_ACTORDER_GROUP;
    return PQ_OK;
}

static void describe(const pq_method *self, const pq_quantize_request *q, char *buf, size_t cap) {
    const pq_gptq_args *a = &q->gptq;
    snprintf(buf, cap, ", damp %g, block %d%s%s%s%s", a->damp, a->block_size, a->act_order ? ", act-order" : "",
             a->static_groups ? ", static groups" : "", a->true_sequential ? ", true-sequential" : "",
             a->imatrix ? ", imatrix" : "");
}

static void done(void *state) {
    gptq_state *g = state;
    for (int k = 0; k < PQ_NLINEAR; k++) {
        pq_qtensor_free(&g->q[k]);
        json_decref(g->entry[k]);
        g->entry[k] = NULL;
    }
    g->damp_raised = 0;
}

static void free_state(void *state) {
    gptq_state *g = state;
    if (!g) return;
    done(g);
    pq_free(g->w), pq_free(g->diag), pq_free(g->hws), pq_free(g->sws), pq_free(g->ews);
    pq_gptq_cuda_free(g->dev);
    free(g);
}

// The workspaces: the Hessian and solve workspaces of the largest group and
// linear, the output-error workspace (on the GPU: the host part of the
// prepare, and the device context that solves and measures), the widened
// weight; the estimate also counts one block's quantized tensors.
static pq_status create(const pq_method *self, const pq_method_ctx *c, void **state) {
    const pq_config *cfg = &c->m->cfg;
    pq_device dev;
    PQ_TRY(pq_device_resolve(c->q->device, &dev));
    int gpu = dev == PQ_DEVICE_CUDA && pq_scheme_ggml_type(c->scheme) < 0;
    gptq_state *g = calloc(1, sizeof *g);
    PQ_FAIL_IF(!g, PQ_ERR_NOMEM, "out of memory");
    g->c = *c;
    g->gp = pq_method_gptq_params(c);
    size_t hb = 0, sb = 0, eb = 0, qb = 0, wb = 0;
    pq_gptq_params most = g->gp; // with a plan: the most any grouping asks for (a batch of every column)
    if (c->mix) most.block_size = 65536;
    int widest = 0, nt = pq_pool_size(c->pool);
    for (int gi = 0; gi < PQ_NGROUPS; gi++) {
        int cols = pq_input_group_cols(cfg, gi);
        size_t b = gpu ? pq_gptq_cuda_hessian_bytes(cols) : pq_gptq_hessian_bytes(cols);
        hb = b > hb ? b : hb;
        widest = cols > widest ? cols : widest;
    }
    for (int s = 0; s < PQ_NLINEAR; s++) {
        const pq_linear *L = pq_model_linear(c->m, 0, (pq_linear_slot)s);
        size_t b = pq_gptq_solve_bytes(L->rows, L->cols, &most), e = pq_act_stats_error_bytes(L->rows, L->cols, nt);
        if (pq_scheme_ggml_type(c->scheme) >= 0) b = pq_ggml_gptq_solve_bytes(L->rows, L->cols, &most, nt);
        if (gpu) { // no host solve or output-error product: the device holds the largest group's factor,
                   // the largest linear's solve and its output error
            size_t d = pq_gptq_cuda_bytes(widest, L->rows, L->cols, &most);
            g->gpu_work = d > g->gpu_work ? d : g->gpu_work;
            b = e = 0;
        }
        e = e > pq_gptq_errors_bytes(L->rows, L->cols, nt) ? e : pq_gptq_errors_bytes(L->rows, L->cols, nt);
        sb = b > sb ? b : sb;
        eb = e > eb ? e : eb;
        qb += (size_t)pq_scheme_matrix_bytes(c->scheme, L->rows, L->cols, 4) + (size_t)L->cols * 4;
        wb = (size_t)L->rows * L->cols * 4 > wb ? (size_t)L->rows * L->cols * 4 : wb;
    }
    g->hws = pq_alloc(hb);
    g->sws = sb ? pq_alloc(sb) : NULL;
    g->ews = pq_alloc(eb);
    g->w = pq_alloc(wb);
    g->diag = pq_alloc((size_t)widest * sizeof(float));
    g->work = hb + sb + eb + qb + wb;
    if (!g->hws || (sb && !g->sws) || !g->ews || !g->w || !g->diag) {
        free_state(g);
        return PQ_FAIL(PQ_ERR_NOMEM, "out of memory for the GPTQ workspaces (%.1f MiB)", (hb + sb + eb) / 1048576.0);
    }
    pq_status st = gpu ? pq_gptq_cuda_create(&g->dev) : PQ_OK;
    if (st != PQ_OK) {
        free_state(g);
        return st;
    }
    *state = g;
    return PQ_OK;
}

// The widened source weight of a linear, checked for NaN / Inf.
static pq_status widen(gptq_state *g, const char *module, const pq_linear *L) {
    PQ_FAIL_IF(L->fmt != PQ_W_DENSE, PQ_ERR_FORMAT, "%s: %s is not a dense weight", g->c.q->model, module);
    pq_linear_rows(L, 0, L->rows, g->w);
    long long bad = pq_scan_finite_cpu(g->w, (size_t)L->rows * L->cols, NULL);
    size_t i = (size_t)bad;
    PQ_FAIL_IF(bad >= 0, PQ_ERR_NUMERIC, "%s/%s.weight: weight [%zu, %zu] is %s", g->c.q->model, module,
               i / L->cols, i % L->cols, isnan(g->w[i]) ? "NaN" : "Inf");
    return PQ_OK;
}

static pq_status quantize_linear(gptq_state *g, int layer, int slot, pq_layer *L, const pq_gptq_hessian *h,
                                 const pq_act_stats *st) {
    const pq_linear *src = &L->lin[slot];
    char module[256];
    pq_method_module(module, sizeof module, layer, (pq_linear_slot)slot);
    pq_qtensor *q = &g->q[slot];
    pq_qtensor_free(q);
    const pq_scheme *sc = pq_method_scheme(&g->c, layer, (pq_linear_slot)slot);
    g->dense[slot] = !sc;
    json_decref(g->entry[slot]);
    if (!sc) { // a plan keeps it unquantized
        g->entry[slot] = json_pack("{s:s, s:f, s:f}", "name", module, PQ_JSON_REL_ERR, 0.0, PQ_JSON_OUT_ERR, 0.0);
        PQ_FAIL_IF(!g->entry[slot], PQ_ERR_NOMEM, "out of memory");
        return PQ_OK;
    }
    pq_gptq_params gp = g->gp;
    gp.bits = sc->bits, gp.group = sc->group, gp.sym = sc->sym;
    PQ_TRY(widen(g, module, src));
    PQ_TRY(pq_qtensor_init(q, sc, src->rows, src->cols, pq_linear_dtype(src)));
    if (pq_gptq_has_g_idx(&gp, src->cols)) {
        q->g_idx = pq_alloc((size_t)src->cols * sizeof(int32_t));
        PQ_FAIL_IF(!q->g_idx, PQ_ERR_NOMEM, "%s: out of memory", module);
    }
    double loss = 0;
    if (q->is_ggml) { // a GGUF scheme: the codes on ggml's grids
        const float *imx = NULL;
        if (g->c.q->gptq.imatrix) {
            for (int c = 0; c < st->cols; c++) g->diag[c] = st->xtx[(size_t)c * st->cols + c];
            imx = g->diag;
        }
        PQ_TRY(pq_ggml_gptq_solve(g->w, src->rows, h, &gp, imx, module, g->sws, g->c.pool, q, &loss));
    } else if (g->dev) {
        PQ_TRY(pq_gptq_cuda_solve(g->dev, g->w, src->rows, h, &gp, module, q, &loss));
    } else {
        PQ_TRY(pq_gptq_solve(g->w, src->rows, h, &gp, module, g->sws, g->c.pool, q, &loss));
    }
    pq_linear view = pq_qtensor_linear(q);
    view.bias = src->bias;
    double rel, out, err;
    pq_gptq_errors(g->w, &view, g->dev ? NULL : h, loss, g->ews, g->c.pool, &rel, &err);
    if (g->dev) {
        PQ_TRY(pq_gptq_cuda_output_error(g->dev, &out));
    } else { // the error from the solve's loss, the energy by one product with X^T X
        double energy = pq_act_stats_energy(st, g->w, src->rows, g->ews, g->c.pool);
        out = energy > 0 ? err / energy : 0;
    }
    g->entry[slot] = json_pack("{s:s, s:f, s:f, s:f, s:i}", "name", module, PQ_JSON_REL_ERR, rel, PQ_JSON_OUT_ERR, out,
                               "damp", h->damp, "dead_columns", h->n_dead);
    PQ_FAIL_IF(!g->entry[slot], PQ_ERR_NOMEM, "out of memory");
    L->lin[slot] = view;
    return PQ_OK;
}

static pq_status quantize_group(void *ud, int layer, int gi, pq_layer *L, const pq_act_stats *st) {
    gptq_state *g = ud;
    const pq_input_group *grp = &PQ_INPUT_GROUPS[gi];
    char name[256];
    snprintf(name, sizeof name, "model.layers.%d %s input", layer, grp->name);
    pq_gptq_hessian h;
    if (g->dev)
        PQ_TRY(pq_gptq_cuda_prepare(g->dev, st->xtx, st->cols, &g->gp, name, g->hws, &h));
    else
        PQ_TRY(pq_gptq_prepare(st->xtx, st->cols, &g->gp, name, g->hws, g->c.pool, &h));
    pq_method_note_damp(&g->c, name, g->gp.damp, &h, &g->damp_raised);
    for (int k = 0; k < grp->n; k++) PQ_TRY(quantize_linear(g, layer, grp->members[k], L, &h, st));
    return PQ_OK;
}

static pq_status hooks(void *state, pq_calib_method *drv) {
    gptq_state *g = state;
    *drv = (pq_calib_method){.stats = PQ_STAT_XTX, .work_bytes = g->work, .gpu_work_bytes = g->gpu_work,
                             .quantize_group = quantize_group, .ud = g};
    return PQ_OK;
}

static pq_status result(void *state, int layer, pq_block_out *out) {
    gptq_state *g = state;
    for (int k = 0; k < PQ_NLINEAR; k++) out->q[k] = g->dense[k] ? NULL : &g->q[k], out->entry[k] = g->entry[k];
    out->damp_raised = g->damp_raised;
    return PQ_OK;
}

// A run on the GPU also says where the solve ran ("solve_device": cuda, or
// cpu for a GGUF scheme's grids); a CPU run's object is unchanged.
static json_t *provenance(void *state, const pq_method_summary *s) {
    gptq_state *g = state;
    const pq_calib_report *m = s->report;
    json_t *o = json_pack("{s:i, s:f, s:i, s:b, s:b, s:b, s:b, s:i, s:s, s:s, s:i}", "bits", g->gp.bits, "damp", g->gp.damp,
                     "block_size", g->gp.block_size, "act_order", g->gp.act_order, "static_groups",
                     g->gp.static_groups, "true_sequential", g->c.q->gptq.true_sequential, "imatrix",
                     g->c.q->gptq.imatrix, "damp_raised",
                     s->damp_raised, "hessian_device", m->on_gpu ? "cuda" : "cpu", "forward_device",
                     m->on_gpu ? "cuda" : "cpu", "forward_cpu_fallbacks", m->cpu_passes);
    if (o && m->on_gpu && json_object_set_new(o, "solve_device", json_string(g->dev ? "cuda" : "cpu")) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

const pq_method PQ_METHOD_GPTQ = {
    .name = "gptq", .scheme = "w4a16", .work = "GPTQ", .kind = PQ_SMOOTH_NONE,
    .takes = PQ_ARG_DAMP | PQ_ARG_BLOCK_SIZE | PQ_ARG_ACT_ORDER | PQ_ARG_STATIC_GROUPS | PQ_ARG_TRUE_SEQUENTIAL |
             PQ_ARG_IMATRIX,
    .calibrates = always, .check = check, .describe = describe, .create = create, .hooks = hooks,
    .result = result, .done = done, .provenance = provenance, .free = free_state,
};
