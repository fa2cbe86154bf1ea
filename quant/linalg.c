// quant/linalg.c — blocked Cholesky and triangular inverse (see linalg.h).
#include "quant/linalg.h"

#include <math.h>

#include "kernels/blas.h"
#include "kernels/cpu.h"

#define NB PQ_LINALG_NB
#define LANES PQ_LINALG_LANES
#define A(i, j) a[(size_t)(i) * lda + (j)]

static int min_i(int a, int b) { return a < b ? a : b; }

// Unblocked Cholesky of the n x n block at a (row stride lda), lower
// triangle only: the Cholesky–Banachiewicz loop, dot products of rows.
static int chol_block(double *a, int lda, int n) {
    for (int j = 0; j < n; j++) {
        double d = A(j, j);
        for (int k = 0; k < j; k++) d -= A(j, k) * A(j, k);
        if (!(d > 0) || !isfinite(d)) return j + 1;
        d = sqrt(d);
        A(j, j) = d;
        for (int i = j + 1; i < n; i++) {
            double s = A(i, j);
            for (int k = 0; k < j; k++) s -= A(i, k) * A(j, k);
            A(i, j) = s / d;
        }
    }
    return 0;
}

// Unblocked inverse of the lower-triangular n x n block at a, in place,
// column by column from the left (column j reads only columns >= j).
static void trinv_block(double *a, int lda, int n) {
    for (int j = 0; j < n; j++) {
        A(j, j) = 1.0 / A(j, j);
        for (int i = j + 1; i < n; i++) {
            double s = 0;
            for (int k = j; k < i; k++) s += A(i, k) * A(k, j);
            A(i, j) = -s / A(i, i);
        }
    }
}

// The same two loops for the blocked versions' diagonal blocks, reordered
// so that the inner products run in vector lanes: every element is still
// computed by the same operations in the same order (the results are the
// plain loops' bits), but independent elements side by side.
//
// Cholesky: rows in stripes of LANES; a stripe's columns left of it are a
// panel step (rows side by side), its own triangle the plain loop's.
static int chol_diag(double *a, int lda, int n) {
    for (int r0 = 0; r0 < n; r0 += LANES) {
        int r1 = min_i(r0 + LANES, n);
        if (r0 > 0) pq_chol_panel_cpu(a, lda, r0, r1, 0, r0);
        for (int i = r0; i < r1; i++) {
            for (int c = r0; c < i; c++) {
                double s = A(i, c);
                for (int k = 0; k < c; k++) s -= A(i, k) * A(c, k);
                A(i, c) = s / A(c, c);
            }
            double d = A(i, i);
            for (int k = 0; k < i; k++) d -= A(i, k) * A(i, k);
            if (!(d > 0) || !isfinite(d)) return i + 1;
            A(i, i) = sqrt(d);
        }
    }
    return 0;
}

// Triangular inverse: columns in stripes of LANES; a stripe's own triangle
// the plain loop's, the rows below it a stripe step (columns side by side).
static void trinv_diag(double *a, int lda, int n) {
    for (int c0 = 0; c0 < n; c0 += LANES) {
        int c1 = min_i(c0 + LANES, n);
        for (int j = c0; j < c1; j++) {
            A(j, j) = 1.0 / A(j, j);
            for (int i = j + 1; i < c1; i++) {
                double s = 0;
                for (int k = j; k < i; k++) s += A(i, k) * A(k, j);
                A(i, j) = -s / A(i, i);
            }
        }
        pq_trinv_stripe_cpu(a, lda, c1, n, c0, c1);
    }
}

static void zero_upper(double *a, int lda, int n) {
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) A(i, j) = 0;
}

int pq_chol_lower_ref(double *a, int n) {
    int lda = n, r = chol_block(a, lda, n);
    if (r == 0) zero_upper(a, lda, n);
    return r;
}

void pq_trinv_lower_ref(double *a, int n) { trinv_block(a, n, n); }

void pq_trinv_stripe_ref(double *a, int lda, int i0, int i1, int c0, int c1) {
    for (int i = i0; i < i1; i++)
        for (int j = c0; j < c1; j++) {
            double s = 0;
            for (int k = j; k < i; k++) s += A(i, k) * A(k, j);
            A(i, j) = -s / A(i, i);
        }
}

void pq_trinv_stripe_cpu(double *a, int lda, int i0, int i1, int c0, int c1) {
    if (pq_cpu_isa() >= PQ_ISA_AVX512) pq_trinv_stripe_avx512(a, lda, i0, i1, c0, c1);
    else if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_trinv_stripe_avx2(a, lda, i0, i1, c0, c1);
    else pq_trinv_stripe_ref(a, lda, i0, i1, c0, c1);
}

size_t pq_linalg_workspace_bytes(int n) { return (size_t)n * NB * sizeof(double); }

// ---- blocked Cholesky (right looking) --------------------------------------

typedef struct {
    double *a;
    int n, k0, kb, first; // the factored diagonal block [k0, k0+kb); first row of the trailing part
    int nblk;             // trailing row blocks
} chol_job;

// Rows of block i of the panel below the diagonal block: x L_kk^T = a_i,
// forward substitution row by row.
static void chol_panel(void *ctx, int bi, int tid) {
    chol_job *j = ctx;
    int i0 = j->first + bi * NB;
    pq_chol_panel_cpu(j->a, j->n, i0, min_i(i0 + NB, j->n), j->k0, j->kb);
}

void pq_chol_panel_ref(double *a, int lda, int i0, int i1, int k0, int kb) {
    for (int i = i0; i < i1; i++)
        for (int c = 0; c < kb; c++) {
            double s = A(i, k0 + c);
            for (int m = 0; m < c; m++) s -= A(i, k0 + m) * A(k0 + c, k0 + m);
            A(i, k0 + c) = s / A(k0 + c, k0 + c);
        }
}

void pq_chol_panel_cpu(double *a, int lda, int i0, int i1, int k0, int kb) {
    if (pq_cpu_isa() >= PQ_ISA_AVX512) pq_chol_panel_avx512(a, lda, i0, i1, k0, kb);
    else if (pq_cpu_isa() >= PQ_ISA_AVX2) pq_chol_panel_avx2(a, lda, i0, i1, k0, kb);
    else pq_chol_panel_ref(a, lda, i0, i1, k0, kb);
}

// Trailing row block bi: A[I][first : I's end] -= P_I P^T over those rows
// (its part of the lower triangle, the diagonal tile whole: one dgemm).
static void chol_update(void *ctx, int bi, int tid) {
    chol_job *j = ctx;
    int i0 = j->first + bi * NB, i1 = min_i(i0 + NB, j->n), lda = j->n;
    double *a = j->a;
    pq_dgemm_nt(i1 - i0, i1 - j->first, j->kb, -1.0, &A(i0, j->k0), lda, &A(j->first, j->k0), lda, 1.0,
                &A(i0, j->first), lda);
}

int pq_chol_lower(double *a, int n, pq_pool *pool) {
    int lda = n;
    for (int k0 = 0; k0 < n; k0 += NB) {
        chol_job j = {a, n, k0, min_i(NB, n - k0), k0 + min_i(NB, n - k0), 0};
        int r = chol_diag(&A(k0, k0), lda, j.kb);
        if (r) return k0 + r;
        j.nblk = (n - j.first + NB - 1) / NB;
        pq_pool_for(pool, j.nblk, chol_panel, &j);
        pq_pool_for(pool, j.nblk, chol_update, &j);
    }
    zero_upper(a, lda, n);
    return 0;
}

// ---- blocked triangular inverse (right to left) ----------------------------

typedef struct {
    double *a, *t; // t: [n - j1][jb] products X[j1:, j1:] . L[j1:, j0:j1]
    int n, j0, jb, j1;
} trinv_job;

// Row block bi of the trailing part: T_I = X[I, j1:i1] . L[j1:i1, j0:j1]
// (X is lower triangular there, zero above its diagonal).
static void trinv_product(void *ctx, int bi, int tid) {
    trinv_job *j = ctx;
    double *a = j->a;
    int lda = j->n, i0 = j->j1 + bi * NB, i1 = min_i(i0 + NB, j->n);
    pq_dgemm_nn(i1 - i0, j->jb, i1 - j->j1, 1.0, &A(i0, j->j1), lda, &A(j->j1, j->j0), lda, 0.0,
                j->t + (size_t)(i0 - j->j1) * j->jb, j->jb);
}

// New panel rows: X[I, j0:j1] = -T_I . X_jj.
static void trinv_panel(void *ctx, int bi, int tid) {
    trinv_job *j = ctx;
    double *a = j->a;
    int lda = j->n, i0 = j->j1 + bi * NB, i1 = min_i(i0 + NB, j->n);
    pq_dgemm_nn(i1 - i0, j->jb, j->jb, -1.0, j->t + (size_t)(i0 - j->j1) * j->jb, j->jb, &A(j->j0, j->j0), lda,
                0.0, &A(i0, j->j0), lda);
}

void pq_trinv_lower(double *a, int n, void *ws, pq_pool *pool) {
    int lda = n;
    for (int j0 = (n - 1) / NB * NB; j0 >= 0; j0 -= NB) {
        trinv_job j = {a, ws, n, j0, min_i(NB, n - j0), min_i(j0 + NB, n)};
        int nblk = (n - j.j1 + NB - 1) / NB;
        pq_pool_for(pool, nblk, trinv_product, &j);
        trinv_diag(&A(j0, j0), lda, j.jb);
        pq_pool_for(pool, nblk, trinv_panel, &j);
    }
}

// (i, j) <-> (n-1-i, n-1-j): element k <-> n*n-1-k, the first half's
// rows swapped with the last half's in tasks of REVERSE_ROWS rows.
#define REVERSE_ROWS 32

typedef struct {
    double *a;
    int n;
} reverse_job;

static void reverse_rows(void *ctx, int t, int tid) {
    reverse_job *j = ctx;
    size_t nn = (size_t)j->n * j->n, k0 = (size_t)t * REVERSE_ROWS * j->n, k1 = k0 + (size_t)REVERSE_ROWS * j->n;
    for (size_t k = k0; k < k1 && k < nn / 2; k++) {
        double x = j->a[k];
        j->a[k] = j->a[nn - 1 - k];
        j->a[nn - 1 - k] = x;
    }
}

static void reverse(double *a, int n, pq_pool *pool) {
    reverse_job j = {a, n};
    pq_pool_for(pool, ((n + 1) / 2 + REVERSE_ROWS - 1) / REVERSE_ROWS, reverse_rows, &j);
}

int pq_inv_chol_upper(double *h, int n, void *ws, pq_pool *pool) {
    reverse(h, n, pool);
    int r = pq_chol_lower(h, n, pool);
    if (r) return r;
    pq_trinv_lower(h, n, ws, pool);
    reverse(h, n, pool);
    return 0;
}
