// formats/qtensor.h — one quantized weight matrix, owned: what a quantizer
// (RTN, GPTQ, the smoothing methods) produces and the packed-checkpoint writer
// stores, viewable as a pq_linear so the engine's kernels can run it.
//
// The layouts are those of kernels/qpack.h and kernels/fp8.h:
//   PQ_W_QPACK  packed [rows][words], scales [rows][ngroups], zeros (asym)
//               [rows][ngroups] unsigned (the signed zero point + 2^(bits-1))
//   PQ_W_INT8   i8 [rows][cols], scales [rows]
//   PQ_W_FP8    f8 [rows][cols] E4M3 bytes, scales [rows] or [1] (per tensor)
//   ggml        a GGUF scheme's matrix (formats/scheme.h): blocks [rows][row
//               bytes] of type ggml (the scheme's, or llama.cpp's fallback
//               for its cols), and dense [rows][cols], the f32 values the
//               blocks dequantize to exactly (kernels/ggml_dequant.h), which
//               the view runs as a dense F32 linear; fmt is PQ_W_DENSE
// Every scale is an f32 that is exactly representable in scale_dtype (the
// dtype it is stored in), so what the file holds dequantizes to the values
// the quantizer chose, bit for bit.
#ifndef PQ_QTENSOR_H
#define PQ_QTENSOR_H

#include <stdint.h>

#include "formats/safetensors.h"
#include "formats/scheme.h"
#include "kernels/linear.h"

typedef struct {
    pq_wformat fmt;        // PQ_W_QPACK, PQ_W_INT8 or PQ_W_FP8
    int rows, cols;
    int bits;              // PQ_W_QPACK: 2..8
    int group;             // PQ_W_QPACK: columns per group (>= cols: per channel)
    int per_tensor;        // PQ_W_FP8: one scale
    pq_dtype scale_dtype;  // PQ_DT_F16, PQ_DT_BF16 or PQ_DT_F32
    uint32_t *packed;      // PQ_W_QPACK
    uint8_t *zeros;        // PQ_W_QPACK asymmetric, else NULL
    int8_t *i8;            // PQ_W_INT8
    uint8_t *f8;           // PQ_W_FP8
    float *scales;
    int nscales;           // entries of scales
    int32_t *g_idx;        // PQ_W_QPACK: [cols] group of each column (GPTQ act-order) or NULL; owned
                           // (allocated by whoever sets it with pq_alloc, freed by pq_qtensor_free)
    float input_scale;     // PQ_W_INT8 / PQ_W_FP8 of a static activation scheme: the calibrated
                           // activation scale (exact in scale_dtype), else 0
    int is_ggml;           // a GGUF scheme's matrix: ggml, blocks, dense below
    int ggml;              // its pq_ggml_type (kernels/ggml_blocks.h)
    uint8_t *blocks;
    float *dense;
} pq_qtensor;

// Bytes of one row of a ggml matrix's blocks.
size_t pq_qtensor_row_bytes(const pq_qtensor *q);

// Allocates the arrays for the given shape and format (fields above set by
// the caller first: fmt, rows, cols, bits, group, per_tensor, scale_dtype;
// asym says whether QPACK zeros are needed). Contents are zeroed. On
// PQ_ERR_NOMEM nothing stays allocated.
pq_status pq_qtensor_alloc(pq_qtensor *q, int asym);

// A zeroed q for a [rows x cols] matrix quantized with scheme s, scales
// stored as scale_dtype: the format, bits, group (s->group when it is > 0
// and < cols, else one group per row) and per-tensor scale of s, zero
// points when s is asymmetric; no g_idx. A GGUF scheme's q is a ggml
// matrix of the type pq_scheme_ggml_type_for gives cols. A shape that is
// not positive is PQ_ERR_ARG; otherwise as pq_qtensor_alloc.
pq_status pq_qtensor_init(pq_qtensor *q, const pq_scheme *s, int rows, int cols, pq_dtype scale_dtype);
void pq_qtensor_free(pq_qtensor *q); // frees the arrays (NULL-safe), keeps the shape

// Stores the signed code of element [r][c] of an integer format (PQ_W_QPACK
// packed with its offset of 2^(bits-1), or PQ_W_INT8) into arrays that
// start zeroed; each element is written once. Rows are independent words,
// so threads may fill different rows concurrently.
void pq_qtensor_set_code(pq_qtensor *q, int r, int c, int code);
// The same for codes c0..c0+n-1 of row r (integral floats, as RTN computes them).
void pq_qtensor_set_codes(pq_qtensor *q, int r, int c0, int n, const float *codes);
// The same for column c of rows r0..r0+n-1 (GPTQ's column by column).
void pq_qtensor_set_column(pq_qtensor *q, int r0, int n, int c, const float *codes);

// A pq_linear that borrows q's arrays (valid while q is).
pq_linear pq_qtensor_linear(const pq_qtensor *q);

// Number of scale groups per row (1 for per channel).
int pq_qtensor_ngroups(const pq_qtensor *q);

// x rounded to the nearest value of a float dtype (F16 / BF16; F32 and any
// other dtype: x itself), ties to even, returned as an f32.
float pq_round_to_dtype(float x, pq_dtype dt);

#endif
