// calib/block_gpu.h — the calibration driver's block passes on the GPU: one
// window of calibration tokens at a time through eval/block_cuda.h (the
// CUDA engine's block: FP16 weights and matrix inputs, f32 residual and
// accumulation), the driver's hooks fed host f32 copies of each linear's
// input (the FP16 values the GPU multiplies). Used by calib/driver.c when
// the run's X^T X is on the GPU.
#ifndef PQ_CALIB_BLOCK_GPU_H
#define PQ_CALIB_BLOCK_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "eval/block_cpu.h"
#include "eval/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pq_calib_gpu pq_calib_gpu;

// Host memory a pq_calib_gpu holds for windows of len tokens: the FP16 and
// f32 staging of the widest hooked input (hidden, q dim or intermediate).
static inline size_t pq_calib_gpu_host_bytes(const pq_config *c, int len) {
    size_t qd = (size_t)c->n_heads * c->head_dim, widest = (size_t)c->hidden;
    widest = qd > widest ? qd : widest;
    widest = (size_t)c->intermediate > widest ? (size_t)c->intermediate : widest;
    return (size_t)len * widest * (sizeof(uint16_t) + sizeof(float));
}

// Device buffers for windows of len tokens of a model with config c, on
// the first usable GPU. PQ_ERR_NO_DEVICE without one (or without CUDA in
// this build); PQ_ERR_CUDA naming the call. On error *out is NULL.
pq_status pq_calib_gpu_create(const pq_config *c, int len, pq_calib_gpu **out);
void pq_calib_gpu_free(pq_calib_gpu *g); // NULL-safe

// Uploads block `layer` as L holds it now (source or quantized linears,
// norms), replacing the block loaded before. A weight the CUDA backend
// cannot run is PQ_ERR_FORMAT / PQ_ERR_NUMERIC (the driver then runs the
// pass on the CPU); nothing stays loaded after an error.
pq_status pq_calib_gpu_load(pq_calib_gpu *g, const pq_layer *L, int layer);

// One window x [len][hidden] (host f32) through the loaded block; y (may be
// x; NULL: not copied back) gets the block's output. hooks (may be NULL)
// receive each linear group's input as host f32 [len][cols].
pq_status pq_calib_gpu_forward(pq_calib_gpu *g, int layer, const float *x, float *y, const pq_block_hooks *hooks);

// The most device memory seen in use since create (cudaMemGetInfo: total
// minus free, so the CUDA context and other processes count too), bytes.
size_t pq_calib_gpu_peak_bytes(const pq_calib_gpu *g);

#ifdef __cplusplus
}
#endif

#endif
