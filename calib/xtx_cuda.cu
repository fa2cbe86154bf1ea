// calib/xtx_cuda.cu — X^T X with cuBLAS SSYRK (see xtx_cuda.h).
#include "kernels/cuda_util.cuh"

extern "C" {
#include "calib/xtx_cuda.h"
#include "kernels/cuda_host.h"
}

struct pq_xtx_cuda {
    int cols, max_T;
    float *d_x;   // [max_T][cols]
    float *d_c;   // [cols][cols]; its column-major lower triangle is the row-major upper one
    cublasHandle_t blas;
    cudaStream_t stream;
};

extern "C" void pq_xtx_cuda_free(pq_xtx_cuda *h) {
    if (!h) return;
    if (h->blas) cublasDestroy(h->blas);
    if (h->stream) cudaStreamDestroy(h->stream);
    cudaFree(h->d_x);
    cudaFree(h->d_c);
    free(h);
}

static pq_status create(pq_xtx_cuda *h) {
    size_t c = (size_t)h->cols;
    PQ_CUDA_TRY(cudaStreamCreateWithFlags(&h->stream, cudaStreamNonBlocking));
    PQ_CUBLAS_TRY(cublasCreate(&h->blas));
    PQ_CUBLAS_TRY(cublasSetStream(h->blas, h->stream));
    PQ_CUBLAS_TRY(cublasSetMathMode(h->blas, CUBLAS_PEDANTIC_MATH)); // true f32: no TF32 in the Hessian
    PQ_CUDA_TRY(cudaMalloc((void **)&h->d_x, (size_t)h->max_T * c * sizeof(float)));
    PQ_CUDA_TRY(cudaMalloc((void **)&h->d_c, c * c * sizeof(float)));
    PQ_CUDA_TRY(cudaMemsetAsync(h->d_c, 0, c * c * sizeof(float), h->stream));
    return PQ_OK;
}

extern "C" pq_status pq_xtx_cuda_create(int cols, int max_T, pq_xtx_cuda **out) {
    *out = NULL;
    PQ_FAIL_IF(cols < 1 || max_T < 1, PQ_ERR_ARG, "X^T X on the GPU: bad shape %d x %d", max_T, cols);
    pq_device dev;
    PQ_TRY(pq_device_resolve(PQ_DEVICE_CUDA, &dev));
    pq_xtx_cuda *h = (pq_xtx_cuda *)calloc(1, sizeof *h);
    PQ_FAIL_IF(!h, PQ_ERR_NOMEM, "out of memory");
    h->cols = cols;
    h->max_T = max_T;
    pq_status s = create(h);
    if (s != PQ_OK) {
        pq_xtx_cuda_free(h);
        return s;
    }
    *out = h;
    return PQ_OK;
}

extern "C" pq_status pq_xtx_cuda_add(pq_xtx_cuda *h, const float *x, int T) {
    PQ_FAIL_IF(T < 0 || T > h->max_T, PQ_ERR_ARG, "X^T X on the GPU: %d rows, at most %d", T, h->max_T);
    if (T == 0) return PQ_OK;
    const float one = 1.0f;
    PQ_CUDA_TRY(cudaMemcpyAsync(h->d_x, x, (size_t)T * h->cols * sizeof(float), cudaMemcpyHostToDevice, h->stream));
    // row-major x [T][cols] is the column-major cols x T matrix A: C += A A^T
    PQ_CUBLAS_TRY(cublasSsyrk(h->blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, h->cols, T, &one, h->d_x, h->cols, &one,
                              h->d_c, h->cols));
    PQ_CUDA_TRY(cudaStreamSynchronize(h->stream)); // x is the caller's buffer
    return PQ_OK;
}

extern "C" pq_status pq_xtx_cuda_read(pq_xtx_cuda *h, float *xtx) {
    // the same bytes: element (i, j) of the column-major lower triangle is (j, i) of the row-major upper one
    PQ_CUDA_TRY(cudaMemcpyAsync(xtx, h->d_c, (size_t)h->cols * h->cols * sizeof(float), cudaMemcpyDeviceToHost,
                                h->stream));
    PQ_CUDA_TRY(cudaStreamSynchronize(h->stream));
    return PQ_OK;
}
