// calib/block_gpu.h — the calibration driver's block passes on the GPU,
// resident: the activations X of every calibration window [n][len][hidden]
// (f32) are uploaded once and stay on the device from block to block; each
// pass runs the windows through eval/block_cuda.h (the CUDA engine's block:
// 16-bit weights and matrix inputs, f32 residual and accumulation), a
// measuring pass on a copy of each window with hooks that receive each
// linear group's 16-bit input on the device (calib/xtx_cuda.h accumulates
// X^T X from there), the final pass in place. A block is uploaded once per
// stage: a linear whose pq_linear is unchanged since the last load of the
// same layer (same data pointers: the driver installs new tensors, it does
// not rewrite them) stays on the device, and dense weights are converted
// on the device (kernels/linear_cuda.h). Used by calib/driver.c when the
// run's X^T X is on the GPU.
#ifndef PQ_CALIB_BLOCK_GPU_H
#define PQ_CALIB_BLOCK_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "eval/block_cpu.h"
#include "eval/model.h"
#include "kernels/linear_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pq_calib_gpu pq_calib_gpu;

// Host memory a pq_calib_gpu holds for windows of len tokens when a method
// also wants statistics the GPU does not accumulate (PQ_STAT_ABS): the
// 16-bit and f32 staging of the widest hooked input (hidden, q dim or
// intermediate). Allocated only then.
static inline size_t pq_calib_gpu_host_bytes(const pq_config *c, int len) {
    size_t qd = (size_t)c->n_heads * c->head_dim, widest = (size_t)c->hidden;
    widest = qd > widest ? qd : widest;
    widest = (size_t)c->intermediate > widest ? (size_t)c->intermediate : widest;
    return (size_t)len * widest * (sizeof(uint16_t) + sizeof(float));
}

// Device memory of a pq_calib_gpu of n windows of len tokens besides the
// block's weights and the linear workspace: X, one window's copy and block
// scratch, its K/V.
size_t pq_calib_gpu_device_bytes(const pq_config *c, int n, int len);

// The activation type the block passes use for a model (BF16 for a model
// stored in BF16, as the CUDA engine).
pq_act_dtype pq_calib_gpu_dtype(const pq_model *m);

// Device buffers for n windows of len tokens of a model with config c
// (activations of type dt), on the first usable GPU. PQ_ERR_NO_DEVICE
// without one (or without CUDA in this build); PQ_ERR_CUDA naming the call
// (device memory too small for X: a message with the sizes). On error
// *out is NULL.
pq_status pq_calib_gpu_create(const pq_config *c, pq_act_dtype dt, int n, int len, pq_calib_gpu **out);
void pq_calib_gpu_free(pq_calib_gpu *g); // NULL-safe

// The stream its work runs on (a cudaStream_t): calib/xtx_cuda.h's
// accumulators are created on it.
void *pq_calib_gpu_stream(const pq_calib_gpu *g);

// X [n][len][hidden] (host f32) to the device, or back (the driver's CPU
// fallback pass for a block the CUDA backend cannot run).
pq_status pq_calib_gpu_set_inputs(pq_calib_gpu *g, const float *X);
pq_status pq_calib_gpu_get_inputs(pq_calib_gpu *g, float *X);

// Makes the device hold block `layer` as L holds it now (source or
// quantized linears, norms): re-uploads only what changed since the last
// load of the same layer. A weight the CUDA backend cannot run is
// PQ_ERR_FORMAT / PQ_ERR_NUMERIC (the driver then runs the pass on the
// CPU); nothing stays loaded after an error.
pq_status pq_calib_gpu_load(pq_calib_gpu *g, const pq_layer *L, int layer);

// The hooks of a measuring pass: each linear group's input, 16-bit (the
// pass's type) [T][cols] on the device, in stream order; the callback
// enqueues work on `stream` or waits for it.
typedef struct {
    pq_status (*input)(void *ud, int layer, pq_linear_slot slot, const uint16_t *d_x, int T, int cols, void *stream);
    void *ud;
} pq_calib_gpu_hooks;

// Every window through the loaded block: measuring (hooks not NULL) on a
// copy of each window, X unchanged; else in place, X becomes the block's
// output. Waits for the stream.
pq_status pq_calib_gpu_pass(pq_calib_gpu *g, int layer, const pq_calib_gpu_hooks *hooks);

// A hooked input copied to the host and widened to f32 (the statistics the
// GPU does not accumulate): *x [T][cols] points into g's host staging
// buffers (allocated on first use), valid until the next fetch.
pq_status pq_calib_gpu_fetch(pq_calib_gpu *g, const uint16_t *d_x, int T, int cols, const float **x);

// The first element of X that is not finite (window-major), or -1: the
// driver's check after a block's final pass, on the device.
pq_status pq_calib_gpu_first_nonfinite(pq_calib_gpu *g, long long *index);

// The most device memory seen in use since create (cudaMemGetInfo: total
// minus free, so the CUDA context and other processes count too), bytes.
size_t pq_calib_gpu_peak_bytes(const pq_calib_gpu *g);

#ifdef __cplusplus
}
#endif

#endif
