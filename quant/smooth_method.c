// quant/smooth_method.c — the smoothing methods' shared implementation of
// the method table (see smooth_method.h).
#include "quant/smooth_method.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct {
    pq_method_ctx c;
    pq_smooth_kind kind;
    pq_smooth *S;                   // calibrated: the search
    size_t work;
    const pq_block_scales *sc;      // the current block's calibration (the search's, or the file's)
    const pq_smooth_block *qb;      //   and its quantized linears
    pq_block_scales file_sc;        // --scales: the block read from the file
    pq_fold_block b;                //   widened and folded
    pq_smooth_block own;            //   quantized
    json_t *entry[PQ_NLINEAR];
} smooth_state;

int pq_smooth_method_calibrates(const pq_scheme *s) { return 1; }

pq_status pq_smooth_method_check(const pq_method *self, const pq_quantize_request *q, pq_scheme *s, int calibrated) {
    return pq_smooth_check((pq_smooth_kind)self->kind, &q->smooth, s);
}

void pq_smooth_method_describe(const pq_method *self, const pq_quantize_request *q, char *buf, size_t cap) {
    pq_smooth_describe((pq_smooth_kind)self->kind, &q->smooth, buf, cap);
}

// The search's result of one block (valid until the next).
static pq_status emit(void *ud, int layer, const pq_block_scales *sc, const pq_smooth_block *qb) {
    smooth_state *st = ud;
    st->sc = sc, st->qb = qb;
    return PQ_OK;
}

void pq_smooth_method_done(void *state) {
    smooth_state *st = state;
    for (int k = 0; k < PQ_NLINEAR; k++) {
        json_decref(st->entry[k]);
        st->entry[k] = NULL;
    }
    pq_smooth_block_free(&st->own);
    pq_fold_block_free(&st->b);
    st->sc = NULL, st->qb = NULL;
}

void pq_smooth_method_free(void *state) {
    smooth_state *st = state;
    if (!st) return;
    pq_smooth_method_done(st);
    pq_smooth_free(st->S);
    free(st);
}

pq_status pq_smooth_method_create(const pq_method *self, const pq_method_ctx *c, void **state) {
    smooth_state *st = calloc(1, sizeof *st);
    PQ_FAIL_IF(!st, PQ_ERR_NOMEM, "out of memory");
    st->c = *c;
    st->kind = (pq_smooth_kind)self->kind;
    if (c->calib) {
        pq_smooth_config cfg = {.m = c->m, .kind = st->kind, .scheme = *c->scheme, .dt = c->dt, .p = c->q->smooth,
                                .pool = c->pool, .emit = emit, .ud = st, .bf16 = c->bf16};
        pq_status s = pq_smooth_create(&cfg, c->calib, &st->S, &st->work);
        if (s != PQ_OK) {
            free(st);
            return s;
        }
    }
    *state = st;
    return PQ_OK;
}

pq_status pq_smooth_method_hooks(void *state, pq_calib_method *drv) {
    smooth_state *st = state;
    *drv = (pq_calib_method){.stats = PQ_STAT_ABS, .work_bytes = st->work, .quantize_block = pq_smooth_quantize_block,
                             .sample = pq_smooth_sample, .sample_output = pq_smooth_sample_output,
                             .ud = st->S};
    return PQ_OK;
}

pq_status pq_smooth_method_result(void *state, int layer, pq_block_out *out) {
    smooth_state *st = state;
    const pq_smooth_block *qb = st->qb;
    const pq_block_scales *sc = st->sc;
    PQ_FAIL_IF(!qb || !sc, PQ_ERR_ARG, "layer %d: no result from the search", layer);
    char module[256];
    for (int k = 0; k < PQ_NLINEAR; k++) {
        pq_method_module(module, sizeof module, layer, (pq_linear_slot)k);
        int g = pq_fold_group_of((pq_linear_slot)k);
        json_t *e = json_pack("{s:s, s:f}", "name", module, PQ_JSON_REL_ERR, qb->rel_err[k]);
        if (e && qb->out_err[k] >= 0) json_object_set_new(e, PQ_JSON_OUT_ERR, json_real(qb->out_err[k]));
        if (e && sc->alpha[g] >= 0) json_object_set_new(e, "alpha", json_real(sc->alpha[g]));
        if (e && qb->q[k].input_scale > 0) json_object_set_new(e, "input_scale", json_real(qb->q[k].input_scale));
        PQ_FAIL_IF(!e, PQ_ERR_NOMEM, "out of memory");
        json_decref(st->entry[k]);
        st->entry[k] = e;
        out->q[k] = &qb->q[k];
        out->entry[k] = e;
    }
    for (int g = 0; g < PQ_NGROUPS; g++) {
        const pq_input_group *G = &PQ_INPUT_GROUPS[g];
        out->folded[g] = G->from == PQ_FROM_ATTN_NORM  ? qb->attn_norm
                         : G->from == PQ_FROM_MLP_NORM ? qb->mlp_norm
                                                       : qb->bias[G->from_slot];
    }
    out->scales = sc;
    return PQ_OK;
}

pq_status pq_smooth_method_block(void *state, int layer, pq_block_out *out) {
    smooth_state *st = state;
    const pq_method_ctx *c = &st->c;
    PQ_TRY(pq_scales_read_block(c->scales, c->m, st->kind, c->scheme, layer, &st->file_sc));
    PQ_TRY(pq_fold_block_load(&c->m->cfg, &c->m->layers[layer], layer, c->q->model, c->pool, &st->b));
    pq_smooth_fold(&st->b, &st->file_sc, c->dt, c->pool);
    PQ_TRY(pq_smooth_quantize(&st->b, &st->file_sc, c->scheme, c->dt, layer, c->q->model, c->pool, &st->own));
    st->sc = &st->file_sc, st->qb = &st->own;
    return pq_smooth_method_result(st, layer, out);
}

json_t *pq_smooth_method_provenance(void *state) {
    smooth_state *st = state;
    const pq_scheme *s = st->c.scheme;
    return json_pack("{s:s, s:i}", "activations", pq_scheme_act_static(s) ? "static per tensor"
                     : s->act != PQ_ACT_NONE ? "dynamic per token" : "none", "search_tokens",
                     st->c.q->smooth.search_tokens);
}

const pq_smooth_params *pq_smooth_method_params(void *state) { return &((smooth_state *)state)->c.q->smooth; }
