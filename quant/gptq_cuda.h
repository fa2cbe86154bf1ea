// quant/gptq_cuda.h — GPTQ (quant/gptq.h) on the GPU: the Hessian's
// factorization and the column loop, for the integer grids of
// compressed-tensors (PQ_W_QPACK / PQ_W_INT8: sym or asym, per channel or
// groups, act-order with dynamic or static groups, the minmax and mse
// observers). A GGUF scheme's ggml grids (quant/ggml_grid.h) stay on the
// CPU: pq_ggml_gptq_solve reads the host factor of pq_gptq_prepare.
//
// The algorithm is quant/gptq.h's, step for step, in the same precision:
//   prepare  the column order, dead columns and mean diagonal on the host
//            (pq_gptq_order, the CPU's own code: the same permutation); on
//            the device the permuted, dampened H reversed (J H J), its lower
//            Cholesky factor Lr (cusolverDnDpotrf), Lr^-1 in place
//            (cusolverDnXtrtri) and U = J Lr^-1 J, all in f64 as the CPU's
//            quant/linalg.h; a failed factorization (potrf's info, or a
//            pivot that is not finite and positive) raises the dampening by
//            10x like the CPU, up to PQ_GPTQ_DAMP_MAX, with the CPU's message.
//   solve    W (f64, permuted, column-major so that a warp's rows are
//            adjacent) batch by batch: one kernel per batch quantizes its
//            columns one after the other, a thread per row (group scales
//            chosen at a group's first column, as pq_rtn_group_params), and
//            spreads each column's error over the batch's later columns;
//            then one cublasDgemm applies the lazy update W[:, end:] -= E
//            U[batch, end:]. Codes are packed on the device into q's layout.
//   measure  the output error the method records per linear, from the
//            device's W, W' and H (pq_gptq_cuda_output_error).
// f64, not f32: the CPU keeps W and U in double (quant/gptq.h), and the
// device's results are compared with it; an f32 U loses ~7 digits against
// the condition number of a dampened Hessian. H200-class GPUs run f64
// GEMMs on their tensor cores, so the lazy updates are not the cost.
//
// Compared with the CPU: every scalar step is the same IEEE operation
// (no FMA contraction: __dmul_rn / __dsub_rn and friends), so codes, scales
// and zero points are the CPU's except where the factor (cuSOLVER's blocked
// order, not quant/linalg.c's) or the lazy update (cuBLAS's summation
// order) moved a value across a rounding boundary; tests/test_gptq_cuda.c
// compares both on random problems. Deterministic for a given GPU and
// CUDA version (no atomics in the arithmetic).
#ifndef PQ_GPTQ_CUDA_H
#define PQ_GPTQ_CUDA_H

#include <stddef.h>

#include "quant/gptq.h"

typedef struct pq_gptq_cuda pq_gptq_cuda;

// Device bytes a pq_gptq_cuda holds for a Hessian of hcols columns and a
// linear of rows x cols with parameters p (the peak of prepare and solve:
// the estimate of a GPU run counts it; cuSOLVER's workspace is taken as n
// x 256 doubles, its usual blocking).
size_t pq_gptq_cuda_bytes(int hcols, int rows, int cols, const pq_gptq_params *p);

// A context on the first usable GPU, its own stream, cuBLAS and cuSOLVER
// handles; device buffers are allocated by the calls that need them and
// kept for the next. PQ_ERR_NO_DEVICE without a GPU (or without CUDA in
// this build); PQ_ERR_CUDA naming the call. On error *out is NULL.
pq_status pq_gptq_cuda_create(pq_gptq_cuda **out);
void pq_gptq_cuda_free(pq_gptq_cuda *g); // NULL-safe

// Host workspace bytes of pq_gptq_cuda_prepare (pq_gptq_order_bytes).
size_t pq_gptq_cuda_hessian_bytes(int cols);

// pq_gptq_prepare on the device: h [cols][cols] (host f32, symmetric) is
// factored into g's factor, which replaces the previous one. out: as the
// CPU's (cols, perm, dead pointing into ws, damp, retries, n_dead) except
// u, which is NULL: the factor stays in g, for the pq_gptq_cuda_solve calls
// that follow with this out. Errors as pq_gptq_prepare (a non-finite h,
// not positive definite even at PQ_GPTQ_DAMP_MAX: PQ_ERR_NUMERIC naming
// `name`), PQ_ERR_CUDA naming the call; after an error g holds no factor.
pq_status pq_gptq_cuda_prepare(pq_gptq_cuda *g, const float *h, int cols, const pq_gptq_params *p,
                               const char *name, void *ws, pq_gptq_hessian *out);

// The prepared U [cols][cols] (row-major, upper, zero below the diagonal)
// copied into host u: what pq_gptq_prepare's out->u holds (tests compare).
pq_status pq_gptq_cuda_read_factor(pq_gptq_cuda *g, double *u);

// pq_gptq_solve on the device with the Hessian of the last
// pq_gptq_cuda_prepare (h: its out). w [rows][h->cols] host f32, finite; q
// as pq_gptq_solve takes it (a GGUF scheme's q is PQ_ERR_ARG); its codes,
// scales, zero points and g_idx are overwritten. *loss (optional): as
// pq_gptq_solve, summed per row in double. A scale that overflows
// q->scale_dtype is PQ_ERR_NUMERIC naming `name` and the first such row.
pq_status pq_gptq_cuda_solve(pq_gptq_cuda *g, const float *w, int rows, const pq_gptq_hessian *h,
                             const pq_gptq_params *p, const char *name, pq_qtensor *q, double *loss);

// ||W X^T - W' X^T||^2 / ||W X^T||^2 of the last pq_gptq_cuda_solve (its w
// and the values its codes dequantize to) over the Hessian of the last
// prepare, as pq_act_stats_output_error computes it from xtx = that h (the
// ratio does not depend on h's scale): two cublasSgemm with h, per-row sums
// in double added in row order; 0 for a zero W X. Once per solve:
// PQ_ERR_ARG without a solve since the last prepare or measure.
pq_status pq_gptq_cuda_output_error(pq_gptq_cuda *g, double *out);

#endif
