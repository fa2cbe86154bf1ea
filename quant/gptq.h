// quant/gptq.h — GPTQ (Frantar et al., 2022, "GPTQ: Accurate Post-Training
// Quantization for Generative Pre-trained Transformers"; reference
// implementation IST-DASLab/gptq gptq.py) for one weight matrix.
//
// Given W [rows][cols] and the Hessian of its layer-wise loss
// ||W X - Q X||^2, H = 2 X^T X / n (any positive multiple gives the same
// result), columns are quantized one at a time and the error of each is
// spread over the columns not yet quantized through the upper Cholesky
// factor U of H^-1 (U^T U = H^-1):
//   err = (w[:, i] - q[:, i]) / U[i][i];   w[:, j] -= err * U[i][j]  for j > i
// Like the reference:
//   - dead columns (H[i][i] = 0: an input channel that is always 0) get
//     H[i][i] = 1 and W[:, i] = 0;
//   - dampening: H += damp * mean(diag H) * I (damp = 0.01 by default); if
//     the Cholesky factorization fails, damp is multiplied by 10 and the
//     factorization retried, up to PQ_GPTQ_DAMP_MAX (the report says so);
//   - act_order: columns in descending order of diag H (ties by index);
//   - lazy batch updates: the update of the columns right of a batch of
//     block_size columns is one dgemm per batch;
//   - groups: the scale and zero point of a group are chosen when its first
//     column comes up, by quant/rtn.h's pq_rtn_group_params over the group's
//     weights as updated so far (so H = I gives RTN's codes exactly); with
//     act_order the groups are runs of `group` consecutive columns in the
//     permuted order and g_idx records each column's group (compressed-
//     tensors actorder "group"); static_groups fixes every group's scale
//     from the unmodified W first, in natural column order (actorder
//     "weight": no g_idx needed).
// Unlike the reference, a batch never splits a group (its length is rounded
// to whole groups) and the group scales see the weights updated by every
// earlier column; the reference reads not-yet-updated weights for groups
// that start inside a batch, which makes its result depend on block_size.
// Here the result is the unblocked algorithm's for any block_size (up to
// rounding): tests/test_gptq.c checks codes against a plain double
// implementation.
//
// Precision: H is factored and W updated in double. Rows are independent
// and run as fixed chunks of PQ_GPTQ_ROWS over the pool, so results are
// bit-identical for any thread count.
#ifndef PQ_GPTQ_H
#define PQ_GPTQ_H

#include <stddef.h>

#include "common/threads.h"
#include "formats/qtensor.h"
#include "formats/scheme.h"

#define PQ_GPTQ_ROWS 32
#define PQ_GPTQ_DAMP_MIN 1e-12 // below it the dampening is lost in double's rounding of diag H
#define PQ_GPTQ_DAMP_MAX 100.0

typedef struct {
    int bits;          // 2..8
    int group;         // columns per group; >= cols or <= 0: one group per row (per channel)
    int sym;           // 1: symmetric, 0: asymmetric (zero points)
    double damp;       // relative dampening, > 0 (0.01)
    int block_size;    // lazy-batch columns, >= 1 (128)
    int act_order;     // columns by descending diag H
    int static_groups; // group scales from the unmodified W, in natural order
    pq_observer observer; // how group scales are chosen (quant/rtn.h): minmax, or mse
} pq_gptq_params;

pq_gptq_params pq_gptq_default_params(void);

// The Hessian of one input, prepared once for every linear reading it.
typedef struct {
    int cols;
    int *perm;          // [cols] the column order (identity without act_order)
    unsigned char *dead;// [cols] H[i][i] == 0, natural order
    double *u;          // [cols][cols] U (upper) with U^T U = (H + damp I)^-1, permuted
    double damp;        // the relative dampening used (params damp x 10^retries)
    double lambda;      // the dampening added to the diagonal: damp x the mean diagonal
    int retries;        // Cholesky failures before it succeeded
    int n_dead;
} pq_gptq_hessian;

// Workspace bytes of pq_gptq_prepare for cols columns (the arrays of
// pq_gptq_hessian live in it).
size_t pq_gptq_hessian_bytes(int cols);

// Prepares h [cols][cols] (f32, symmetric: X^T X up to a positive factor).
// ws: pq_gptq_hessian_bytes(cols); *out points into it. A non-finite
// element of h is PQ_ERR_NUMERIC; so is a factorization that fails even
// with damp = PQ_GPTQ_DAMP_MAX. `name` prefixes messages.
pq_status pq_gptq_prepare(const float *h, int cols, const pq_gptq_params *p, const char *name, void *ws,
                          pq_pool *pool, pq_gptq_hessian *out);

// The part of pq_gptq_prepare before the factorization, which the GPU's
// prepare (quant/gptq_cuda.h) shares so that both order the columns alike:
// checks p->damp and h, finds the dead columns and the column order, and
// sets *mean to the mean diagonal (a dead column's counted as 1). out gets
// cols, perm, dead, n_dead and damp = p->damp (u NULL, retries 0); perm and
// dead point into ws (pq_gptq_order_bytes(cols)). Errors as pq_gptq_prepare.
size_t pq_gptq_order_bytes(int cols);
pq_status pq_gptq_order(const float *h, int cols, const pq_gptq_params *p, const char *name, void *ws,
                        pq_gptq_hessian *out, double *mean);

// The grid of GPTQ's column loop (pq_gptq_run): pq_gptq_solve's integer
// groups or ggml's blocks (quant/ggml_grid.h). Grid g of a row covers `group`
// columns from g * group: of the column order h->perm when chosen on the fly
// (as its first column comes up, from the weights as updated so far), else
// natural ones (a row's grids all first, from the unmodified row).
typedef struct {
    int group, on_the_fly;
    // Chooses grid g of row r from its weights x[n] (dead columns 0); 0 if it
    // cannot be stored. NULL: no grids.
    int (*choose)(void *ctx, int tid, int r, int g, const float *x, int n);
    // Quantizes x[k], the weight at natural column c of row r0 + k (k < n),
    // on the row's grid g: stores the code, and its value in v[k].
    void (*quantize)(void *ctx, int tid, int r0, int n, int g, int c, const float *x, float *v);
    void *ctx;
} pq_gptq_grid;

// The column loop's update: W[k][c] -= e[k] * u[c] for k < rows, c < n
// (ldw: W's row stride). Each element is one multiply and one subtract,
// never fused, so every version gives the _ref's bits. _cpu runs the best
// version this CPU has (kernels/cpu.h).
void pq_gptq_rank1_ref(double *W, size_t ldw, const double *e, int rows, const double *u, int n);
void pq_gptq_rank1_cpu(double *W, size_t ldw, const double *e, int rows, const double *u, int n);
void pq_gptq_rank1_avx2(double *W, size_t ldw, const double *e, int rows, const double *u, int n);   // gptq_avx2.c
void pq_gptq_rank1_avx512(double *W, size_t ldw, const double *e, int rows, const double *u, int n); // gptq_avx512.c

// Workspace bytes of pq_gptq_run for lazy batches of at most `batch` columns.
size_t pq_gptq_run_bytes(int rows, int cols, int batch);

// GPTQ's column loop over w [rows][h->cols] on the grid g, with lazy batches
// of block_size columns (rounded to whole grids chosen on the fly, at most
// cols), rows in chunks of PQ_GPTQ_ROWS over the pool; tid is the pool
// thread running the chunk. *loss (optional) receives sum(err^2). Returns
// -1, or the first row whose grid could not be chosen. ws: pq_gptq_run_bytes.
int pq_gptq_run(const float *w, int rows, const pq_gptq_hessian *h, int block_size, const pq_gptq_grid *g, void *ws,
                pq_pool *pool, double *loss);

// Workspace bytes of pq_gptq_solve (independent of the thread count).
size_t pq_gptq_solve_bytes(int rows, int cols, const pq_gptq_params *p);

// Quantizes w [rows][cols] (f32, finite) with the prepared Hessian into q,
// which the caller allocated with pq_qtensor_alloc (PQ_W_QPACK or PQ_W_INT8,
// q->bits = p->bits, q->group as p->group, zeros iff asymmetric; zeroed) and,
// for act_order with groups and without static_groups, q->g_idx [cols]
// (pq_alloc). Writes codes, scales (in q->scale_dtype), zero points and
// g_idx. *loss (optional) receives sum(err^2) = tr(dW Hd dW^T) for the
// damped Hessian Hd as given. A scale that overflows q->scale_dtype is
// PQ_ERR_NUMERIC naming `name` and the row. ws: pq_gptq_solve_bytes.
pq_status pq_gptq_solve(const float *w, int rows, const pq_gptq_hessian *h, const pq_gptq_params *p,
                        const char *name, void *ws, pq_pool *pool, pq_qtensor *q, double *loss);

// Columns per lazy batch: block_size, rounded to whole groups when group
// scales are chosen on the fly (so that a group never straddles a batch),
// at most cols.
int pq_gptq_batch_len(const pq_gptq_params *p, int cols);

// pq_gptq_solve's check of its arguments: 2..8 bits, block_size >= 1, and
// q made for rows x cols with these parameters (format, bits, group, zero
// points iff asymmetric, g_idx iff pq_gptq_has_g_idx); PQ_ERR_ARG naming
// `name` otherwise.
pq_status pq_gptq_check_output(const pq_qtensor *q, int rows, int cols, const pq_gptq_params *p, const char *name);

// The run's parameters a user gives: damp in [PQ_GPTQ_DAMP_MIN,
// PQ_GPTQ_DAMP_MAX], block_size in 1..65536; PQ_ERR_ARG naming the flag.
pq_status pq_gptq_check(double damp, int block_size);

// The errors of a solve of w [q->rows][q->cols] into the quantized linear
// q: *weight_rel = ||W - Q||^2 / ||W||^2 (0 for a zero W) and, with h (the
// solve's Hessian) and loss (its sum(err^2) = tr(dW' Hd dW'^T), dW' the
// error of W with h's dead columns zeroed), *out_sq = tr(dW H dW^T) for the
// undamped H: loss less the dampening's part lambda ||dW'||^2 and the dead
// columns' (H's are 0) — the output error's numerator with no product by H.
// Rows in chunks of PQ_GPTQ_ROWS over the pool, the sums added in chunk
// order (the same for any thread count). ws: pq_gptq_errors_bytes.
size_t pq_gptq_errors_bytes(int rows, int cols, int nthreads);
void pq_gptq_errors(const float *w, const pq_linear *q, const pq_gptq_hessian *h, double loss, void *ws,
                    pq_pool *pool, double *weight_rel, double *out_sq);

// Whether pq_gptq_solve writes a g_idx for these parameters and cols.
int pq_gptq_has_g_idx(const pq_gptq_params *p, int cols);

#endif
