// kernels/linear_cuda.h — linear layers on the GPU: a weight uploaded to the
// device once, and one forward call whatever its format.
//
//   y[T, rows] = x[T, cols] . W[rows, cols]^T (+ bias[rows])     x FP16 or BF16, y f32
//
// Formats on the device (kernels/quant_cuda.h has the kernels):
//   PQ_W_DENSE  F16 / BF16 / F32 on the host, stored in the activation type
//               (FP16 or BF16) [rows][cols], multiplied with cublasGemmEx
//               (16-bit inputs, f32 accumulation).
//   PQ_W_QPACK  4- and 8-bit codes in the tiled layout below; other widths,
//               groups that do not fit it, and a g_idx that is not a
//               permutation of whole groups keep the packed words as stored
//               (kernels/qpack.h), each row padded with zero words to `ldw`
//               (the rows layout). Scales as FP16 when every scale is exactly
//               an FP16 value, else f32; zero points uint8.
//   PQ_W_INT8 / PQ_W_FP8  weight-only: the tiled layout at 8 bits; W8A8:
//               the bytes as stored, each row padded with zero bytes to
//               `ldq` (a multiple of 64) and the rows padded with zero rows
//               to a multiple of 32 (what cuBLASLt's INT8 / FP8 GEMMs
//               accept); f32 scales.
// Quantized weights are never expanded to a dense matrix: T <= 32 tokens run
// the fused dequantizing GEMV (one read of the weight for all of them), more
// tokens dequantize panels of rows into workspace (two panels, on a second
// stream, overlapped with cuBLAS multiplying the previous one); W8A8
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

// The activation type of a linear's input x (and of a dense weight, which
// is stored in it): FP16, or BF16 for a model stored in BF16, whose
// activations can exceed FP16's 65504 (kernels/cuda_act.cuh).
typedef enum { PQ_ACT_F16, PQ_ACT_BF16 } pq_act_dtype;
const char *pq_act_dtype_name(pq_act_dtype dt); // "fp16", "bf16"

// The device layouts of the quantized formats: one struct each, filled by
// the upload (host code, compiled as C or C++) and passed by value to the
// CUDA kernels (kernels/qgemv_cuda.cu, qrows_cuda.cu: pq_qtile_cuda too), which
// read the layout through it alone; the offsets and sizes below are checked
// by every compiler of this header, so all of them agree on it.
//
// The tiled layout (4- and 8-bit codes, the fast GEMV of quant_cuda.h): rows
// in tiles of PQ_TILE_ROWS, each row's words in stages of
// PQ_TILE_STAGE_WORDS (256 codes at 4 bits, 128 at 8), zero padded; the
// 512 words of one tile and stage are contiguous, tile-major:
//   word ((rt * nst + st) * 512) + ((c * 2 + h) * 32 + lane) * 4 + k
// holds row 16 rt + lane / 4 + 8 h, word st * 32 + c * 16 + 4 k + lane % 4
// of the row (c < 2: the stage's two chunks of 16 words; k < 4), so that
// lane (g = lane / 4, q = lane % 4) of a warp reads, per chunk, one 16-byte
// vector for row g and one for row g + 8, and the four lanes of a row hold
// four consecutive words at each k (the 32 codes of one group block at 4
// bits, 16 at 8). In a 4-bit word the codes of columns 0..7 sit in the
// nibbles 0, 4, 1, 5, 2, 6, 3, 7 (code i in nibble (i % 2) * 4 + i / 2), so
// that masking nibbles 0 and 4, 1 and 5, ... yields the column pairs
// (0, 1), (2, 3), ... the tensor cores multiply with x as it lies. 8-bit
// codes keep their byte order. Scales and zero points of the tiled layout
// are [rt][group][16].
#define PQ_TILE_ROWS 16
#define PQ_TILE_STAGE_WORDS 32
#define PQ_TILE_WORDS (PQ_TILE_ROWS * PQ_TILE_STAGE_WORDS) // 512 words per tile and stage

// Functions of the layout that C, host C++ and device code all call.
#ifdef __CUDACC__
#define PQ_HOST_DEVICE __host__ __device__
#else
#define PQ_HOST_DEVICE
#endif

// The tiled array's word holding word w of row `row` (nst stages per row),
// and the position of code i (< 32 / bits) of a word: the formula above.
static inline PQ_HOST_DEVICE size_t pq_tile_word(int row, int w, int nst) {
    const int rt = row / PQ_TILE_ROWS, rr = row % PQ_TILE_ROWS, g = rr % 8, h = rr / 8;
    const int st = w / PQ_TILE_STAGE_WORDS, ws = w % PQ_TILE_STAGE_WORDS, c = ws / 16, wc = ws % 16;
    return ((size_t)rt * nst + st) * PQ_TILE_WORDS + (size_t)((c * 2 + h) * 32 + g * 4 + wc % 4) * 4 + wc / 4;
}
static inline PQ_HOST_DEVICE int pq_tile_code_pos(int bits, int i) { return bits == 8 ? i : (i % 2) * 4 + i / 2; }

// Stages per row of a tiled weight of cols codes of `bits` bits.
static inline int pq_tile_stages(int cols, int bits) {
    const int sc = PQ_TILE_STAGE_WORDS * (32 / bits);
    return (cols + sc - 1) / sc;
}

// The specification of the tiling (pq_qtile_cuda, kernels/quant_cuda.h):
// out [ceil(rows / 16)][nst][512] words from the code matrix src [rows][cols]
// of `bits` (4 or 8) bits at src_stride bytes per row (code c of a row: byte
// c at 8 bits, nibble c % 2 of byte c / 2 at 4), columns taken through perm
// (NULL: in order); codes past the rows and columns are 0.
void pq_qtile_ref(const uint8_t *src, size_t src_stride, int rows, int cols, int bits, const int32_t *perm, int nst,
                  uint32_t *out);

// A pack-quantized weight (PQ_W_QPACK), rows x cols codes of `bits` bits.
typedef struct {
    const uint32_t *packed;  // rows layout: [rows][ldw] words, each row padded with zero words; tiled: above
    const void *scales;      // rows: [rows][ngroups]; tiled: [tiles][ngroups][16]; __half when scales_f16, else float
    const uint8_t *zeros;    // as scales, unsigned zero points, or NULL (symmetric: 2^(bits-1))
    const int32_t *gidx;     // rows layout: [cols] each column's group, or NULL (column / group)
    const int32_t *perm;     // tiled: stored column j is source column perm[j] (GPTQ act order), or NULL
    int bits, group, ngroups;
    int ldw;                 // rows layout: words per row, pq_qpack_words_per_row rounded up to 16
    int nst;                 // tiled: stages per row
    int tiled;               // 1: the tiled layout (bits 4 or 8)
    int scales_f16;
    int pad_;                // keeps the size a multiple of 8 on every ABI
} pq_qpack_dev;
PQ_STATIC_ASSERT(offsetof(pq_qpack_dev, perm) == 4 * sizeof(void *), "pq_qpack_dev: pointers first");
PQ_STATIC_ASSERT(offsetof(pq_qpack_dev, bits) == 5 * sizeof(void *), "pq_qpack_dev: then the ints");
PQ_STATIC_ASSERT(offsetof(pq_qpack_dev, scales_f16) == 5 * sizeof(void *) + 6 * sizeof(int), "pq_qpack_dev: ints");
PQ_STATIC_ASSERT(sizeof(pq_qpack_dev) == 5 * sizeof(void *) + 8 * sizeof(int), "pq_qpack_dev: no padding");

// 8-bit codes (PQ_W_INT8 / PQ_W_FP8), rows x cols bytes: for W8A8 (cuBLASLt)
// row major, [rows rounded up to 32][ldq] bytes, zero padded; weight-only,
// the tiled layout at 8 bits.
typedef struct {
    const uint8_t *q;
    const float *scales;     // [rows], or [1] for an FP8 per-tensor scale (per_channel 0)
    int ldq;                 // row major: bytes per row, cols rounded up to 64
    int nst;                 // tiled: stages per row
    int per_channel;
    int tiled;
} pq_bytes_dev;
PQ_STATIC_ASSERT(offsetof(pq_bytes_dev, ldq) == 2 * sizeof(void *), "pq_bytes_dev: pointers first");
PQ_STATIC_ASSERT(sizeof(pq_bytes_dev) == 2 * sizeof(void *) + 4 * sizeof(int), "pq_bytes_dev: no padding");

typedef struct {
    pq_wformat fmt;
    int rows, cols;
    pq_act_dtype act_dtype; // the type of x (and of d_w)
    pq_actq act;         // W8A8 (PQ_W_INT8 / PQ_W_FP8); PQ_ACTQ_NONE: weight only
    uint16_t *d_w;       // PQ_W_DENSE: act_dtype [rows][cols]
    pq_qpack_dev qp;     // PQ_W_QPACK (its arrays owned)
    pq_bytes_dev qb;     // PQ_W_INT8 / PQ_W_FP8 (its arrays owned)
    float *d_bias;       // f32 [rows] or NULL
    int borrowed_w;      // d_w belongs to another pq_linear_cuda (a tied embedding): not freed here
} pq_linear_cuda;

// What forward calls share: the stream, a second stream for the prefill's
// panel dequantization, cuBLAS and cuBLASLt handles, a device workspace, the
// split-K arrival counters of the GEMV and cuBLASLt's algorithm choices
// (looked up once per shape). One context must not be used by two host
// threads at once. Every forward enqueued through it may be captured into a
// CUDA graph (cuBLAS has a workspace of its own, set here, so it allocates
// nothing while capturing).
typedef struct pq_cuda_ctx pq_cuda_ctx;

// A context on `stream` (a cudaStream_t) with ws_bytes of device workspace
// (the largest pq_linear_cuda_workspace_bytes of the linears it will run).
// On error *out is NULL and nothing stays allocated.
pq_status pq_cuda_ctx_create(void *stream, size_t ws_bytes, pq_cuda_ctx **out);
void pq_cuda_ctx_free(pq_cuda_ctx *c); // NULL-safe; does not wait for the stream

// Copies n elements of a dense host array of type src to a new device buffer
// of type dt (*d_out, free with cudaFree): the bytes go to the device in
// chunks through a bounded staging buffer and are converted there (round to
// nearest even; the same type is copied as is). A finite value beyond the
// FP16 range is refused for dt FP16 (PQ_ERR_NUMERIC, naming `what` and the
// element). On error *d_out is NULL.
pq_status pq_cuda_upload_act(pq_dense_type src, const void *w, size_t n, pq_act_dtype dt, const char *what,
                             uint16_t **d_out);

// Uploads W (and its bias) for inputs of type dt. `what` names it in
// messages ("layer 3 self_attn.q_proj"). A malformed weight (bits outside
// 2..8, a zero point or a g_idx entry out of range) is PQ_ERR_FORMAT; FP8 x
// FP8 on a GPU older than compute capability 8.9 is PQ_ERR_FORMAT. 4- and
// 8-bit codes (QPACK, weight-only INT8 and FP8) are rearranged on the device
// into the tiled layout when their groups allow it (per row, or a group of a
// multiple of 32 codes at 4 bits / 16 at 8 that divides, or is a multiple
// of, a stage); an act-order g_idx whose groups are `group` consecutive
// columns of some order (what GPTQ writes) is applied as a column
// permutation (perm), so such checkpoints take the tiled kernels too. On
// error *out is zeroed and nothing stays allocated.
pq_status pq_linear_cuda_upload(const pq_linear *W, const char *what, pq_act_dtype dt, pq_linear_cuda *out);

// A pq_linear_cuda over the weight of `src` (not copied, not freed) with no
// bias: the output head of a model whose embedding is tied (dense only).
pq_linear_cuda pq_linear_cuda_alias(const pq_linear_cuda *src);

// Frees the device buffers it owns and zeroes *L. NULL-safe.
void pq_linear_cuda_free(pq_linear_cuda *L);

// Device workspace bytes a forward call of up to max_T tokens needs (0 for
// dense weights; for quantized ones, the split-K partial sums of the GEMV,
// the permuted copy of x, the two panels of the prefill, cuBLASLt's W8A8
// buffers).
size_t pq_linear_cuda_workspace_bytes(const pq_linear_cuda *L, int max_T);

// y = x W^T + b, enqueued on the context's stream. x [T][cols] (L->act_dtype)
// and y f32 [T][rows] are device buffers, contiguous. A workspace smaller
// than pq_linear_cuda_workspace_bytes(L, T) is PQ_ERR_ARG; PQ_ERR_CUDA names
// a failing call.
pq_status pq_linear_cuda_forward(const pq_linear_cuda *L, const uint16_t *d_x, int T, float *d_y, pq_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
