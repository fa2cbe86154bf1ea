// quant/gptq_cuda.h in a build without nvcc: no device.
#if !PQ_HAVE_CUDA
#include "quant/gptq_cuda.h"

static pq_status none(void) {
    return PQ_FAIL(PQ_ERR_NO_DEVICE, "--device cuda: this pq was built without CUDA (nvcc was not found)");
}

size_t pq_gptq_cuda_bytes(int hcols, int rows, int cols, const pq_gptq_params *p) { return 0; }
size_t pq_gptq_cuda_hessian_bytes(int cols) { return pq_gptq_order_bytes(cols); }
pq_status pq_gptq_cuda_create(pq_gptq_cuda **out) {
    *out = NULL;
    return none();
}
void pq_gptq_cuda_free(pq_gptq_cuda *g) { (void)g; }
pq_status pq_gptq_cuda_prepare(pq_gptq_cuda *g, const float *h, int cols, const pq_gptq_params *p, const char *name,
                               void *ws, pq_gptq_hessian *out) {
    return none();
}
pq_status pq_gptq_cuda_read_factor(pq_gptq_cuda *g, double *u) { return none(); }
pq_status pq_gptq_cuda_solve(pq_gptq_cuda *g, const float *w, int rows, const pq_gptq_hessian *h,
                             const pq_gptq_params *p, const char *name, pq_qtensor *q, double *loss) {
    return none();
}
pq_status pq_gptq_cuda_output_error(pq_gptq_cuda *g, double *out) { return none(); }
#endif
