// quant/ggml_grid.h — quantizing onto llama.cpp's grids (the GGUF schemes,
// formats/scheme.h): a weight matrix into a ggml matrix (formats/qtensor.h:
// blocks of its type, and the exact values they dequantize to) by
//   RTN    ggml's own round to nearest, block by block (kernels/ggml_quant.h);
//   GPTQ   quant/gptq.h's column loop (pq_gptq_run) with ggml's blocks as
//          its grids: each block's grid (its scales and mins: for Q4_K the 6-bit
//          sub-block scales and mins under the FP16 super-block scales) is
//          chosen first by the type's own search, exactly as llama.cpp's
//          RTN chooses it, over the block's weights as GPTQ has updated
//          them when its first column comes up (or, with static_groups,
//          over the unmodified weights), optionally weighted like llama.cpp's
//          importance matrix by the calibration's diag(X^T X) (K types);
//          then every column's code is chosen on that fixed grid, the
//          nearest as the type's quantizer rounds, and its error spread over
//          the columns not yet quantized. With H = I (no correlation) the
//          result is ggml's RTN, byte for byte.
// A ggml matrix of type F16 (llama.cpp's fallback for rows that are not
// whole blocks of any type) holds each weight rounded to FP16.
#ifndef PQ_GGML_GRID_H
#define PQ_GGML_GRID_H

#include "common/threads.h"
#include "formats/qtensor.h"
#include "quant/gptq.h"

// RTN of w [q->rows][q->cols] (finite) into the ggml matrix q
// (pq_qtensor_init of a GGUF scheme). rel_err (optional): ||W - W'||^2 /
// ||W||^2. A value F16 cannot hold is PQ_ERR_NUMERIC naming `name`.
pq_status pq_ggml_rtn_quantize(const float *w, const char *name, pq_pool *pool, pq_qtensor *q, double *rel_err);

// Workspace bytes of pq_ggml_gptq_solve.
size_t pq_ggml_gptq_solve_bytes(int rows, int cols, const pq_gptq_params *p, int nthreads);

// GPTQ of w [rows][h->cols] into the ggml matrix q with the prepared
// Hessian h and p's damp, block_size, act_order (which needs static_groups:
// a block's columns are consecutive) and static_groups. imatrix: NULL or
// [cols] importance weights for the K types' grids (diag of X^T X). *loss
// (optional) receives sum(err^2) as quant/gptq.h's does. ws:
// pq_ggml_gptq_solve_bytes. Deterministic for any thread count.
pq_status pq_ggml_gptq_solve(const float *w, int rows, const pq_gptq_hessian *h, const pq_gptq_params *p,
                             const float *imatrix, const char *name, void *ws, pq_pool *pool, pq_qtensor *q,
                             double *loss);

// Values per block of a ggml matrix's type (F16: 1).
int pq_ggml_grid_block(int ggml_type);

// x[n] (n a whole number of blocks of type t) quantized with ggml's RTN and
// dequantized into out[n] (F16: rounded): what the AWQ clip search measures.
void pq_ggml_fake_quant(int ggml_type, const float *x, int n, float *out);

#endif
