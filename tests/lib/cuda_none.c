// tests/lib/cuda_none.c — what the tests call of the CUDA code (the host
// wrappers of tests/lib/cuda_wrappers.h, pq_attention_cuda) in a build
// without nvcc: there is no device, so the GPU tests skip.
#if !PQ_HAVE_CUDA
#include "tests/lib/cuda_wrappers.h"

static pq_status none(void) { return PQ_FAIL(PQ_ERR_NO_DEVICE, "this pq was built without CUDA (nvcc was not found)"); }

pq_status pq_cuda_test_embed(const uint16_t *table, int vocab, int n, const int32_t *tokens, int T, float *x) {
    return none();
}
pq_status pq_cuda_test_rmsnorm(const float *x, const float *w, int T, int n, float eps, float *y) { return none(); }
pq_status pq_cuda_test_rope(const double *inv_freq, int head_dim, int pos0, int T, int stride, int n_heads,
                            float *x, float *cs, float *sn) {
    return none();
}
pq_status pq_cuda_test_swiglu(const float *gate, const float *up, size_t n, float *out) { return none(); }
pq_status pq_cuda_test_add(float *y, const float *x, size_t n) { return none(); }
pq_status pq_cuda_test_f32_to_f16(const float *x, size_t n, uint16_t *y) { return none(); }
pq_status pq_cuda_test_attention(const pq_attn_shape *s, const float *q, const float *k, const float *v, int T,
                                 int pos0, float *out) {
    return none();
}
pq_status pq_cuda_test_linear(const pq_linear *W, const float *x, int T, float *y) { return none(); }
pq_status pq_cuda_test_qlinear(const pq_linear *W, const float *x, int T, pq_cuda_path path, float *y) {
    return none();
}
pq_status pq_cuda_test_qrows(const pq_linear *W, int r0, int n, uint16_t *out) { return none(); }
pq_status pq_cuda_test_actq(const pq_actq *act, const float *x, int T, int cols, uint8_t *q, float *scale) {
    return none();
}
pq_status pq_attention_cuda(const pq_attn_shape *s, const float *d_q, const uint16_t *d_k, const uint16_t *d_v,
                            int T, int pos0, uint16_t *d_out, void *stream) {
    return none();
}
#endif
