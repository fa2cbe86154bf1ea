// quant/method_rtn.c — round to nearest (quant/rtn.h) as a method: every
// linear of a block widened and quantized on its own, no calibration.
// (rtn with static activation scales calibrates them: quant/request.c runs
// the fp8 method's static-scale calibration for it.)
#include <stdio.h>

#include "common/sys.h"
#include "quant/method.h"
#include "quant/rtn.h"

typedef struct {
    pq_method_ctx c;
    float *w;                       // one widened weight matrix, the largest of a block
    pq_qtensor q[PQ_NLINEAR];
    json_t *entry[PQ_NLINEAR];
} rtn_state;

static int never(const pq_scheme *s) { return 0; }

static pq_status check(const pq_method *self, const pq_quantize_request *q, pq_scheme *s, int calibrated) {
    return PQ_OK;
}

static void describe(const pq_method *self, const pq_quantize_request *q, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", "");
}

static void done(void *state) {
    rtn_state *st = state;
    for (int k = 0; k < PQ_NLINEAR; k++) {
        pq_qtensor_free(&st->q[k]);
        json_decref(st->entry[k]);
        st->entry[k] = NULL;
    }
}

static void free_state(void *state) {
    rtn_state *st = state;
    if (!st) return;
    done(st);
    pq_free(st->w);
    free(st);
}

static pq_status create(const pq_method *self, const pq_method_ctx *c, void **state) {
    size_t most = 0;
    for (int k = 0; k < PQ_NLINEAR; k++) {
        const pq_linear *L = pq_model_linear(c->m, 0, (pq_linear_slot)k);
        most = (size_t)L->rows * L->cols > most ? (size_t)L->rows * L->cols : most;
    }
    rtn_state *st = calloc(1, sizeof *st);
    PQ_FAIL_IF(!st, PQ_ERR_NOMEM, "out of memory");
    st->c = *c;
    st->w = pq_alloc(most * sizeof(float));
    if (!st->w) {
        free(st);
        return PQ_FAIL(PQ_ERR_NOMEM, "out of memory for a %zu-weight matrix", most);
    }
    *state = st;
    return PQ_OK;
}

static pq_status block(void *state, int layer, pq_block_out *out) {
    rtn_state *st = state;
    const pq_method_ctx *c = &st->c;
    char module[256], name[1400];
    for (int k = 0; k < PQ_NLINEAR; k++) {
        const pq_linear *L = pq_model_linear(c->m, layer, (pq_linear_slot)k);
        pq_method_module(module, sizeof module, layer, (pq_linear_slot)k);
        PQ_FAIL_IF(L->fmt != PQ_W_DENSE, PQ_ERR_FORMAT, "%s: %s is not a dense weight", c->q->model, module);
        const pq_scheme *sc = pq_method_scheme(c, layer, (pq_linear_slot)k);
        double rel = 0;
        if (sc) {
            pq_linear_rows(L, 0, L->rows, st->w);
            snprintf(name, sizeof name, "%.1000s/%s.weight", c->q->model, module);
            PQ_TRY(pq_qtensor_init(&st->q[k], sc, L->rows, L->cols, pq_linear_dtype(L)));
            PQ_TRY(pq_rtn_quantize(st->w, sc, name, c->pool, &st->q[k], &rel));
        }
        st->entry[k] = json_pack("{s:s, s:f}", "name", module, PQ_JSON_REL_ERR, rel);
        PQ_FAIL_IF(!st->entry[k], PQ_ERR_NOMEM, "out of memory");
        out->q[k] = sc ? &st->q[k] : NULL;
        out->entry[k] = st->entry[k];
    }
    return PQ_OK;
}

const pq_method PQ_METHOD_RTN = {
    .name = "rtn", .scheme = "w4a16", .work = "RTN", .kind = PQ_SMOOTH_NONE,
    .calibrates = never, .check = check, .describe = describe, .create = create, .block = block, .done = done,
    .free = free_state,
};
