// tests/lib/cuda_wrappers.h — host wrappers that run one CUDA op or kernel
// on host arrays, for the tests (test-only: tests/lib/cuda_wrappers.cu, and
// tests/lib/cuda_none.c in a build without nvcc): host arrays in, device
// buffers allocated, the op run on a private stream and waited for, the
// result copied back, everything freed. PQ_ERR_CUDA (naming the call) on any
// CUDA failure, PQ_ERR_NO_DEVICE without a device.
#ifndef PQ_TEST_CUDA_WRAPPERS_H
#define PQ_TEST_CUDA_WRAPPERS_H

#include "kernels/ops_cuda.h"
#include "kernels/quant_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- kernels/ops_cuda.h --------------------------------------------------------

// table FP16 [vocab][n]; tokens [T] (each < vocab, else PQ_ERR_ARG); x [T][n].
pq_status pq_cuda_test_embed(const uint16_t *table, int vocab, int n, const int32_t *tokens, int T, float *x);
// y [T][n]: the FP16 output widened to f32.
pq_status pq_cuda_test_rmsnorm(const float *x, const float *w, int T, int n, float eps, float *y);
// Builds the tables on the device (returned in cs/sn [T][head_dim/2]) and
// rotates x [T][stride] in place with them.
pq_status pq_cuda_test_rope(const double *inv_freq, int head_dim, int pos0, int T, int stride, int n_heads,
                            float *x, float *cs, float *sn);
// out [n]: the FP16 output widened to f32.
pq_status pq_cuda_test_swiglu(const float *gate, const float *up, size_t n, float *out);
// y [n] += x [n].
pq_status pq_cuda_test_add(float *y, const float *x, size_t n);
// y [n]: FP16 bit patterns.
pq_status pq_cuda_test_f32_to_f16(const float *x, size_t n, uint16_t *y);
// k and v f32 [pos0+T][n_kv*hd] are rounded to FP16 on the way in; out
// [T][n_heads*hd] is the FP16 output widened to f32.
pq_status pq_cuda_test_attention(const pq_attn_shape *s, const float *q, const float *k, const float *v, int T,
                                 int pos0, float *out);
// y [T][rows] = x W^T + b through pq_linear_cuda_forward (W uploaded by
// kernels/linear_cuda.h, x rounded to FP16 on the way in).
pq_status pq_cuda_test_linear(const pq_linear *W, const float *x, int T, float *y);

// ---- kernels/quant_cuda.h -------------------------------------------------------

// y [T][rows] = x W^T + b through pq_linear_cuda_forward_path.
pq_status pq_cuda_test_qlinear(const pq_linear *W, const float *x, int T, pq_cuda_path path, float *y);
// out [n][cols]: FP16 bit patterns from pq_qlinear_rows_cuda.
pq_status pq_cuda_test_qrows(const pq_linear *W, int r0, int n, uint16_t *out);
// q [T][cols] codes and scale [T] from pq_actq_cuda.
pq_status pq_cuda_test_actq(const pq_actq *act, const float *x, int T, int cols, uint8_t *q, float *scale);

#ifdef __cplusplus
}
#endif

#endif
