// Linear layers on the GPU (kernels/linear_cuda.h): upload as FP16, forward
// through cuBLAS.
#include "kernels/cuda_util.cuh"

extern "C" {
#include "common/half.h"
}
#include "kernels/linear_cuda.h"
#include "kernels/ops_cuda.h"

// Elements converted per chunk when widening BF16 / F32 to FP16 (8 MiB of FP16).
#define UPLOAD_CHUNK ((size_t)4 << 20)

static float to_f32(pq_dense_type dt, const void *w, size_t i) {
    switch (dt) {
    case PQ_DENSE_F32: return ((const float *)w)[i];
    case PQ_DENSE_F16: return pq_fp16_to_f32(((const uint16_t *)w)[i]);
    case PQ_DENSE_BF16: return pq_bf16_to_f32(((const uint16_t *)w)[i]);
    }
    return NAN;
}

// Converts n elements starting at i0 into buf; PQ_ERR_NUMERIC on a finite
// value that FP16 cannot hold.
static pq_status convert_chunk(pq_dense_type dt, const void *w, size_t i0, size_t n, const char *what,
                               uint16_t *buf) {
    for (size_t i = 0; i < n; i++) {
        float f = to_f32(dt, w, i0 + i);
        uint16_t hbits = pq_f32_to_fp16(f);
        PQ_FAIL_IF((hbits & 0x7fff) == 0x7c00 && std::isfinite(f), PQ_ERR_NUMERIC,
                   "%s: weight %g at element %zu does not fit FP16 (the CUDA backend stores weights as FP16)", what,
                   (double)f, i0 + i);
        buf[i] = hbits;
    }
    return PQ_OK;
}

static pq_status copy_converted(pq_dense_type dt, const void *w, size_t n, const char *what, uint16_t *d) {
    if (dt == PQ_DENSE_F16) {
        PQ_CUDA_TRY(cudaMemcpy(d, w, n * sizeof(uint16_t), cudaMemcpyHostToDevice));
        return PQ_OK;
    }
    size_t chunk = n < UPLOAD_CHUNK ? n : UPLOAD_CHUNK;
    uint16_t *buf = (uint16_t *)malloc(chunk * sizeof(uint16_t));
    PQ_FAIL_IF(!buf, PQ_ERR_NOMEM, "%s: out of memory for an upload buffer", what);
    pq_status s = PQ_OK;
    for (size_t i0 = 0; i0 < n && s == PQ_OK; i0 += chunk) {
        size_t m = n - i0 < chunk ? n - i0 : chunk;
        s = convert_chunk(dt, w, i0, m, what, buf);
        if (s != PQ_OK) break;
        cudaError_t e = cudaMemcpy(d + i0, buf, m * sizeof(uint16_t), cudaMemcpyHostToDevice);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            s = PQ_FAIL(PQ_ERR_CUDA, "%s: cudaMemcpy of %zu bytes to the device: %s", what, m * sizeof(uint16_t),
                        cudaGetErrorString(e));
        }
    }
    free(buf);
    return s;
}

pq_status pq_cuda_upload_f16(pq_dense_type dt, const void *w, size_t n, const char *what, uint16_t **d_out) {
    *d_out = NULL;
    PQ_FAIL_IF(n == 0, PQ_ERR_ARG, "%s: empty weight", what);
    void *d = NULL;
    cudaError_t e = cudaMalloc(&d, n * sizeof(uint16_t));
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return PQ_FAIL(PQ_ERR_CUDA, "%s: cudaMalloc of %.1f MiB: %s", what, n * 2.0 / 1048576.0,
                       cudaGetErrorString(e));
    }
    pq_status s = copy_converted(dt, w, n, what, (uint16_t *)d);
    if (s != PQ_OK) {
        cudaFree(d);
        return s;
    }
    *d_out = (uint16_t *)d;
    return PQ_OK;
}

pq_status pq_linear_cuda_upload(const pq_linear *W, const char *what, pq_linear_cuda *out) {
    memset(out, 0, sizeof *out);
    PQ_FAIL_IF(W->fmt != PQ_W_DENSE, PQ_ERR_FORMAT, "%s: weight format %d is not supported by the CUDA backend yet",
               what, (int)W->fmt);
    PQ_FAIL_IF(W->rows < 1 || W->cols < 1, PQ_ERR_ARG, "%s: shape [%d, %d]", what, W->rows, W->cols);
    pq_linear_cuda L;
    memset(&L, 0, sizeof L);
    L.fmt = W->fmt;
    L.rows = W->rows;
    L.cols = W->cols;
    PQ_TRY(pq_cuda_upload_f16(W->dense_type, W->w, (size_t)W->rows * W->cols, what, &L.d_w));
    if (W->bias) {
        cudaError_t e = cudaMalloc((void **)&L.d_bias, (size_t)W->rows * sizeof(float));
        if (e == cudaSuccess)
            e = cudaMemcpy(L.d_bias, W->bias, (size_t)W->rows * sizeof(float), cudaMemcpyHostToDevice);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            pq_linear_cuda_free(&L);
            return PQ_FAIL(PQ_ERR_CUDA, "%s: uploading the bias (cudaMalloc/cudaMemcpy): %s", what,
                           cudaGetErrorString(e));
        }
    }
    *out = L;
    return PQ_OK;
}

pq_linear_cuda pq_linear_cuda_alias(const pq_linear_cuda *src) {
    pq_linear_cuda L = *src;
    L.d_bias = NULL;
    L.borrowed_w = 1;
    return L;
}

void pq_linear_cuda_free(pq_linear_cuda *L) {
    if (!L) return;
    if (!L->borrowed_w) cudaFree(L->d_w);
    cudaFree(L->d_bias);
    memset(L, 0, sizeof *L);
}

pq_status pq_linear_cuda_forward(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y, void *cublas,
                                 void *stream) {
    if (T <= 0) return PQ_OK;
    cublasHandle_t h = (cublasHandle_t)cublas;
    switch (L->fmt) {
    case PQ_W_DENSE: {
        // Row-major y[T][rows] = x[T][cols] W[rows][cols]^T is, in cuBLAS's
        // column-major terms, y^T (rows x T, ld rows) = op(A) B with
        // A = the buffer of W seen as cols x rows (ld cols), op = transpose,
        // and B = the buffer of x seen as cols x T (ld cols).
        const float one = 1.0f, zero = 0.0f;
        PQ_CUBLAS_TRY(cublasSetStream(h, (cudaStream_t)stream));
        PQ_CUBLAS_TRY(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, L->rows, T, L->cols, &one, L->d_w, CUDA_R_16F,
                                   L->cols, d_x, CUDA_R_16F, L->cols, &zero, d_y, CUDA_R_32F, L->rows,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        break;
    }
    default:
        return PQ_FAIL(PQ_ERR_FORMAT, "weight format %d is not supported by the CUDA backend yet", (int)L->fmt);
    }
    if (L->d_bias) PQ_TRY(pq_add_bias_cuda(d_y, L->d_bias, T, L->rows, stream));
    return PQ_OK;
}
