// kernels/blas.h — the dense FP32 GEMM pq builds on (OpenBLAS, loaded at run time).
//
// pq loads libopenblas.so.0 with dlopen so that it can choose the kernel set
// first: OpenBLAS 0.3.21 (Debian 12) does not recognise recent Xeons and
// falls back to its SSE3 "Prescott" kernels, 5x slower than its AVX-512
// ones. Unless OPENBLAS_CORETYPE is already set, pq sets it from cpuid
// (SkylakeX with AVX-512, Haswell with AVX2+FMA) before loading. OpenBLAS
// runs single-threaded: pq's own pool runs one GEMM per thread.
#ifndef PQ_BLAS_H
#define PQ_BLAS_H

#include "common/status.h"

// Loads OpenBLAS once per process; later calls return the first result.
pq_status pq_blas_init(void);

// The OpenBLAS kernel set in use ("SkylakeX", ...); "" before init.
const char *pq_blas_core(void);

// Threads OpenBLAS itself may use inside one call (1 inside pq's pool).
void pq_blas_set_threads(int n);

// C[M,N] = alpha * A[M,K] . B[N,K]^T + beta * C   (row-major, leading dims given)
void pq_sgemm_nt(int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc);
// C[M,N] = alpha * A[M,K] . B[K,N] + beta * C
void pq_sgemm_nn(int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc);
// C[M,N] = alpha * A[K,M]^T . B[K,N] + beta * C   (X^T X of activations x[T][cols])
void pq_sgemm_tn(int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc);
// The upper triangle (row <= column) of C[N,N] = alpha * A[K,N]^T . A[K,N] +
// beta * C (ssyrk); the strictly lower triangle is not touched.
void pq_ssyrk_tn_upper(int N, int K, float alpha, const float *A, int lda, float beta, float *C, int ldc);
// Double precision, same conventions (the GPTQ solver and quant/linalg.c).
void pq_dgemm_nt(int M, int N, int K, double alpha, const double *A, int lda, const double *B, int ldb,
                 double beta, double *C, int ldc);
void pq_dgemm_nn(int M, int N, int K, double alpha, const double *A, int lda, const double *B, int ldb,
                 double beta, double *C, int ldc);

// The specification of pq_sgemm_nt: a plain triple loop with a double accumulator.
void pq_sgemm_nt_ref(int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc);

#endif
