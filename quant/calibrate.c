// quant/calibrate.c — `pq calibrate`: a smoothing method's search, written
// to a scales file (see calibrate.h).
#include "quant/calibrate.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/sys.h"
#include "formats/fileio.h"
#include "formats/tokenizer/tokenizer.h"
#include "quant/quantize_run.h"
#include "quant/scales.h"

typedef struct {
    const pq_quantize_params *p;
    pq_quantize_progress progress;
    void *ud;
    pq_model *m;
    pq_scales_writer *w;
    pq_calibrate_result *res;
    double out_sum;
    int n_out;
    double blk_out;
} cal;

static void note(cal *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(cal *c, const char *fmt, ...) {
    if (!c->progress) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    pq_quantize_event e = {.kind = PQ_QUANTIZE_NOTE, .note = line};
    c->progress(c->ud, &e);
}

static pq_status emit(void *ud, int layer, const pq_block_scales *sc, const pq_smooth_block *qb) {
    cal *c = ud;
    c->blk_out = 0;
    for (int k = 0; k < PQ_NLINEAR; k++) {
        c->out_sum += qb->out_err[k], c->n_out++;
        c->blk_out += qb->out_err[k] / PQ_NLINEAR;
        c->res->max_out_err = fmax(c->res->max_out_err, qb->out_err[k]);
    }
    return pq_scales_writer_put(c->w, layer, sc);
}

typedef struct {
    pq_smooth *S;
    cal *c;
} method_ud;

static pq_status quantize_block(void *ud, int layer, pq_layer *L, const pq_act_stats *st, const float *X) {
    return pq_smooth_quantize_block(((method_ud *)ud)->S, layer, L, st, X);
}

static pq_status block_done(void *ud, int layer, int resumed) {
    cal *c = ((method_ud *)ud)->c;
    pq_quantize_event e = {.kind = PQ_QUANTIZE_LAYER, .done = layer + 1, .total = c->m->cfg.n_layers,
                           .layer_rel_err = -1, .layer_out_err = c->blk_out};
    if (c->progress) c->progress(c->ud, &e);
    c->res->blocks = layer + 1;
    return PQ_OK;
}

static pq_status run(cal *c, const pq_qrun_resolved *o, pq_pool *pool, pq_calib_data *d) {
    const pq_quantize_params *p = c->p;
    pq_calibrate_result *res = c->res;
    pq_tokenizer *tok;
    PQ_TRY(pq_tok_load(p->model, &tok));
    pq_status s = pq_calib_load(&p->calib, tok, c->m->cfg.max_pos, d);
    pq_tok_free(tok);
    PQ_TRY(s);
    if (d->note[0]) note(c, "calibration: %s", d->note);
    snprintf(res->calib_sha256, sizeof res->calib_sha256, "%s", d->sha256);
    res->calib_windows = d->n, res->calib_len = d->len;
    pq_smooth_params sp = p->smooth;
    sp.kind = o->kind;
    char params[200], calib[96];
    pq_smooth_describe(o->kind, &sp, params, sizeof params);
    pq_calib_describe(d->n, d->len, p->calib.seed, p->calib.mode, calib, sizeof calib);
    pq_scales_meta meta = {o->method, res->scheme, params[0] ? params + 2 : "", p->model, res->source_sha256,
                           d->sha256, calib, d->n, d->len, (unsigned long long)p->calib.seed};
    PQ_TRY(pq_scales_writer_create(p->out, c->m, o->kind, &sp, &o->scheme, &meta, &c->w));
    method_ud mu = {NULL, c};
    pq_smooth_config cfg = {.m = c->m, .scheme = o->scheme, .dt = pq_model_dtype(c->m), .p = sp, .pool = pool,
                            .emit = emit, .ud = c};
    size_t work;
    PQ_TRY(pq_smooth_create(&cfg, d, &mu.S, &work));
    pq_calib_method meth = {.stats = PQ_STAT_ABS, .work_bytes = work, .quantize_block = quantize_block,
                            .block_done = block_done, .ud = &mu};
    pq_calib_run_params rp = {.pool = pool, .device = p->device};
    pq_calib_report rep;
    pq_calib_estimate(c->m, d, &meth, &rp, &rep);
    note(c, "memory estimate %.1f MiB (%d x %d calibration tokens)", rep.total / 1048576.0, d->n, d->len);
    s = pq_calib_run(c->m, d, &meth, &rp, &rep);
    pq_smooth_free(mu.S);
    PQ_TRY(s);
    res->mem_estimate = rep.total, res->peak_rss = rep.peak_rss;
    note(c, "peak memory %.1f MiB (estimate %.1f MiB)", rep.peak_rss / 1048576.0, rep.total / 1048576.0);
    return pq_scales_writer_commit(c->w);
}

pq_status pq_calibrate(const pq_quantize_params *p, pq_quantize_progress progress, void *ud, pq_calibrate_result *out) {
    memset(out, 0, sizeof *out);
    double t0 = pq_now();
    pq_qrun_resolved o;
    PQ_TRY(pq_qrun_resolve(p, &o));
    PQ_FAIL_IF(p->scales, PQ_ERR_ARG, "--scales: pq calibrate writes a scales file, it does not read one");
    PQ_FAIL_IF(!o.smooth || !strcmp(o.method, "rtn"), PQ_ERR_ARG,
               "--method %s: pq calibrate runs awq, smoothquant or fp8", o.method);
    PQ_FAIL_IF(p->resume, PQ_ERR_ARG, "--resume: pq calibrate is not resumable (rerun it)");
    PQ_FAIL_IF(pq_file_exists(p->out) && !p->force, PQ_ERR_ARG, "%s exists (pass --force to replace it)", p->out);
    snprintf(out->method, sizeof out->method, "%s", o.method);
    pq_scheme_describe(&o.scheme, out->scheme, sizeof out->scheme);
    cal c = {.p = p, .progress = progress, .ud = ud, .res = out};
    pq_pool *pool = NULL;
    pq_calib_data d = {0};
    pq_status s = pq_model_open(p->model, &c.m);
    if (s == PQ_OK && c.m->quant.quantized)
        s = PQ_FAIL(PQ_ERR_FORMAT, "%s: already quantized (compressed-tensors %s); calibrate an FP16/BF16/F32 "
                    "checkpoint", p->model, c.m->quant.format);
    if (s == PQ_OK) s = pq_pool_create(p->nthreads, &pool);
    if (s == PQ_OK) s = pq_st_sha256(c.m->st, out->source_sha256);
    if (s == PQ_OK) s = run(&c, &o, pool, &d);
    pq_scales_writer_free(c.w);
    pq_calib_data_free(&d);
    pq_pool_free(pool);
    pq_model_free(c.m);
    if (s != PQ_OK) {
        pq_calibrate_result zero = {0};
        *out = zero;
        return s;
    }
    struct stat sb;
    out->bytes = stat(p->out, &sb) == 0 ? (unsigned long long)sb.st_size : 0;
    out->mean_out_err = c.n_out ? c.out_sum / c.n_out : 0;
    out->seconds = pq_now() - t0;
    return PQ_OK;
}
