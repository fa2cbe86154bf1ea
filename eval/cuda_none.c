// The CUDA backend entry points of a build without nvcc: no devices.
#if !PQ_HAVE_CUDA
#include "eval/backend.h"

pq_status pq_backend_cuda_create(const pq_model *m, int max_ctx, int graphs, pq_backend **out) {
    *out = NULL;
    return PQ_FAIL(PQ_ERR_NO_DEVICE, "--device cuda: this pq was built without CUDA (nvcc was not found)");
}
#endif
