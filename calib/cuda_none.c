// calib/xtx_cuda.h in a build without nvcc: no device.
#if !PQ_HAVE_CUDA
#include "calib/xtx_cuda.h"

pq_status pq_xtx_cuda_create(int cols, int max_T, pq_xtx_cuda **out) {
    *out = NULL;
    return PQ_FAIL(PQ_ERR_NO_DEVICE, "--device cuda: this pq was built without CUDA (nvcc was not found)");
}

void pq_xtx_cuda_free(pq_xtx_cuda *h) { (void)h; }

pq_status pq_xtx_cuda_add(pq_xtx_cuda *h, const float *x, int T) {
    return PQ_FAIL(PQ_ERR_NO_DEVICE, "no CUDA in this build");
}

pq_status pq_xtx_cuda_read(pq_xtx_cuda *h, float *xtx) {
    return PQ_FAIL(PQ_ERR_NO_DEVICE, "no CUDA in this build");
}
#endif
