// calib/xtx_cuda.h and calib/block_gpu.h in a build without nvcc: no device.
#if !PQ_HAVE_CUDA
#include "calib/block_gpu.h"
#include "calib/xtx_cuda.h"

static pq_status none(void) {
    return PQ_FAIL(PQ_ERR_NO_DEVICE, "--device cuda: this pq was built without CUDA (nvcc was not found)");
}

pq_status pq_xtx_cuda_create(int cols, pq_act_dtype dt, void *stream, pq_xtx_cuda **out) {
    *out = NULL;
    return none();
}
void pq_xtx_cuda_free(pq_xtx_cuda *h) { (void)h; }
pq_status pq_xtx_cuda_add(pq_xtx_cuda *h, const uint16_t *d_x, int T) { return none(); }
pq_status pq_xtx_cuda_read(pq_xtx_cuda *h, float *xtx) { return none(); }

size_t pq_calib_gpu_device_bytes(const pq_config *c, int n, int len) { return 0; }
pq_act_dtype pq_calib_gpu_dtype(const pq_model *m) { return PQ_ACT_F16; }
pq_status pq_calib_gpu_create(const pq_config *c, pq_act_dtype dt, int n, int len, pq_calib_gpu **out) {
    *out = NULL;
    return none();
}
void pq_calib_gpu_free(pq_calib_gpu *g) { (void)g; }
void *pq_calib_gpu_stream(const pq_calib_gpu *g) { return NULL; }
pq_status pq_calib_gpu_set_inputs(pq_calib_gpu *g, const float *X) { return none(); }
pq_status pq_calib_gpu_get_inputs(pq_calib_gpu *g, float *X) { return none(); }
pq_status pq_calib_gpu_load(pq_calib_gpu *g, const pq_layer *L, int layer) { return none(); }
pq_status pq_calib_gpu_pass(pq_calib_gpu *g, int layer, const pq_calib_gpu_hooks *hooks) { return none(); }
pq_status pq_calib_gpu_fetch(pq_calib_gpu *g, const uint16_t *d_x, int T, int cols, const float **x) { return none(); }
pq_status pq_calib_gpu_first_nonfinite(pq_calib_gpu *g, long long *index) { return none(); }
size_t pq_calib_gpu_peak_bytes(const pq_calib_gpu *g) { return 0; }
#endif
