// calib/stats.h — what calibration measures about the input of a group of
// linears that read the same activations (q/k/v, o, gate/up, down):
//   abs_sum[c]  sum over tokens of |x[t][c]|   (mean |x| = abs_sum / n; AWQ)
//   abs_max[c]  max over tokens of |x[t][c]|   (SmoothQuant)
//   xtx         sum over tokens of x[t]^T x[t] (the GPTQ Hessian is 2 xtx / n)
// accumulated window by window in a fixed order: xtx on a fixed grid of
// PQ_STATS_TILE-wide tiles, each tile one sgemm per window (beta = 1; a
// diagonal tile its upper triangle, one ssyrk), the tiles spread over the pool;
// abs_sum / abs_max per column over tokens in order. Results depend only on
// the inputs and their order, never on the thread count. xtx is accumulated in f32 like the reference's (its
// elements are sums of n products; relative error ~n 2^-24 in the worst
// case, far below what GPTQ is sensitive to), the other sums in double.
#ifndef PQ_CALIB_STATS_H
#define PQ_CALIB_STATS_H

#include <stddef.h>

#include "common/threads.h"
#include "kernels/linear.h"

#define PQ_STATS_TILE 256

// What a method asks the driver to measure.
enum { PQ_STAT_ABS = 1, PQ_STAT_XTX = 2 };

typedef struct {
    int cols, want;       // want: PQ_STAT_* flags
    long long n;          // tokens accumulated
    double *abs_sum;      // [cols] (PQ_STAT_ABS)
    float *abs_max;       // [cols] (PQ_STAT_ABS)
    float *xtx;           // [cols][cols] (PQ_STAT_XTX): upper triangle while accumulating,
                          // symmetric after pq_act_stats_finish
} pq_act_stats;

// Bytes the statistics of cols columns take.
size_t pq_act_stats_bytes(int cols, int want);

// Allocates zeroed statistics. On error nothing stays allocated.
pq_status pq_act_stats_init(pq_act_stats *s, int cols, int want);
void pq_act_stats_free(pq_act_stats *s); // NULL-safe

// Adds the T rows of x [T][cols] (one window) to the statistics in `what`
// (a subset of want: a caller accumulating xtx elsewhere, on the GPU, passes
// PQ_STAT_ABS). s->n counts the calls' rows. pool may be NULL.
void pq_act_stats_add(pq_act_stats *s, const float *x, int T, int what, pq_pool *pool);

// Mirrors xtx's upper triangle into the lower one (after the last add);
// pool may be NULL.
void pq_act_stats_finish(pq_act_stats *s, pq_pool *pool);

// ||W X^T - Wq X^T||^2 / ||W X^T||^2 over the accumulated inputs, from xtx
// (finished): tr(dW xtx dW^T) / tr(W xtx W^T) with dW = W - Wq. w is
// [rows][cols] f32, wq the quantized linear (dequantized row by row). 0 for
// a zero W X. Chunks of PQ_STATS_ROWS rows run over the pool (sgemm with
// xtx) and their sums are added in order: deterministic for any thread
// count. ws: pq_act_stats_error_bytes(rows, cols, pool size).
#define PQ_STATS_ROWS 256
size_t pq_act_stats_error_bytes(int rows, int cols, int nthreads);
double pq_act_stats_output_error(const pq_act_stats *s, const float *w, const pq_linear *wq, void *ws,
                                 pq_pool *pool);
// The two terms of that ratio: *err = tr(dW xtx dW^T) = ||W X^T - Wq X^T||^2,
// *energy = tr(W xtx W^T) (same order of summation, same workspace).
void pq_act_stats_output_sq(const pq_act_stats *s, const float *w, const pq_linear *wq, void *ws, pq_pool *pool,
                            double *err, double *energy);
// *energy alone, for w [rows][cols] (half the products).
double pq_act_stats_energy(const pq_act_stats *s, const float *w, int rows, void *ws, pq_pool *pool);

#endif
