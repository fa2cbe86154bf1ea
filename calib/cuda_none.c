// calib/xtx_cuda.h and calib/block_gpu.h in a build without nvcc: no device.
#if !PQ_HAVE_CUDA
#include "calib/block_gpu.h"
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

pq_status pq_calib_gpu_create(const pq_config *c, int len, pq_calib_gpu **out) {
    *out = NULL;
    return PQ_FAIL(PQ_ERR_NO_DEVICE, "--device cuda: this pq was built without CUDA (nvcc was not found)");
}

void pq_calib_gpu_free(pq_calib_gpu *g) { (void)g; }

pq_status pq_calib_gpu_load(pq_calib_gpu *g, const pq_layer *L, int layer) {
    return PQ_FAIL(PQ_ERR_NO_DEVICE, "no CUDA in this build");
}

pq_status pq_calib_gpu_forward(pq_calib_gpu *g, int layer, const float *x, float *y, const pq_block_hooks *hooks) {
    return PQ_FAIL(PQ_ERR_NO_DEVICE, "no CUDA in this build");
}

size_t pq_calib_gpu_peak_bytes(const pq_calib_gpu *g) { return 0; }
#endif
