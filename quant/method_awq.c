// quant/method_awq.c — AWQ (quant/awq.h) as a method: per block, the
// smoothing search of quant/smooth.h with kind PQ_SMOOTH_AWQ (an alpha grid
// per input group judged by the block output, then clip values), the scales
// folded into the norms and producer linears, RTN of the folded linears. The
// next block's input is the unquantized block's output, as llm-awq and
// AutoAWQ compute it.
#include "quant/smooth_method.h"

static json_t *provenance(void *state, const pq_method_summary *s) {
    const pq_smooth_params *p = pq_smooth_method_params(state);
    json_t *o = pq_smooth_method_provenance(state);
    if (o && json_object_update_new(o, json_pack("{s:i, s:i, s:s}", "grid", p->grid, "clip_grid", p->clip_grid,
                                                 "loss", "block output")) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

const pq_method PQ_METHOD_AWQ = {
    .name = "awq", .scheme = "w4a16", .work = "awq search", .kind = PQ_SMOOTH_AWQ, .smoothing = 1, .folds = 1,
    .source_propagates = 1, .takes = PQ_ARG_AWQ_GRID | PQ_ARG_AWQ_CLIP_GRID | PQ_ARG_SEARCH_TOKENS,
    .calibrates = pq_smooth_method_calibrates, .check = pq_smooth_method_check,
    .describe = pq_smooth_method_describe, .create = pq_smooth_method_create, .hooks = pq_smooth_method_hooks,
    .block = pq_smooth_method_block, .result = pq_smooth_method_result, .done = pq_smooth_method_done,
    .provenance = provenance, .free = pq_smooth_method_free,
};
