// tests/lib/cuda_wrappers.cu — host wrappers that run one device op on host
// arrays, for the tests (tests/lib/cuda_wrappers.h): copy in, run on a
// private stream, wait, copy out.
#include "kernels/cuda_util.cuh"

#include <vector>

extern "C" {
#include "calib/xtx_cuda.h"
#include "common/half.h"
}
#include "kernels/linear_cuda.h"
#include "tests/lib/cuda_wrappers.h"

// The device buffers and stream of one wrapper call, released by `release`.
typedef struct {
    void *p[12];
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
    if (s->st) cudaStreamSynchronize(s->st); // nothing may still run when the buffers go
    for (int i = 0; i < s->n; i++) cudaFree(s->p[i]);
    if (s->st) cudaStreamDestroy(s->st);
    memset(s, 0, sizeof *s);
}

// A device buffer of `bytes`, filled from `host` when it is not NULL.
static pq_status dev(scratch *s, void **d, const void *host, size_t bytes) {
    PQ_ASSERT(s->n < 12);
    *d = NULL;
    PQ_CUDA_TRY(cudaMalloc(d, bytes ? bytes : 1));
    s->p[s->n++] = *d;
    if (host && bytes) PQ_CUDA_TRY(cudaMemcpy(*d, host, bytes, cudaMemcpyHostToDevice));
    return PQ_OK;
}

static uint16_t to16(pq_act_dtype dt, float f) { return dt == PQ_ACT_BF16 ? pq_f32_to_bf16(f) : pq_f32_to_fp16(f); }
static float from16(pq_act_dtype dt, uint16_t h) { return dt == PQ_ACT_BF16 ? pq_bf16_to_f32(h) : pq_fp16_to_f32(h); }

void pq_cuda_test_round(pq_act_dtype dt, float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = from16(dt, to16(dt, x[i]));
}

// A dt copy of n floats on the device.
static pq_status dev16(scratch *s, pq_act_dtype dt, uint16_t **d, const float *host, size_t n) {
    std::vector<uint16_t> tmp(n ? n : 1);
    for (size_t i = 0; i < n; i++) tmp[i] = to16(dt, host[i]);
    return dev(s, (void **)d, tmp.data(), n * sizeof(uint16_t));
}

// Waits for the stream, then copies a device buffer to the host.
static pq_status fetch(scratch *s, void *host, const void *d, size_t bytes) {
    PQ_CUDA_TRY(cudaStreamSynchronize(s->st));
    if (bytes) PQ_CUDA_TRY(cudaMemcpy(host, d, bytes, cudaMemcpyDeviceToHost));
    return PQ_OK;
}

// As fetch, for a dt buffer widened into n floats.
static pq_status fetch16(scratch *s, pq_act_dtype dt, float *host, const uint16_t *d, size_t n) {
    std::vector<uint16_t> tmp(n ? n : 1);
    PQ_TRY(fetch(s, tmp.data(), d, n * sizeof(uint16_t)));
    for (size_t i = 0; i < n; i++) host[i] = from16(dt, tmp[i]);
    return PQ_OK;
}

pq_status pq_cuda_test_embed(pq_act_dtype dt, const float *table, int vocab, int n, const int32_t *tokens, int T,
                             float *x) {
    for (int t = 0; t < T; t++)
        PQ_FAIL_IF(tokens[t] < 0 || tokens[t] >= vocab, PQ_ERR_ARG, "token %d outside [0, %d)", tokens[t], vocab);
    scratch s;
    pq_status st;
    uint16_t *d_table;
    void *d_tok, *d_x;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, dev16(&s, dt, &d_table, table, (size_t)vocab * n));
    PQ_TRY_GOTO(st, dev(&s, &d_tok, tokens, (size_t)T * sizeof(int32_t)));
    PQ_TRY_GOTO(st, dev(&s, &d_x, NULL, (size_t)T * n * sizeof(float)));
    PQ_TRY_GOTO(st, pq_embed_cuda(dt, d_table, (const int32_t *)d_tok, T, n, (float *)d_x, s.st));
    PQ_TRY_GOTO(st, fetch(&s, x, d_x, (size_t)T * n * sizeof(float)));
done:
    release(&s);
    return st;
}

pq_status pq_cuda_test_rmsnorm(pq_act_dtype dt, const float *x, const float *w, int T, int n, float eps, float *y) {
    scratch s;
    pq_status st;
    void *d_x, *d_w, *d_y;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, dev(&s, &d_x, x, (size_t)T * n * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_w, w, (size_t)n * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_y, NULL, (size_t)T * n * sizeof(uint16_t)));
    PQ_TRY_GOTO(st, pq_rmsnorm_cuda(dt, (const float *)d_x, (const float *)d_w, T, n, eps, (uint16_t *)d_y, s.st));
    PQ_TRY_GOTO(st, fetch16(&s, dt, y, (const uint16_t *)d_y, (size_t)T * n));
done:
    release(&s);
    return st;
}

pq_status pq_cuda_test_rope(const double *inv_freq, int head_dim, int pos0, int device_pos, int T, int stride,
                            int n_heads, float *x, float *cs, float *sn) {
    scratch s;
    pq_status st;
    size_t half = (size_t)(head_dim / 2);
    void *d_f, *d_x, *d_cs, *d_sn, *d_pos;
    const int32_t pos = pos0;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, dev(&s, &d_f, inv_freq, half * sizeof(double)));
    PQ_TRY_GOTO(st, dev(&s, &d_x, x, (size_t)T * stride * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_cs, NULL, (size_t)T * half * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_sn, NULL, (size_t)T * half * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_pos, &pos, sizeof pos));
    PQ_TRY_GOTO(st, pq_rope_table_cuda((const double *)d_f, head_dim, device_pos ? -1 : pos0,
                                       device_pos ? (const int32_t *)d_pos : NULL, T, (float *)d_cs, (float *)d_sn,
                                       s.st));
    PQ_TRY_GOTO(st, pq_rope_apply_cuda((float *)d_x, T, stride, n_heads, head_dim, (const float *)d_cs,
                                       (const float *)d_sn, s.st));
    PQ_TRY_GOTO(st, fetch(&s, x, d_x, (size_t)T * stride * sizeof(float)));
    PQ_TRY_GOTO(st, fetch(&s, cs, d_cs, (size_t)T * half * sizeof(float)));
    PQ_TRY_GOTO(st, fetch(&s, sn, d_sn, (size_t)T * half * sizeof(float)));
done:
    release(&s);
    return st;
}

pq_status pq_cuda_test_swiglu(pq_act_dtype dt, const float *gate, const float *up, size_t n, float *out) {
    scratch s;
    pq_status st;
    void *d_g, *d_u, *d_o;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, dev(&s, &d_g, gate, n * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_u, up, n * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_o, NULL, n * sizeof(uint16_t)));
    PQ_TRY_GOTO(st, pq_swiglu_cuda(dt, (const float *)d_g, (const float *)d_u, n, (uint16_t *)d_o, s.st));
    PQ_TRY_GOTO(st, fetch16(&s, dt, out, (const uint16_t *)d_o, n));
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

pq_status pq_cuda_test_f32_to_act(pq_act_dtype dt, const float *x, size_t n, uint16_t *y) {
    scratch s;
    pq_status st;
    void *d_x, *d_y;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, dev(&s, &d_x, x, n * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_y, NULL, n * sizeof(uint16_t)));
    PQ_TRY_GOTO(st, pq_f32_to_act_cuda(dt, (const float *)d_x, n, (uint16_t *)d_y, s.st));
    PQ_TRY_GOTO(st, fetch(&s, y, d_y, n * sizeof(uint16_t)));
done:
    release(&s);
    return st;
}

// A [rows][width] dt cache on the device: rows < filled from host (rounded),
// the others NaN.
static pq_status dev_cache(scratch *s, pq_act_dtype dt, uint16_t **d, const float *host, int filled, int rows,
                           int width) {
    std::vector<float> tmp((size_t)rows * width, NAN);
    if (host) memcpy(tmp.data(), host, (size_t)filled * width * sizeof(float));
    return dev16(s, dt, d, tmp.data(), tmp.size());
}

pq_status pq_cuda_test_kv_store(pq_act_dtype dt, const float *k, const float *v, int T, int kvd, int pos0,
                                int device_pos, int n_ctx, float *kc, float *vc) {
    PQ_FAIL_IF(pos0 + T > n_ctx, PQ_ERR_ARG, "rows past the cache");
    scratch s;
    pq_status st;
    void *d_k, *d_v, *d_pos;
    uint16_t *d_kc, *d_vc;
    const int32_t pos = pos0;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, dev(&s, &d_k, k, (size_t)T * kvd * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_v, v, (size_t)T * kvd * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_pos, &pos, sizeof pos));
    PQ_TRY_GOTO(st, dev_cache(&s, dt, &d_kc, NULL, 0, n_ctx, kvd));
    PQ_TRY_GOTO(st, dev_cache(&s, dt, &d_vc, NULL, 0, n_ctx, kvd));
    PQ_TRY_GOTO(st, pq_kv_store_cuda(dt, (const float *)d_k, (const float *)d_v, T, kvd, device_pos ? -1 : pos0,
                                     device_pos ? (const int32_t *)d_pos : NULL, d_kc, d_vc, s.st));
    PQ_TRY_GOTO(st, fetch16(&s, dt, kc, d_kc, (size_t)n_ctx * kvd));
    PQ_TRY_GOTO(st, fetch16(&s, dt, vc, d_vc, (size_t)n_ctx * kvd));
done:
    release(&s);
    return st;
}

pq_status pq_cuda_test_nll(const float *logits, int n, int vocab, const int32_t *targets, float *nll) {
    scratch s;
    pq_status st;
    void *d_l, *d_t, *d_n;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, dev(&s, &d_l, logits, (size_t)n * vocab * sizeof(float)));
    PQ_TRY_GOTO(st, dev(&s, &d_t, targets, (size_t)n * sizeof(int32_t)));
    PQ_TRY_GOTO(st, dev(&s, &d_n, NULL, (size_t)n * sizeof(float)));
    PQ_TRY_GOTO(st, pq_nll_cuda((const float *)d_l, n, vocab, (const int32_t *)d_t, (float *)d_n, s.st));
    PQ_TRY_GOTO(st, fetch(&s, nll, d_n, (size_t)n * sizeof(float)));
done:
    release(&s);
    return st;
}

pq_status pq_cuda_test_attention(const pq_attn_shape *a, pq_act_dtype dt, pq_attn_path path, const float *q,
                                 const float *k, const float *v, int T, int pos0, int n_ctx, float *out) {
    const size_t qd = (size_t)a->n_heads * a->head_dim, kvd = (size_t)a->n_kv * a->head_dim;
    PQ_FAIL_IF(n_ctx < pos0 + T, PQ_ERR_ARG, "a cache of %d rows for %d tokens at %d", n_ctx, T, pos0);
    scratch s;
    pq_status st;
    void *d_q, *d_o, *d_ws, *d_pos;
    uint16_t *d_k, *d_v;
    const int32_t pos = pos0;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, dev(&s, &d_q, q, (size_t)T * qd * sizeof(float)));
    PQ_TRY_GOTO(st, dev_cache(&s, dt, &d_k, k, pos0 + T, n_ctx, (int)kvd));
    PQ_TRY_GOTO(st, dev_cache(&s, dt, &d_v, v, pos0 + T, n_ctx, (int)kvd));
    PQ_TRY_GOTO(st, dev(&s, &d_o, NULL, (size_t)T * qd * sizeof(uint16_t)));
    PQ_TRY_GOTO(st, dev(&s, &d_ws, NULL, pq_attention_cuda_ws_bytes(a, n_ctx)));
    PQ_TRY_GOTO(st, dev(&s, &d_pos, &pos, sizeof pos));
    switch (path) {
    case PQ_ATTN_AUTO:
        st = pq_attention_cuda(a, dt, (const float *)d_q, d_k, d_v, T, pos0, NULL, n_ctx, (uint16_t *)d_o, d_ws, s.st);
        break;
    case PQ_ATTN_PREFILL:
        st = pq_attention_prefill_cuda(a, dt, (const float *)d_q, d_k, d_v, T, pos0, (uint16_t *)d_o, s.st);
        break;
    case PQ_ATTN_DECODE:
    case PQ_ATTN_DECODE_DEVPOS:
        PQ_CHECK_GOTO(T != 1, st, PQ_ERR_ARG, "decode attention of %d tokens", T);
        st = pq_attention_decode_cuda(a, dt, (const float *)d_q, d_k, d_v, path == PQ_ATTN_DECODE ? pos0 : -1,
                                      path == PQ_ATTN_DECODE ? NULL : (const int32_t *)d_pos, n_ctx, (uint16_t *)d_o,
                                      d_ws, s.st);
        break;
    }
    if (st != PQ_OK) goto done;
    PQ_TRY_GOTO(st, fetch16(&s, dt, out, (const uint16_t *)d_o, (size_t)T * qd));
done:
    release(&s);
    return st;
}

pq_status pq_cuda_test_qlinear(const pq_linear *W, pq_act_dtype dt, const float *x, int T, pq_cuda_path path,
                               float *y, int *layout) {
    scratch s;
    pq_status st;
    pq_linear_cuda L;
    memset(&L, 0, sizeof L);
    pq_cuda_ctx *ctx = NULL;
    uint16_t *d_x;
    void *d_y;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, pq_linear_cuda_upload(W, "test weight", dt, &L));
    if (layout) *layout = (L.fmt == PQ_W_QPACK && L.qp.tiled) || L.qb.tiled;
    {
        // a forced panel path below the GEMV threshold still needs its panels
        size_t ws = pq_linear_cuda_workspace_bytes(&L, T);
        size_t panel = pq_linear_cuda_workspace_bytes(&L, PQ_CUDA_GEMV_MAX_T + T);
        PQ_TRY_GOTO(st, pq_cuda_ctx_create(s.st, path == PQ_CUDA_PATH_PANEL && panel > ws ? panel : ws, &ctx));
    }
    PQ_TRY_GOTO(st, dev16(&s, dt, &d_x, x, (size_t)T * W->cols));
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

pq_status pq_cuda_test_qrows(const pq_linear *W, pq_act_dtype dt, int r0, int n, float *out) {
    scratch s;
    pq_status st;
    pq_linear_cuda L;
    memset(&L, 0, sizeof L);
    void *d_out;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, pq_linear_cuda_upload(W, "test weight", dt, &L));
    PQ_TRY_GOTO(st, dev(&s, &d_out, NULL, (size_t)n * W->cols * sizeof(uint16_t)));
    PQ_TRY_GOTO(st, pq_qlinear_rows_cuda(&L, r0, n, (uint16_t *)d_out, s.st));
    PQ_TRY_GOTO(st, fetch16(&s, dt, out, (const uint16_t *)d_out, (size_t)n * W->cols));
done:
    if (s.st) cudaStreamSynchronize(s.st);
    pq_linear_cuda_free(&L);
    release(&s);
    return st;
}

pq_status pq_cuda_test_qtile(const uint8_t *src, size_t src_stride, int rows, int cols, int bits,
                             const int32_t *perm, int nst, int chunk, uint32_t *out) {
    PQ_FAIL_IF(chunk % PQ_TILE_ROWS || chunk < 0, PQ_ERR_ARG, "chunk of %d rows", chunk);
    const size_t words = (size_t)((rows + PQ_TILE_ROWS - 1) / PQ_TILE_ROWS) * nst * PQ_TILE_WORDS;
    scratch s;
    pq_status st;
    void *d_src, *d_perm = NULL, *d_out;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, dev(&s, &d_src, src, (size_t)rows * src_stride));
    if (perm) PQ_TRY_GOTO(st, dev(&s, &d_perm, perm, (size_t)cols * sizeof(int32_t)));
    PQ_TRY_GOTO(st, dev(&s, &d_out, NULL, words * sizeof(uint32_t)));
    PQ_CHECK_GOTO(cudaMemsetAsync(d_out, 0xff, words * sizeof(uint32_t), s.st) != cudaSuccess, st, PQ_ERR_CUDA,
                  "cudaMemsetAsync");
    for (int r0 = 0; r0 < rows; r0 += chunk ? chunk : rows) {
        const int n = chunk && rows - r0 > chunk ? chunk : rows - r0;
        PQ_TRY_GOTO(st, pq_qtile_cuda((const uint8_t *)d_src + (size_t)r0 * src_stride, src_stride, r0, n, cols, bits,
                                      (const int32_t *)d_perm, nst, (uint32_t *)d_out, s.st));
    }
    PQ_TRY_GOTO(st, fetch(&s, out, d_out, words * sizeof(uint32_t)));
done:
    release(&s);
    return st;
}

pq_status pq_cuda_test_actq(const pq_actq *act, pq_act_dtype dt, const float *x, int T, int cols, uint8_t *q,
                            float *scale) {
    // padded as pq_linear_cuda_forward pads: columns to 64, tokens to 32
    const int ld = (cols + 63) / 64 * 64, T_pad = (T + 31) / 32 * 32;
    scratch s;
    pq_status st;
    uint16_t *d_x;
    void *d_q, *d_s;
    std::vector<uint8_t> qp((size_t)T_pad * ld);
    std::vector<float> sp((size_t)T_pad);
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, dev16(&s, dt, &d_x, x, (size_t)T * cols));
    PQ_TRY_GOTO(st, dev(&s, &d_q, NULL, (size_t)T_pad * ld));
    PQ_TRY_GOTO(st, dev(&s, &d_s, NULL, (size_t)T_pad * sizeof(float)));
    PQ_TRY_GOTO(st, pq_actq_cuda(act, dt, d_x, T, cols, ld, T_pad, (uint8_t *)d_q, (float *)d_s, s.st));
    PQ_TRY_GOTO(st, fetch(&s, qp.data(), d_q, (size_t)T_pad * ld));
    PQ_TRY_GOTO(st, fetch(&s, sp.data(), d_s, (size_t)T_pad * sizeof(float)));
    // the padding must be zeros: codes past cols, tokens past T (codes and scales)
    for (size_t i = 0; i < (size_t)T_pad * ld; i++)
        PQ_CHECK_GOTO(qp[i] != 0 && ((int)(i / ld) >= T || (int)(i % ld) >= cols), st, PQ_ERR_NUMERIC,
                      "padding code %d at token %zu column %zu", qp[i], i / ld, i % ld);
    for (int t = T; t < T_pad; t++)
        PQ_CHECK_GOTO(sp[t] != 0.0f, st, PQ_ERR_NUMERIC, "padding token %d has scale %g", t, (double)sp[t]);
    for (int t = 0; t < T; t++) memcpy(q + (size_t)t * cols, qp.data() + (size_t)t * ld, (size_t)cols);
    memcpy(scale, sp.data(), (size_t)T * sizeof(float));
done:
    release(&s);
    return st;
}

pq_status pq_cuda_test_xtx(pq_act_dtype dt, const float *x, int T, int T2, int cols, float *xtx) {
    scratch s;
    pq_status st;
    uint16_t *d_x;
    pq_xtx_cuda *h = NULL;
    PQ_TRY_GOTO(st, begin(&s));
    PQ_TRY_GOTO(st, dev16(&s, dt, &d_x, x, (size_t)T * cols));
    PQ_TRY_GOTO(st, pq_xtx_cuda_create(cols, dt, s.st, &h));
    PQ_TRY_GOTO(st, pq_xtx_cuda_add(h, d_x, T));
    PQ_TRY_GOTO(st, pq_xtx_cuda_add(h, d_x, T2));
    PQ_TRY_GOTO(st, pq_xtx_cuda_read(h, xtx));
done:
    pq_xtx_cuda_free(h);
    release(&s);
    return st;
}
