// Linear layers on the GPU (kernels/linear_cuda.h): the context, the
// forward dispatch per format and token count, and the cuBLAS / cuBLASLt
// calls (the upload is kernels/linear_upload_cuda.cu).
//
// Quantized weights with more than PQ_CUDA_GEMV_MAX_T tokens: rows are
// dequantized into panels of at most PANEL_ELEMS weights (32 MiB, whatever
// the model) and at most a quarter of the rows (so a dense copy of a whole
// quantized weight never exists), on the context's second stream, two
// panels in turn, while cuBLAS multiplies the previous panel on the first
// (events order the two). Why not a fused tensor-core GEMM: at 512 tokens
// the product is compute-bound (512 FLOP per weight), and cuBLAS's Hopper
// kernels (wgmma, TMA, warp-specialized) run near the 16-bit peak, which a
// hand-written mma.sync kernel does not approach; the panel costs ~4.5
// bytes of traffic per weight (0.5 read, 2 written, 2 read by the GEMM,
// mostly from L2), and with the overlap only the first panel's
// dequantization is exposed. tests/bench_cuda.c measures the ratio to
// cuBLAS FP16 (target: within 10%; not measured on a GPU yet).
//
// W8A8: activations quantized per token on the device, the tokens padded to
// a multiple of 32 (what cuBLASLt's INT8 kernels accept for any n: PyTorch's
// _int_mm pads the same way), cuBLASLt's INT8 (IMMA, exact int32) or FP8
// GEMM, then kernels/w8a8.h's epilogue. The epilogue stays a kernel of ours:
// cuBLASLt's INT8 GEMM has no float per-row or per-column scale with int32
// accumulators (its alpha is one int32), and its FP8 outer-vector scaling
// (CUDA 12.8+) multiplies the two scales in another order than
// kernels/w8a8.h, so neither would be equal to the specification; the
// epilogue is one pass over T x rows x 8 bytes, a few percent of the GEMM.
#include "kernels/cuda_util.cuh"

#include <cublasLt.h>

extern "C" {
#include "kernels/w8a8.h"
}
#include "kernels/linear_cuda.h"
#include "kernels/ops_cuda.h"
#include "kernels/quant_cuda.h"

// Weights per dequantized panel of the GEMM path (32 MiB at 16 bits).
#define PANEL_ELEMS ((size_t)16 << 20)
// Tokens per cuBLASLt call of a W8A8 linear (bounds its workspace).
#define W8A8_CHUNK_T 512
// Tokens of a W8A8 GEMM are padded to a multiple of this (and rows too).
#define W8A8_PAD 32
// cuBLASLt's own workspace (NVIDIA's recommendation for Hopper), and cuBLAS's.
#define LT_WS_BYTES ((size_t)32 << 20)
#define BLAS_WS_BYTES ((size_t)32 << 20)
// Split-K arrival counters of the GEMV (row blocks of 64 rows: 4M rows).
#define GEMV_COUNTERS 65536
// cuBLASLt algorithms remembered per context (one per GEMM shape).
#define LT_PLANS 64

static size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

// ---- context ------------------------------------------------------------------

typedef struct {
    int fp8, m, n, k;
    cublasLtMatmulAlgo_t algo;
} lt_plan;

struct pq_cuda_ctx {
    cudaStream_t stream, side;     // the caller's stream; the panels' dequantization stream
    cudaEvent_t ev_start, ev_deq[2], ev_gemm[2];
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    void *d_ws, *d_blas_ws;
    size_t ws_bytes;
    int *d_counters;               // GEMV_COUNTERS, zero between launches
    int sms;
    lt_plan plans[LT_PLANS];
    int n_plans, next_plan;
};

static pq_status ctx_init(pq_cuda_ctx *c, size_t ws_bytes) {
    int dev = 0;
    PQ_CUDA_TRY(cudaGetDevice(&dev));
    PQ_CUDA_TRY(cudaDeviceGetAttribute(&c->sms, cudaDevAttrMultiProcessorCount, dev));
    PQ_CUDA_TRY(cudaStreamCreateWithFlags(&c->side, cudaStreamNonBlocking));
    PQ_CUDA_TRY(cudaEventCreateWithFlags(&c->ev_start, cudaEventDisableTiming));
    for (int i = 0; i < 2; i++) {
        PQ_CUDA_TRY(cudaEventCreateWithFlags(&c->ev_deq[i], cudaEventDisableTiming));
        PQ_CUDA_TRY(cudaEventCreateWithFlags(&c->ev_gemm[i], cudaEventDisableTiming));
    }
    PQ_CUBLAS_TRY(cublasCreate(&c->blas));
    PQ_CUBLAS_TRY(cublasSetStream(c->blas, c->stream));
    PQ_CUBLAS_TRY(cublasLtCreate(&c->lt));
    // a workspace of its own: cuBLAS then allocates nothing while a CUDA graph is captured
    PQ_TRY(pq_cuda_malloc_named(&c->d_blas_ws, BLAS_WS_BYTES, "cuBLAS workspace"));
    PQ_CUBLAS_TRY(cublasSetWorkspace(c->blas, c->d_blas_ws, BLAS_WS_BYTES));
    PQ_TRY(pq_cuda_malloc_named((void **)&c->d_counters, GEMV_COUNTERS * sizeof(int), "GEMV counters"));
    PQ_CUDA_TRY(cudaMemset(c->d_counters, 0, GEMV_COUNTERS * sizeof(int)));
    if (ws_bytes) PQ_TRY(pq_cuda_malloc_named(&c->d_ws, ws_bytes, "a linear-layer workspace"));
    c->ws_bytes = ws_bytes;
    return PQ_OK;
}

pq_status pq_cuda_ctx_create(void *stream, size_t ws_bytes, pq_cuda_ctx **out) {
    *out = NULL;
    pq_cuda_ctx *c = (pq_cuda_ctx *)calloc(1, sizeof *c);
    PQ_FAIL_IF(!c, PQ_ERR_NOMEM, "out of memory");
    c->stream = (cudaStream_t)stream;
    pq_status s = ctx_init(c, ws_bytes);
    if (s != PQ_OK) {
        pq_cuda_ctx_free(c);
        return s;
    }
    *out = c;
    return PQ_OK;
}

void pq_cuda_ctx_free(pq_cuda_ctx *c) {
    if (!c) return;
    if (c->side) cudaStreamSynchronize(c->side);
    cudaFree(c->d_ws);
    cudaFree(c->d_blas_ws);
    cudaFree(c->d_counters);
    if (c->lt) cublasLtDestroy(c->lt);
    if (c->blas) cublasDestroy(c->blas);
    for (int i = 0; i < 2; i++) {
        if (c->ev_deq[i]) cudaEventDestroy(c->ev_deq[i]);
        if (c->ev_gemm[i]) cudaEventDestroy(c->ev_gemm[i]);
    }
    if (c->ev_start) cudaEventDestroy(c->ev_start);
    if (c->side) cudaStreamDestroy(c->side);
    free(c);
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
    size_t T_pad = round_up((size_t)Tc, W8A8_PAD);
    w8a8_layout o;
    o.qx = 0;
    o.sx = round_up(o.qx + T_pad * L->qb.ldq, 256);
    o.acc = round_up(o.sx + T_pad * 4, 256);
    o.lt = round_up(o.acc + T_pad * round_up((size_t)L->rows, W8A8_PAD) * 4, 256);
    o.total = o.lt + LT_WS_BYTES;
    return o;
}

// Whether x must be copied before the tiled GEMV (a column permutation, or
// rows of x that are not 16-byte aligned), and the gathered copy's bytes.
static int gemv_gathers(const pq_linear_cuda *L, const uint16_t *d_x, int T) {
    const int perm = L->fmt == PQ_W_QPACK && L->qp.perm;
    return perm || (uintptr_t)d_x % 16 || (T > 1 && L->cols % 8);
}
static size_t gather_bytes(const pq_linear_cuda *L, int T, int ld) {
    return round_up((size_t)T * ld * sizeof(uint16_t), 256);
}
static int tiled(const pq_linear_cuda *L) {
    return (L->fmt == PQ_W_QPACK && L->qp.tiled) || ((L->fmt == PQ_W_INT8 || L->fmt == PQ_W_FP8) && L->qb.tiled);
}
static int device_sms(void) {
    static int sms = 0; // one device per process: the same value from every thread
    int dev = 0;
    if (!sms && (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)) {
        (void)cudaGetLastError();
        sms = 132;
    }
    return sms;
}

static size_t gemv_ws(const pq_linear_cuda *L, int T) {
    if (!tiled(L)) return 0;
    return gather_bytes(L, T, (int)round_up((size_t)L->cols, 8)) + pq_qlinear_gemv_ws_bytes(L, T, device_sms());
}
static size_t panel_ws(const pq_linear_cuda *L, int T) {
    const size_t gather = L->fmt == PQ_W_QPACK && L->qp.perm ? gather_bytes(L, T, L->cols) : 0;
    return gather + 2 * round_up((size_t)panel_rows(L) * L->cols * sizeof(uint16_t), 256);
}

size_t pq_linear_cuda_workspace_bytes(const pq_linear_cuda *L, int max_T) {
    if (L->fmt == PQ_W_DENSE || max_T < 1) return 0;
    if (L->act.type != PQ_ACTQ_NONE) return w8a8_ws(L, max_T < W8A8_CHUNK_T ? max_T : W8A8_CHUNK_T).total;
    size_t ws = gemv_ws(L, max_T < PQ_CUDA_GEMV_MAX_T ? max_T : PQ_CUDA_GEMV_MAX_T);
    if (max_T > PQ_CUDA_GEMV_MAX_T) {
        size_t p = panel_ws(L, max_T);
        ws = p > ws ? p : ws;
    }
    return ws;
}

// ---- forward ------------------------------------------------------------------------

// y[T][rows] (ldc = ldy) = x[T][k] w[m][k]^T (+ beta y) for 16-bit w and x of
// type dt, f32 y, on stream st.
static pq_status gemm16(pq_cuda_ctx *c, pq_act_dtype dt, const uint16_t *d_w, int m, int k, const uint16_t *d_x,
                        int T, float *d_y, int ldy, cudaStream_t st) {
    // Row-major y[T][m] = x[T][k] W[m][k]^T is, in cuBLAS's column-major
    // terms, y^T (m x T, ld ldy) = op(A) B with A = the buffer of W seen as
    // k x m (ld k), op = transpose, and B = the buffer of x seen as k x T.
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType_t t = dt == PQ_ACT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    PQ_CUBLAS_TRY(cublasSetStream(c->blas, st));
    PQ_CUBLAS_TRY(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, T, k, &one, d_w, t, k, d_x, t, k, &zero, d_y,
                               CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return PQ_OK;
}

// Panels of rows dequantized on the side stream into two buffers in turn,
// each multiplied on the main stream once ready; a buffer is refilled only
// after the GEMM that read it. Everything joins back into the main stream.
static pq_status forward_panels(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y, pq_cuda_ctx *c) {
    const int pr = panel_rows(L);
    unsigned char *ws = (unsigned char *)c->d_ws;
    if (L->fmt == PQ_W_QPACK && L->qp.perm) { // x in the weight's stored column order
        PQ_TRY(pq_gather_cols_cuda(d_x, T, L->cols, L->cols, L->qp.perm, L->cols, (uint16_t *)ws, c->stream));
        d_x = (const uint16_t *)ws;
        ws += gather_bytes(L, T, L->cols);
    }
    uint16_t *panel[2] = {(uint16_t *)ws,
                          (uint16_t *)(ws + round_up((size_t)pr * L->cols * sizeof(uint16_t), 256))};
    PQ_CUDA_TRY(cudaEventRecord(c->ev_start, c->stream));
    PQ_CUDA_TRY(cudaStreamWaitEvent(c->side, c->ev_start, 0));
    for (int r0 = 0, i = 0; r0 < L->rows; r0 += pr, i++) {
        const int n = L->rows - r0 < pr ? L->rows - r0 : pr, b = i % 2;
        if (i >= 2) PQ_CUDA_TRY(cudaStreamWaitEvent(c->side, c->ev_gemm[b], 0));
        PQ_TRY(pq_qlinear_rows_cuda(L, r0, n, panel[b], c->side));
        PQ_CUDA_TRY(cudaEventRecord(c->ev_deq[b], c->side));
        PQ_CUDA_TRY(cudaStreamWaitEvent(c->stream, c->ev_deq[b], 0));
        PQ_TRY(gemm16(c, L->act_dtype, panel[b], n, L->cols, d_x, T, d_y + r0, L->rows, c->stream));
        PQ_CUDA_TRY(cudaEventRecord(c->ev_gemm[b], c->stream));
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
// shapes (rows and tokens to multiples of 32, columns to ldq, all zeros
// past the data), then the epilogue into y.
static pq_status forward_w8a8(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y, pq_cuda_ctx *c) {
    const int fp8 = L->fmt == PQ_W_FP8, rows_pad = (int)round_up((size_t)L->rows, W8A8_PAD);
    const w8a8_layout o = w8a8_ws(L, T < W8A8_CHUNK_T ? T : W8A8_CHUNK_T);
    uint8_t *ws = (uint8_t *)c->d_ws;
    for (int t0 = 0; t0 < T; t0 += W8A8_CHUNK_T) {
        const int nt = T - t0 < W8A8_CHUNK_T ? T - t0 : W8A8_CHUNK_T, nt_pad = (int)round_up((size_t)nt, W8A8_PAD);
        PQ_TRY(pq_actq_cuda(&L->act, L->act_dtype, d_x + (size_t)t0 * L->cols, nt, L->cols, L->qb.ldq, nt_pad,
                            ws + o.qx, (float *)(ws + o.sx), c->stream));
        PQ_TRY(lt_matmul(c, fp8, L->qb.q, ws + o.qx, ws + o.acc, rows_pad, nt_pad, L->qb.ldq, ws + o.lt));
        PQ_TRY(pq_w8a8_epilogue_cuda(!fp8, ws + o.acc, rows_pad, (const float *)(ws + o.sx), L->qb.scales,
                                     L->qb.per_channel, L->d_bias, nt, L->rows, d_y + (size_t)t0 * L->rows, c->stream));
    }
    return PQ_OK;
}

// The fused GEMV of up to PQ_CUDA_GEMV_MAX_T tokens: tiled (x gathered
// first when its order or alignment needs it), or the rows layout's.
static pq_status forward_gemv(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y, pq_cuda_ctx *c) {
    if (!tiled(L)) return pq_qpack_gemv_generic_cuda(L, d_x, T, d_y, c->stream);
    unsigned char *ws = (unsigned char *)c->d_ws;
    size_t left = c->ws_bytes;
    if (gemv_gathers(L, d_x, T)) {
        const int ld = (int)round_up((size_t)L->cols, 8);
        const int32_t *perm = L->fmt == PQ_W_QPACK ? L->qp.perm : NULL;
        PQ_TRY(pq_gather_cols_cuda(d_x, T, L->cols, L->cols, perm, ld, (uint16_t *)ws, c->stream));
        d_x = (const uint16_t *)ws;
        ws += gather_bytes(L, T, ld);
        left -= gather_bytes(L, T, ld);
    }
    pq_cuda_launch lc = {c->stream, ws, left, c->d_counters, GEMV_COUNTERS, c->sms};
    return pq_qlinear_gemv_cuda(L, d_x, T, d_y, &lc);
}

pq_status pq_linear_cuda_forward_path(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y,
                                      pq_cuda_ctx *c, pq_cuda_path path) {
    if (T <= 0) return PQ_OK;
    PQ_FAIL_IF(c->ws_bytes < pq_linear_cuda_workspace_bytes(L, T), PQ_ERR_ARG,
               "linear [%d x %d] of %d tokens needs %zu bytes of workspace, the context has %zu", L->rows, L->cols, T,
               pq_linear_cuda_workspace_bytes(L, T), c->ws_bytes);
    if (L->fmt == PQ_W_DENSE) {
        PQ_FAIL_IF(path != PQ_CUDA_PATH_AUTO, PQ_ERR_ARG, "dense weights have one path");
        PQ_TRY(gemm16(c, L->act_dtype, L->d_w, L->rows, L->cols, d_x, T, d_y, L->rows, c->stream));
        if (L->d_bias) PQ_TRY(pq_add_bias_cuda(d_y, L->d_bias, T, L->rows, c->stream));
        return PQ_OK;
    }
    if (L->act.type != PQ_ACTQ_NONE) {
        PQ_FAIL_IF(path != PQ_CUDA_PATH_AUTO, PQ_ERR_ARG, "W8A8 weights have one path");
        return forward_w8a8(L, d_x, T, d_y, c);
    }
    if (path == PQ_CUDA_PATH_AUTO) path = T <= PQ_CUDA_GEMV_MAX_T ? PQ_CUDA_PATH_GEMV : PQ_CUDA_PATH_PANEL;
    switch (path) {
    case PQ_CUDA_PATH_GEMV:
        PQ_FAIL_IF(T > PQ_CUDA_GEMV_MAX_T, PQ_ERR_ARG, "GEMV of %d tokens (at most %d)", T, PQ_CUDA_GEMV_MAX_T);
        return forward_gemv(L, d_x, T, d_y, c);
    case PQ_CUDA_PATH_PANEL:
        // a forced panel path below the GEMV threshold still needs its panels
        PQ_FAIL_IF(c->ws_bytes < panel_ws(L, T), PQ_ERR_ARG, "panel path without a panel workspace");
        return forward_panels(L, d_x, T, d_y, c);
    case PQ_CUDA_PATH_AUTO: break;
    }
    return PQ_FAIL(PQ_ERR_ARG, "forward path %d", (int)path);
}

pq_status pq_linear_cuda_forward(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y, pq_cuda_ctx *ctx) {
    return pq_linear_cuda_forward_path(L, d_x, T, d_y, ctx, PQ_CUDA_PATH_AUTO);
}
