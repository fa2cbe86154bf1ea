// kernels/cuda_host.h — device memory, streams, copies and event timing for
// C code that cannot include the CUDA headers (tests/bench_cuda.c). Built
// only with CUDA (PQ_HAVE_CUDA). Every call returns PQ_ERR_CUDA naming the
// failing CUDA call.
#ifndef PQ_CUDA_HOST_H
#define PQ_CUDA_HOST_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "common/status.h"

typedef struct {
    char name[256];
    int cc_major, cc_minor, sms;
    size_t mem_bytes, l2_bytes;
    double peak_gbs;   // 2 (double data rate) x memory clock x bus width, in GB/s (1e9 bytes)
} pq_cuda_device_info;

// Properties of the current device.
pq_status pq_cuda_device_info_get(pq_cuda_device_info *out);

pq_status pq_cuda_alloc(size_t bytes, void **d);  // *d NULL on error
void pq_cuda_free(void *d);                        // NULL-safe
pq_status pq_cuda_to_device(void *d, const void *h, size_t bytes);

pq_status pq_cuda_stream_create(void **stream);
void pq_cuda_stream_destroy(void *stream);         // NULL-safe

// Calls fn(ud, i) for i < warmup untimed, then for i < reps between two CUDA
// events on `stream`, waits, and returns the milliseconds per call. fn
// enqueues work on that stream; its failure is returned as is.
typedef pq_status (*pq_cuda_work)(void *ud, int i);
pq_status pq_cuda_time(void *stream, pq_cuda_work fn, void *ud, int warmup, int reps, double *ms_per_call);

// Device-to-device cudaMemcpyAsync of `bytes` (the mean of `reps` copies
// after 2 untimed ones), as GB/s of bytes read plus bytes written (2 x bytes
// per copy).
pq_status pq_cuda_copy_gbs(size_t bytes, int reps, double *gbs);

#ifdef __cplusplus
}
#endif

#endif
