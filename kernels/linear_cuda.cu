// Linear layers on the GPU (kernels/linear_cuda.h): upload, the forward
// dispatch per format and token count, and the cuBLAS / cuBLASLt calls.
//
// Quantized weights with more than PQ_CUDA_GEMV_MAX_T tokens: rows are
// dequantized into an FP16 panel of at most PANEL_ELEMS weights (32 MiB,
// whatever the model) and at most a quarter of the rows (so a dense copy of
// a whole quantized weight never exists, even for small ones), and
// multiplied with cublasGemmEx. Why not a fused
// tensor-core GEMM: at 512 tokens the product is compute-bound (512 FLOP
// per weight), and cuBLAS's Hopper kernels (wgmma, TMA, warp-specialized)
// run near the FP16 peak, which a hand-written mma.sync kernel does not
// approach; the panel costs ~4.5 bytes of traffic per weight (0.5 read, 2
// written, 2 read by the GEMM, mostly from L2 at this size), a few percent
// of the GEMM's time at 512 tokens. tests/bench_cuda.c measures the ratio
// to cuBLAS FP16; a fused kernel is the next step if it disappoints.
#include "kernels/cuda_util.cuh"

#include <cublasLt.h>

extern "C" {
#include "common/half.h"
#include "kernels/w8a8.h"
}
#include "kernels/linear_cuda.h"
#include "kernels/ops_cuda.h"
#include "kernels/quant_cuda.h"

// Elements converted per chunk when widening BF16 / F32 to FP16 (8 MiB of FP16).
#define UPLOAD_CHUNK ((size_t)4 << 20)
// Weights per dequantized FP16 panel of the GEMM path (32 MiB).
#define PANEL_ELEMS ((size_t)16 << 20)
// Tokens per cuBLASLt call of a W8A8 linear (bounds its workspace).
#define W8A8_CHUNK_T 512
// cuBLASLt's own workspace (NVIDIA's recommendation for Hopper).
#define LT_WS_BYTES ((size_t)32 << 20)
// cuBLASLt algorithms remembered per context (one per GEMM shape).
#define LT_PLANS 64

static size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

// ---- context ------------------------------------------------------------------

typedef struct {
    int fp8, m, n, k;
    cublasLtMatmulAlgo_t algo;
} lt_plan;

struct pq_cuda_ctx {
    cudaStream_t stream;
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    void *d_ws;
    size_t ws_bytes;
    lt_plan plans[LT_PLANS];
    int n_plans, next_plan;
};

pq_status pq_cuda_ctx_create(void *stream, size_t ws_bytes, pq_cuda_ctx **out) {
    *out = NULL;
    pq_cuda_ctx *c = (pq_cuda_ctx *)calloc(1, sizeof *c);
    PQ_FAIL_IF(!c, PQ_ERR_NOMEM, "out of memory");
    c->stream = (cudaStream_t)stream;
    pq_status s = PQ_OK;
    cublasStatus_t bs = cublasCreate(&c->blas);
    if (bs == CUBLAS_STATUS_SUCCESS) bs = cublasSetStream(c->blas, c->stream);
    if (bs == CUBLAS_STATUS_SUCCESS) bs = cublasLtCreate(&c->lt);
    if (bs != CUBLAS_STATUS_SUCCESS) s = PQ_FAIL(PQ_ERR_CUDA, "cuBLAS / cuBLASLt handle: %s", cublasGetStatusString(bs));
    if (s == PQ_OK && ws_bytes) {
        cudaError_t e = cudaMalloc(&c->d_ws, ws_bytes);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            c->d_ws = NULL;
            s = PQ_FAIL(PQ_ERR_CUDA, "cudaMalloc of a %.1f MiB linear-layer workspace: %s", ws_bytes / 1048576.0,
                        cudaGetErrorString(e));
        }
    }
    if (s != PQ_OK) {
        pq_cuda_ctx_free(c);
        return s;
    }
    c->ws_bytes = ws_bytes;
    *out = c;
    return PQ_OK;
}

void pq_cuda_ctx_free(pq_cuda_ctx *c) {
    if (!c) return;
    cudaFree(c->d_ws);
    if (c->lt) cublasLtDestroy(c->lt);
    if (c->blas) cublasDestroy(c->blas);
    free(c);
}


// ---- upload -------------------------------------------------------------------------

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

// A zeroed device matrix of h_alloc rows of `dpitch` bytes, its first
// h_copy rows holding the host rows of `width` bytes (spitch apart): row
// padding without expanding the data.
static pq_status dev_rows(void **d, size_t h_alloc, size_t dpitch, const void *host, size_t spitch, size_t width,
                          size_t h_copy, const char *what) {
    PQ_TRY(pq_cuda_malloc_named(d, h_alloc * dpitch, what));
    PQ_CUDA_TRY(cudaMemset(*d, 0, h_alloc * dpitch));
    PQ_CUDA_TRY(cudaMemcpy2D(*d, dpitch, host, spitch, width, h_copy, cudaMemcpyHostToDevice));
    return PQ_OK;
}

pq_status pq_cuda_upload_f16(pq_dense_type dt, const void *w, size_t n, const char *what, uint16_t **d_out) {
    *d_out = NULL;
    PQ_FAIL_IF(n == 0, PQ_ERR_ARG, "%s: empty weight", what);
    void *d = NULL;
    PQ_TRY(pq_cuda_malloc_named(&d, n * sizeof(uint16_t), what));
    pq_status s = copy_converted(dt, w, n, what, (uint16_t *)d);
    if (s != PQ_OK) {
        cudaFree(d);
        return s;
    }
    *d_out = (uint16_t *)d;
    return PQ_OK;
}

static pq_status upload_qpack(const pq_qpack *q, const char *what, pq_linear_cuda *L) {
    PQ_FAIL_IF(q->bits < 2 || q->bits > 8 || q->group < 1, PQ_ERR_FORMAT, "%s: packed weight of %d bits, group %d",
               what, q->bits, q->group);
    const int wpr = pq_qpack_words_per_row(q->cols, q->bits), ng = pq_qpack_ngroups(q->cols, q->group);
    const size_t nsc = (size_t)q->rows * ng;
    pq_qpack_dev *d = &L->qp;
    void *p = NULL;
    d->bits = q->bits, d->group = q->group, d->ngroups = ng;
    d->ldw = (int)round_up((size_t)wpr, 16);
    PQ_TRY(dev_rows(&p, (size_t)q->rows, (size_t)d->ldw * 4, q->packed, (size_t)wpr * 4, (size_t)wpr * 4,
                    (size_t)q->rows, what));
    d->packed = (const uint32_t *)p;
    // FP16 scales when that loses nothing (checkpoints store them as FP16 /
    // BF16): half the bytes the GEMV reads besides the codes
    uint16_t *s16 = (uint16_t *)malloc(nsc * sizeof(uint16_t));
    PQ_FAIL_IF(!s16, PQ_ERR_NOMEM, "%s: out of memory", what);
    d->scales_f16 = 1;
    for (size_t i = 0; i < nsc && d->scales_f16; i++) {
        s16[i] = pq_f32_to_fp16(q->scales[i]);
        d->scales_f16 = pq_fp16_to_f32(s16[i]) == q->scales[i];
    }
    p = NULL;
    pq_status s = d->scales_f16 ? pq_cuda_copy_named(&p, s16, nsc * 2, what)
                                : pq_cuda_copy_named(&p, q->scales, nsc * 4, what);
    d->scales = p;
    free(s16);
    PQ_TRY(s);
    if (q->zeros) {
        // the GEMV builds FP16 constants from z assuming a b-bit code (a
        // packed file cannot hold more)
        for (size_t i = 0; i < nsc; i++)
            PQ_FAIL_IF(q->zeros[i] >> q->bits, PQ_ERR_FORMAT, "%s: zero point %d of a %d-bit weight (row %zu)", what,
                       q->zeros[i], q->bits, i / ng);
        p = NULL;
        s = pq_cuda_copy_named(&p, q->zeros, nsc, what);
        d->zeros = (const uint8_t *)p;
        PQ_TRY(s);
    }
    if (q->g_idx) {
        for (int c = 0; c < q->cols; c++)
            PQ_FAIL_IF(q->g_idx[c] < 0 || q->g_idx[c] >= ng, PQ_ERR_FORMAT, "%s: g_idx[%d] = %d outside [0, %d)", what,
                       c, q->g_idx[c], ng);
        p = NULL;
        s = pq_cuda_copy_named(&p, q->g_idx, (size_t)q->cols * 4, what);
        d->gidx = (const int32_t *)p;
        PQ_TRY(s);
    }
    return PQ_OK;
}

// INT8 / FP8 codes, rows padded to ldq bytes and to a multiple of 16 rows.
static pq_status upload_bytes(const void *q, const float *scales, int nscales, const char *what, pq_linear_cuda *L) {
    pq_bytes_dev *d = &L->qb;
    void *p = NULL;
    d->ldq = (int)round_up((size_t)L->cols, 64);
    PQ_TRY(dev_rows(&p, round_up((size_t)L->rows, 16), (size_t)d->ldq, q, (size_t)L->cols, (size_t)L->cols,
                    (size_t)L->rows, what));
    d->q = (const uint8_t *)p;
    p = NULL;
    pq_status s = pq_cuda_copy_named(&p, scales, (size_t)nscales * 4, what);
    d->scales = (const float *)p;
    return s;
}

static pq_status check_act(const pq_linear *W, const char *what) {
    const pq_actq *a = &W->act;
    if (a->type == PQ_ACTQ_NONE) return PQ_OK;
    PQ_FAIL_IF(!(a->type == PQ_ACTQ_INT8 && W->fmt == PQ_W_INT8) && !(a->type == PQ_ACTQ_FP8 && W->fmt == PQ_W_FP8),
               PQ_ERR_FORMAT, "%s: activation quantization %d with weight format %d", what, (int)a->type, (int)W->fmt);
    PQ_FAIL_IF(!(a->static_scale >= 0.0f) || std::isinf(a->static_scale), PQ_ERR_FORMAT,
               "%s: static activation scale %g", what, (double)a->static_scale);
    PQ_FAIL_IF(W->cols > PQ_W8A8_MAX_COLS, PQ_ERR_FORMAT, "%s: W8A8 with %d input columns (at most %d)", what,
               W->cols, PQ_W8A8_MAX_COLS);
    if (a->type == PQ_ACTQ_FP8) {
        int dev = 0, major = 0, minor = 0;
        PQ_CUDA_TRY(cudaGetDevice(&dev));
        PQ_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
        PQ_CUDA_TRY(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
        PQ_FAIL_IF(major * 10 + minor < 89, PQ_ERR_FORMAT,
                   "%s: FP8 x FP8 (fp8-dynamic) needs compute capability 8.9 or newer; this GPU has %d.%d", what,
                   major, minor);
    }
    return PQ_OK;
}

static pq_status upload_weight(const pq_linear *W, const char *what, pq_linear_cuda *L) {
    PQ_TRY(check_act(W, what));
    L->act = W->act;
    switch (W->fmt) {
    case PQ_W_DENSE: return pq_cuda_upload_f16(W->dense_type, W->w, (size_t)W->rows * W->cols, what, &L->d_w);
    case PQ_W_QPACK:
        PQ_FAIL_IF(W->q.rows != W->rows || W->q.cols != W->cols, PQ_ERR_ARG, "%s: packed shape disagrees", what);
        return upload_qpack(&W->q, what, L);
    case PQ_W_INT8:
        L->qb.per_channel = 1;
        return upload_bytes(W->i8.q, W->i8.scales, W->rows, what, L);
    case PQ_W_FP8:
        L->qb.per_channel = W->f8.per_channel;
        return upload_bytes(W->f8.q, W->f8.scales, W->f8.per_channel ? W->rows : 1, what, L);
    }
    return PQ_FAIL(PQ_ERR_FORMAT, "%s: weight format %d", what, (int)W->fmt);
}

pq_status pq_linear_cuda_upload(const pq_linear *W, const char *what, pq_linear_cuda *out) {
    memset(out, 0, sizeof *out);
    PQ_FAIL_IF(W->rows < 1 || W->cols < 1, PQ_ERR_ARG, "%s: shape [%d, %d]", what, W->rows, W->cols);
    pq_linear_cuda L;
    memset(&L, 0, sizeof L);
    L.fmt = W->fmt;
    L.rows = W->rows;
    L.cols = W->cols;
    pq_status s = upload_weight(W, what, &L);
    if (s == PQ_OK && W->bias)
        s = pq_cuda_copy_named((void **)&L.d_bias, W->bias, (size_t)W->rows * sizeof(float), what);
    if (s != PQ_OK) {
        pq_linear_cuda_free(&L);
        return s;
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
    if (!L->borrowed_w) {
        cudaFree(L->d_w);
        cudaFree((void *)L->qp.packed);
        cudaFree((void *)L->qp.scales);
        cudaFree((void *)L->qp.zeros);
        cudaFree((void *)L->qp.gidx);
        cudaFree((void *)L->qb.q);
        cudaFree((void *)L->qb.scales);
    }
    cudaFree(L->d_bias);
    memset(L, 0, sizeof *L);
}

// ---- workspace --------------------------------------------------------------------

// Rows per panel: a multiple of 16, at most PANEL_ELEMS weights and a
// quarter of the rows (rounded up to 16), at least 16.
static int panel_rows(const pq_linear_cuda *L) {
    size_t r = PANEL_ELEMS / (size_t)L->cols / 16 * 16, quarter = ((size_t)L->rows / 4 + 15) / 16 * 16;
    if (r > quarter) r = quarter;
    if (r < 16) r = 16;
    return r < (size_t)L->rows ? (int)r : L->rows;
}

// The W8A8 workspace for chunks of up to Tc tokens: codes [T_pad][ldq],
// scales [T_pad], the GEMM output [T_pad][rows_pad] (int32 or f32) and
// cuBLASLt's workspace, each 256-byte aligned.
typedef struct {
    size_t qx, sx, acc, lt, total;
} w8a8_layout;

static w8a8_layout w8a8_ws(const pq_linear_cuda *L, int Tc) {
    size_t T_pad = round_up((size_t)Tc, 16);
    w8a8_layout o;
    o.qx = 0;
    o.sx = round_up(o.qx + T_pad * L->qb.ldq, 256);
    o.acc = round_up(o.sx + T_pad * 4, 256);
    o.lt = round_up(o.acc + T_pad * round_up((size_t)L->rows, 16) * 4, 256);
    o.total = o.lt + LT_WS_BYTES;
    return o;
}

size_t pq_linear_cuda_workspace_bytes(const pq_linear_cuda *L, int max_T) {
    if (L->fmt == PQ_W_DENSE || max_T < 1) return 0;
    if (L->act.type != PQ_ACTQ_NONE) return w8a8_ws(L, max_T < W8A8_CHUNK_T ? max_T : W8A8_CHUNK_T).total;
    if (max_T <= PQ_CUDA_GEMV_MAX_T) return 0;
    return round_up((size_t)panel_rows(L) * L->cols * sizeof(uint16_t), 256);
}

// ---- forward ------------------------------------------------------------------------

// y[T][rows] (ldc = ldy) = x[T][k] w[m][k]^T for FP16 w and x, f32 y.
static pq_status gemm_f16(pq_cuda_ctx *c, const uint16_t *d_w, int m, int k, const uint16_t *d_x, int T, float *d_y,
                          int ldy) {
    // Row-major y[T][m] = x[T][k] W[m][k]^T is, in cuBLAS's column-major
    // terms, y^T (m x T, ld ldy) = op(A) B with A = the buffer of W seen as
    // k x m (ld k), op = transpose, and B = the buffer of x seen as k x T.
    const float one = 1.0f, zero = 0.0f;
    PQ_CUBLAS_TRY(cublasSetStream(c->blas, c->stream));
    PQ_CUBLAS_TRY(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, T, k, &one, d_w, CUDA_R_16F, k, d_x, CUDA_R_16F,
                               k, &zero, d_y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return PQ_OK;
}

static pq_status forward_panels(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y, pq_cuda_ctx *c) {
    const int pr = panel_rows(L);
    uint16_t *panel = (uint16_t *)c->d_ws;
    for (int r0 = 0; r0 < L->rows; r0 += pr) {
        int n = L->rows - r0 < pr ? L->rows - r0 : pr;
        PQ_TRY(pq_qlinear_rows_cuda(L, r0, n, panel, c->stream));
        PQ_TRY(gemm_f16(c, panel, n, L->cols, d_x, T, d_y + r0, L->rows));
    }
    if (L->d_bias) PQ_TRY(pq_add_bias_cuda(d_y, L->d_bias, T, L->rows, c->stream));
    return PQ_OK;
}

// cuBLASLt's algorithm for an INT8 (IMMA) or FP8 GEMM shape, looked up once.
static pq_status lt_algo(pq_cuda_ctx *c, int fp8, int m, int n, int k, cublasLtMatmulDesc_t op,
                         cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld,
                         cublasLtMatmulAlgo_t *algo) {
    for (int i = 0; i < c->n_plans; i++)
        if (c->plans[i].fp8 == fp8 && c->plans[i].m == m && c->plans[i].n == n && c->plans[i].k == k) {
            *algo = c->plans[i].algo;
            return PQ_OK;
        }
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    size_t ws = LT_WS_BYTES;
    cublasStatus_t s = cublasLtMatmulPreferenceCreate(&pref);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulAlgoGetHeuristic(c->lt, op, la, lb, ld, ld, pref, 1, &res, &found);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    PQ_FAIL_IF(s != CUBLAS_STATUS_SUCCESS || found < 1, PQ_ERR_CUDA,
               "cuBLASLt has no %s GEMM for m %d, n %d, k %d (%s)", fp8 ? "FP8" : "INT8", m, n, k,
               s != CUBLAS_STATUS_SUCCESS ? cublasGetStatusString(s) : "no algorithm");
    lt_plan *p = &c->plans[c->next_plan];
    c->next_plan = (c->next_plan + 1) % LT_PLANS;
    if (c->n_plans < LT_PLANS) c->n_plans++;
    p->fp8 = fp8, p->m = m, p->n = n, p->k = k, p->algo = res.algo;
    *algo = res.algo;
    return PQ_OK;
}

// acc (m x n, ld m, column-major) = A^T B with A the weight codes (k x m, ld
// k) and B the activation codes (k x n, ld k): INT8 -> int32 or FP8 -> f32.
static pq_status lt_matmul(pq_cuda_ctx *c, int fp8, const void *A, const void *B, void *acc, int m, int n, int k,
                           void *ws) {
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    const cudaDataType_t ab = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_8I, dt = fp8 ? CUDA_R_32F : CUDA_R_32I;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const int32_t ione = 1, izero = 0;
    const float fone = 1.0f, fzero = 0.0f;
    cublasLtMatmulAlgo_t algo;
    pq_status st = PQ_OK;
    cublasStatus_t s = cublasLtMatmulDescCreate(&op, fp8 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32I, dt);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&la, ab, (uint64_t)k, (uint64_t)m, k);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&lb, ab, (uint64_t)k, (uint64_t)n, k);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&ld, dt, (uint64_t)m, (uint64_t)n, m);
    if (s != CUBLAS_STATUS_SUCCESS) {
        st = PQ_FAIL(PQ_ERR_CUDA, "cuBLASLt descriptors: %s", cublasGetStatusString(s));
        goto done;
    }
    PQ_TRY_GOTO(st, lt_algo(c, fp8, m, n, k, op, la, lb, ld, &algo));
    s = cublasLtMatmul(c->lt, op, fp8 ? (const void *)&fone : (const void *)&ione, A, la, B, lb,
                       fp8 ? (const void *)&fzero : (const void *)&izero, acc, ld, acc, ld, &algo, ws, LT_WS_BYTES,
                       c->stream);
    PQ_CHECK_GOTO(s != CUBLAS_STATUS_SUCCESS, st, PQ_ERR_CUDA, "cublasLtMatmul (%s, m %d, n %d, k %d): %s",
                  fp8 ? "FP8" : "INT8", m, n, k, cublasGetStatusString(s));
done:
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return st;
}

// W8A8: per chunk of tokens, quantize x, one cuBLASLt GEMM over the padded
// shapes (rows and tokens to multiples of 16, columns to ldq, all zeros
// past the data), then the epilogue into y.
static pq_status forward_w8a8(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y, pq_cuda_ctx *c) {
    const int fp8 = L->fmt == PQ_W_FP8, rows_pad = (int)round_up((size_t)L->rows, 16);
    const w8a8_layout o = w8a8_ws(L, T < W8A8_CHUNK_T ? T : W8A8_CHUNK_T);
    uint8_t *ws = (uint8_t *)c->d_ws;
    for (int t0 = 0; t0 < T; t0 += W8A8_CHUNK_T) {
        const int nt = T - t0 < W8A8_CHUNK_T ? T - t0 : W8A8_CHUNK_T, nt_pad = (int)round_up((size_t)nt, 16);
        PQ_TRY(pq_actq_cuda(&L->act, d_x + (size_t)t0 * L->cols, nt, L->cols, L->qb.ldq, nt_pad, ws + o.qx,
                            (float *)(ws + o.sx), c->stream));
        PQ_TRY(lt_matmul(c, fp8, L->qb.q, ws + o.qx, ws + o.acc, rows_pad, nt_pad, L->qb.ldq, ws + o.lt));
        PQ_TRY(pq_w8a8_epilogue_cuda(!fp8, ws + o.acc, rows_pad, (const float *)(ws + o.sx), L->qb.scales,
                                     L->qb.per_channel, L->d_bias, nt, L->rows, d_y + (size_t)t0 * L->rows, c->stream));
    }
    return PQ_OK;
}

// GEMV passes of up to PQ_CUDA_GEMV_T tokens.
static pq_status forward_gemv(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y, cudaStream_t st,
                              int generic) {
    for (int t0 = 0; t0 < T; t0 += PQ_CUDA_GEMV_T) {
        const int nt = T - t0 < PQ_CUDA_GEMV_T ? T - t0 : PQ_CUDA_GEMV_T;
        const uint16_t *x = d_x + (size_t)t0 * L->cols;
        float *y = d_y + (size_t)t0 * L->rows;
        PQ_TRY(generic ? pq_qpack_gemv_generic_cuda(L, x, nt, y, st) : pq_qlinear_gemv_cuda(L, x, nt, y, st));
    }
    return PQ_OK;
}

pq_status pq_linear_cuda_forward_path(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y,
                                      pq_cuda_ctx *c, pq_cuda_path path) {
    if (T <= 0) return PQ_OK;
    PQ_FAIL_IF(c->ws_bytes < pq_linear_cuda_workspace_bytes(L, T), PQ_ERR_ARG,
               "linear [%d x %d] of %d tokens needs %zu bytes of workspace, the context has %zu", L->rows, L->cols, T,
               pq_linear_cuda_workspace_bytes(L, T), c->ws_bytes);
    if (L->fmt == PQ_W_DENSE) {
        PQ_FAIL_IF(path != PQ_CUDA_PATH_AUTO, PQ_ERR_ARG, "dense weights have one path");
        PQ_TRY(gemm_f16(c, L->d_w, L->rows, L->cols, d_x, T, d_y, L->rows));
        if (L->d_bias) PQ_TRY(pq_add_bias_cuda(d_y, L->d_bias, T, L->rows, c->stream));
        return PQ_OK;
    }
    if (L->act.type != PQ_ACTQ_NONE) {
        PQ_FAIL_IF(path != PQ_CUDA_PATH_AUTO, PQ_ERR_ARG, "W8A8 weights have one path");
        return forward_w8a8(L, d_x, T, d_y, c);
    }
    if (path == PQ_CUDA_PATH_AUTO) path = T <= PQ_CUDA_GEMV_MAX_T ? PQ_CUDA_PATH_GEMV : PQ_CUDA_PATH_PANEL;
    switch (path) {
    case PQ_CUDA_PATH_GEMV: return forward_gemv(L, d_x, T, d_y, c->stream, 0);
    case PQ_CUDA_PATH_GENERIC: return forward_gemv(L, d_x, T, d_y, c->stream, 1);
    case PQ_CUDA_PATH_PANEL:
        // a forced panel path below the GEMV threshold still needs its panel
        PQ_FAIL_IF(c->ws_bytes < pq_linear_cuda_workspace_bytes(L, PQ_CUDA_GEMV_MAX_T + 1), PQ_ERR_ARG,
                   "panel path without a panel workspace");
        return forward_panels(L, d_x, T, d_y, c);
    case PQ_CUDA_PATH_AUTO: break;
    }
    return PQ_FAIL(PQ_ERR_ARG, "forward path %d", (int)path);
}

pq_status pq_linear_cuda_forward(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y, pq_cuda_ctx *ctx) {
    return pq_linear_cuda_forward_path(L, d_x, T, d_y, ctx, PQ_CUDA_PATH_AUTO);
}
