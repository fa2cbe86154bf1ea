// bench_gptq — GPTQ-quantizing a TinyLlama-1.1B-shaped model (random F16
// weights built in memory: hidden 2048, intermediate 5632, 32/4 heads, 22
// layers) through the calibration driver with 16 windows x 512 random token
// ids: time split into the calibration forward passes, the X^T X
// accumulation and the GPTQ solve (factorization, column loop, output
// error; with --device cuda all three run on the GPU, quant/gptq_cuda.h), and the measured peak RSS against the driver's printed estimate.
//
// The random model's 2.2 GB live in anonymous memory, resident before the
// run starts: the estimate counts them in "resident at the start" (what a
// model read from a file would instead count as one block's mapped pages,
// calib/driver.h). Both the ratio to the whole estimate and the
// calibration-only share are printed.
//
//   build/tests/bench_gptq [--layers N] [--device cpu|cuda] [--windows N] [--seqlen L]
// Without --device it runs the CPU, then the GPU variant when a GPU is
// present ("skip" otherwise).
#include "tests/lib/model_random.h"
#include "tests/test.h"

#include "calib/driver.h"
#include "common/sys.h"
#include "kernels/cuda_host.h"
#include "kernels/blas.h"
#include "kernels/cpu.h"
#include "quant/gptq.h"
#include "quant/gptq_cuda.h"

typedef struct {
    pq_pool *pool;
    pq_gptq_params gp;
    pq_gptq_cuda *dev;   // --device cuda: the GPU's prepare and solve
    pq_qtensor q[PQ_NLINEAR];
    float *w;
    void *hws, *sws, *ews;
    double t_start, t_prepare, t_solve, t_error, err_sum;
    int n;
} bench_method;

static pq_status bm_group(void *ud, int layer, int g, pq_layer *L, const pq_act_stats *st) {
    bench_method *b = ud;
    double t0 = pq_now();
    pq_gptq_hessian h;
    if (b->dev)
        PQ_TRY(pq_gptq_cuda_prepare(b->dev, st->xtx, st->cols, &b->gp, "bench", b->hws, &h));
    else
        PQ_TRY(pq_gptq_prepare(st->xtx, st->cols, &b->gp, "bench", b->hws, b->pool, &h));
    b->t_prepare += pq_now() - t0;
    for (int k = 0; k < PQ_INPUT_GROUPS[g].n; k++) {
        int s = PQ_INPUT_GROUPS[g].members[k];
        const pq_linear *src = &L->lin[s];
        pq_qtensor *q = &b->q[s];
        t0 = pq_now();
        pq_linear_rows(src, 0, src->rows, b->w);
        *q = (pq_qtensor){.fmt = PQ_W_QPACK, .rows = src->rows, .cols = src->cols, .bits = b->gp.bits,
                          .group = b->gp.group, .scale_dtype = PQ_DT_F16};
        PQ_TRY(pq_qtensor_alloc(q, !b->gp.sym));
        if (b->dev)
            PQ_TRY(pq_gptq_cuda_solve(b->dev, b->w, src->rows, &h, &b->gp, "bench", q, NULL));
        else
            PQ_TRY(pq_gptq_solve(b->w, src->rows, &h, &b->gp, "bench", b->sws, b->pool, q, NULL));
        double t1 = pq_now();
        b->t_solve += t1 - t0;
        pq_linear view = pq_qtensor_linear(q);
        double e;
        if (b->dev)
            PQ_TRY(pq_gptq_cuda_output_error(b->dev, &e));
        else
            e = pq_act_stats_output_error(st, b->w, &view, b->ews, b->pool);
        b->err_sum += e;
        b->n++;
        b->t_error += pq_now() - t1;
        L->lin[s] = view;
    }
    return PQ_OK;
}

static pq_status bm_done(void *ud, int layer, int resumed) {
    bench_method *b = ud;
    for (int s = 0; s < PQ_NLINEAR; s++) pq_qtensor_free(&b->q[s]);
    fprintf(stderr, "bench_gptq: block %d done at %.0f s\n", layer + 1, pq_now() - b->t_start);
    return PQ_OK;
}

static pq_status bm_load(void *ud, int layer, pq_layer *L) { return PQ_OK; }

static int run(const pq_config *c, pq_device device, int windows, int seqlen) {
    pq_model *m;
    if (pq_model_random(c, PQ_DENSE_F16, 1, &m) != PQ_OK) {
        printf("FAIL - random model: %s\n", pq_last_error());
        return 1;
    }
    pq_calib_data d = {.n = windows, .len = seqlen};
    d.tokens = malloc((size_t)windows * seqlen * sizeof(int32_t));
    for (int i = 0; i < windows * seqlen; i++) d.tokens[i] = i % seqlen == 0 ? 1 : (int32_t)(pq_test_u64() % c->vocab);
    bench_method b = {.gp = pq_gptq_default_params()};
    pq_pool_create(0, &b.pool);
    size_t hb = 0, sb = 0, eb = 0, wb = 0;
    for (int g = 0; g < PQ_NGROUPS; g++) {
        size_t x = pq_gptq_hessian_bytes(pq_input_group_cols(c, g));
        hb = x > hb ? x : hb;
    }
    for (int s = 0; s < PQ_NLINEAR; s++) {
        const pq_linear *L = &m->layers[0].lin[s];
        size_t x = pq_gptq_solve_bytes(L->rows, L->cols, &b.gp), e = pq_act_stats_error_bytes(L->rows, L->cols, pq_pool_size(b.pool));
        sb = x > sb ? x : sb, eb = e > eb ? e : eb;
        wb = (size_t)L->rows * L->cols * 4 > wb ? (size_t)L->rows * L->cols * 4 : wb;
    }
    size_t qb = 0;
    for (int s = 0; s < PQ_NLINEAR; s++) {
        const pq_linear *L = &m->layers[0].lin[s];
        qb += (size_t)L->rows * pq_qpack_words_per_row(L->cols, 4) * 4 + (size_t)L->rows * ((L->cols + 127) / 128) * 4;
    }
    b.hws = pq_alloc(hb), b.sws = pq_alloc(sb), b.ews = pq_alloc(eb), b.w = pq_alloc(wb);
    if (device == PQ_DEVICE_CUDA && pq_cuda_device_count() > 0 && pq_gptq_cuda_create(&b.dev) != PQ_OK) {
        printf("FAIL - GPTQ on the GPU: %s\n", pq_last_error());
        return 1;
    }
    pq_calib_method meth = {.stats = PQ_STAT_XTX, .work_bytes = hb + sb + eb + wb + qb, .quantize_group = bm_group,
                            .load_block = bm_load, .block_done = bm_done, .ud = &b};
    pq_calib_run_params rp = {.pool = b.pool, .device = device};
    pq_calib_report r;
    pq_calib_estimate(m, &d, &meth, &rp, &r);
    const double MiB = 1048576.0;
    printf("model: TinyLlama-1.1B shapes (hidden %d, intermediate %d, %d/%d heads, %d layers), random F16 weights "
           "(%.0f MiB, in memory)\n", c->hidden, c->intermediate, c->n_heads, c->n_kv_heads, c->n_layers,
           m->weight_bytes / MiB);
    printf("calibration: %d windows x %d tokens (random ids), GPTQ w4 g128 sym, damp 0.01, block 128, %s, %d threads, "
           "%s, OpenBLAS %s\n", windows, seqlen, device == PQ_DEVICE_CUDA ? "block passes, X^T X and the GPTQ solve on the GPU" : "CPU",
           pq_pool_size(b.pool), pq_isa_name(pq_cpu_isa()), pq_blas_core());
    printf("estimate: %.0f MiB = %.0f resident at the start (the model's %.0f) + %.0f activations + %.0f block scratch "
           "+ %.0f X^T X + %.0f GPTQ workspaces\n", r.total / MiB, r.base_rss / MiB, m->weight_bytes / MiB,
           r.act_bytes / MiB, r.scratch_bytes / MiB, r.stats_bytes / MiB, r.method_bytes / MiB);
    fflush(stdout);
    double t0 = b.t_start = pq_now();
    pq_status s = pq_calib_run(m, &d, &meth, &rp, &r);
    double total = pq_now() - t0;
    if (s != PQ_OK) {
        printf("%s - run: %s\n", s == PQ_ERR_NO_DEVICE ? "skip" : "FAIL", pq_last_error());
        return s == PQ_ERR_NO_DEVICE ? 0 : 1;
    }
    printf("time: %.1f s total = %.1f calibration forward (2 passes over %d blocks) + %.1f X^T X + %.1f GPTQ "
           "(%.1f factorization, %.1f solve, %.1f output error) + %.1f other\n", total, r.t_forward, c->n_layers,
           r.t_stats, r.t_method, b.t_prepare, b.t_solve, b.t_error,
           total - r.t_forward - r.t_stats - r.t_method - r.t_embed);
    double calib = (double)(r.total - r.base_rss), used = (double)r.peak_rss - (double)r.base_rss;
    printf("peak RSS: %.0f MiB measured vs %.0f MiB estimate: ratio %.3f (limit 1.25); calibration only (above the "
           "start): %.0f MiB measured vs %.0f estimated, ratio %.3f\n", r.peak_rss / MiB, r.total / MiB,
           (double)r.peak_rss / r.total, used / MiB, calib / MiB, used / calib);
    if (r.on_gpu)
        printf("GPU: %.0f MiB of device memory in use at most, %d block passes fell back to the CPU\n",
               r.peak_gpu_bytes / MiB, r.cpu_passes);
    printf("mean output error ||WX - W'X||^2/||WX||^2 over %d linears: %.4e\n", b.n, b.err_sum / b.n);
    PQ_CHECK((double)r.peak_rss <= 1.25 * r.total, "peak RSS within 1.25x of the estimate");
    for (int k = 0; k < PQ_NLINEAR; k++) pq_qtensor_free(&b.q[k]);
    pq_free(b.hws), pq_free(b.sws), pq_free(b.ews), pq_free(b.w);
    pq_gptq_cuda_free(b.dev);
    pq_pool_free(b.pool);
    free(d.tokens);
    pq_model_free(m);
    return pq_test_done();
}

int main(int argc, char **argv) {
    int layers = 22, windows = 16, seqlen = 512, dev = -1;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 < argc && !strcmp(argv[i], "--layers")) layers = atoi(argv[i + 1]);
        else if (i + 1 < argc && !strcmp(argv[i], "--windows")) windows = atoi(argv[i + 1]);
        else if (i + 1 < argc && !strcmp(argv[i], "--seqlen")) seqlen = atoi(argv[i + 1]);
        else if (i + 1 < argc && !strcmp(argv[i], "--device"))
            dev = !strcmp(argv[i + 1], "cuda") ? PQ_DEVICE_CUDA : PQ_DEVICE_CPU;
        else {
            fprintf(stderr, "usage: %s [--layers N] [--windows N] [--seqlen L] [--device cpu|cuda]\n", argv[0]);
            return 2;
        }
    }
    pq_test_seed();
    if (pq_blas_init() != PQ_OK) {
        printf("FAIL - OpenBLAS: %s\n", pq_last_error());
        return 1;
    }
    pq_config c = {.arch = PQ_ARCH_LLAMA, .arch_name = "LlamaForCausalLM", .hidden = 2048, .intermediate = 5632,
                   .n_layers = layers, .n_heads = 32, .n_kv_heads = 4, .head_dim = 64, .vocab = 32000, .max_pos = 2048,
                   .rms_eps = 1e-5f, .rope_theta = 10000.0f, .bos_id = 1, .eos_id = 2};
    if (dev >= 0) return run(&c, (pq_device)dev, windows, seqlen);
    int rc = run(&c, PQ_DEVICE_CPU, windows, seqlen);
    if (pq_cuda_device_count() > 0) rc |= run(&c, PQ_DEVICE_CUDA, windows, seqlen);
    else pq_test_skip("GPU variant (bench_gptq --device cuda): no GPU");
    return rc;
}
