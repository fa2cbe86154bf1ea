// quant/hadamard.h — randomized orthogonal transforms for rotating a
// model's residual stream (quant/rotate.h): Q = D K / sqrt(n), where D is a
// diagonal of seeded random signs and K an n x n matrix with orthogonal rows
// built as a Kronecker product of known Hadamard matrices:
//   Sylvester   order 2^a (applied as a fast Walsh-Hadamard transform)
//   Paley I     order q + 1 for a prime q = 3 (mod 4)  (12, 20, 24, 32, 44, 48, 60, ...)
//   Paley II    order 2(q + 1) for a prime q = 1 (mod 4)  (12, 28, 36, 60, 76, ...)
// so hidden sizes like 576 = 12 x 12 x 4 (SmolLM2), 960, 1536 = 12 x 128,
// 3584 = 28 x 128 are exact Hadamard rotations (every entry +-1/sqrt(n):
// each output coordinate mixes all inputs with equal weight, which is what
// spreads an outlier channel evenly; QuaRot's argument). When no product of
// those orders equals n (n = 172 = 4 x 43), the part that has none is a
// random orthogonal matrix from a seeded Gaussian matrix orthonormalized by
// Gram-Schmidt in double precision (Haar-like; its entries are only about
// 1/sqrt(m) in size, so it spreads outliers less evenly), Kronecker'd with
// the largest Hadamard factor that divides n.
//
// Everything is computed in double precision in a fixed order: the same n
// and seed give the same transform on every machine and thread count.
#ifndef PQ_HADAMARD_H
#define PQ_HADAMARD_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

#define PQ_ROT_MAX_FACTORS 8

typedef struct {
    int n;                              // order
    int nf;                             // factors, outermost first (index i = (i_1, ..., i_nf), row major)
    int order[PQ_ROT_MAX_FACTORS];
    char kind[PQ_ROT_MAX_FACTORS];      // 'S' Sylvester, 'P' Paley I, 'Q' Paley II, 'R' random orthogonal
    double *m[PQ_ROT_MAX_FACTORS];      // [order][order] normalized (orthogonal) factor; NULL for 'S'
    double *sign;                       // [n] the random +-1 diagonal D
    uint64_t seed;
} pq_rot;

// Builds Q for order n (1..2^24) from seed. PQ_ERR_ARG for n out of range,
// PQ_ERR_NOMEM. Free with pq_rot_free.
pq_status pq_rot_make(int n, uint64_t seed, pq_rot *out);
void pq_rot_free(pq_rot *r); // NULL-safe; leaves it zeroed

// x[rows][n] <- x Q, each row a row vector (x Q = (x D) K). ws: 2n doubles.
void pq_rot_apply(const pq_rot *r, double *x, int rows, double *ws);

// Q as a dense matrix q[n][n] (row i = e_i Q), for tests and small checks.
void pq_rot_matrix(const pq_rot *r, double *q, double *ws);

// "576 = 12 (Paley I, q 11) x 12 (Paley I, q 11) x 4 (Sylvester)" into buf.
void pq_rot_describe(const pq_rot *r, char *buf, size_t cap);

// Whether every factor is a Hadamard matrix (no random orthogonal part).
int pq_rot_is_hadamard(const pq_rot *r);

#endif
