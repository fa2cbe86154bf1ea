// quant/method_fp8.c — static activation scales without smoothing as a
// method ("fp8", whose default scheme is fp8-static; rtn with a static
// scheme runs it too): per block, quant/smooth.h's search with kind
// PQ_SMOOTH_NONE measures each input's max |x| over the calibration windows
// for its static scale; the linears are quantized with RTN; the next
// block's input comes from the quantized block.
#include "quant/smooth_method.h"

static json_t *provenance(void *state, const pq_method_summary *s) { return pq_smooth_method_provenance(state); }

const pq_method PQ_METHOD_FP8 = {
    .name = "fp8", .scheme = "fp8-static", .work = "fp8 search", .kind = PQ_SMOOTH_NONE, .smoothing = 1,
    .calibrates = pq_smooth_method_calibrates, .check = pq_smooth_method_check,
    .describe = pq_smooth_method_describe, .create = pq_smooth_method_create, .hooks = pq_smooth_method_hooks,
    .block = pq_smooth_method_block, .result = pq_smooth_method_result, .done = pq_smooth_method_done,
    .provenance = provenance, .free = pq_smooth_method_free,
};
