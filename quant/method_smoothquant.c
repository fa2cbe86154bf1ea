// quant/method_smoothquant.c — SmoothQuant (quant/smoothquant.h) as a
// method: per block, the smoothing search of quant/smooth.h with kind
// PQ_SMOOTH_SQ (s = max|x|^a / max|W|^(1-a) per input group, alpha fixed or
// searched), the scales folded into the norms and producer linears, the
// static activation scales of a static scheme, RTN of the folded linears;
// the next block's input comes from the quantized block.
#include "quant/smooth_method.h"

static json_t *provenance(void *state, const pq_method_summary *s) {
    const pq_smooth_params *p = pq_smooth_method_params(state);
    json_t *o = pq_smooth_method_provenance(state);
    if (o && json_object_set_new(o, "alpha", p->alpha == PQ_ALPHA_AUTO ? json_string("auto") : json_real(p->alpha)) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

const pq_method PQ_METHOD_SMOOTHQUANT = {
    .name = "smoothquant", .scheme = "w8a8", .work = "smoothquant search", .kind = PQ_SMOOTH_SQ, .smoothing = 1,
    .folds = 1, .takes = PQ_ARG_ALPHA | PQ_ARG_SEARCH_TOKENS,
    .calibrates = pq_smooth_method_calibrates, .check = pq_smooth_method_check,
    .describe = pq_smooth_method_describe, .create = pq_smooth_method_create, .hooks = pq_smooth_method_hooks,
    .block = pq_smooth_method_block, .result = pq_smooth_method_result, .done = pq_smooth_method_done,
    .provenance = provenance, .free = pq_smooth_method_free,
};
