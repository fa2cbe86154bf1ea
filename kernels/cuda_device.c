// kernels/cuda_device.c — the device rule of kernels/cuda_host.h, and the
// device discovery of a build without nvcc (no devices).
#include "kernels/cuda_host.h"

#include <stdio.h>

#if !PQ_HAVE_CUDA
int pq_cuda_first_device(char *why, size_t cap) {
    snprintf(why, cap, "this pq was built without CUDA (nvcc was not found)");
    return -1;
}

int pq_cuda_device_count(void) { return 0; }
#endif

pq_status pq_device_resolve(pq_device want, pq_device *got) {
    char why[256];
    if (want == PQ_DEVICE_CPU) return *got = PQ_DEVICE_CPU, PQ_OK;
    int first = pq_cuda_first_device(why, sizeof why);
    PQ_FAIL_IF(want == PQ_DEVICE_CUDA && first < 0, PQ_ERR_NO_DEVICE, "--device cuda: no usable CUDA device (%s)", why);
    *got = first >= 0 ? PQ_DEVICE_CUDA : PQ_DEVICE_CPU;
    return PQ_OK;
}

const char *pq_device_name(pq_device d) {
    return d == PQ_DEVICE_CPU ? "cpu" : d == PQ_DEVICE_CUDA ? "cuda" : "auto";
}
