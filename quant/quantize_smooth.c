// quant/quantize_smooth.c — AWQ, SmoothQuant and static activation scales
// in `pq quantize`: calibrated inline through the driver (quant/smooth.h),
// or applied from a scales file (--scales, quant/scales.h). Either way each
// block goes through pq_smooth_fold + pq_smooth_quantize and write_block, so
// the two write the same model.safetensors. Inline runs are resumable with
// the GPTQ path's journal (quant/quantize_gptq.c): a finished block is
// re-run from its tensors in model.safetensors.tmp (SmoothQuant and static
// scales: quantized linears, folded norms and biases; AWQ: the unquantized
// source block, which is what AWQ propagates).
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "common/sys.h"
#include "formats/packed.h"
#include "quant/quantize_run.h"

// The tensor a scale of group g folds into, after "model.layers.L.": a
// norm's weight, or the producer linear's bias (only if it has one).
static const char *folded_suffix(int g, char *buf, size_t cap) {
    const pq_input_group *G = &PQ_INPUT_GROUPS[g];
    if (G->from == PQ_FROM_ATTN_NORM) return "input_layernorm.weight";
    if (G->from == PQ_FROM_MLP_NORM) return "post_attention_layernorm.weight";
    snprintf(buf, cap, "%s.bias", pq_linear_slot_name(G->from_slot));
    return buf;
}

int pq_qrun_smooth_rewrites(const pq_quantize_run *r, const char *name) {
    int l, n = 0;
    if (!r->smooth || !pq_smooth_has_scales(r->sp.kind)) return 0;
    if (sscanf(name, "model.layers.%d.%n", &l, &n) != 1 || n == 0) return 0;
    char buf[64];
    for (int g = 0; g < PQ_NGROUPS; g++)
        if (pq_fold_usable(&r->m->cfg, g) && strcmp(name + n, folded_suffix(g, buf, sizeof buf)) == 0) return 1;
    return 0;
}

// A folded vector v [n] (exact in the tensor's dtype) written in the dtype
// of the source tensor `name`.
static pq_status put_vector(pq_quantize_run *r, const char *name, const float *v, int n) {
    const pq_tensor *t = pq_st_find(r->m->st, name);
    PQ_FAIL_IF(!t, PQ_ERR_FORMAT, "%s: tensor '%s' is missing", r->p->model, name);
    size_t es = pq_dtype_size(t->dtype);
    char *bytes = pq_alloc((size_t)n * es);
    PQ_FAIL_IF(!bytes, PQ_ERR_NOMEM, "%s: out of memory", name);
    for (int i = 0; i < n; i++) {
        uint16_t h = t->dtype == PQ_DT_F16 ? pq_f32_to_fp16(v[i]) : pq_f32_to_bf16(v[i]);
        if (t->dtype == PQ_DT_F32) memcpy(bytes + 4 * (size_t)i, &v[i], 4);
        else memcpy(bytes + 2 * (size_t)i, &h, 2);
    }
    pq_status s = pq_st_writer_put(r->w, name, bytes, (size_t)n * es);
    pq_free(bytes);
    return s;
}

// One block's tensors and pq.json entries; *err / *out: the block's mean
// relative weight and output errors (-1: not measured).
static pq_status write_block(pq_quantize_run *r, int layer, const pq_block_scales *sc, const pq_smooth_block *qb,
                             double *err, double *out) {
    char module[256], name[320], buf[64];
    *err = 0, *out = 0;
    for (int k = 0; k < PQ_NLINEAR; k++) {
        snprintf(module, sizeof module, "model.layers.%d.%s", layer, pq_linear_slot_name((pq_linear_slot)k));
        PQ_TRY(pq_packed_put(r->w, module, &qb->q[k]));
        int g = pq_fold_group_of((pq_linear_slot)k);
        json_t *e = json_pack("{s:s, s:f}", "name", module, "rel_error", qb->rel_err[k]);
        if (e && qb->out_err[k] >= 0) json_object_set_new(e, "output_rel_error", json_real(qb->out_err[k]));
        if (e && sc->alpha[g] >= 0) json_object_set_new(e, "alpha", json_real(sc->alpha[g]));
        if (e && qb->q[k].input_scale > 0) json_object_set_new(e, "input_scale", json_real(qb->q[k].input_scale));
        PQ_TRY(pq_qrun_record(r, &r->m->layers[layer].lin[k], e));
        *err += qb->rel_err[k] / PQ_NLINEAR;
        *out = qb->out_err[k] < 0 || *out < 0 ? -1 : *out + qb->out_err[k] / PQ_NLINEAR;
    }
    for (int g = 0; g < PQ_NGROUPS; g++) {
        const pq_input_group *G = &PQ_INPUT_GROUPS[g];
        const float *vec = G->from == PQ_FROM_ATTN_NORM ? qb->attn_norm : G->from == PQ_FROM_MLP_NORM
                                                                               ? qb->mlp_norm
                                                                               : qb->bias[G->from_slot];
        if (!vec) continue;
        int n = G->from == PQ_FROM_LINEAR ? r->m->layers[layer].lin[G->from_slot].rows : r->m->cfg.hidden;
        snprintf(name, sizeof name, "model.layers.%d.%s", layer, folded_suffix(g, buf, sizeof buf));
        PQ_TRY(put_vector(r, name, vec, n));
    }
    return PQ_OK;
}

static void layer_event(pq_quantize_run *r, int layer, double err, double out, int resumed) {
    pq_quantize_event e = {.kind = PQ_QUANTIZE_LAYER, .done = layer + 1, .total = r->m->cfg.n_layers,
                           .layer_rel_err = err, .layer_out_err = out, .resumed = resumed};
    if (r->progress) r->progress(r->ud, &e);
}

json_t *pq_qrun_smooth_provenance(const pq_quantize_run *r) {
    const pq_smooth_params *p = &r->sp;
    json_t *o = json_pack("{s:s, s:i}", "activations", pq_scheme_act_static(&r->scheme) ? "static per tensor"
                          : r->scheme.act != PQ_ACT_NONE ? "dynamic per token" : "none", "search_tokens",
                          p->search_tokens);
    if (o && p->kind == PQ_SMOOTH_AWQ) {
        json_object_set_new(o, "grid", json_integer(p->grid));
        json_object_set_new(o, "clip_grid", json_integer(p->clip_grid));
        json_object_set_new(o, "loss", json_string("block output"));
    }
    if (o && p->kind == PQ_SMOOTH_SQ)
        json_object_set_new(o, "alpha", p->alpha == PQ_ALPHA_AUTO ? json_string("auto") : json_real(p->alpha));
    return o;
}

// ---- inline, through the driver ---------------------------------------------

typedef struct {
    pq_quantize_run *r;
    pq_smooth *S;
    pq_packed_owned own[PQ_NLINEAR];  // a resumed block's linears read back
    float *vecs[PQ_NGROUPS];          // and its folded norms / biases
    double err, out;                  // the current block's
} smooth_method;

static pq_status emit(void *ud, int layer, const pq_block_scales *sc, const pq_smooth_block *qb) {
    smooth_method *sm = ud;
    return write_block(sm->r, layer, sc, qb, &sm->err, &sm->out);
}

static pq_status quantize_block(void *ud, int layer, pq_layer *L, const pq_act_stats *st, const float *X) {
    smooth_method *sm = ud;
    return pq_smooth_quantize_block(sm->S, layer, L, st, X);
}

// A folded vector of a finished block, read back from the temporary file.
static pq_status read_vector(pq_quantize_run *r, const char *name, int n, float **out) {
    const pq_tensor *t = pq_st_find(r->tmp_st, name);
    PQ_FAIL_IF(!t || t->numel != n, PQ_ERR_FORMAT, "%s: tensor '%s' is missing or has another size",
               pq_st_writer_tmp_path(r->w), name);
    pq_dense_type dt = t->dtype == PQ_DT_F16 ? PQ_DENSE_F16 : t->dtype == PQ_DT_BF16 ? PQ_DENSE_BF16 : PQ_DENSE_F32;
    *out = pq_alloc((size_t)n * sizeof(float));
    PQ_FAIL_IF(!*out, PQ_ERR_NOMEM, "%s: out of memory", name);
    pq_dense_rows_ref(dt, t->data, n, 0, 1, *out);
    return PQ_OK;
}

static void free_resumed(smooth_method *sm) {
    for (int k = 0; k < PQ_NLINEAR; k++)
        for (int i = 0; i < PQ_PACKED_MAX_OWNED; i++) pq_free(sm->own[k].p[i]), sm->own[k].p[i] = NULL;
    for (int g = 0; g < PQ_NGROUPS; g++) pq_free(sm->vecs[g]), sm->vecs[g] = NULL;
}

static pq_status load_block(void *ud, int layer, pq_layer *L) {
    smooth_method *sm = ud;
    pq_quantize_run *r = sm->r;
    if (r->sp.kind == PQ_SMOOTH_AWQ) return PQ_OK; // AWQ propagates the unquantized block
    PQ_TRY(pq_qrun_tmp_load(r, layer, L, sm->own));
    char name[320], buf[64];
    for (int g = 0; g < PQ_NGROUPS && pq_smooth_has_scales(r->sp.kind); g++) {
        const pq_input_group *G = &PQ_INPUT_GROUPS[g];
        if (!pq_fold_usable(&r->m->cfg, g) || (G->from == PQ_FROM_LINEAR && !L->lin[G->from_slot].bias)) continue;
        int n = G->from == PQ_FROM_LINEAR ? L->lin[G->from_slot].rows : r->m->cfg.hidden;
        snprintf(name, sizeof name, "model.layers.%d.%s", layer, folded_suffix(g, buf, sizeof buf));
        PQ_TRY(read_vector(r, name, n, &sm->vecs[g]));
        if (G->from == PQ_FROM_ATTN_NORM) L->attn_norm = sm->vecs[g];
        else if (G->from == PQ_FROM_MLP_NORM) L->mlp_norm = sm->vecs[g];
        else L->lin[G->from_slot].bias = sm->vecs[g];
    }
    return PQ_OK;
}

static pq_status block_done(void *ud, int layer, int resumed) {
    smooth_method *sm = ud;
    pq_quantize_run *r = sm->r;
    if (resumed) {
        free_resumed(sm);
        sm->err = sm->out = 0;
        for (int k = 0; k < PQ_NLINEAR; k++) {
            json_t *e = json_array_get(r->layers, (size_t)layer * PQ_NLINEAR + k);
            sm->err += json_real_value(json_object_get(e, "rel_error")) / PQ_NLINEAR;
            sm->out += json_real_value(json_object_get(e, "output_rel_error")) / PQ_NLINEAR;
        }
    } else {
        PQ_TRY(pq_qrun_block_journaled(r, layer));
    }
    layer_event(r, layer, sm->err, sm->out, resumed);
    return PQ_OK;
}

pq_status pq_qrun_smooth_blocks(pq_quantize_run *r) {
    smooth_method sm = {.r = r};
    pq_smooth_config cfg = {.m = r->m, .scheme = r->scheme, .dt = pq_qrun_scale_dtype(&r->m->layers[0].lin[0]),
                            .p = r->sp, .pool = r->pool, .emit = emit, .ud = &sm};
    size_t work;
    PQ_TRY(pq_smooth_create(&cfg, &r->calib, &sm.S, &work));
    pq_calib_method meth = {.stats = PQ_STAT_ABS, .work_bytes = work, .quantize_block = quantize_block,
                            .load_block = load_block, .block_done = block_done, .ud = &sm};
    pq_calib_run_params rp = {.true_sequential = r->p->true_sequential, .pool = r->pool, .device = r->p->device,
                              .first_block = r->blocks_done};
    pq_calib_estimate(r->m, &r->calib, &meth, &rp, &r->mem);
    const pq_calib_report *m = &r->mem;
    pq_qrun_note(r, "memory estimate %.1f MiB: %.1f resident now + %.1f mapped weights + %.1f activations (%d x %d x %d "
                    "f32) + %.1f block scratch + %.1f statistics + %.1f %s search",
                 m->total / 1048576.0, m->base_rss / 1048576.0, m->model_bytes / 1048576.0, m->act_bytes / 1048576.0,
                 r->calib.n, r->calib.len, r->m->cfg.hidden, m->scratch_bytes / 1048576.0,
                 m->stats_bytes / 1048576.0, m->method_bytes / 1048576.0, r->method);
    double t0 = pq_now();
    pq_status s = pq_calib_run(r->m, &r->calib, &meth, &rp, &r->mem);
    r->t_quant = pq_now() - t0;
    if (s == PQ_OK)
        pq_qrun_note(r, "peak memory %.1f MiB (estimate %.1f MiB, ratio %.2f)", r->mem.peak_rss / 1048576.0,
                     r->mem.total / 1048576.0, (double)r->mem.peak_rss / (double)r->mem.total);
    free_resumed(&sm);
    pq_smooth_free(sm.S);
    return s;
}

// ---- from a scales file -------------------------------------------------------

pq_status pq_qrun_scales_blocks(pq_quantize_run *r) {
    pq_dtype dt = pq_qrun_scale_dtype(&r->m->layers[0].lin[0]);
    pq_fold_block b = {0};
    pq_smooth_block qb = {0};
    pq_status s = PQ_OK;
    double t0 = pq_now();
    for (int l = 0; l < r->m->cfg.n_layers && s == PQ_OK; l++) {
        pq_block_scales sc;
        double err, out;
        s = pq_scales_read_block(r->scales, r->m, r->sp.kind, &r->scheme, l, &sc);
        if (s == PQ_OK) s = pq_fold_block_load(&r->m->cfg, &r->m->layers[l], l, r->p->model, &b);
        if (s == PQ_OK) {
            pq_smooth_fold(&b, &sc, dt);
            s = pq_smooth_quantize(&b, &sc, &r->scheme, dt, l, r->p->model, r->pool, &qb);
        }
        if (s == PQ_OK) s = write_block(r, l, &sc, &qb, &err, &out);
        if (s == PQ_OK) layer_event(r, l, err, -1, 0);
        pq_smooth_block_free(&qb);
        pq_fold_block_free(&b);
    }
    r->t_quant = pq_now() - t0;
    return s;
}
