// tests/lib/cuda_none.c — what the tests call of the CUDA code (the host
// wrappers of tests/lib/cuda_wrappers.h and the device entry points the
// tests call directly) in a build without nvcc: there is no device, so the
// GPU tests skip.
#if !PQ_HAVE_CUDA
#include "common/half.h"
#include "tests/lib/cuda_wrappers.h"

static pq_status none(void) { return PQ_FAIL(PQ_ERR_NO_DEVICE, "this pq was built without CUDA (nvcc was not found)"); }

void pq_cuda_test_round(pq_act_dtype dt, float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        x[i] = dt == PQ_ACT_BF16 ? pq_bf16_to_f32(pq_f32_to_bf16(x[i])) : pq_fp16_to_f32(pq_f32_to_fp16(x[i]));
}
pq_status pq_cuda_test_embed(pq_act_dtype dt, const float *table, int vocab, int n, const int32_t *tokens, int T,
                             float *x) {
    return none();
}
pq_status pq_cuda_test_rmsnorm(pq_act_dtype dt, const float *x, const float *w, int T, int n, float eps, float *y) {
    return none();
}
pq_status pq_cuda_test_rope(const double *inv_freq, int head_dim, int pos0, int device_pos, int T, int stride,
                            int n_heads, float *x, float *cs, float *sn) {
    return none();
}
pq_status pq_cuda_test_swiglu(pq_act_dtype dt, const float *gate, const float *up, size_t n, float *out) {
    return none();
}
pq_status pq_cuda_test_add(float *y, const float *x, size_t n) { return none(); }
pq_status pq_cuda_test_f32_to_act(pq_act_dtype dt, const float *x, size_t n, uint16_t *y) { return none(); }
pq_status pq_cuda_test_kv_store(pq_act_dtype dt, const float *k, const float *v, int T, int kvd, int pos0,
                                int device_pos, int n_ctx, float *kc, float *vc) {
    return none();
}
pq_status pq_cuda_test_nll(const float *logits, int n, int vocab, const int32_t *targets, float *nll) {
    return none();
}
pq_status pq_cuda_test_attention(const pq_attn_shape *s, pq_act_dtype dt, pq_attn_path path, const float *q,
                                 const float *k, const float *v, int T, int pos0, int n_ctx, float *out) {
    return none();
}
pq_status pq_cuda_test_qlinear(const pq_linear *W, pq_act_dtype dt, const float *x, int T, pq_cuda_path path,
                               float *y, int *layout) {
    return none();
}
pq_status pq_cuda_test_qrows(const pq_linear *W, pq_act_dtype dt, int r0, int n, float *out) { return none(); }
pq_status pq_cuda_test_qtile(const uint8_t *src, size_t src_stride, int rows, int cols, int bits,
                             const int32_t *perm, int nst, int chunk, uint32_t *out) {
    return none();
}
pq_status pq_cuda_test_actq(const pq_actq *act, pq_act_dtype dt, const float *x, int T, int cols, uint8_t *q,
                            float *scale) {
    return none();
}
pq_status pq_cuda_test_xtx(pq_act_dtype dt, const float *x, int T, int T2, int cols, float *xtx) { return none(); }
pq_status pq_attention_cuda(const pq_attn_shape *s, pq_act_dtype dt, const float *d_q, const uint16_t *d_k,
                            const uint16_t *d_v, int T, int pos0, const int32_t *d_pos, int n_ctx, uint16_t *d_out,
                            void *d_ws, void *stream) {
    return none();
}
#endif
