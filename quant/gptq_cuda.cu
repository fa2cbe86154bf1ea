// quant/gptq_cuda.cu — GPTQ on the GPU (see gptq_cuda.h). Every kernel's
// scalar arithmetic is that of quant/gptq.c and quant/rtn.c, one IEEE
// operation at a time (the _rn intrinsics keep nvcc from contracting a
// multiply and an add into an FMA, which the CPU build does not do either:
// -ffp-contract=off).
#include "kernels/cuda_util.cuh"

#include <cuda_bf16.h>
#include <cusolverDn.h>

extern "C" {
#include "kernels/cuda_host.h"
#include "kernels/qpack.h"
#include "quant/gptq_cuda.h"
#include "quant/rtn.h"
}

// Threads (rows) per block of the batch kernel: small, so that the few
// hundred blocks of a 4096-row linear spread over every SM.
#define ROWS_PER_BLOCK 64
// "no bad row yet": cudaMemsetAsync of 0x7f bytes, above any row index
#define NO_ROW 0x7f7f7f7f

#define PQ_CUSOLVER_TRY(call)                                                                    \
    do {                                                                                         \
        cusolverStatus_t pq_cusolver_s_ = (call);                                                \
        if (pq_cusolver_s_ != CUSOLVER_STATUS_SUCCESS)                                           \
            return PQ_FAIL(PQ_ERR_CUDA, "%s: cuSOLVER status %d", #call, (int)pq_cusolver_s_);  \
    } while (0)

struct pq_gptq_cuda {
    cudaStream_t stream;
    cublasHandle_t blas;
    cusolverDnHandle_t solver;
    int cols;                       // columns of the prepared factor (0: none)
    // device buffers, grown on demand (bytes held in the *_cap fields)
    float *d_h;                     // [cols][cols] H as given
    double *d_u;                    // [cols][cols] J H J, its factor, then U (row-major, upper)
    void *d_work;                   // potrf's and trtri's workspace
    int *d_perm;                    // [cols]
    unsigned char *d_dead;          // [cols]
    int *d_flags;                   // [2] potrf / trtri info; bad pivots, or the first row whose scale overflowed
    float *d_wf;                    // [rows][cols] w as given
    double *d_w;                    // [cols][rows] W permuted, column-major
    double *d_e;                    // [blen][rows] a batch's errors, column-major
    int8_t *d_codes;                // [rows][cols] signed codes, natural order
    float *d_deq;                   // [rows][cols] W' (the dequantized codes), then W - W'
    float *d_y;                     // [rows][cols] a product with H (the output error)
    double *d_dots;                 // [2][rows] the output error's per-row sums
    uint32_t *d_packed;             // [rows][words] the packed codes (PQ_W_QPACK)
    float *d_scales, *d_zeros;      // [rows][ng] scales, signed zero points
    uint8_t *d_zq;                  // [rows][ng] zero points as stored
    double *d_loss;                 // [rows]
    size_t h_cap, u_cap, work_cap, perm_cap, dead_cap, wf_cap, w_cap, e_cap, codes_cap, deq_cap, y_cap, dots_cap,
        packed_cap, scales_cap, zeros_cap, zq_cap, loss_cap;
    int solved_rows;                // rows of the last solve since the last prepare (0: none)
    void *h_work;                   // trtri's host workspace
    size_t h_work_cap;
    double *h_loss;                 // [rows] host copy of d_loss, then [2][rows] of d_dots
    size_t h_loss_cap;
};

// ---- the scalar arithmetic of quant/rtn.c --------------------------------------

typedef struct {
    int bits, sym, mse;
    int dt; // 0 f32, 1 f16, 2 bf16
} qparams;

// One operation's f32 result rounded to the scale dtype (pq_round_to_dtype):
// round to nearest even, overflow to Inf, as common/half.h.
static __device__ float rd(float x, int dt) {
    if (dt == 1) return __half2float(__float2half_rn(x));
    if (dt == 2) return __bfloat162float(__float2bfloat16_rn(x));
    return x;
}

static __device__ float dtype_eps(int dt) { return dt == 1 ? 0x1p-10f : dt == 2 ? 0x1p-7f : 0x1p-23f; }

static __device__ float clampf(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

// range_params of quant/rtn.c
static __device__ int range_params(float lo, float hi, const qparams &q, float *scale, float *zero) {
    float qmin = (float)-(1 << (q.bits - 1)), qmax = (float)((1 << (q.bits - 1)) - 1);
    lo = rd(lo, q.dt), hi = rd(hi, q.dt);
    float levels = (float)((1 << q.bits) - 1);
    float raw = q.sym ? rd(__fdiv_rn(fmaxf(-lo, hi), levels / 2), q.dt)
                      : rd(__fdiv_rn(rd(__fsub_rn(hi, lo), q.dt), levels), q.dt);
    float sc = raw == 0 ? dtype_eps(q.dt) : raw;
    if (!isfinite(sc)) return 0;
    *scale = sc;
    if (q.sym)
        *zero = 0;
    else if (raw == 0)
        *zero = lo == 0 ? 0 : qmax;
    else
        *zero = rintf(clampf(rd(__fsub_rn(qmin, rd(__fdiv_rn(lo, raw), q.dt)), q.dt), qmin, qmax));
    return 1;
}

// pq_rtn_code
static __device__ float code_of(float w, float scale, float zero, int bits) {
    float x = __fdiv_rn(w, scale);
    if (zero != 0) x = __fadd_rn(x, zero);
    return rintf(clampf(x, (float)-(1 << (bits - 1)), (float)((1 << (bits - 1)) - 1)));
}

// pq_rtn_group_lp_error; powf as the correctly rounded f32 of the f64 pow
// (glibc's powf is correctly rounded but for rare hard cases)
template <class Get> static __device__ double lp_error(const Get &w, int n, int bits, float scale, float zero) {
    double e = 0;
    for (int c = 0; c < n; c++) {
        float v = w(c);
        float d = fabsf(__fsub_rn(v, __fmul_rn(scale, __fsub_rn(code_of(v, scale, zero, bits), zero))));
        if (d > 0) e = __dadd_rn(e, (double)(float)pow((double)d, (double)(float)PQ_MSE_NORM));
    }
    return e;
}

// pq_rtn_group_params over the n values w(0..n)
template <class Get>
static __device__ int group_params(const Get &w, int n, const qparams &q, float *scale, float *zero) {
    float lo = 0, hi = 0;
    for (int c = 0; c < n; c++) {
        float v = w(c);
        lo = v < lo ? v : lo, hi = v > hi ? v : hi;
    }
    if (!range_params(lo, hi, q, scale, zero)) return 0;
    if (!q.mse) return 1;
    double best = lp_error(w, n, q.bits, *scale, *zero);
    for (int i = 1; i < PQ_MSE_STEPS; i++) {
        double p = __dsub_rn(1.0, __ddiv_rn((double)i, (double)PQ_MSE_GRID));
        float sc, z;
        if (!range_params((float)__dmul_rn(p, (double)lo), (float)__dmul_rn(p, (double)hi), q, &sc, &z)) continue;
        double e = lp_error(w, n, q.bits, sc, z);
        if (e < best) best = e, *scale = sc, *zero = z;
    }
    return 1;
}

// A group's values in the permuted, column-major working copy (on the fly),
// rounded to f32 as the CPU's f32 buffer holds them.
struct strided_f64 {
    const double *w;
    size_t stride;
    __device__ float operator()(int c) const { return (float)w[(size_t)c * stride]; }
};

// A group's values in the unmodified weight, dead columns as 0 (static groups).
struct masked_f32 {
    const float *w;
    const unsigned char *dead;
    __device__ float operator()(int c) const { return dead[c] ? 0.0f : w[c]; }
};

static __device__ void store_params(float *scales, float *zeros, uint8_t *zq, size_t k, float sc, float z, int bits) {
    scales[k] = sc;
    zeros[k] = z;
    zq[k] = (uint8_t)((int)z + (1 << (bits - 1)));
}

// ---- prepare ------------------------------------------------------------------------

// a [n][n] = J Hp J + the dampening: Hp[i][j] = h[perm[i]][perm[j]], a dead
// column's diagonal 1, then + add on the diagonal (as pq_gptq_prepare), with
// the index order reversed (quant/linalg.h: U = J Lr^-1 J). Symmetric, so
// row- and column-major alike.
static __global__ void build_reversed(const float *h, const int *perm, const unsigned char *dead, int n, double add,
                                      double *a) {
    const size_t nn = (size_t)n * n;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < nn; k += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(k / n), j = (int)(k % n);
        int pi = perm[n - 1 - i], pj = perm[n - 1 - j];
        double v = h[(size_t)pi * n + pj];
        if (i == j) v = __dadd_rn(dead[pi] ? 1.0 : v, add);
        a[k] = v;
    }
}

// Counts the diagonal elements of the factor that are not finite and
// positive (potrf reports a non-positive pivot; this also catches NaN / Inf).
static __global__ void check_pivots(const double *a, int n, int *bad) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        double d = a[(size_t)i * n + i];
        if (!(d > 0) || isinf(d)) atomicAdd(bad, 1);
    }
}

// In place: the column-major lower-triangular Lr^-1 in a becomes the
// row-major upper U = J Lr^-1 J, zero below the diagonal. U[i][j] is
// Lr^-1 (n-1-i, n-1-j), stored at row-major (n-1-j, n-1-i): an involution,
// so each pair is swapped by the one thread of the pair's element above the
// anti-diagonal (i + j < n - 1); elements on it stay.
static __global__ void anti_transpose(double *a, int n) {
    const size_t nn = (size_t)n * n, m = (size_t)n - 1;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < nn; k += (size_t)gridDim.x * blockDim.x) {
        size_t i = k / n, j = k % n;
        if (i + j > m) continue; // the partner's thread moves it
        if (i + j == m) {
            if (i > j) a[k] = 0;
            continue;
        }
        size_t si = m - j, sj = m - i, s = si * n + sj;
        double x = a[k], y = a[s];
        a[k] = i > j ? 0.0 : y;
        a[s] = si > sj ? 0.0 : x;
    }
}

// ---- solve ----------------------------------------------------------------------------

// W [cols][rows] (column-major, permuted): W(r, i) = w[r][perm[i]], 0 for a dead column.
static __global__ void load_w(const float *wf, const int *perm, const unsigned char *dead, int rows, int cols,
                              double *W) {
    const size_t n = (size_t)rows * cols;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(k / rows), r = (int)(k % rows), c = perm[i];
        W[k] = dead[c] ? 0.0 : (double)wf[(size_t)r * cols + c];
    }
}

// static_groups: the scale of group g of row r from the unmodified row, one
// thread per (r, g); the first row that overflows into *bad (atomicMin).
static __global__ void static_params(const float *wf, const unsigned char *dead, int rows, int cols, int G, int ng,
                                     qparams q, float *scales, float *zeros, uint8_t *zq, int *bad) {
    const size_t n = (size_t)rows * ng;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) {
        int r = (int)(k / ng), c0 = (int)(k % ng) * G, len = c0 + G < cols ? G : cols - c0;
        float sc, z;
        if (group_params(masked_f32{wf + (size_t)r * cols + c0, dead + c0}, len, q, &sc, &z))
            store_params(scales, zeros, zq, k, sc, z, q.bits);
        else
            atomicMin(bad, r);
    }
}

// Columns [i1, i2) of every row, one thread per row r: solve_chunk's inner
// loop of quant/gptq.c. W(r, i) is W[i * rows + r] (a warp's rows are
// adjacent); U's row i is read by every thread at once (one broadcast
// transaction per warp, cached: block_size may be up to 65536, too large
// a batch for shared memory). The batch's errors go to E for the GEMM.
static __global__ void batch(double *W, double *E, const double *U, const int *perm, int rows, int cols, int i1,
                             int i2, int G, int ng, int on_the_fly, qparams q, float *scales, float *zeros,
                             uint8_t *zq, int8_t *codes, float *deq, double *loss, int *bad) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const size_t R = (size_t)rows;
    double *Wr = W + r, *Er = E + r, l = 0;
    for (int i = i1; i < i2; i++) {
        size_t k = (size_t)r * ng + (on_the_fly ? i / G : perm[i] / G);
        if (on_the_fly && i % G == 0) {
            float sc, z;
            if (!group_params(strided_f64{Wr + (size_t)i * R, R}, i + G < cols ? G : cols - i, q, &sc, &z)) {
                atomicMin(bad, r); // the run fails; the rest of the row's batch is left harmless
                for (int c = i; c < i2; c++) Er[(size_t)(c - i1) * R] = 0;
                return;
            }
            store_params(scales, zeros, zq, k, sc, z, q.bits);
        }
        const float sc = scales[k], z = zeros[k];
        const double w = Wr[(size_t)i * R];
        const float code = code_of((float)w, sc, z, q.bits);
        const float dq = __fmul_rn(sc, __fsub_rn(code, z)); // what the stored code dequantizes to
        codes[(size_t)r * cols + perm[i]] = (int8_t)code;
        deq[(size_t)r * cols + perm[i]] = dq;
        const double *Ui = U + (size_t)i * cols;
        const double err = __ddiv_rn(__dsub_rn(w, (double)dq), Ui[i]);
        l = __dadd_rn(l, __dmul_rn(err, err));
        Er[(size_t)(i - i1) * R] = err;
        for (int c = i + 1; c < i2; c++) Wr[(size_t)c * R] = __dsub_rn(Wr[(size_t)c * R], __dmul_rn(err, Ui[c]));
    }
    loss[r] = __dadd_rn(loss[r], l);
}

// The codes as PQ_W_QPACK stores them (pq_qtensor_set_code): word wd of row
// r holds columns wd * per .. + per - 1, each code + 2^(bits-1) at bits x (c % per).
static __global__ void pack(const int8_t *codes, int rows, int cols, int bits, int per, int words, uint32_t *out) {
    const size_t n = (size_t)rows * words;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) {
        int r = (int)(k / words), c0 = (int)(k % words) * per;
        uint32_t v = 0;
        for (int j = 0; j < per && c0 + j < cols; j++)
            v |= (uint32_t)(codes[(size_t)r * cols + c0 + j] + (1 << (bits - 1))) << (j * bits);
        out[k] = v;
    }
}

// d = w - d in place (f32, as pq_act_stats_output_sq's D).
static __global__ void difference(const float *w, size_t n, float *d) {
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x)
        d[k] = __fsub_rn(w[k], d[k]);
}

// out[r] = sum_c p[r][c] y[r][c] in double, columns in order; a thread per row.
static __global__ void row_dots(const float *p, const float *y, int rows, int cols, double *out) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float *pr = p + (size_t)r * cols, *yr = y + (size_t)r * cols;
    double s = 0;
    for (int c = 0; c < cols; c++) s = __dadd_rn(s, __dmul_rn((double)pr[c], (double)yr[c]));
    out[r] = s;
}

// ---- the context ----------------------------------------------------------------------

static int grouped(const pq_gptq_params *p, int cols) { return p->group > 0 && p->group < cols; }

extern "C" size_t pq_gptq_cuda_hessian_bytes(int cols) { return pq_gptq_order_bytes(cols); }

extern "C" size_t pq_gptq_cuda_bytes(int hcols, int rows, int cols, const pq_gptq_params *p) {
    size_t hn = (size_t)hcols, n = (size_t)rows * cols, R = (size_t)rows;
    size_t ng = grouped(p, cols) ? (size_t)((cols + p->group - 1) / p->group) : 1;
    size_t prepare = hn * hn * (sizeof(float) + sizeof(double)) + hn * (sizeof(int) + 1) + hn * 256 * sizeof(double);
    // w as given, W, W' and a product with H, codes and (at most a byte a code) their packed copy; the batch
    // errors; scales, zeros; loss and the output error's sums
    size_t solve = n * (3 * sizeof(float) + sizeof(double) + 2) + R * pq_gptq_batch_len(p, cols) * sizeof(double) +
                   R * ng * (2 * sizeof(float) + 1) + 3 * R * sizeof(double);
    return prepare + solve;
}

extern "C" void pq_gptq_cuda_free(pq_gptq_cuda *g) {
    if (!g) return;
    if (g->stream) cudaStreamSynchronize(g->stream);
    if (g->solver) cusolverDnDestroy(g->solver);
    if (g->blas) cublasDestroy(g->blas);
    void *bufs[] = {g->d_h,    g->d_u,      g->d_work,   g->d_perm,   g->d_dead, g->d_flags, g->d_wf,
                    g->d_w,    g->d_e,      g->d_codes,  g->d_deq,    g->d_y,    g->d_dots,  g->d_packed,
                    g->d_scales, g->d_zeros, g->d_zq,    g->d_loss};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
    if (g->stream) cudaStreamDestroy(g->stream);
    free(g->h_work);
    free(g->h_loss);
    free(g);
}

static pq_status create(pq_gptq_cuda *g) {
    PQ_CUDA_TRY(cudaStreamCreate(&g->stream));
    PQ_CUBLAS_TRY(cublasCreate(&g->blas));
    PQ_CUBLAS_TRY(cublasSetStream(g->blas, g->stream));
    PQ_CUSOLVER_TRY(cusolverDnCreate(&g->solver));
    PQ_CUSOLVER_TRY(cusolverDnSetStream(g->solver, g->stream));
    return pq_cuda_malloc_named((void **)&g->d_flags, 2 * sizeof(int), "GPTQ's flags");
}

extern "C" pq_status pq_gptq_cuda_create(pq_gptq_cuda **out) {
    *out = NULL;
    pq_device dev;
    PQ_TRY(pq_device_resolve(PQ_DEVICE_CUDA, &dev));
    pq_gptq_cuda *g = (pq_gptq_cuda *)calloc(1, sizeof *g);
    PQ_FAIL_IF(!g, PQ_ERR_NOMEM, "out of memory");
    pq_status s = create(g);
    if (s != PQ_OK) {
        pq_gptq_cuda_free(g);
        return s;
    }
    *out = g;
    return PQ_OK;
}

// *d holds at least `bytes` (the stream is idle whenever this is called:
// every entry point ends by waiting for it).
static pq_status grow(void *d, size_t *cap, size_t bytes, const char *what) {
    void **p = (void **)d;
    if (bytes <= *cap && *p) return PQ_OK;
    cudaFree(*p);
    *p = NULL;
    *cap = 0;
    PQ_TRY(pq_cuda_malloc_named(p, bytes, what));
    *cap = bytes;
    return PQ_OK;
}

static pq_status grow_host(void **h, size_t *cap, size_t bytes) {
    if (bytes <= *cap && *h) return PQ_OK;
    free(*h);
    *cap = 0;
    *h = malloc(bytes ? bytes : 1);
    PQ_FAIL_IF(!*h, PQ_ERR_NOMEM, "out of memory for GPTQ's host staging (%zu bytes)", bytes);
    *cap = bytes;
    return PQ_OK;
}

static pq_status wait_for(pq_gptq_cuda *g, const char *what) {
    cudaError_t e = cudaStreamSynchronize(g->stream);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return PQ_FAIL(PQ_ERR_CUDA, "%s on the GPU: %s", what, cudaGetErrorString(e));
    }
    return PQ_OK;
}

// ---- prepare ----------------------------------------------------------------------------

// The factorization of J Hp J with the dampening of hs->damp x mean;
// *ok: it succeeded (potrf's info 0 and every pivot finite and positive).
static pq_status factor(pq_gptq_cuda *g, int n, double mean, int lwork, const pq_gptq_hessian *hs, int *ok) {
    size_t nn = (size_t)n * n;
    int flags[2];
    build_reversed<<<pq_cuda_blocks(nn), PQ_CUDA_THREADS, 0, g->stream>>>(g->d_h, g->d_perm, g->d_dead, n,
                                                                             hs->damp * mean, g->d_u);
    PQ_CUDA_LAUNCHED("build_reversed");
    PQ_CUDA_TRY(cudaMemsetAsync(g->d_flags, 0, 2 * sizeof(int), g->stream));
    PQ_CUSOLVER_TRY(cusolverDnDpotrf(g->solver, CUBLAS_FILL_MODE_LOWER, n, g->d_u, n, (double *)g->d_work, lwork,
                                     g->d_flags));
    check_pivots<<<pq_cuda_blocks((size_t)n), PQ_CUDA_THREADS, 0, g->stream>>>(g->d_u, n, g->d_flags + 1);
    PQ_CUDA_LAUNCHED("check_pivots");
    PQ_CUDA_TRY(cudaMemcpyAsync(flags, g->d_flags, sizeof flags, cudaMemcpyDeviceToHost, g->stream));
    PQ_TRY(wait_for(g, "the Cholesky factorization"));
    PQ_FAIL_IF(flags[0] < 0, PQ_ERR_CUDA, "cusolverDnDpotrf: parameter %d is invalid", -flags[0]);
    *ok = flags[0] == 0 && flags[1] == 0;
    return PQ_OK;
}

extern "C" pq_status pq_gptq_cuda_prepare(pq_gptq_cuda *g, const float *h, int cols, const pq_gptq_params *p,
                                          const char *name, void *ws, pq_gptq_hessian *out) {
    pq_gptq_hessian hs;
    double mean;
    g->cols = 0; // no factor until this one is done (a failed prepare leaves none), no solve with it yet
    g->solved_rows = 0;
    PQ_TRY(pq_gptq_order(h, cols, p, name, ws, &hs, &mean));
    const size_t n = (size_t)cols, nn = n * n;
    int lwork = 0;
    size_t tr_dev = 0, tr_host = 0;
    PQ_TRY(grow(&g->d_h, &g->h_cap, nn * sizeof(float), "the GPTQ Hessian"));
    PQ_TRY(grow(&g->d_u, &g->u_cap, nn * sizeof(double), "the GPTQ factor"));
    PQ_TRY(grow(&g->d_perm, &g->perm_cap, n * sizeof(int), "GPTQ's column order"));
    PQ_TRY(grow(&g->d_dead, &g->dead_cap, n, "GPTQ's dead columns"));
    PQ_CUSOLVER_TRY(cusolverDnDpotrf_bufferSize(g->solver, CUBLAS_FILL_MODE_LOWER, cols, g->d_u, cols, &lwork));
    PQ_CUSOLVER_TRY(cusolverDnXtrtri_bufferSize(g->solver, CUBLAS_FILL_MODE_LOWER, CUBLAS_DIAG_NON_UNIT, cols,
                                                CUDA_R_64F, g->d_u, cols, &tr_dev, &tr_host));
    size_t work = (size_t)lwork * sizeof(double) > tr_dev ? (size_t)lwork * sizeof(double) : tr_dev;
    PQ_TRY(grow(&g->d_work, &g->work_cap, work, "the Cholesky workspace"));
    PQ_TRY(grow_host(&g->h_work, &g->h_work_cap, tr_host));
    PQ_CUDA_TRY(cudaMemcpyAsync(g->d_h, h, nn * sizeof(float), cudaMemcpyHostToDevice, g->stream));
    PQ_CUDA_TRY(cudaMemcpyAsync(g->d_perm, hs.perm, n * sizeof(int), cudaMemcpyHostToDevice, g->stream));
    PQ_CUDA_TRY(cudaMemcpyAsync(g->d_dead, hs.dead, n, cudaMemcpyHostToDevice, g->stream));
    for (;; hs.damp *= 10, hs.retries++) { // pq_gptq_prepare's loop
        PQ_FAIL_IF(hs.damp > PQ_GPTQ_DAMP_MAX * (1 + 1e-9), PQ_ERR_NUMERIC,
                   "%s: the Hessian is not positive definite even with dampening %g (x mean diagonal)", name,
                   hs.damp / 10);
        int ok = 0;
        PQ_TRY(factor(g, cols, mean, lwork, &hs, &ok));
        if (ok) break;
    }
    hs.lambda = hs.damp * mean;
    int info = 0;
    PQ_CUSOLVER_TRY(cusolverDnXtrtri(g->solver, CUBLAS_FILL_MODE_LOWER, CUBLAS_DIAG_NON_UNIT, cols, CUDA_R_64F,
                                     g->d_u, cols, g->d_work, tr_dev, g->h_work, tr_host, g->d_flags));
    anti_transpose<<<pq_cuda_blocks(nn), PQ_CUDA_THREADS, 0, g->stream>>>(g->d_u, cols);
    PQ_CUDA_LAUNCHED("anti_transpose");
    PQ_CUDA_TRY(cudaMemcpyAsync(&info, g->d_flags, sizeof info, cudaMemcpyDeviceToHost, g->stream));
    PQ_TRY(wait_for(g, "the inverse of the Cholesky factor"));
    PQ_FAIL_IF(info != 0, PQ_ERR_NUMERIC, "%s: cusolverDnXtrtri: info %d", name, info);
    g->cols = cols;
    *out = hs;
    return PQ_OK;
}

extern "C" pq_status pq_gptq_cuda_read_factor(pq_gptq_cuda *g, double *u) {
    PQ_FAIL_IF(!g->cols, PQ_ERR_ARG, "GPTQ on the GPU: no prepared Hessian");
    PQ_CUDA_TRY(cudaMemcpyAsync(u, g->d_u, (size_t)g->cols * g->cols * sizeof(double), cudaMemcpyDeviceToHost,
                                g->stream));
    return wait_for(g, "reading the GPTQ factor");
}

// ---- solve ------------------------------------------------------------------------------

extern "C" pq_status pq_gptq_cuda_solve(pq_gptq_cuda *g, const float *w, int rows, const pq_gptq_hessian *h,
                                        const pq_gptq_params *p, const char *name, pq_qtensor *q, double *loss) {
    const int cols = h->cols;
    PQ_TRY(pq_gptq_check_output(q, rows, cols, p, name));
    PQ_FAIL_IF(q->is_ggml, PQ_ERR_ARG, "%s: GPTQ on the GPU does not write GGUF grids", name);
    PQ_FAIL_IF(g->cols != cols, PQ_ERR_ARG, "%s: no prepared Hessian of %d columns on the GPU", name, cols);
    const int blen = pq_gptq_batch_len(p, cols), ng = pq_qtensor_ngroups(q), G = grouped(p, cols) ? p->group : cols;
    const int on_the_fly = !p->static_groups || G == cols;
    const int words = pq_qpack_words_per_row(cols, p->bits);
    const size_t R = (size_t)rows, n = R * cols, nq = R * ng;
    const qparams qp = {p->bits, p->sym != 0, p->observer == PQ_OBSERVER_MSE,
                        q->scale_dtype == PQ_DT_F16 ? 1 : q->scale_dtype == PQ_DT_BF16 ? 2 : 0};
    PQ_TRY(grow(&g->d_wf, &g->wf_cap, n * sizeof(float), "the GPTQ weight"));
    PQ_TRY(grow(&g->d_w, &g->w_cap, n * sizeof(double), "GPTQ's working weight"));
    PQ_TRY(grow(&g->d_e, &g->e_cap, R * blen * sizeof(double), "GPTQ's batch errors"));
    PQ_TRY(grow(&g->d_codes, &g->codes_cap, n, "the GPTQ codes"));
    PQ_TRY(grow(&g->d_deq, &g->deq_cap, n * sizeof(float), "the dequantized GPTQ weight"));
    PQ_TRY(grow(&g->d_packed, &g->packed_cap, R * words * sizeof(uint32_t), "the packed GPTQ codes"));
    PQ_TRY(grow(&g->d_scales, &g->scales_cap, nq * sizeof(float), "the GPTQ scales"));
    PQ_TRY(grow(&g->d_zeros, &g->zeros_cap, nq * sizeof(float), "the GPTQ zero points"));
    PQ_TRY(grow(&g->d_zq, &g->zq_cap, nq, "the stored GPTQ zero points"));
    PQ_TRY(grow(&g->d_loss, &g->loss_cap, R * sizeof(double), "the GPTQ loss"));
    PQ_TRY(grow_host((void **)&g->h_loss, &g->h_loss_cap, 2 * R * sizeof(double)));
    g->solved_rows = 0;
    PQ_CUDA_TRY(cudaMemcpyAsync(g->d_wf, w, n * sizeof(float), cudaMemcpyHostToDevice, g->stream));
    PQ_CUDA_TRY(cudaMemsetAsync(g->d_loss, 0, R * sizeof(double), g->stream));
    PQ_CUDA_TRY(cudaMemsetAsync(g->d_flags + 1, 0x7f, sizeof(int), g->stream)); // NO_ROW
    load_w<<<pq_cuda_blocks(n), PQ_CUDA_THREADS, 0, g->stream>>>(g->d_wf, g->d_perm, g->d_dead, rows, cols, g->d_w);
    PQ_CUDA_LAUNCHED("load_w");
    if (!on_the_fly) {
        static_params<<<pq_cuda_blocks(nq), PQ_CUDA_THREADS, 0, g->stream>>>(
            g->d_wf, g->d_dead, rows, cols, G, ng, qp, g->d_scales, g->d_zeros, g->d_zq, g->d_flags + 1);
        PQ_CUDA_LAUNCHED("static_params");
    }
    const unsigned nblk = (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    const double minus_one = -1.0, one = 1.0;
    for (int i1 = 0; i1 < cols; i1 += blen) {
        int i2 = i1 + blen < cols ? i1 + blen : cols;
        batch<<<nblk, ROWS_PER_BLOCK, 0, g->stream>>>(g->d_w, g->d_e, g->d_u, g->d_perm, rows, cols, i1, i2, G, ng,
                                                       on_the_fly, qp, g->d_scales, g->d_zeros, g->d_zq,
                                                       g->d_codes, g->d_deq, g->d_loss, g->d_flags + 1);
        PQ_CUDA_LAUNCHED("batch");
        if (i2 == cols) break;
        // W[:, i2:] -= E U[i1:i2, i2:], column-major: E is rows x (i2 - i1) (ld rows); the row-major
        // U[i1:i2, i2:] read column-major from &U[i1][i2] with ld cols is its transpose, hence OP_T
        PQ_CUBLAS_TRY(cublasDgemm(g->blas, CUBLAS_OP_N, CUBLAS_OP_T, rows, cols - i2, i2 - i1, &minus_one, g->d_e,
                                  rows, g->d_u + (size_t)i1 * cols + i2, cols, &one, g->d_w + (size_t)i2 * R, rows));
    }
    if (q->fmt == PQ_W_QPACK) {
        pack<<<pq_cuda_blocks(R * words), PQ_CUDA_THREADS, 0, g->stream>>>(
            g->d_codes, rows, cols, p->bits, pq_qpack_per_word(p->bits), words, g->d_packed);
        PQ_CUDA_LAUNCHED("pack");
        PQ_CUDA_TRY(cudaMemcpyAsync(q->packed, g->d_packed, R * words * sizeof(uint32_t), cudaMemcpyDeviceToHost,
                                    g->stream));
    } else {
        PQ_CUDA_TRY(cudaMemcpyAsync(q->i8, g->d_codes, n, cudaMemcpyDeviceToHost, g->stream));
    }
    PQ_CUDA_TRY(cudaMemcpyAsync(q->scales, g->d_scales, nq * sizeof(float), cudaMemcpyDeviceToHost, g->stream));
    if (q->zeros) PQ_CUDA_TRY(cudaMemcpyAsync(q->zeros, g->d_zq, nq, cudaMemcpyDeviceToHost, g->stream));
    int bad = NO_ROW;
    PQ_CUDA_TRY(cudaMemcpyAsync(&bad, g->d_flags + 1, sizeof bad, cudaMemcpyDeviceToHost, g->stream));
    PQ_CUDA_TRY(cudaMemcpyAsync(g->h_loss, g->d_loss, R * sizeof(double), cudaMemcpyDeviceToHost, g->stream));
    PQ_TRY(wait_for(g, "the GPTQ solve"));
    PQ_FAIL_IF(bad != NO_ROW, PQ_ERR_NUMERIC, "%s: row %d: a scale overflows %s", name, bad,
               pq_dtype_name(q->scale_dtype));
    if (q->g_idx)
        for (int i = 0; i < cols; i++) q->g_idx[h->perm[i]] = i / p->group;
    double total = 0;
    for (int r = 0; r < rows; r++) total += g->h_loss[r];
    if (loss) *loss = total;
    g->solved_rows = rows;
    return PQ_OK;
}

extern "C" pq_status pq_gptq_cuda_output_error(pq_gptq_cuda *g, double *out) {
    const int rows = g->solved_rows, cols = g->cols;
    PQ_FAIL_IF(!rows, PQ_ERR_ARG, "GPTQ on the GPU: no solved linear to measure");
    const size_t R = (size_t)rows, n = R * cols;
    const float one = 1.0f, zero = 0.0f;
    PQ_TRY(grow(&g->d_y, &g->y_cap, n * sizeof(float), "the output error's product"));
    PQ_TRY(grow(&g->d_dots, &g->dots_cap, 2 * R * sizeof(double), "the output error's sums"));
    difference<<<pq_cuda_blocks(n), PQ_CUDA_THREADS, 0, g->stream>>>(g->d_wf, n, g->d_deq);
    PQ_CUDA_LAUNCHED("difference");
    // Y = P H for P [rows][cols] row-major (a cols x rows column-major matrix): Y^T = H P^T, H symmetric
    const float *P[2] = {g->d_wf, g->d_deq};
    const unsigned nblk = (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    for (int k = 0; k < 2; k++) { // energy from W, error from W - W'
        PQ_CUBLAS_TRY(cublasSgemm(g->blas, CUBLAS_OP_N, CUBLAS_OP_N, cols, rows, cols, &one, g->d_h, cols, P[k], cols,
                                  &zero, g->d_y, cols));
        row_dots<<<nblk, ROWS_PER_BLOCK, 0, g->stream>>>(P[k], g->d_y, rows, cols, g->d_dots + k * R);
        PQ_CUDA_LAUNCHED("row_dots");
    }
    PQ_CUDA_TRY(cudaMemcpyAsync(g->h_loss, g->d_dots, 2 * R * sizeof(double), cudaMemcpyDeviceToHost, g->stream));
    PQ_TRY(wait_for(g, "the GPTQ output error"));
    g->solved_rows = 0; // W' became W - W'
    double den = 0, num = 0;
    for (int r = 0; r < rows; r++) den += g->h_loss[r], num += g->h_loss[R + r];
    *out = den > 0 ? num / den : 0;
    return PQ_OK;
}
