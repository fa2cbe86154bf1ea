// kernels/cuda_host.h — the CUDA devices seen from C: which ones pq can use,
// the one rule that picks where a stage runs (--device auto|cpu|cuda), and
// device memory, streams, copies and event timing for C code that cannot
// include the CUDA headers (tests/bench_cuda.c).
//
// Device discovery and the device rule are in every build (a build without
// nvcc has no devices: kernels/cuda_none.c); the helpers after them are
// built only with CUDA (PQ_HAVE_CUDA) and return PQ_ERR_CUDA naming the
// failing CUDA call.
#ifndef PQ_CUDA_HOST_H
#define PQ_CUDA_HOST_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "common/status.h"

// ---- devices (every build) ---------------------------------------------------

// Where a stage runs: AUTO is the GPU when there is a usable one, else the CPU.
typedef enum { PQ_DEVICE_AUTO, PQ_DEVICE_CPU, PQ_DEVICE_CUDA } pq_device;

// Devices pq's kernels can run on (compute capability 8.0 or newer); 0
// without CUDA support or without a GPU.
int pq_cuda_device_count(void);

// The index of the first usable device, or -1 with the reason (no runtime,
// no device, too old a device, a build without nvcc) in why[cap].
int pq_cuda_first_device(char *why, size_t cap);

// The device rule, the one place it is written: AUTO becomes CUDA when
// pq_cuda_device_count() > 0, else CPU; CPU stays CPU; CUDA without a usable
// device is PQ_ERR_NO_DEVICE ("--device cuda: no usable CUDA device (why)").
pq_status pq_device_resolve(pq_device want, pq_device *got);

// "auto", "cpu", "cuda".
const char *pq_device_name(pq_device d);

// ---- helpers (CUDA builds only) ------------------------------------------------

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

// As pq_cuda_time, but timed as a CUDA graph replays it: after the warmup
// calls (plain launches, which also do any first-call setup), the calls i <
// per_graph are captured from `stream` into one graph, which is replayed
// once untimed and then `replays` times between two events: the result is
// the device time per call without the host's launch cost. A call that
// cannot be captured fails the capture: PQ_ERR_CUDA naming it.
pq_status pq_cuda_time_graph(void *stream, pq_cuda_work fn, void *ud, int warmup, int per_graph, int replays,
                             double *ms_per_call);

// Device-to-device cudaMemcpyAsync of `bytes` (the mean of `reps` copies
// after 2 untimed ones), as GB/s of bytes read plus bytes written (2 x bytes
// per copy).
pq_status pq_cuda_copy_gbs(size_t bytes, int reps, double *gbs);

#ifdef __cplusplus
}
#endif

#endif
