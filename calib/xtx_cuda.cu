// calib/xtx_cuda.cu — X^T X with cublasGemmEx on the tensor cores (see xtx_cuda.h).
#include "kernels/cuda_util.cuh"

extern "C" {
#include "calib/xtx_cuda.h"
#include "kernels/cuda_host.h"
}

struct pq_xtx_cuda {
    int cols;
    pq_act_dtype dt;
    float *d_c; // [cols][cols]
    cublasHandle_t blas;
    cudaStream_t stream;
};

extern "C" void pq_xtx_cuda_free(pq_xtx_cuda *h) {
    if (!h) return;
    if (h->stream) cudaStreamSynchronize(h->stream);
    if (h->blas) cublasDestroy(h->blas);
    cudaFree(h->d_c);
    free(h);
}

static pq_status create(pq_xtx_cuda *h) {
    size_t c = (size_t)h->cols;
    PQ_CUBLAS_TRY(cublasCreate(&h->blas));
    PQ_CUBLAS_TRY(cublasSetStream(h->blas, h->stream));
    PQ_TRY(pq_cuda_malloc_named((void **)&h->d_c, c * c * sizeof(float), "X^T X"));
    PQ_CUDA_TRY(cudaMemsetAsync(h->d_c, 0, c * c * sizeof(float), h->stream));
    return PQ_OK;
}

extern "C" pq_status pq_xtx_cuda_create(int cols, pq_act_dtype dt, void *stream, pq_xtx_cuda **out) {
    *out = NULL;
    PQ_FAIL_IF(cols < 1, PQ_ERR_ARG, "X^T X on the GPU: %d columns", cols);
    pq_device dev;
    PQ_TRY(pq_device_resolve(PQ_DEVICE_CUDA, &dev));
    pq_xtx_cuda *h = (pq_xtx_cuda *)calloc(1, sizeof *h);
    PQ_FAIL_IF(!h, PQ_ERR_NOMEM, "out of memory");
    h->cols = cols, h->dt = dt, h->stream = (cudaStream_t)stream;
    pq_status s = create(h);
    if (s != PQ_OK) {
        pq_xtx_cuda_free(h);
        return s;
    }
    *out = h;
    return PQ_OK;
}

extern "C" pq_status pq_xtx_cuda_add(pq_xtx_cuda *h, const uint16_t *d_x, int T) {
    PQ_FAIL_IF(T < 0, PQ_ERR_ARG, "X^T X on the GPU: %d rows", T);
    if (T == 0) return PQ_OK;
    const float one = 1.0f;
    const cudaDataType_t t = h->dt == PQ_ACT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    // row-major x [T][cols] is the column-major cols x T matrix A: C += A A^T
    PQ_CUBLAS_TRY(cublasGemmEx(h->blas, CUBLAS_OP_N, CUBLAS_OP_T, h->cols, h->cols, T, &one, d_x, t, h->cols, d_x, t,
                               h->cols, &one, h->d_c, CUDA_R_32F, h->cols, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return PQ_OK;
}

extern "C" pq_status pq_xtx_cuda_read(pq_xtx_cuda *h, float *xtx) {
    // element (i, j) of the column-major C is (j, i) of the row-major copy: C is symmetric
    PQ_CUDA_TRY(cudaMemcpyAsync(xtx, h->d_c, (size_t)h->cols * h->cols * sizeof(float), cudaMemcpyDeviceToHost,
                                h->stream));
    PQ_CUDA_TRY(cudaStreamSynchronize(h->stream));
    return PQ_OK;
}

