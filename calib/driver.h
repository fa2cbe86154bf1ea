// calib/driver.h — the streaming calibration driver (DESIGN.md section 7):
// the GPTQ reference's layer-by-layer loop, method-agnostic.
//
//   X[n][len][hidden] = embeddings of the calibration windows      (f32)
//   for each decoder block l:
//     for each stage (all four input groups at once, or with
//     true_sequential one group after the other: q/k/v, o, gate/up, down):
//       run every window of X through block l (a copy; the linears of
//       earlier stages already quantized) with hooks on the stage's inputs,
//       accumulating what the method asks for (calib/stats.h)
//       method->quantize_group for each group of the stage: it quantizes
//       the group's linears and installs them into the block (or, for a
//       method that needs all groups at once, method->quantize_block once)
//     run every window through the quantized block, in place: X becomes
//     the input of block l + 1
//     method->block_done; the block's source linears are put back and
//     their mapped pages released
// Memory: X, one window's block scratch, the statistics of the groups
// measured at once, the method's workspace, and (mapped from the source
// file) one block's weights: pq_calib_estimate. Windows are processed in
// order and every reduction has a fixed order (calib/stats.h), so results
// are bit-identical for any thread count.
//
// Resume: with first_block = k, blocks < k are done (an earlier run wrote
// them): the driver asks the method to install their quantized linears
// (load_block) and only re-runs them to regenerate block k's input.
//
// Devices: the device is resolved by the one rule (kernels/cuda_host.h:
// auto is the GPU when there is one; cuda without one is PQ_ERR_NO_DEVICE,
// whatever the method). For a method that needs X^T X (GPTQ), on the GPU
// X lives on the device for the whole run, the block passes run the CUDA
// engine's block (calib/block_gpu.h: 16-bit weights and matrix inputs, so
// the statistics are those of the activations a GPU run sees) and X^T X is
// accumulated there from the device activations (calib/xtx_cuda.h); a block
// whose linears the CUDA backend cannot run falls back to the CPU engine's
// block (eval/block_cpu.h) for that pass, X copied to the host and back.
// Other methods, and every method with a quantize_block (it reads X on the
// host: AWQ+GPTQ), run on the CPU.
#ifndef PQ_CALIB_DRIVER_H
#define PQ_CALIB_DRIVER_H

#include <stddef.h>

#include "calib/data.h"
#include "calib/stats.h"
#include "eval/engine.h"
#include "eval/model.h"

// Linears that read the same input, with the hook slot of that input
// (eval/block_cpu.h) and the op that produces it, into which a per-channel
// input scale folds (AWQ, SmoothQuant; quant/fold.h): the one table of this
// wiring for the Llama family (Llama, Mistral, Qwen2).
#define PQ_NGROUPS 4
typedef enum { PQ_FROM_ATTN_NORM, PQ_FROM_MLP_NORM, PQ_FROM_LINEAR } pq_producer;
typedef struct {
    pq_linear_slot input;          // PQ_Q, PQ_O, PQ_GATE, PQ_DOWN
    int n;                         // members
    pq_linear_slot members[3];
    const char *name;              // "q/k/v", "o", "gate/up", "down"
    pq_producer from;              // input_layernorm, post_attention_layernorm or a linear:
    pq_linear_slot from_slot;      //   that linear's rows (PQ_FROM_LINEAR: v_proj, up_proj)
} pq_input_group;
extern const pq_input_group PQ_INPUT_GROUPS[PQ_NGROUPS];

// Columns of group g's input for a model.
int pq_input_group_cols(const pq_config *c, int g);

// What a method plugs into the driver. Callbacks return PQ_OK or stop the
// run with their status.
typedef struct {
    int stats;            // PQ_STAT_* flags the method needs
    size_t work_bytes;    // the most memory the method holds at once (for the estimate)
    size_t gpu_work_bytes; // the most device memory it holds when the run is on the GPU (GPTQ's solve)
    // Quantizes the linears of group g of block `layer` from st (finished:
    // xtx symmetric) and installs quantized linears into L->lin[members];
    // what they point to must stay valid until block_done returns.
    pq_status (*quantize_group)(void *ud, int layer, int g, pq_layer *L, const pq_act_stats *st);
    // Instead of quantize_group, for a method that needs every group of a
    // block at once (a scale of one group folds into a linear of another:
    // AWQ, SmoothQuant): called once per block, after one pass measured all
    // groups (true_sequential is then PQ_ERR_ARG), with their statistics
    // st[PQ_NGROUPS] and the block's input X [n][len][hidden] (read only).
    // It installs whatever the final pass should run into L (linears, norms);
    // L's pointers must stay valid until block_done returns.
    pq_status (*quantize_block)(void *ud, int layer, pq_layer *L, const pq_act_stats *st, const float *X);
    // Optional, beside quantize_block: sees each group's input x [T][cols]
    // of window `window` (0, 1, ... in order) as the block's measuring pass
    // computes it, before that block's quantize_block.
    void (*sample)(void *ud, int layer, int window, pq_linear_slot slot, const float *x, int T, int cols);
    // Optional, beside sample: sees each linear's output y [T][rows] of the
    // same pass and window (down_proj's is not computed there).
    void (*sample_output)(void *ud, int layer, int window, pq_linear_slot slot, const float *y, int T, int rows);
    // Resume: installs the quantized linears of a block an earlier run finished.
    pq_status (*load_block)(void *ud, int layer, pq_layer *L);
    // Block `layer` has run quantized over every window (resumed: it was
    // only re-run). Afterwards the driver puts the source linears back.
    pq_status (*block_done)(void *ud, int layer, int resumed);
    void *ud;
} pq_calib_method;

typedef struct {
    int true_sequential;   // one group per stage (q/k/v, o, gate/up, down)
    pq_pool *pool;         // borrowed (the method may share it); NULL: serial
    pq_device device;      // where X^T X and the block passes run (kernels/cuda_host.h's rule)
    int first_block;       // resume: blocks before it are done
    int bf16;              // the CPU block passes multiply in BF16 (kernels/gemm.h's BF16 products)
} pq_calib_run_params;

typedef struct {
    // the estimate, bytes: RSS at the start + what the run adds
    size_t base_rss;       // resident when the run starts (process, model if in memory)
    size_t model_bytes;    // mapped source weights touched: the largest block + the embedding
    size_t act_bytes;      // X: n x len x hidden x 4
    size_t scratch_bytes;  // one window through a block, and a copy of its input
    size_t stats_bytes;    // statistics of the groups measured at once
    size_t method_bytes;   // the method's work_bytes
    size_t total;
    // measured
    size_t peak_rss;       // the run's peak RSS (VmHWM, reset when the run starts)
    double t_embed, t_forward, t_stats, t_method; // seconds: embedding, block passes, accumulation, method
    size_t gpu_bytes;      // on the GPU: X, one window's scratch, the X^T X of the groups measured
                           //   at once and the method's gpu_work_bytes (not the block's weights nor
                           //   its linear workspace)
    size_t gpu_xtx_max;    //   (true_sequential: the largest group's X^T X, counted once)
    int on_gpu;            // X^T X was accumulated and the block passes ran on the GPU
    int cpu_passes;        //   passes that fell back to the CPU (a block the CUDA backend refused)
    size_t peak_gpu_bytes; //   the most device memory seen in use (calib/block_gpu.h)
} pq_calib_report;

// The memory estimate of a run, filled into r (the measured fields zeroed).
void pq_calib_estimate(const pq_model *m, const pq_calib_data *d, const pq_calib_method *meth,
                       const pq_calib_run_params *p, pq_calib_report *r);

// Runs the loop above over m (its layers' linears are swapped while a
// block is processed and restored after). r: the estimate (as
// pq_calib_estimate) and the measurements. --device cuda without a GPU is
// PQ_ERR_NO_DEVICE; a NaN or Inf in a block's output is PQ_ERR_NUMERIC
// naming the block.
pq_status pq_calib_run(pq_model *m, const pq_calib_data *d, const pq_calib_method *meth,
                       const pq_calib_run_params *p, pq_calib_report *r);

#endif
