// kernels/cuda_util.cuh — what every pq .cu file shares (CUDA C++ only):
// turning CUDA / cuBLAS failures into a pq_status that names the failing
// call, and the launch geometry of the elementwise kernels.
//
// C headers of the project are included inside extern "C" by the .cu files,
// after the C++ system headers (so the C library headers they pull in are
// already seen and skipped).
#ifndef PQ_CUDA_UTIL_CUH
#define PQ_CUDA_UTIL_CUH

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

extern "C" {
#include "common/status.h"
}

// Returns PQ_ERR_CUDA "<call>: <CUDA's message>" from the enclosing function
// when `call` fails. The runtime's per-thread "last error" is cleared so a
// later launch check does not report this failure a second time.
#define PQ_CUDA_TRY(call)                                                                      \
    do {                                                                                       \
        cudaError_t pq_cuda_e_ = (call);                                                       \
        if (pq_cuda_e_ != cudaSuccess) {                                                       \
            (void)cudaGetLastError();                                                          \
            return PQ_FAIL(PQ_ERR_CUDA, "%s: %s", #call, cudaGetErrorString(pq_cuda_e_));     \
        }                                                                                      \
    } while (0)

#define PQ_CUBLAS_TRY(call)                                                                    \
    do {                                                                                       \
        cublasStatus_t pq_cublas_s_ = (call);                                                  \
        if (pq_cublas_s_ != CUBLAS_STATUS_SUCCESS)                                             \
            return PQ_FAIL(PQ_ERR_CUDA, "%s: %s", #call, cublasGetStatusString(pq_cublas_s_)); \
    } while (0)

// After a <<<...>>> launch: a bad configuration (or an earlier asynchronous
// failure) becomes PQ_ERR_CUDA naming the kernel.
#define PQ_CUDA_LAUNCHED(kernel_name)                                                          \
    do {                                                                                       \
        cudaError_t pq_cuda_e_ = cudaGetLastError();                                           \
        if (pq_cuda_e_ != cudaSuccess)                                                         \
            return PQ_FAIL(PQ_ERR_CUDA, "launch of %s: %s", kernel_name,                       \
                           cudaGetErrorString(pq_cuda_e_));                                    \
    } while (0)

// cudaMalloc of `bytes` (at least 1) into *d, naming `what` on failure (then
// *d is NULL).
static inline pq_status pq_cuda_malloc_named(void **d, size_t bytes, const char *what) {
    cudaError_t e = cudaMalloc(d, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *d = NULL;
        return PQ_FAIL(PQ_ERR_CUDA, "%s: cudaMalloc of %.1f MiB: %s", what, bytes / 1048576.0, cudaGetErrorString(e));
    }
    return PQ_OK;
}

// A new device copy (*d, cudaFree it) of `bytes` host bytes, naming `what` on failure.
static inline pq_status pq_cuda_copy_named(void **d, const void *host, size_t bytes, const char *what) {
    PQ_TRY(pq_cuda_malloc_named(d, bytes, what));
    cudaError_t e = cudaMemcpy(*d, host, bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return PQ_FAIL(PQ_ERR_CUDA, "%s: cudaMemcpy of %zu bytes to the device: %s", what, bytes,
                       cudaGetErrorString(e));
    }
    return PQ_OK;
}

// Elementwise kernels: 256 threads per block, grid-stride loops over size_t
// indices, at most PQ_CUDA_MAX_BLOCKS blocks (n > 0).
#define PQ_CUDA_THREADS 256
#define PQ_CUDA_MAX_BLOCKS 65536
static inline unsigned pq_cuda_blocks(size_t n) {
    size_t b = (n + PQ_CUDA_THREADS - 1) / PQ_CUDA_THREADS;
    return (unsigned)(b < PQ_CUDA_MAX_BLOCKS ? b : PQ_CUDA_MAX_BLOCKS);
}

#endif
