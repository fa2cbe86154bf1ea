// calib/driver.c — the streaming calibration loop (see driver.h).
#include "calib/driver.h"

#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "calib/block_gpu.h"
#include "calib/xtx_cuda.h"
#include "common/sys.h"
#include "eval/block_cpu.h"
#include "kernels/blas.h"
#include "kernels/cuda_host.h"
#include "kernels/ops.h"

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

// o's input is the attention output, a linear function of v_proj's output
// (per kv head: with grouped-query attention the heads of a kv group read the
// same v rows); down's input is silu(gate) * up, linear in up_proj's output.
const pq_input_group PQ_INPUT_GROUPS[PQ_NGROUPS] = {
    {PQ_Q, 3, {PQ_Q, PQ_K, PQ_V}, "q/k/v", PQ_FROM_ATTN_NORM, PQ_Q},
    {PQ_O, 1, {PQ_O}, "o", PQ_FROM_LINEAR, PQ_V},
    {PQ_GATE, 2, {PQ_GATE, PQ_UP}, "gate/up", PQ_FROM_MLP_NORM, PQ_GATE},
    {PQ_DOWN, 1, {PQ_DOWN}, "down", PQ_FROM_LINEAR, PQ_UP},
};

int pq_input_group_cols(const pq_config *c, int g) {
    switch (PQ_INPUT_GROUPS[g].input) {
    case PQ_O: return c->n_heads * c->head_dim;
    case PQ_DOWN: return c->intermediate;
    default: return c->hidden;
    }
}

// ---- the estimate ----------------------------------------------------------

static size_t block_source_bytes(const pq_layer *L) {
    size_t b = 0;
    for (int s = 0; s < PQ_NLINEAR; s++) b += pq_linear_weight_bytes(&L->lin[s]);
    return b;
}

// The panels of a block's weights (pq_linear_pack_panels), packed once per
// pass when more than one window goes through it or its products are BF16:
// the most any block of the model takes in any format but W8A8 (which packs
// its own), by shape, so that what a method turns a linear into fits too.
static size_t block_panels_bytes(const pq_model *m, const pq_calib_data *d, int bf16) {
    size_t most = 0;
    for (int l = 0; (d->n > 1 || bf16) && l < m->cfg.n_layers; l++) {
        size_t b = 0;
        for (int s = 0; s < PQ_NLINEAR; s++) {
            const pq_linear *L = &m->layers[l].lin[s];
            b += pq_linear_panels_bytes(&(pq_linear){.rows = L->rows, .cols = L->cols}, bf16);
        }
        most = b > most ? b : most;
    }
    return most;
}

// What one window through a block needs: pq_block_scratch for len tokens
// (its linear workspace as a weight-only quantized linear of the widest
// input needs it: the most of any weight-only format), the K/V of the
// window, a copy of the window.
static size_t scratch_bytes(const pq_config *c, int len, int nthreads) {
    size_t T = (size_t)len, qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t per_token = 2 * c->hidden + 2 * qd + 4 * kvd + 2 * (size_t)c->intermediate + (size_t)c->head_dim;
    pq_linear widest = {.fmt = PQ_W_INT8, .rows = 1, .cols = c->intermediate > c->hidden ? c->intermediate : c->hidden};
    pq_attn_shape as = {c->n_heads, c->n_kv_heads, c->head_dim, 0}; // the workspace does not depend on the window
    return T * per_token * sizeof(float) + pq_linear_workspace_bytes(&widest, nthreads) +
           pq_attention_workspace_bytes(&as, len, nthreads) + T * c->hidden * sizeof(float);
}

// Whether a run of meth on device dev (resolved) uses the GPU: X^T X and the
// block passes there. Methods without X^T X run on the CPU, and so do those
// with a quantize_block (it reads the block's input X on the host).
static int use_gpu(const pq_calib_method *meth, pq_device dev) {
    return (meth->stats & PQ_STAT_XTX) && !meth->quantize_block && dev == PQ_DEVICE_CUDA;
}

void pq_calib_estimate(const pq_model *m, const pq_calib_data *d, const pq_calib_method *meth,
                       const pq_calib_run_params *p, pq_calib_report *r) {
    const pq_config *c = &m->cfg;
    memset(r, 0, sizeof *r);
    r->base_rss = pq_rss_bytes();
    if (!m->owned_weights) { // mapped from a file: the pages of one block, and the embedding rows
        for (int l = 0; l < c->n_layers; l++) {
            size_t b = block_source_bytes(&m->layers[l]);
            r->model_bytes = b > r->model_bytes ? b : r->model_bytes;
        }
        r->model_bytes += pq_linear_weight_bytes(&m->embed);
    }
    r->act_bytes = (size_t)d->n * d->len * c->hidden * sizeof(float);
    r->scratch_bytes = scratch_bytes(c, d->len, pq_pool_size(p->pool)) + block_panels_bytes(m, d, p->bf16);
    pq_device dev;
    if (pq_device_resolve(p->device, &dev) == PQ_OK && use_gpu(meth, dev)) {
        if (meth->stats & ~PQ_STAT_XTX) r->scratch_bytes += pq_calib_gpu_host_bytes(c, d->len);
        r->gpu_bytes = pq_calib_gpu_device_bytes(c, d->n, d->len);
        for (int g = 0; g < PQ_NGROUPS; g++) {
            size_t cols = (size_t)pq_input_group_cols(c, g), b = cols * cols * sizeof(float);
            r->gpu_bytes += p->true_sequential ? 0 : b;
            if (p->true_sequential && b > r->gpu_xtx_max) r->gpu_xtx_max = b;
        }
        r->gpu_bytes += r->gpu_xtx_max + meth->gpu_work_bytes;
    }
    for (int g = 0; g < PQ_NGROUPS; g++) {
        size_t b = pq_act_stats_bytes(pq_input_group_cols(c, g), meth->stats);
        r->stats_bytes = p->true_sequential ? (b > r->stats_bytes ? b : r->stats_bytes) : r->stats_bytes + b;
    }
    r->method_bytes = meth->work_bytes;
    r->total = r->base_rss + r->model_bytes + r->act_bytes + r->scratch_bytes + r->stats_bytes + r->method_bytes;
}

// ---- the run ---------------------------------------------------------------

typedef struct {
    pq_model *m;
    const pq_calib_data *d;
    const pq_calib_method *meth;
    const pq_calib_run_params *p;
    pq_calib_report *r;
    pq_block_scratch s;
    size_t lin_ws;          // bytes of s.lin_ws
    float *X, *xw;          // X [n][len][hidden], xw: one window
    float *kc, *vc;         // [len][kv_dim]
    char *panels;           // block_panels_bytes, or NULL (one window, f32)
    double *inv_freq;
    pq_act_stats st[PQ_NGROUPS];
    int active[PQ_NGROUPS]; // measured in the current pass
    int window;             // the window the current pass is at
    int on_gpu;             // X^T X accumulated and the block passes run on the GPU
    pq_xtx_cuda *gpu[PQ_NGROUPS];
    pq_calib_gpu *blocks;   // the GPU block passes (on_gpu): X lives on the device
} drv;

static void on_input(void *ud, int layer, pq_linear_slot slot, const float *x, int T, int cols) {
    drv *v = ud;
    if (v->meth->sample) v->meth->sample(v->meth->ud, layer, v->window, slot, x, T, cols);
    for (int g = 0; g < PQ_NGROUPS; g++) {
        if (PQ_INPUT_GROUPS[g].input != slot || !v->active[g]) continue;
        double t0 = pq_now();
        pq_act_stats_add(&v->st[g], x, T, v->st[g].want, v->p->pool);
        v->r->t_stats += pq_now() - t0;
    }
}

static void on_output(void *ud, int layer, pq_linear_slot slot, const float *y, int T, int rows) {
    drv *v = ud;
    v->meth->sample_output(v->meth->ud, layer, v->window, slot, y, T, rows);
}

// The hook of a pass on the GPU: X^T X from the device input as it is;
// other statistics (PQ_STAT_ABS) from a host copy.
static pq_status on_input_gpu(void *ud, int layer, pq_linear_slot slot, const uint16_t *d_x, int T, int cols,
                              void *stream) {
    drv *v = ud;
    for (int g = 0; g < PQ_NGROUPS; g++) {
        if (PQ_INPUT_GROUPS[g].input != slot || !v->active[g]) continue;
        double t0 = pq_now();
        int rest = v->st[g].want & ~PQ_STAT_XTX;
        PQ_TRY(pq_xtx_cuda_add(v->gpu[g], d_x, T));
        const float *x = NULL;
        if (rest) PQ_TRY(pq_calib_gpu_fetch(v->blocks, d_x, T, cols, &x));
        pq_act_stats_add(&v->st[g], x, T, rest, v->p->pool); // counts the rows
        v->r->t_stats += pq_now() - t0;
    }
    return PQ_OK;
}

// The linear workspace for the block's current linears (quantized ones may need more).
static pq_status ensure_ws(drv *v, const pq_layer *L) {
    size_t need = v->lin_ws;
    for (int s = 0; s < PQ_NLINEAR; s++) {
        size_t b = pq_linear_workspace_bytes(&L->lin[s], pq_pool_size(v->p->pool));
        need = b > need ? b : need;
    }
    if (need == v->lin_ws) return PQ_OK;
    void *ws = pq_alloc(need);
    PQ_FAIL_IF(!ws, PQ_ERR_NOMEM, "out of memory for a %zu-byte linear workspace", need);
    pq_free(v->s.lin_ws);
    v->s.lin_ws = ws;
    v->lin_ws = need;
    return PQ_OK;
}

// Every window through block l: in place on X (measure 0), or on a copy
// with the hooks of the active groups. On the GPU (X resident there) when
// the run is there and the block's current linears upload; else (or for a
// block the CUDA backend cannot run: counted in cpu_passes, X travels to
// the host and back) on the CPU.
static pq_status pass(drv *v, int l, int measure) {
    const pq_config *c = &v->m->cfg;
    pq_layer *L = &v->m->layers[l];
    // a measuring pass runs on a copy of X: its output is dropped
    pq_block_hooks hooks = {.linear_input = on_input, .linear_output = v->meth->sample_output ? on_output : NULL,
                            .ud = v, .inputs_only = 1};
    size_t win = (size_t)v->d->len * c->hidden;
    double t0 = pq_now(), t_stats0 = v->r->t_stats;
    if (v->blocks) {
        pq_status s = pq_calib_gpu_load(v->blocks, L, l);
        if (s != PQ_ERR_FORMAT && s != PQ_ERR_NUMERIC) PQ_TRY(s);
        v->r->cpu_passes += s != PQ_OK;
        if (s == PQ_OK) {
            pq_calib_gpu_hooks gh = {on_input_gpu, v};
            s = pq_calib_gpu_pass(v->blocks, l, measure ? &gh : NULL);
            v->r->t_forward += pq_now() - t0 - (v->r->t_stats - t_stats0);
            return s;
        }
        PQ_TRY(pq_calib_gpu_get_inputs(v->blocks, v->X));
    }
    PQ_TRY(ensure_ws(v, L));
    if (v->panels) pq_block_pack_panels(L, v->panels, v->p->bf16, v->s.lin_ws, v->p->pool); // once for every window
    for (int w = 0; w < v->d->n; w++) {
        float *x = v->X + (size_t)w * win;
        v->window = w;
        if (measure) x = memcpy(v->xw, x, win * sizeof(float));
        pq_block_forward_cpu(c, L, l, x, v->d->len, 0, v->kc, v->vc, &v->s, v->p->pool, measure ? &hooks : NULL);
    }
    for (int k = 0; k < PQ_NLINEAR; k++) L->lin[k].panels = NULL, L->lin[k].bf16 = 0;
    v->r->t_forward += pq_now() - t0 - (v->r->t_stats - t_stats0);
    if (v->blocks && !measure) PQ_TRY(pq_calib_gpu_set_inputs(v->blocks, v->X));
    return PQ_OK;
}

static pq_status check_finite(const drv *v, int l) {
    size_t n = (size_t)v->d->n * v->d->len * v->m->cfg.hidden;
    long long bad = -1;
    if (v->blocks) {
        PQ_TRY(pq_calib_gpu_first_nonfinite(v->blocks, &bad));
    } else {
        bad = pq_scan_finite_cpu(v->X, n, NULL);
    }
    size_t i = (size_t)bad;
    PQ_FAIL_IF(bad >= 0, PQ_ERR_NUMERIC, "calibration: block %d output is not finite (window %zu, token %zu, channel %zu)",
               l, i / ((size_t)v->d->len * v->m->cfg.hidden), i / v->m->cfg.hidden % v->d->len,
               i % v->m->cfg.hidden);
    return PQ_OK;
}

// Drops the mapped source pages of a finished part of the model from this
// process (they are not needed again). MADV_PAGEOUT never loses data, so
// this is safe for memory the model owns too (there it does nothing
// without swap).
static void release(const pq_model *m, const pq_linear *lin) {
    if (m->owned_weights || lin->fmt != PQ_W_DENSE) return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = pq_linear_weight_bytes(lin);
    uintptr_t a = ((uintptr_t)lin->w + page - 1) / page * page, e = ((uintptr_t)lin->w + bytes) / page * page;
    if (e > a) madvise((void *)a, e - a, MADV_PAGEOUT);
}

// The stages of block l and its final in-place pass.
static pq_status quantize_block(drv *v, int l) {
    const pq_config *c = &v->m->cfg;
    pq_layer *L = &v->m->layers[l];
    int nstages = v->p->true_sequential ? PQ_NGROUPS : 1;
    for (int stage = 0; stage < nstages; stage++) {
        int g0 = v->p->true_sequential ? stage : 0, g1 = v->p->true_sequential ? stage + 1 : PQ_NGROUPS;
        pq_status s = PQ_OK;
        for (int g = g0; g < g1 && s == PQ_OK; g++) {
            s = pq_act_stats_init(&v->st[g], pq_input_group_cols(c, g), v->meth->stats);
            if (s == PQ_OK && v->blocks)
                s = pq_xtx_cuda_create(pq_input_group_cols(c, g), pq_calib_gpu_dtype(v->m),
                                       pq_calib_gpu_stream(v->blocks), &v->gpu[g]);
            v->active[g] = 1;
        }
        if (s == PQ_OK) s = pass(v, l, 1);
        for (int g = g0; g < g1 && s == PQ_OK; g++)
            if (v->gpu[g] && v->st[g].n) s = pq_xtx_cuda_read(v->gpu[g], v->st[g].xtx);
        for (int g = g0; g < g1 && s == PQ_OK; g++) pq_act_stats_finish(&v->st[g], v->p->pool);
        double t0 = pq_now();
        if (v->meth->quantize_block && s == PQ_OK) s = v->meth->quantize_block(v->meth->ud, l, L, v->st, v->X);
        for (int g = g0; g < g1 && s == PQ_OK && !v->meth->quantize_block; g++)
            s = v->meth->quantize_group(v->meth->ud, l, g, L, &v->st[g]);
        v->r->t_method += pq_now() - t0;
        for (int g = g0; g < g1; g++) {
            pq_act_stats_free(&v->st[g]);
            pq_xtx_cuda_free(v->gpu[g]);
            v->gpu[g] = NULL;
            v->active[g] = 0;
        }
        PQ_TRY(s);
    }
    PQ_TRY(pass(v, l, 0));
    return check_finite(v, l);
}

static pq_status setup(drv *v) {
    const pq_config *c = &v->m->cfg;
    int len = v->d->len, nt = pq_pool_size(v->p->pool);
    size_t kvd = (size_t)c->n_kv_heads * c->head_dim;
    PQ_TRY(pq_block_scratch_init(&v->s, c, len, len, nt, v->m->layers, c->n_layers, NULL));
    for (int l = 0; l < c->n_layers; l++) PQ_TRY(ensure_ws(v, &v->m->layers[l]));
    v->X = pq_alloc((size_t)v->d->n * len * c->hidden * sizeof(float));
    v->xw = pq_alloc((size_t)len * c->hidden * sizeof(float));
    v->kc = pq_alloc((size_t)len * kvd * sizeof(float));
    v->vc = pq_alloc((size_t)len * kvd * sizeof(float));
    size_t pb = block_panels_bytes(v->m, v->d, v->p->bf16);
    v->panels = pb ? pq_alloc(pb) : NULL;
    v->inv_freq = malloc((size_t)(c->head_dim / 2) * sizeof(double));
    PQ_FAIL_IF(!v->X || !v->xw || !v->kc || !v->vc || !v->inv_freq || (pb && !v->panels), PQ_ERR_NOMEM,
               "out of memory for the calibration activations (%d windows of %d tokens: %.1f MiB)", v->d->n, len,
               v->r->act_bytes / 1048576.0);
    pq_rope_params rp = {c->rope_theta, c->rope_llama3, c->rope_factor, c->rope_low_freq_factor,
                         c->rope_high_freq_factor, c->rope_orig_max_pos};
    pq_rope_inv_freq(&rp, c->head_dim, v->inv_freq);
    pq_block_rope_prepare(&v->s, v->inv_freq, c->head_dim, 0, len);
    double t0 = pq_now();
    for (size_t t = 0; t < (size_t)v->d->n * len; t++) {
        int id = v->d->tokens[t];
        PQ_FAIL_IF(id < 0 || id >= c->vocab, PQ_ERR_FORMAT, "calibration token %d is outside the %d rows of the "
                   "model's embedding (config.json vocab_size): the tokenizer does not belong to this model", id,
                   c->vocab);
        pq_linear_rows(&v->m->embed, id, 1, v->X + t * c->hidden);
    }
    release(v->m, &v->m->embed);
    v->r->t_embed = pq_now() - t0;
    return PQ_OK;
}

pq_status pq_calib_run(pq_model *m, const pq_calib_data *d, const pq_calib_method *meth,
                       const pq_calib_run_params *p, pq_calib_report *r) {
    pq_calib_estimate(m, d, meth, p, r);
    pq_peak_rss_reset(); // the peak measured is this run's (tokenizing the text may have peaked higher)
    const pq_config *c = &m->cfg;
    drv v = {.m = m, .d = d, .meth = meth, .p = p, .r = r};
    pq_status s = PQ_OK;
    pq_device dev;
    PQ_TRY_GOTO(s, pq_device_resolve(p->device, &dev));
    int gpu = use_gpu(meth, dev);
    PQ_CHECK_GOTO(meth->quantize_block && p->true_sequential, s, PQ_ERR_ARG,
                  "--true-sequential: this method calibrates every group of a block from one pass");
    if (p->first_block >= c->n_layers) goto done; // every block done: nothing to regenerate
    PQ_TRY_GOTO(s, pq_blas_init());
    PQ_TRY_GOTO(s, setup(&v));
    v.on_gpu = r->on_gpu = gpu;
    if (gpu) {
        PQ_TRY_GOTO(s, pq_calib_gpu_create(c, pq_calib_gpu_dtype(m), d->n, d->len, &v.blocks));
        PQ_TRY_GOTO(s, pq_calib_gpu_set_inputs(v.blocks, v.X));
    }
    for (int l = 0; l < c->n_layers; l++) {
        pq_layer saved = m->layers[l];
        int resumed = l < p->first_block;
        s = resumed ? meth->load_block(meth->ud, l, &m->layers[l]) : quantize_block(&v, l);
        if (s == PQ_OK && resumed) s = pass(&v, l, 0);
        if (s == PQ_OK) s = meth->block_done(meth->ud, l, resumed);
        m->layers[l] = saved;
        for (int k = 0; k < PQ_NLINEAR; k++) release(m, &saved.lin[k]);
        PQ_TRY_GOTO(s, s);
    }
done:
    for (int g = 0; g < PQ_NGROUPS; g++) {
        pq_act_stats_free(&v.st[g]);
        pq_xtx_cuda_free(v.gpu[g]);
    }
    r->peak_gpu_bytes = pq_calib_gpu_peak_bytes(v.blocks);
    pq_calib_gpu_free(v.blocks);
    pq_block_scratch_free(&v.s);
    pq_free(v.X);
    pq_free(v.xw);
    pq_free(v.kc);
    pq_free(v.vc);
    pq_free(v.panels);
    free(v.inv_freq);
    r->peak_rss = pq_peak_rss_bytes();
    return s;
}
