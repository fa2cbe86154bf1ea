// tests/lib/cuda_wrappers.cu — host wrappers that run one device op on host
// arrays, for the tests (tests/lib/cuda_wrappers.h): copy in, run on a
// private stream, wait, copy out.
#include "kernels/cuda_util.cuh"

extern "C" {
#include "common/half.h"
}
#include "kernels/linear_cuda.h"
#include "tests/lib/cuda_wrappers.h"

// The device buffers and stream of one wrapper call, released by `release`.
typedef struct {
    void *p[8];
    int n;
    cudaStream_t st;
} scratch;

static pq_status begin(scratch *s) {
    memset(s, 0, sizeof *s);
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        return PQ_FAIL(PQ_ERR_NO_DEVICE, "no CUDA device (%s)",
                       e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    }
    PQ_CUDA_TRY(cudaStreamCreate(&s->st));
    return PQ_OK;
}

static void release(scratch *s) {
    for (int i = 0; i < s->n; i++) cudaFree(s->p[i]);
    if (s->st) cudaStreamDestroy(s->st);
    memset(s, 0, sizeof *s);
}

// A device buffer of `bytes`, filled from `host` when it is not NULL.
static pq_status dev(scratch *s, void **d, const void *host, size_t bytes) {
    PQ_ASSERT(s->n < 8);
    *d = NULL;
    PQ_CUDA_TRY(cudaMalloc(d, bytes ? bytes : 1));
    s->p[s->n++] = *d;
    if (host && bytes) PQ_CUDA_TRY(cudaMemcpy(*d, host, bytes, cudaMemcpyHostToDevice));
    return PQ_OK;
}

// FP16 copy of n floats on the device.
static pq_status dev_f16(scratch *s, uint16_t **d, const float *host, size_t n) {
    uint16_t *tmp = (uint16_t *)malloc((n ? n : 1) * sizeof(uint16_t));
    PQ_FAIL_IF(!tmp, PQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) tmp[i] = pq_f32_to_fp16(host[i]);
    pq_status st = dev(s, (void **)d, tmp, n * sizeof(uint16_t));
    free(tmp);
    return st;
}

// Waits for the stream, then copies a device buffer to the host.
static pq_status fetch(scratch *s, void *host, const void *d, size_t bytes) {
    PQ_CUDA_TRY(cudaStreamSynchronize(s->st));
    if (bytes) PQ_CUDA_TRY(cudaMemcpy(host, d, bytes, cudaMemcpyDeviceToHost));
    return PQ_OK;
}

// As fetch, for an FP16 buffer widened into n floats.
static pq_status fetch_f16(scratch *s, float *host, const uint16_t *d, size_t n) {
    uint16_t *tmp = (uint16_t *)malloc((n ? n : 1) * sizeof(uint16_t));
    PQ_FAIL_IF(!tmp, PQ_ERR_NOMEM, "out of memory");
    pq_status st = fetch(s, tmp, d, n * sizeof(uint16_t));
    for (size_t i = 0; st == PQ_OK && i < n; i++) host[i] = pq_fp16_to_f32(tmp[i]);
    free(tmp);
    return st;
}

pq_status pq_cuda_test_embed(const uint16_t *table, int vocab, int n, const int32_t *tokens, int T, float *x) {
    for (int t = 0; t < T; t++)
        PQ_FAIL_IF(tokens[t] < 0 || tokens[t] >= vocab, PQ_ERR_ARG, "token %d outside [0, %d)", tokens[t], vocab);
    scratch s;
    pq_status st;
    void *d_table, *d_tok, *d_x;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, dev(&s, &d_table, table, (size_t)vocab * n * sizeof(uint16_t)));
    PQ_TRY_GOTO(st, dev(&s, &d_tok, tokens, (size_t)T * sizeof(int32_t)));
    PQ_TRY_GOTO(st, dev(&s, &d_x, NULL, (size_t)T * n * sizeof(float)));
    PQ_TRY_GOTO(st, pq_embed_cuda((const uint16_t *)d_table, (const int32_t *)d_tok, T, n, (float *)d_x, s.st));
    PQ_TRY_GOTO(st, fetch(&s, x, d_x, (size_t)T * n * sizeof(float)));
done:
    release(&s);
    return st;
}

pq_status pq_cuda_test_rmsnorm(const float *x, const float *w, int T, int n, float eps, float *y) {
    scratch s;
    pq_status st;
    void *d_x, *d_w, *d_y;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, dev(&s, &d_x, x, (size_t)T * n * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_w, w, (size_t)n * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_y, NULL, (size_t)T * n * sizeof(uint16_t)));
    PQ_TRY_GOTO(st, pq_rmsnorm_cuda((const float *)d_x, (const float *)d_w, T, n, eps, (uint16_t *)d_y, s.st));
    PQ_TRY_GOTO(st, fetch_f16(&s, y, (const uint16_t *)d_y, (size_t)T * n));
done:
    release(&s);
    return st;
}

pq_status pq_cuda_test_rope(const double *inv_freq, int head_dim, int pos0, int T, int stride, int n_heads,
                            float *x, float *cs, float *sn) {
    scratch s;
    pq_status st;
    size_t half = (size_t)(head_dim / 2);
    void *d_f, *d_x, *d_cs, *d_sn;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, dev(&s, &d_f, inv_freq, half * sizeof(double)));
    PQ_TRY_GOTO(st, dev(&s, &d_x, x, (size_t)T * stride * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_cs, NULL, (size_t)T * half * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_sn, NULL, (size_t)T * half * sizeof(float)));
    PQ_TRY_GOTO(st, pq_rope_table_cuda((const double *)d_f, head_dim, pos0, T, (float *)d_cs, (float *)d_sn, s.st));
    PQ_TRY_GOTO(st, pq_rope_apply_cuda((float *)d_x, T, stride, n_heads, head_dim, (const float *)d_cs,
                                       (const float *)d_sn, s.st));
    PQ_TRY_GOTO(st, fetch(&s, x, d_x, (size_t)T * stride * sizeof(float)));
    PQ_TRY_GOTO(st, fetch(&s, cs, d_cs, (size_t)T * half * sizeof(float)));
    PQ_TRY_GOTO(st, fetch(&s, sn, d_sn, (size_t)T * half * sizeof(float)));
done:
    release(&s);
    return st;
}

pq_status pq_cuda_test_swiglu(const float *gate, const float *up, size_t n, float *out) {
    scratch s;
    pq_status st;
    void *d_g, *d_u, *d_o;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, dev(&s, &d_g, gate, n * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_u, up, n * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_o, NULL, n * sizeof(uint16_t)));
    PQ_TRY_GOTO(st, pq_swiglu_cuda((const float *)d_g, (const float *)d_u, n, (uint16_t *)d_o, s.st));
    PQ_TRY_GOTO(st, fetch_f16(&s, out, (const uint16_t *)d_o, n));
done:
    release(&s);
    return st;
}

pq_status pq_cuda_test_add(float *y, const float *x, size_t n) {
    scratch s;
    pq_status st;
    void *d_y, *d_x;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, dev(&s, &d_y, y, n * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_x, x, n * sizeof(float)));
    PQ_TRY_GOTO(st, pq_add_cuda((float *)d_y, (const float *)d_x, n, s.st));
    PQ_TRY_GOTO(st, fetch(&s, y, d_y, n * sizeof(float)));
done:
    release(&s);
    return st;
}

pq_status pq_cuda_test_f32_to_f16(const float *x, size_t n, uint16_t *y) {
    scratch s;
    pq_status st;
    void *d_x, *d_y;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, dev(&s, &d_x, x, n * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_y, NULL, n * sizeof(uint16_t)));
    PQ_TRY_GOTO(st, pq_f32_to_f16_cuda((const float *)d_x, n, (uint16_t *)d_y, s.st));
    PQ_TRY_GOTO(st, fetch(&s, y, d_y, n * sizeof(uint16_t)));
done:
    release(&s);
    return st;
}

pq_status pq_cuda_test_attention(const pq_attn_shape *a, const float *q, const float *k, const float *v, int T,
                                 int pos0, float *out) {
    size_t qd = (size_t)a->n_heads * a->head_dim, kvd = (size_t)a->n_kv * a->head_dim, n_ctx = (size_t)(pos0 + T);
    scratch s;
    pq_status st;
    void *d_q, *d_o;
    uint16_t *d_k, *d_v;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, dev(&s, &d_q, q, (size_t)T * qd * sizeof(float)));
    PQ_TRY_GOTO(st, dev_f16(&s, &d_k, k, n_ctx * kvd));
    PQ_TRY_GOTO(st, dev_f16(&s, &d_v, v, n_ctx * kvd));
    PQ_TRY_GOTO(st, dev(&s, &d_o, NULL, (size_t)T * qd * sizeof(uint16_t)));
    PQ_TRY_GOTO(st, pq_attention_cuda(a, (const float *)d_q, d_k, d_v, T, pos0, (uint16_t *)d_o, s.st));
    PQ_TRY_GOTO(st, fetch_f16(&s, out, (const uint16_t *)d_o, (size_t)T * qd));
done:
    release(&s);
    return st;
}

pq_status pq_cuda_test_linear(const pq_linear *W, const float *x, int T, float *y) {
    return pq_cuda_test_qlinear(W, x, T, PQ_CUDA_PATH_AUTO, y);
}

pq_status pq_cuda_test_qlinear(const pq_linear *W, const float *x, int T, pq_cuda_path path, float *y) {
    scratch s;
    pq_status st;
    pq_linear_cuda L;
    memset(&L, 0, sizeof L);
    pq_cuda_ctx *ctx = NULL;
    uint16_t *d_x;
    void *d_y;
    // a forced panel path needs the panel workspace whatever T is
    int ws_T = path == PQ_CUDA_PATH_PANEL && T <= PQ_CUDA_GEMV_MAX_T ? PQ_CUDA_GEMV_MAX_T + 1 : T;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, pq_linear_cuda_upload(W, "test weight", &L));
    PQ_TRY_GOTO(st, pq_cuda_ctx_create(s.st, pq_linear_cuda_workspace_bytes(&L, ws_T), &ctx));
    PQ_TRY_GOTO(st, dev_f16(&s, &d_x, x, (size_t)T * W->cols));
    PQ_TRY_GOTO(st, dev(&s, &d_y, NULL, (size_t)T * W->rows * sizeof(float)));
    PQ_TRY_GOTO(st, pq_linear_cuda_forward_path(&L, d_x, T, (float *)d_y, ctx, path));
    PQ_TRY_GOTO(st, fetch(&s, y, d_y, (size_t)T * W->rows * sizeof(float)));
done:
    if (s.st) cudaStreamSynchronize(s.st); // nothing may still run when the buffers go
    pq_cuda_ctx_free(ctx);
    pq_linear_cuda_free(&L);
    release(&s);
    return st;
}

pq_status pq_cuda_test_qrows(const pq_linear *W, int r0, int n, uint16_t *out) {
    scratch s;
    pq_status st;
    pq_linear_cuda L;
    memset(&L, 0, sizeof L);
    void *d_out;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, pq_linear_cuda_upload(W, "test weight", &L));
    PQ_TRY_GOTO(st, dev(&s, &d_out, NULL, (size_t)n * W->cols * sizeof(uint16_t)));
    PQ_TRY_GOTO(st, pq_qlinear_rows_cuda(&L, r0, n, (uint16_t *)d_out, s.st));
    PQ_TRY_GOTO(st, fetch(&s, out, d_out, (size_t)n * W->cols * sizeof(uint16_t)));
done:
    if (s.st) cudaStreamSynchronize(s.st);
    pq_linear_cuda_free(&L);
    release(&s);
    return st;
}

pq_status pq_cuda_test_actq(const pq_actq *act, const float *x, int T, int cols, uint8_t *q, float *scale) {
    // padded as pq_linear_cuda_forward pads: columns to 64, tokens to 16
    const int ld = (cols + 63) / 64 * 64, T_pad = (T + 15) / 16 * 16;
    scratch s;
    pq_status st;
    uint16_t *d_x;
    void *d_q, *d_s;
    uint8_t *qp = (uint8_t *)malloc((size_t)T_pad * ld);
    float *sp = (float *)malloc((size_t)T_pad * sizeof(float));
    PQ_TRY_GOTO(st, begin(&s));
    PQ_CHECK_GOTO(!qp || !sp, st, PQ_ERR_NOMEM, "out of memory");
    PQ_TRY_GOTO(st, dev_f16(&s, &d_x, x, (size_t)T * cols));
    PQ_TRY_GOTO(st, dev(&s, &d_q, NULL, (size_t)T_pad * ld));
    PQ_TRY_GOTO(st, dev(&s, &d_s, NULL, (size_t)T_pad * sizeof(float)));
    PQ_TRY_GOTO(st, pq_actq_cuda(act, d_x, T, cols, ld, T_pad, (uint8_t *)d_q, (float *)d_s, s.st));
    PQ_TRY_GOTO(st, fetch(&s, qp, d_q, (size_t)T_pad * ld));
    PQ_TRY_GOTO(st, fetch(&s, sp, d_s, (size_t)T_pad * sizeof(float)));
    // the padding must be zeros: codes past cols, tokens past T (codes and scales)
    for (size_t i = 0; i < (size_t)T_pad * ld; i++)
        PQ_CHECK_GOTO(qp[i] != 0 && ((int)(i / ld) >= T || (int)(i % ld) >= cols), st, PQ_ERR_NUMERIC,
                      "padding code %d at token %zu column %zu", qp[i], i / ld, i % ld);
    for (int t = T; t < T_pad; t++)
        PQ_CHECK_GOTO(sp[t] != 0.0f, st, PQ_ERR_NUMERIC, "padding token %d has scale %g", t, (double)sp[t]);
    for (int t = 0; t < T; t++) memcpy(q + (size_t)t * cols, qp + (size_t)t * ld, (size_t)cols);
    memcpy(scale, sp, (size_t)T * sizeof(float));
done:
    if (s.st) cudaStreamSynchronize(s.st);
    release(&s);
    free(qp);
    free(sp);
    return st;
}
