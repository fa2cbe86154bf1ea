// tests/lib/cuda_wrappers.h — host wrappers that run one CUDA op or kernel
// on host arrays, for the tests (test-only: tests/lib/cuda_wrappers.cu, and
// tests/lib/cuda_none.c in a build without nvcc): host arrays in, device
// buffers allocated, the op run on a private stream and waited for, the
// result copied back, everything freed. PQ_ERR_CUDA (naming the call) on any
// CUDA failure, PQ_ERR_NO_DEVICE without a device.
//
// 16-bit device data of type dt (kernels/linear_cuda.h's pq_act_dtype) is
// passed as f32 host arrays: rounded to dt on the way in (the caller rounds
// its reference inputs the same way: pq_cuda_test_round), widened exactly on
// the way out.
#ifndef PQ_TEST_CUDA_WRAPPERS_H
#define PQ_TEST_CUDA_WRAPPERS_H

#include "kernels/ops_cuda.h"
#include "kernels/quant_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

// x[i] = dt(x[i]) widened back (what the device holds of it).
void pq_cuda_test_round(pq_act_dtype dt, float *x, size_t n);

// ---- kernels/ops_cuda.h --------------------------------------------------------

// table [vocab][n] (rounded to dt); tokens [T] (each < vocab, else PQ_ERR_ARG); x [T][n].
pq_status pq_cuda_test_embed(pq_act_dtype dt, const float *table, int vocab, int n, const int32_t *tokens, int T,
                             float *x);
// y [T][n]: the dt output widened to f32.
pq_status pq_cuda_test_rmsnorm(pq_act_dtype dt, const float *x, const float *w, int T, int n, float eps, float *y);
// Builds the tables on the device (returned in cs/sn [T][head_dim/2]) and
// rotates x [T][stride] in place with them; with device_pos (T = 1) the
// position is read from device memory.
pq_status pq_cuda_test_rope(const double *inv_freq, int head_dim, int pos0, int device_pos, int T, int stride,
                            int n_heads, float *x, float *cs, float *sn);
// out [n]: the dt output widened to f32.
pq_status pq_cuda_test_swiglu(pq_act_dtype dt, const float *gate, const float *up, size_t n, float *out);
// y [n] += x [n].
pq_status pq_cuda_test_add(float *y, const float *x, size_t n);
// y [n]: 16-bit patterns of dt.
pq_status pq_cuda_test_f32_to_act(pq_act_dtype dt, const float *x, size_t n, uint16_t *y);
// The cache [n_ctx][kvd] (dt) starts as NaN; rows pos0..pos0+T-1 (or row
// pos0 read from device memory: device_pos, T = 1) get k, v [T][kvd]; kc,
// vc [n_ctx][kvd] return the whole cache widened (NaN where unwritten).
pq_status pq_cuda_test_kv_store(pq_act_dtype dt, const float *k, const float *v, int T, int kvd, int pos0,
                                int device_pos, int n_ctx, float *kc, float *vc);
// nll [n] of logits [n][vocab] at targets [n] (< 0: not scored).
pq_status pq_cuda_test_nll(const float *logits, int n, int vocab, const int32_t *targets, float *nll);

// Which attention kernel: pq_attention_cuda's choice, the prefill one, the
// decode one (T = 1) with the position as an argument or read from the device.
typedef enum { PQ_ATTN_AUTO, PQ_ATTN_PREFILL, PQ_ATTN_DECODE, PQ_ATTN_DECODE_DEVPOS } pq_attn_path;
// k and v [pos0+T][n_kv*hd] are rounded to dt on the way in, in a cache of
// n_ctx >= pos0 + T rows whose other rows are NaN (the kernels must not read
// them); out [T][n_heads*hd] is the dt output widened to f32.
pq_status pq_cuda_test_attention(const pq_attn_shape *s, pq_act_dtype dt, pq_attn_path path, const float *q,
                                 const float *k, const float *v, int T, int pos0, int n_ctx, float *out);

// y [T][rows] = x W^T + b through pq_linear_cuda_forward_path (W uploaded by
// kernels/linear_cuda.h for inputs of type dt, x rounded to dt on the way
// in). layout (optional): 1 when W was tiled, 0 for the rows layout.
pq_status pq_cuda_test_qlinear(const pq_linear *W, pq_act_dtype dt, const float *x, int T, pq_cuda_path path,
                               float *y, int *layout);
// out [n][cols]: rows r0..r0+n of W from pq_qlinear_rows_cuda, widened to
// f32 (in the weight's stored column order: see perm).
pq_status pq_cuda_test_qrows(const pq_linear *W, pq_act_dtype dt, int r0, int n, float *out);
// out (the whole tiled array, ceil(rows / 16) * nst * 512 words) from
// pq_qtile_cuda on the code matrix src [rows][src_stride bytes], in calls
// of `chunk` rows (a multiple of 16; 0: one call), each given only its
// rows, as the upload calls it; perm [cols] or NULL. The array starts as
// 0xff bytes: every word must be written.
pq_status pq_cuda_test_qtile(const uint8_t *src, size_t src_stride, int rows, int cols, int bits,
                             const int32_t *perm, int nst, int chunk, uint32_t *out);
// q [T][cols] codes and scale [T] from pq_actq_cuda (x rounded to dt), and
// the padding checked (codes past cols and tokens past T zero).
pq_status pq_cuda_test_actq(const pq_actq *act, pq_act_dtype dt, const float *x, int T, int cols, uint8_t *q,
                            float *scale);

// ---- calib/xtx_cuda.h ------------------------------------------------------------

// xtx [cols][cols] accumulated on the GPU from x [T][cols] (rounded to dt)
// added twice: all T rows, then the first T2.
pq_status pq_cuda_test_xtx(pq_act_dtype dt, const float *x, int T, int T2, int cols, float *xtx);

#ifdef __cplusplus
}
#endif

#endif
