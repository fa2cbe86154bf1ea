// quant/request.h — a pq_quantize_request resolved against the method table
// (internal to quant/): the method that runs, the scheme it writes, whether
// it calibrates. pq_quantize_describe, pq_quantize and pq_calibrate all
// start here, so they refuse the same requests with the same messages.
#ifndef PQ_REQUEST_H
#define PQ_REQUEST_H

#include <string.h>

#include "quant/method.h"

typedef struct {
    const pq_method *m;   // the implementation that runs
    const char *name;     // the method as reported: m->name, or "rtn" when rtn with static
                          // activation scales runs the fp8 method's static-scale calibration
    pq_scheme scheme;
    int calibrated;       // runs the calibration driver (not with --scales)
    int bf16;             // its CPU block passes multiply in BF16 (--calib-precision resolved)
} pq_resolved;

// Validates q for pq_quantize (calibrate 0) or pq_calibrate (calibrate 1):
// the method (q->method, or the --scales file's), the scheme, the
// parameters the method takes and their ranges. PQ_ERR_ARG naming what is
// wrong (a parameter the method does not take: the flag and the method);
// PQ_ERR_NO_DEVICE for device cuda without a GPU on a calibrated run.
pq_status pq_request_resolve(const pq_quantize_request *q, int calibrate, pq_resolved *out);

// Whether the request rotates the model first (--rotate hadamard).
static inline int pq_request_rotates(const pq_quantize_request *q) {
    return q->rotate && strcmp(q->rotate, "hadamard") == 0;
}

#endif
