// quant/linalg.h — the dense linear algebra GPTQ needs: Cholesky
// factorization and triangular inverse of n x n row-major double matrices,
// in place.
//
// The blocked versions factor PQ_LINALG_NB columns at a time with plain
// loops and do the O(n^3) updates as dgemm calls (kernels/blas.h) over a
// fixed grid of PQ_LINALG_NB-wide tiles spread over the pool. The grid
// depends on n only, so every element is computed by the same calls in the
// same order whatever the thread count: results are bit-identical across
// --threads. The _ref versions are the unblocked textbook loops (the
// specification the tests compare against).
#ifndef PQ_LINALG_H
#define PQ_LINALG_H

#include <stddef.h>

#include "common/threads.h"

#define PQ_LINALG_NB 128
#define PQ_LINALG_LANES 8 // rows (Cholesky) or columns (inverse) a diagonal block's vector step takes at once

// A = L L^T for a symmetric positive definite A, in place: the lower
// triangle (diagonal included) becomes L and the strict upper triangle 0.
// Only the lower triangle of A is read. Returns 0, or k + 1 when the leading
// minor of order k + 1 is not positive definite (a pivot <= 0 or not
// finite); A is then partly overwritten.
int pq_chol_lower(double *a, int n, pq_pool *pool);
int pq_chol_lower_ref(double *a, int n);

// The blocked Cholesky's panel step on rows [i0, i1): for each column
// c < kb in order, A[i][k0 + c] = (A[i][k0 + c] - sum over m < c, in order,
// of A[i][k0 + m] L[c][m]) / L[c][c], where L = A[k0:, k0:] is the factored
// diagonal block (lda: the row stride, kb <= PQ_LINALG_NB). Each product
// rounded, then subtracted (never fused): every version gives the _ref's
// bits. _cpu runs the best version this CPU has (kernels/cpu.h).
void pq_chol_panel_ref(double *a, int lda, int i0, int i1, int k0, int kb);
void pq_chol_panel_cpu(double *a, int lda, int i0, int i1, int k0, int kb);
void pq_chol_panel_avx2(double *a, int lda, int i0, int i1, int k0, int kb);   // linalg_avx2.c
void pq_chol_panel_avx512(double *a, int lda, int i0, int i1, int k0, int kb); // linalg_avx512.c

// The blocked triangular inverse's step below a diagonal block's stripe of
// columns [c0, c1) (c1 - c0 <= PQ_LINALG_LANES) whose rows [c0, c1) are
// already inverted: for rows i in [i0, i1) (i0 >= c1) and those columns,
// A[i][j] = -(sum over k = j .. i - 1, in order, of A[i][k] A[k][j]) / A[i][i],
// starting from 0, each product rounded, then added (never fused), row by
// row; A[i][k] for k >= j is still L there. Every version gives the _ref's bits.
void pq_trinv_stripe_ref(double *a, int lda, int i0, int i1, int c0, int c1);
void pq_trinv_stripe_cpu(double *a, int lda, int i0, int i1, int c0, int c1);
void pq_trinv_stripe_avx2(double *a, int lda, int i0, int i1, int c0, int c1);   // linalg_avx2.c
void pq_trinv_stripe_avx512(double *a, int lda, int i0, int i1, int c0, int c1); // linalg_avx512.c

// Workspace bytes pq_trinv_lower and pq_inv_chol_upper need for order n.
size_t pq_linalg_workspace_bytes(int n);

// L^-1 in place for a lower-triangular L with a nonzero diagonal and a zero
// strict upper triangle (which stays 0). ws: pq_linalg_workspace_bytes(n).
void pq_trinv_lower(double *a, int n, void *ws, pq_pool *pool);
void pq_trinv_lower_ref(double *a, int n);

// GPTQ's "Cholesky factor of the inverse Hessian": the upper-triangular U
// with U^T U = H^-1 (positive diagonal; equal to torch's
// cholesky(cholesky_inverse(cholesky(H)), upper=True)), in place of a
// symmetric positive definite H (both triangles must hold H). Computed as
// U = J Lr^-1 J where J reverses the index order and J H J = Lr Lr^T: one
// Cholesky and one triangular inverse, no explicit inverse of H. Returns 0,
// or k + 1 as pq_chol_lower when H is not positive definite.
int pq_inv_chol_upper(double *h, int n, void *ws, pq_pool *pool);

#endif
