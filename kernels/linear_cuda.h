// kernels/linear_cuda.h — linear layers on the GPU: a weight uploaded to the
// device once, and one forward call whatever its format.
//
//   y[T, rows] = x[T, cols] . W[rows, cols]^T (+ bias[rows])     x FP16, y f32
//
// Formats on the device (kernels/quant_cuda.h has the kernels):
//   PQ_W_DENSE  F16 / BF16 / F32 on the host, stored as FP16 [rows][cols],
//               multiplied with cublasGemmEx (FP16 inputs, f32 accumulation).
//   PQ_W_QPACK  the packed words as stored (kernels/qpack.h), each row padded
//               with zero words to `ldw` (a multiple of 16 words, 64 bytes, so
//               the GEMV reads whole 16-byte vectors); scales as FP16 when
//               every scale is exactly an FP16 value, else f32; zero points
//               uint8; g_idx int32.
//   PQ_W_INT8 / PQ_W_FP8  the int8 / E4M3 bytes as stored, each row padded
//               with zero bytes to `ldq` (a multiple of 64) and the rows
//               padded with zero rows to a multiple of 16 (what cuBLASLt's
//               INT8 / FP8 GEMMs want); f32 scales.
// Quantized weights are never expanded to a dense matrix: T <= 32 tokens run
// the fused dequantizing GEMV (8 tokens per pass), more tokens dequantize
// panels of rows into FP16 workspace and multiply them with cuBLAS; W8A8
// linears (act.type != PQ_ACTQ_NONE) quantize the activations per token on
// the device and run cuBLASLt's INT8 (IMMA) or FP8 GEMM (kernels/w8a8.h has
// the semantics).
#ifndef PQ_LINEAR_CUDA_H
#define PQ_LINEAR_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include <stddef.h>

#include "common/status.h"
#include "kernels/linear.h"

// The device layouts of the quantized formats: one struct each, filled by
// the upload (host code, compiled as C or C++) and passed by value to the
// CUDA kernels (kernels/qgemv_cuda.cu, qrows_cuda.cu), which read the
// layout through it alone; the offsets and sizes below are checked by every
// compiler of this header, so all of them agree on it.

// A pack-quantized weight (PQ_W_QPACK), rows x cols codes of `bits` bits.
typedef struct {
    const uint32_t *packed;  // [rows][ldw] words, each row padded with zero words
    const void *scales;      // [rows][ngroups]: __half when scales_f16, else float
    const uint8_t *zeros;    // [rows][ngroups] unsigned zero points, or NULL (symmetric: 2^(bits-1))
    const int32_t *gidx;     // [cols] each column's group, or NULL (column / group)
    int bits, group, ngroups;
    int ldw;                 // words per row: pq_qpack_words_per_row rounded up to 16
    int scales_f16;
} pq_qpack_dev;
PQ_STATIC_ASSERT(offsetof(pq_qpack_dev, gidx) == 3 * sizeof(void *), "pq_qpack_dev: pointers first");
PQ_STATIC_ASSERT(offsetof(pq_qpack_dev, bits) == 4 * sizeof(void *), "pq_qpack_dev: then the ints");
PQ_STATIC_ASSERT(offsetof(pq_qpack_dev, scales_f16) == 4 * sizeof(void *) + 4 * sizeof(int), "pq_qpack_dev: ints");
PQ_STATIC_ASSERT(sizeof(pq_qpack_dev) == PQ_ROUND_UP(4 * sizeof(void *) + 5 * sizeof(int), sizeof(void *)),
                 "pq_qpack_dev: no padding but the tail");

// 8-bit codes (PQ_W_INT8 / PQ_W_FP8), rows x cols bytes.
typedef struct {
    const uint8_t *q;        // [rows rounded up to 16][ldq] bytes, zero padded
    const float *scales;     // [rows], or [1] for an FP8 per-tensor scale (per_channel 0)
    int ldq;                 // bytes per row: cols rounded up to 64
    int per_channel;
} pq_bytes_dev;
PQ_STATIC_ASSERT(offsetof(pq_bytes_dev, ldq) == 2 * sizeof(void *), "pq_bytes_dev: pointers first");
PQ_STATIC_ASSERT(sizeof(pq_bytes_dev) == PQ_ROUND_UP(2 * sizeof(void *) + 2 * sizeof(int), sizeof(void *)),
                 "pq_bytes_dev: no padding but the tail");

typedef struct {
    pq_wformat fmt;
    int rows, cols;
    pq_actq act;         // W8A8 (PQ_W_INT8 / PQ_W_FP8); PQ_ACTQ_NONE: weight only
    uint16_t *d_w;       // PQ_W_DENSE: FP16 [rows][cols]
    pq_qpack_dev qp;     // PQ_W_QPACK (its arrays owned)
    pq_bytes_dev qb;     // PQ_W_INT8 / PQ_W_FP8 (its arrays owned)
    float *d_bias;       // f32 [rows] or NULL
    int borrowed_w;      // d_w belongs to another pq_linear_cuda (a tied embedding): not freed here
} pq_linear_cuda;

// What forward calls share: the stream, cuBLAS and cuBLASLt handles, a
// device workspace and cuBLASLt's algorithm choices (looked up once per
// shape). One context must not be used by two host threads at once.
typedef struct pq_cuda_ctx pq_cuda_ctx;

// A context on `stream` (a cudaStream_t) with ws_bytes of device workspace
// (the largest pq_linear_cuda_workspace_bytes of the linears it will run).
// On error *out is NULL and nothing stays allocated.
pq_status pq_cuda_ctx_create(void *stream, size_t ws_bytes, pq_cuda_ctx **out);
void pq_cuda_ctx_free(pq_cuda_ctx *c); // NULL-safe; does not wait for the stream

// Copies n elements of a dense host array of type dt to a new device buffer
// as FP16 (*d_out, free with cudaFree). F16 is copied as is; BF16 and F32
// are rounded to nearest even in chunks through a bounded host buffer. A
// finite value beyond the FP16 range is refused (PQ_ERR_NUMERIC, naming
// `what` and the element). On error *d_out is NULL.
pq_status pq_cuda_upload_f16(pq_dense_type dt, const void *w, size_t n, const char *what, uint16_t **d_out);

// Uploads W (and its bias). `what` names it in messages ("layer 3
// self_attn.q_proj"). A malformed weight (bits outside 2..8, a zero point
// or a g_idx entry out of range) is PQ_ERR_FORMAT; FP8 x FP8 on a GPU older than
// compute capability 8.9 is PQ_ERR_FORMAT. On error *out is zeroed and
// nothing stays allocated.
pq_status pq_linear_cuda_upload(const pq_linear *W, const char *what, pq_linear_cuda *out);

// A pq_linear_cuda over the weight of `src` (not copied, not freed) with no
// bias: the output head of a model whose embedding is tied (dense only).
pq_linear_cuda pq_linear_cuda_alias(const pq_linear_cuda *src);

// Frees the device buffers it owns and zeroes *L. NULL-safe.
void pq_linear_cuda_free(pq_linear_cuda *L);

// Device workspace bytes a forward call of up to max_T tokens needs (0 for
// dense weights, for quantized ones at max_T <= 32, ...).
size_t pq_linear_cuda_workspace_bytes(const pq_linear_cuda *L, int max_T);

// y = x W^T + b, enqueued on the context's stream. x FP16 [T][cols] and y
// f32 [T][rows] are device buffers, contiguous. A workspace smaller than
// pq_linear_cuda_workspace_bytes(L, T) is PQ_ERR_ARG; PQ_ERR_CUDA names a
// failing call.
pq_status pq_linear_cuda_forward(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y, pq_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
