#include "blas.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112, UPPER = 121 };

typedef void (*sgemm_fn)(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                         int lda, const float *B, int ldb, float beta, float *C, int ldc);
typedef void (*dgemm_fn)(int order, int ta, int tb, int M, int N, int K, double alpha, const double *A,
                         int lda, const double *B, int ldb, double beta, double *C, int ldc);
typedef void (*ssyrk_fn)(int order, int uplo, int trans, int N, int K, float alpha, const float *A, int lda,
                         float beta, float *C, int ldc);
typedef void (*set_threads_fn)(int);
typedef char *(*corename_fn)(void);

static sgemm_fn cblas_sgemm_;
static dgemm_fn cblas_dgemm_;
static ssyrk_fn cblas_ssyrk_;
static set_threads_fn set_threads_;
static char core[64];
static pq_status init_status = PQ_OK;
static char init_error[512];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static const char *coretype_for_cpu(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    return NULL; // let OpenBLAS decide
}

static void load(void) {
    const char *ct = coretype_for_cpu();
    if (ct && !getenv("OPENBLAS_CORETYPE")) setenv("OPENBLAS_CORETYPE", ct, 0);
    if (!getenv("OPENBLAS_NUM_THREADS")) setenv("OPENBLAS_NUM_THREADS", "1", 0);
    static const char *names[] = {"libopenblas.so.0", "libopenblas.so", "libopenblasp.so.0"};
    void *h = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        init_status = PQ_ERR_IO;
        snprintf(init_error, sizeof init_error,
                 "cannot load libopenblas.so.0 (%s); install it: apt-get install libopenblas0", dlerror());
        return;
    }
    cblas_sgemm_ = (sgemm_fn)dlsym(h, "cblas_sgemm");
    cblas_dgemm_ = (dgemm_fn)dlsym(h, "cblas_dgemm");
    cblas_ssyrk_ = (ssyrk_fn)dlsym(h, "cblas_ssyrk");
    set_threads_ = (set_threads_fn)dlsym(h, "openblas_set_num_threads");
    corename_fn corename = (corename_fn)dlsym(h, "openblas_get_corename");
    if (!cblas_sgemm_ || !cblas_dgemm_ || !cblas_ssyrk_) {
        init_status = PQ_ERR_IO;
        snprintf(init_error, sizeof init_error, "libopenblas.so.0 has no cblas_sgemm / cblas_dgemm / cblas_ssyrk");
        return;
    }
    if (set_threads_) set_threads_(1);
    snprintf(core, sizeof core, "%s", corename ? corename() : "unknown");
}

pq_status pq_blas_init(void) {
    pthread_once(&once, load);
    PQ_FAIL_IF(init_status != PQ_OK, init_status, "%s", init_error);
    return PQ_OK;
}

const char *pq_blas_core(void) { return core; }

void pq_blas_set_threads(int n) {
    if (set_threads_) set_threads_(n < 1 ? 1 : n);
}

void pq_sgemm_nt(int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc) {
    PQ_ASSERT(cblas_sgemm_); // pq_blas_init must have succeeded
    if (M <= 0 || N <= 0) return;
    cblas_sgemm_(ROW_MAJOR, NO_TRANS, TRANS, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void pq_sgemm_nn(int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc) {
    PQ_ASSERT(cblas_sgemm_);
    if (M <= 0 || N <= 0) return;
    cblas_sgemm_(ROW_MAJOR, NO_TRANS, NO_TRANS, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void pq_ssyrk_tn_upper(int N, int K, float alpha, const float *A, int lda, float beta, float *C, int ldc) {
    PQ_ASSERT(cblas_ssyrk_);
    if (N <= 0) return;
    cblas_ssyrk_(ROW_MAJOR, UPPER, TRANS, N, K, alpha, A, lda, beta, C, ldc);
}

void pq_sgemm_tn(int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc) {
    PQ_ASSERT(cblas_sgemm_);
    if (M <= 0 || N <= 0) return;
    cblas_sgemm_(ROW_MAJOR, TRANS, NO_TRANS, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void pq_dgemm_nt(int M, int N, int K, double alpha, const double *A, int lda, const double *B, int ldb,
                 double beta, double *C, int ldc) {
    PQ_ASSERT(cblas_dgemm_);
    if (M <= 0 || N <= 0) return;
    cblas_dgemm_(ROW_MAJOR, NO_TRANS, TRANS, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void pq_dgemm_nn(int M, int N, int K, double alpha, const double *A, int lda, const double *B, int ldb,
                 double beta, double *C, int ldc) {
    PQ_ASSERT(cblas_dgemm_);
    if (M <= 0 || N <= 0) return;
    cblas_dgemm_(ROW_MAJOR, NO_TRANS, NO_TRANS, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void pq_sgemm_nt_ref(int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int k = 0; k < K; k++) acc += (double)A[(size_t)i * lda + k] * B[(size_t)j * ldb + k];
            float prev = beta == 0 ? 0 : beta * C[(size_t)i * ldc + j];
            C[(size_t)i * ldc + j] = (float)(alpha * acc) + prev;
        }
}
