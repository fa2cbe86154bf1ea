// quant/smooth_method.h — what the smoothing methods (awq, smoothquant,
// fp8: quant/method_awq.c, method_smoothquant.c, method_fp8.c) share as
// entries of the method table (quant/method.h), parameterized by the entry's
// kind (pq_smooth_kind): calibrated inline through the driver (the search of
// quant/smooth.h), or a --scales file applied block by block (quant/scales.h)
// with the same fold and quantization, so both write the same bytes.
#ifndef PQ_SMOOTH_METHOD_H
#define PQ_SMOOTH_METHOD_H

#include "quant/method.h"

// The method-table hooks (see quant/method.h); `self->kind` selects the search.
int pq_smooth_method_calibrates(const pq_scheme *s);
pq_status pq_smooth_method_check(const pq_method *self, const pq_quantize_request *q, pq_scheme *s, int calibrated);
void pq_smooth_method_describe(const pq_method *self, const pq_quantize_request *q, char *buf, size_t cap);
pq_status pq_smooth_method_create(const pq_method *self, const pq_method_ctx *c, void **state);
pq_status pq_smooth_method_hooks(void *state, pq_calib_method *drv);
pq_status pq_smooth_method_block(void *state, int layer, pq_block_out *out);
pq_status pq_smooth_method_result(void *state, int layer, pq_block_out *out);
void pq_smooth_method_done(void *state);
void pq_smooth_method_free(void *state);

// pq.json's object of a smoothing method, the fields every one has:
// "activations" (static per tensor, dynamic per token or none) and
// "search_tokens" (a new reference; NULL when out of memory).
json_t *pq_smooth_method_provenance(void *state);

// The parameters of the method's run.
const pq_smooth_params *pq_smooth_method_params(void *state);

#endif
