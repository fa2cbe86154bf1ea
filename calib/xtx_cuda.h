// calib/xtx_cuda.h — the Hessian statistic X^T X accumulated on the GPU
// (cuBLAS SSYRK, f32), for calibration when a device is present. Same
// convention as pq_act_stats.xtx while accumulating: the upper triangle
// (row-major) holds sum_t x[t]^T x[t]; the caller mirrors it
// (pq_act_stats_finish). Deterministic for a given GPU and cuBLAS (one SYRK
// per window, in order; no atomics), but not bit-identical to the CPU's
// tiled sgemm: a run records the device it used.
#ifndef PQ_XTX_CUDA_H
#define PQ_XTX_CUDA_H

#include "common/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pq_xtx_cuda pq_xtx_cuda;

// A zeroed accumulator for cols columns taking windows of up to max_T
// rows. PQ_ERR_NO_DEVICE without CUDA or a GPU; PQ_ERR_CUDA naming the call.
pq_status pq_xtx_cuda_create(int cols, int max_T, pq_xtx_cuda **out);
void pq_xtx_cuda_free(pq_xtx_cuda *h); // NULL-safe

// Adds the T <= max_T rows of host x [T][cols].
pq_status pq_xtx_cuda_add(pq_xtx_cuda *h, const float *x, int T);

// Copies the accumulation into host xtx [cols][cols]: the upper triangle
// (row-major) holds the sums, the strict lower triangle zeros.
pq_status pq_xtx_cuda_read(pq_xtx_cuda *h, float *xtx);

#ifdef __cplusplus
}
#endif

#endif
