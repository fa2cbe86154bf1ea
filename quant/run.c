// quant/run.c — the one run loop of pq quantize and pq calibrate (see
// quantize.h): the request resolved against the method table, the source
// opened and hashed (on a thread of its own, while the output is opened
// and the calibration windows cut), then every decoder block
// through the method (on its own, or in the calibration driver) into the
// output: the checkpoint with its resume journal (quant/checkpoint.h,
// journal.h), or the scales file (quant/scales.h).
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/sys.h"
#include "common/threads.h"
#include "common/version.h"
#include "formats/fileio.h"
#include "formats/outdir.h"
#include "quant/checkpoint.h"
#include "quant/journal.h"
#include "quant/request.h"
#include "quant/rotate.h"
#include "quant/report.h"
#include "quant/rtn.h"
#include "quant/sensitivity.h"

#define PATH_CAP 4096

typedef struct {
    const pq_quantize_request *q;
    pq_resolved o;
    pq_quantize_progress progress;
    void *ud;
    pq_model *m;                   // the model quantized: the source, or its rotation
    pq_model *src;                 // --rotate: the source (m's unrotated tensors point into it); else NULL
    pq_rotate_info rot;
    // --target-bpw
    pq_mix_table mix;              // the sensitivity table
    int *choice;                   // [units] the item chosen
    pq_mix_plan plan;
    double plan_bpw, plan_loss;
    pq_report_point pts[PQ_MIX_MAX_MENU + 2]; // measured: unquantized, each uniform integer item, the plan
    int n_pts;
    pq_pool *pool;
    char sha[65];                  // the source weights' SHA-256 (source_hash)
    struct {                       // computing sha on a thread of its own while the run goes on
        pthread_t thread;
        int running;
        const pq_st *st;
        pq_status status;
        char error[512];
        double seconds;
    } hash;
    pq_scales_file *scales;        // --scales
    pq_calib_data calib;           // calibrated runs
    void *state;                   // the method's
    pq_calib_method hooks;         // calibrated: the method's driver callbacks
    pq_calib_report mem;
    double t_hash, t_quant;
    // pq quantize
    pq_outdir_spec spec;
    pq_outdir dir;
    const char **inputs;           // what the run reads (the output may be none of them)
    char input_paths[1 + PQ_CKPT_NSIDE_FILES][PATH_CAP];
    pq_ckpt *ck;
    char key[65];                  // the journal's inputs key
    int adopted;                   // continuing an interrupted run's temporary directory
    int keep;                      // the temporary directory holds a journal: an error leaves it for --resume
    int started;                   // the run is past its start (an error then says where the blocks stay)
    int blocks_done, resumed_blocks, damp_raised;
    pq_journal leftover;           // an adopted directory's journal
    pq_ckpt_loaded loaded;         // a resumed block's arrays
    // pq calibrate
    pq_scales_writer *sw;
    pq_calibrate_result *cres;
    double out_sum;
    int n_out;
} run;

static void note(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(run *r, const char *fmt, ...) {
    if (!r->progress) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    pq_quantize_event e = {.kind = PQ_QUANTIZE_NOTE, .note = line};
    r->progress(r->ud, &e);
}

static void method_note(void *ud, const char *line) { note(ud, "%s", line); }

static void layer_event(run *r, int layer, double rel, double out, int resumed) {
    pq_quantize_event e = {.kind = PQ_QUANTIZE_LAYER, .done = layer + 1, .total = r->m->cfg.n_layers,
                           .layer_rel_err = rel, .layer_out_err = out, .resumed = resumed};
    if (r->progress) r->progress(r->ud, &e);
}

// ---- the source and the calibration ------------------------------------------

// --rotate: the source rotated in memory (quant/rotate.h); r->m becomes the rotation.
static pq_status rotate_source(run *r) {
    pq_rotate_params p = {.seed = r->q->rotate_seed, .pool = r->pool};
    pq_model *rm;
    double t0 = pq_now();
    PQ_TRY(pq_rotate_model(r->m, &p, &rm, &r->rot));
    r->src = r->m;
    r->m = rm;
    note(r, "rotated the residual stream (hidden %s; per head %s; seed %llu; norms folded into the linears) in "
         "%.2f s%s", r->rot.hidden, r->rot.head, (unsigned long long)r->q->rotate_seed, pq_now() - t0,
         r->rot.untied ? "; lm_head untied from the embeddings (the final norm folds into it): OUT has its own "
                         "lm_head.weight and tie_word_embeddings false" : "");
    return PQ_OK;
}

static void *hash_main(void *arg) {
    run *r = arg;
    double t0 = pq_now();
    r->hash.status = pq_st_sha256(r->hash.st, r->sha);
    if (r->hash.status != PQ_OK) snprintf(r->hash.error, sizeof r->hash.error, "%s", pq_last_error());
    r->hash.seconds = pq_now() - t0;
    return NULL;
}

// Waits for the hash's thread, if one runs (idempotent).
static void hash_join(run *r) {
    if (!r->hash.running) return;
    pthread_join(r->hash.thread, NULL);
    r->hash.running = 0;
}

// The source's SHA-256 in r->sha (open_source starts it on a thread: the
// files are read while the run opens its output and cuts the calibration
// windows); what anything that records the source calls first. A failed
// hash is reported here, with the message it failed with.
static pq_status source_hash(run *r) {
    hash_join(r);
    r->t_hash = r->hash.seconds;
    return r->hash.status == PQ_OK ? PQ_OK : pq_fail_message(r->hash.status, r->hash.error);
}

// The source: an unquantized checkpoint whose head can be quantized if asked.
static pq_status open_source(run *r) {
    PQ_TRY(pq_model_open(r->q->model, &r->m));
    PQ_FAIL_IF(r->m->quant.quantized, PQ_ERR_FORMAT, "%s: already quantized (compressed-tensors %s); quantize an "
               "FP16/BF16/F32 checkpoint", r->q->model, r->m->quant.format);
    PQ_TRY(pq_pool_create(r->q->nthreads, &r->pool));
    r->hash.st = r->m->st;
    r->hash.running = pq_pool_size(r->pool) > 1 && pthread_create(&r->hash.thread, NULL, hash_main, r) == 0;
    if (!r->hash.running) hash_main(r); // one thread asked for (or none to spare): now
    if (pq_request_rotates(r->q)) PQ_TRY(rotate_source(r));
    PQ_FAIL_IF(r->q->quantize_head && r->m->cfg.tie_embeddings, PQ_ERR_ARG,
               "--quantize-head: %s ties lm_head to the embeddings (tie_word_embeddings), which stay FP16",
               r->q->model);
    return PQ_OK;
}

// The model as read from disk (the source of the side files and the input files).
static const pq_model *disk_model(const run *r) { return r->src ? r->src : r->m; }

// The calibration windows, cut with the source's tokenizer.
static pq_status load_calibration(run *r) {
    pq_tokenizer *tok;
    PQ_TRY(pq_tok_load(r->q->model, &tok));
    pq_status s = pq_calib_load(&r->q->calib, tok, r->m->cfg.max_pos, &r->calib);
    pq_tok_free(tok);
    PQ_TRY(s);
    if (r->calib.note[0]) note(r, "calibration: %s", r->calib.note);
    return PQ_OK;
}

// ---- --target-bpw --------------------------------------------------------------------

static int mixed(const run *r) { return r->q->target_bpw > 0; }

// A measured point: bits per weight, mean KL and PPL on the KL windows.
static void add_point(run *r, const char *what, double bpw, double kl, double ppl) {
    pq_report_point *p = &r->pts[r->n_pts++];
    snprintf(p->name, sizeof p->name, "%s", what);
    p->bpw = bpw, p->kl = kl, p->ppl = ppl;
}

// The measured points: the unquantized model, every uniform integer item, the plan.
static pq_status measure_points(run *r, pq_sens *sens) {
    const pq_mix_table *t = &r->mix;
    int *all = malloc((size_t)t->n_units * sizeof *all);
    PQ_FAIL_IF(!all, PQ_ERR_NOMEM, "out of memory");
    double kl, ppl, bpw, loss;
    pq_status s = pq_sens_eval(sens, t, NULL, &kl, &ppl);
    if (s == PQ_OK) add_point(r, "unquantized", 16, 0, ppl);
    for (int k = 0; k < t->n_opts && s == PQ_OK; k++) {
        if (t->opt[k].dense) continue;
        for (int u = 0; u < t->n_units; u++) all[u] = k;
        pq_mix_uniform(t, k, &bpw, &loss);
        s = pq_sens_eval(sens, t, all, &kl, &ppl);
        if (s == PQ_OK) add_point(r, t->opt[k].name, bpw, kl, ppl);
    }
    if (s == PQ_OK) s = pq_sens_eval(sens, t, r->choice, &kl, &ppl);
    if (s == PQ_OK) add_point(r, "mixed", r->plan_bpw, kl, ppl);
    if (s == PQ_OK) note(r, "mixed plan measured on the KL windows: KL %.4g (predicted %.4g), PPL %.4f (unquantized "
                         "%.4f)", kl, r->plan_loss, ppl, r->pts[0].ppl);
    free(all);
    return s;
}

// pq.json's "measured" array (a new reference).
static json_t *points_json(const run *r) {
    json_t *a = json_array();
    for (int i = 0; a && i < r->n_pts; i++)
        if (json_array_append_new(a, json_pack("{s:s, s:f, s:f, s:f}", "plan", r->pts[i].name, "bits_per_weight",
                                                r->pts[i].bpw, "kl", r->pts[i].kl, "ppl", r->pts[i].ppl)) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

// --report: the plots and tables of the plan (quant/report.h).
static pq_status write_report(run *r, const pq_quantize_result *res) {
    pq_report_input in = {.model = r->q->model, .method = r->o.name,
                          .menu = r->q->menu ? r->q->menu : PQ_MIX_DEFAULT_MENU,
                          .rotation = r->src ? r->rot.hidden : NULL, .target_bpw = r->q->target_bpw,
                          .plan_bpw = r->plan_bpw, .plan_loss = r->plan_loss, .written_bpw = res->bits_per_weight,
                          .kl_windows = r->q->kl_windows < r->calib.n ? r->q->kl_windows : r->calib.n,
                          .kl_len = r->calib.len, .t = &r->mix, .choice = r->choice, .pts = r->pts,
                          .n_pts = r->n_pts};
    return pq_report_write(r->q->report, &in);
}

// The sensitivity table, the knapsack's choice and the plan the run follows.
static pq_status plan_mixed(run *r) {
    const pq_quantize_request *q = r->q;
    pq_mix_option opt[PQ_MIX_MAX_MENU];
    int n;
    PQ_TRY(pq_mix_menu_parse(q->menu ? q->menu : PQ_MIX_DEFAULT_MENU, opt, &n));
    for (int k = 0; k < n; k++) // GPTQ's act-order, as its check completes the run's scheme
        if (r->o.m == &PQ_METHOD_GPTQ && q->gptq.act_order && opt[k].scheme.group > 0)
            opt[k].scheme.actorder = q->gptq.static_groups ? PQ_ACTORDER_WEIGHT : PQ_ACTORDER_GROUP;
    const pq_config *c = &r->m->cfg;
    PQ_TRY(pq_mix_table_init(&r->mix, c->n_layers * PQ_NGROUPS, opt, n));
    // GPTQ's act-order writes a g_idx for grouped weights (quant/gptq.h), static groups do not
    pq_mix_table_shape(&r->mix, r->m, r->o.m == &PQ_METHOD_GPTQ && q->gptq.act_order && !q->gptq.static_groups);
    double least = pq_mix_least_bpw(&r->mix); // before the measurement
    PQ_FAIL_IF(least > q->target_bpw, PQ_ERR_ARG, "--target-bpw %g: the menu's cheapest items take %.4f bits per "
               "weight", q->target_bpw, least);
    r->choice = calloc((size_t)r->mix.n_units, sizeof *r->choice);
    PQ_FAIL_IF(!r->choice, PQ_ERR_NOMEM, "out of memory");
    pq_gptq_params gp = pq_gptq_default_params();
    gp.damp = q->gptq.damp, gp.block_size = q->gptq.block_size, gp.act_order = q->gptq.act_order;
    gp.static_groups = q->gptq.static_groups;
    pq_sens_params sp = {.m = r->m, .calib = &r->calib, .gptq = r->o.m == &PQ_METHOD_GPTQ, .gp = gp,
                         .kl_windows = q->kl_windows, .measure_all = q->measure_all, .pool = r->pool,
                         .device = q->device, .note = method_note, .note_ud = r};
    pq_sens *sens;
    double t0 = pq_now();
    PQ_TRY(pq_sens_run(&sp, &r->mix, &sens));
    pq_status s = pq_mix_choose(&r->mix, q->target_bpw, r->choice, &r->plan_bpw, &r->plan_loss);
    if (s == PQ_OK) s = pq_mix_plan_make(&r->mix, r->choice, c->n_layers, &r->plan);
    if (s == PQ_OK) s = measure_points(r, sens);
    pq_sens_free(sens);
    PQ_TRY(s);
    r->t_quant += pq_now() - t0;
    note(r, "mixed plan: %.4f bits per weight (target %g), predicted KL %.4g (%.1f s of sensitivity measurement)",
         r->plan_bpw, q->target_bpw, r->plan_loss, pq_now() - t0);
    return PQ_OK;
}

static pq_status create_method(run *r) {
    pq_method_ctx c = {.q = r->q, .m = r->m, .scheme = &r->o.scheme, .dt = pq_model_dtype(r->m),
                       .calib = r->o.calibrated ? &r->calib : NULL, .scales = r->scales, .pool = r->pool,
                       .note = method_note, .note_ud = r, .mix = mixed(r) ? &r->plan : NULL, .bf16 = r->o.bf16};
    PQ_TRY(r->o.m->create(r->o.m, &c, &r->state));
    if (r->o.calibrated) PQ_TRY(r->o.m->hooks(r->state, &r->hooks));
    return PQ_OK;
}

// ---- the calibration driver -----------------------------------------------------

static pq_status quantize_group(void *ud, int layer, int g, pq_layer *L, const pq_act_stats *st) {
    run *r = ud;
    return r->hooks.quantize_group(r->hooks.ud, layer, g, L, st);
}

static pq_status quantize_block(void *ud, int layer, pq_layer *L, const pq_act_stats *st, const float *X) {
    run *r = ud;
    return r->hooks.quantize_block(r->hooks.ud, layer, L, st, X);
}

static void sample(void *ud, int layer, int window, pq_linear_slot slot, const float *x, int T, int cols) {
    run *r = ud;
    r->hooks.sample(r->hooks.ud, layer, window, slot, x, T, cols);
}

static void sample_output(void *ud, int layer, int window, pq_linear_slot slot, const float *y, int T, int rows) {
    run *r = ud;
    r->hooks.sample_output(r->hooks.ud, layer, window, slot, y, T, rows);
}

// Resume: a finished block as it was written (AWQ: the source block, which is what it propagates).
static pq_status load_block(void *ud, int layer, pq_layer *L) {
    run *r = ud;
    if (r->o.m->source_propagates) return PQ_OK;
    return pq_ckpt_load_block(r->ck, layer, r->o.m->folds, L, &r->loaded);
}

static pq_status write_journal(run *r) {
    char path[PATH_CAP];
    PQ_TRY(pq_outdir_path(&r->dir, PQ_JOURNAL_NAME, path, sizeof path));
    pq_journal j = {.blocks_done = r->blocks_done, .damp_raised = r->damp_raised, .layers = pq_ckpt_entries(r->ck)};
    snprintf(j.key, sizeof j.key, "%s", r->key);
    return pq_journal_write(path, &j);
}

// pq quantize: the block's tensors written, fsync'd, then journaled.
static pq_status checkpoint_block_done(void *ud, int layer, int resumed) {
    run *r = ud;
    double rel, out;
    if (resumed) {
        pq_ckpt_loaded_free(&r->loaded);
    } else {
        pq_block_out b = {0};
        PQ_TRY(r->o.m->result(r->state, layer, &b));
        pq_status s = pq_ckpt_put_block(r->ck, layer, &b);
        r->damp_raised += b.damp_raised;
        if (r->o.m->done) r->o.m->done(r->state);
        PQ_TRY(s);
        pq_journal_test_kill("PQ_TEST_KILL_AFTER_BLOCK", layer + 1);
        PQ_TRY(pq_ckpt_sync(r->ck));
        r->blocks_done = layer + 1;
        PQ_TRY(write_journal(r));
        pq_journal_test_kill("PQ_TEST_KILL_AFTER_JOURNAL", layer + 1);
    }
    pq_ckpt_block_errors(r->ck, layer, &rel, &out);
    layer_event(r, layer, rel, out, resumed);
    return PQ_OK;
}

// pq calibrate: the block's scales into the file.
static pq_status scales_block_done(void *ud, int layer, int resumed) {
    run *r = ud;
    pq_block_out b = {0};
    PQ_TRY(r->o.m->result(r->state, layer, &b));
    pq_status s = pq_scales_writer_put(r->sw, layer, b.scales);
    double blk = 0;
    for (int k = 0; k < PQ_NLINEAR; k++) {
        double v = json_real_value(json_object_get(b.entry[k], PQ_JSON_OUT_ERR));
        r->out_sum += v, r->n_out++;
        blk += v / PQ_NLINEAR;
        r->cres->max_out_err = v > r->cres->max_out_err ? v : r->cres->max_out_err;
    }
    if (r->o.m->done) r->o.m->done(r->state);
    PQ_TRY(s);
    r->cres->blocks = layer + 1;
    layer_event(r, layer, -1, blk, 0);
    return PQ_OK;
}

// Every block through the driver, with the memory estimate before and the peak after.
static pq_status drive(run *r, pq_status (*block_done)(void *, int, int)) {
    pq_calib_method meth = {.stats = r->hooks.stats, .work_bytes = r->hooks.work_bytes,
                            .gpu_work_bytes = r->hooks.gpu_work_bytes,
                            .quantize_group = r->hooks.quantize_group ? quantize_group : NULL,
                            .quantize_block = r->hooks.quantize_block ? quantize_block : NULL,
                            .sample = r->hooks.sample ? sample : NULL,
                            .sample_output = r->hooks.sample_output ? sample_output : NULL,
                            .load_block = load_block, .block_done = block_done, .ud = r};
    pq_calib_run_params rp = {.true_sequential = r->q->gptq.true_sequential, .pool = r->pool, .device = r->q->device,
                              .first_block = r->blocks_done, .bf16 = r->o.bf16};
    pq_calib_estimate(r->m, &r->calib, &meth, &rp, &r->mem);
    const pq_calib_report *m = &r->mem;
    note(r, "memory estimate %.1f MiB: %.1f resident now + %.1f mapped weights + %.1f activations (%d x %d x %d f32) "
            "+ %.1f block scratch + %.1f statistics + %.1f %s",
         m->total / 1048576.0, m->base_rss / 1048576.0, m->model_bytes / 1048576.0, m->act_bytes / 1048576.0,
         r->calib.n, r->calib.len, r->m->cfg.hidden, m->scratch_bytes / 1048576.0, m->stats_bytes / 1048576.0,
         m->method_bytes / 1048576.0, r->o.m->work);
    double t0 = pq_now();
    pq_status s = pq_calib_run(r->m, &r->calib, &meth, &rp, &r->mem);
    r->t_quant = pq_now() - t0;
    PQ_TRY(s);
    if (m->on_gpu)
        note(r, "peak memory %.1f MiB (estimate %.1f MiB, ratio %.2f); GPU memory in use at most %.1f MiB, "
                "estimate %.1f MiB%s",
             m->peak_rss / 1048576.0, m->total / 1048576.0, (double)m->peak_rss / (double)m->total,
             m->peak_gpu_bytes / 1048576.0, m->gpu_bytes / 1048576.0,
             m->cpu_passes ? " (some block passes ran on the CPU: the CUDA backend refused their linears)" : "");
    else
        note(r, "peak memory %.1f MiB (estimate %.1f MiB, ratio %.2f)", m->peak_rss / 1048576.0,
             m->total / 1048576.0, (double)m->peak_rss / (double)m->total);
    return PQ_OK;
}

// ---- pq quantize ------------------------------------------------------------------

// The journal's key: every parameter and input the output depends on.
static pq_status journal_key(run *r) {
    const pq_quantize_request *q = r->q;
    char desc[64], line[8192];
    const char *files[1 + PQ_CKPT_NSIDE_FILES];
    pq_scheme_describe(&r->o.scheme, desc, sizeof desc);
    pq_device dev;
    PQ_TRY(pq_device_resolve(q->device, &dev));
    const pq_gptq_args *g = &q->gptq;
    const pq_smooth_params *sp = &q->smooth;
    snprintf(line, sizeof line,
             "pq %s|source %s %s|method %s %s|scheme %s actorder %d|head %d|calib %s %d x %d %s seed %llu|"
             "gptq damp %.17g block %d act %d static %d sequential %d|smooth alpha %.17g grid %d clip %d tokens %d|"
             "device %s%s",
             PQ_VERSION, q->model, r->sha, r->o.name, r->o.m->name, desc, (int)r->o.scheme.actorder,
             q->quantize_head, r->calib.sha256, r->calib.n, r->calib.len, pq_calib_mode_name(q->calib.mode),
             (unsigned long long)q->calib.seed, g->damp, g->block_size, g->act_order, g->static_groups,
             g->true_sequential, sp->alpha, sp->grid, sp->clip_grid, sp->search_tokens,
             (r->hooks.stats & PQ_STAT_XTX) && !r->hooks.quantize_block ? pq_device_name(dev) : "cpu",
             r->o.bf16 ? "|calib bf16 products" : "");
    if (pq_request_rotates(q)) {
        size_t n = strlen(line);
        snprintf(line + n, sizeof line - n, "|rotate hadamard seed %llu", (unsigned long long)q->rotate_seed);
    }
    if (mixed(r)) {
        size_t n = strlen(line);
        snprintf(line + n, sizeof line - n, "|mixed %.17g menu %s kl %d all %d", q->target_bpw,
                 q->menu ? q->menu : PQ_MIX_DEFAULT_MENU, q->kl_windows, q->measure_all);
    }
    for (int i = 0; i <= PQ_CKPT_NSIDE_FILES; i++) { // config.json and the side files
        PQ_TRY(pq_path_join(r->input_paths[i], PATH_CAP, q->model, i ? PQ_CKPT_SIDE_FILES[i - 1] : "config.json"));
        files[i] = r->input_paths[i];
    }
    return pq_journal_key(line, files, 1 + PQ_CKPT_NSIDE_FILES, r->key);
}

// From here on an error or a signal leaves the temporary directory for
// --resume (the signal says so).
static void keep_dir(run *r) {
    char line[PATH_CAP + 200];
    r->keep = 1;
    snprintf(line, sizeof line, "pq quantize: interrupted; the finished blocks are kept in %s (the same command with "
             "--resume continues)", r->dir.tmp);
    pq_outdir_keep(&r->dir, line);
}

// Everything the run reads, into r->spec: the model directory, config.json,
// the side files, the weight files, the calibration text, the scales file.
static pq_status collect_inputs(run *r) {
    const pq_quantize_request *q = r->q;
    const pq_st *st = disk_model(r)->st;
    int nf = pq_st_file_count(st), n = 0, k = 0;
    r->inputs = malloc((size_t)(4 + PQ_CKPT_NSIDE_FILES + nf) * sizeof *r->inputs);
    PQ_FAIL_IF(!r->inputs, PQ_ERR_NOMEM, "out of memory");
    r->inputs[n++] = q->model;
    PQ_TRY(pq_path_join(r->input_paths[k], PATH_CAP, q->model, "config.json"));
    r->inputs[n++] = r->input_paths[k++];
    for (int i = 0; i < PQ_CKPT_NSIDE_FILES; i++) {
        PQ_TRY(pq_path_join(r->input_paths[k], PATH_CAP, q->model, PQ_CKPT_SIDE_FILES[i]));
        r->inputs[n++] = r->input_paths[k++];
    }
    for (int f = 0; f < nf; f++) r->inputs[n++] = pq_st_file_path(st, f);
    if (r->o.calibrated) r->inputs[n++] = q->calib.path;
    if (q->scales) r->inputs[n++] = q->scales;
    r->spec.inputs = r->inputs;
    r->spec.n_inputs = n;
    return PQ_OK;
}

// Notes the temporary directories of killed runs that opening OUT removed.
static void note_removed(run *r) {
    if (r->dir.removed)
        note(r, "removed %d temporary director%s of killed runs of %s (%s%s)", r->dir.removed,
             r->dir.removed > 1 ? "ies" : "y", r->q->out, r->dir.removed_first, r->dir.removed > 1 ? ", ..." : "");
}

// OUT's temporary directory: a new one, or for a calibrated run with resume
// the interrupted run's (its journal read back); locked either way.
static pq_status open_outdir(run *r) {
    const pq_quantize_request *q = r->q;
    r->spec = (pq_outdir_spec){.final = q->out, .file = pq_scheme_ggml_type(&r->o.scheme) >= 0, .force = q->force,
                               .resume_marker = r->o.calibrated ? PQ_JOURNAL_NAME : NULL};
    PQ_TRY(collect_inputs(r));
    if (!r->o.calibrated) {
        PQ_TRY(pq_outdir_begin(&r->dir, &r->spec));
        note_removed(r);
        return PQ_OK;
    }
    char tmp[PATH_CAP];
    int found;
    PQ_TRY(pq_outdir_find_leftover(&r->dir, &r->spec, tmp, sizeof tmp, &found));
    note_removed(r);
    if (found && !q->resume) {
        PQ_FAIL_IF(!q->force, PQ_ERR_ARG,
                   "%s: an interrupted run left %s; pass --resume to continue it or --force to start over", q->out,
                   tmp);
        PQ_TRY(pq_outdir_adopt(&r->dir, &r->spec, tmp)); // not removed while another process holds it
        note(r, "removing the interrupted run's %s (--force)", tmp);
        pq_outdir_abort(&r->dir);
        found = 0;
    }
    if (!found) {
        if (q->resume) note(r, "--resume: no interrupted run of %s to continue; starting", q->out);
        return pq_outdir_begin(&r->dir, &r->spec);
    }
    PQ_TRY(pq_outdir_adopt(&r->dir, &r->spec, tmp));
    r->adopted = 1;
    keep_dir(r); // whatever fails from here on, the interrupted run stays
    return PQ_OK;
}

// An adopted directory's journal: read, and refused unless it was made from
// the same inputs and flags (the key).
static pq_status read_leftover(run *r) {
    const pq_quantize_request *q = r->q;
    char path[PATH_CAP];
    PQ_TRY(pq_outdir_path(&r->dir, PQ_JOURNAL_NAME, path, sizeof path));
    PQ_TRY(pq_journal_read(path, r->m->cfg.n_layers, &r->leftover));
    PQ_FAIL_IF(strcmp(r->leftover.key, r->key) != 0, PQ_ERR_ARG,
               "%s: the interrupted run in %s used other inputs or flags (the model's weights, config.json or "
               "tokenizer, the calibration text, the scheme, the method's settings or the device); rerun with the "
               "same ones, or with --force (without --resume) to start over", q->out, r->dir.tmp);
    r->blocks_done = r->resumed_blocks = r->leftover.blocks_done;
    r->damp_raised = r->leftover.damp_raised;
    note(r, "resuming %s: %d of %d blocks done", r->dir.tmp, r->blocks_done, r->m->cfg.n_layers);
    return PQ_OK;
}

// The checkpoint in the temporary directory; a resumed run's finished blocks recorded.
static pq_status begin_checkpoint(run *r) {
    pq_ckpt_params p = {.q = r->q, .m = r->m, .disk = disk_model(r), .scheme = &r->o.scheme,
                        .mix = mixed(r) ? &r->plan : NULL, .method = r->o.name, .folds = r->o.m->folds,
                        .source_sha256 = r->sha, .calib = r->o.calibrated ? &r->calib : NULL, .scales = r->scales,
                        .bf16 = r->o.bf16};
    PQ_TRY(pq_ckpt_begin(&p, r->dir.tmp, r->adopted, &r->ck));
    for (int l = 0; l < r->blocks_done; l++) {
        json_t *e[PQ_NLINEAR];
        for (int k = 0; k < PQ_NLINEAR; k++) e[k] = json_array_get(r->leftover.layers, (size_t)l * PQ_NLINEAR + k);
        PQ_TRY(pq_ckpt_record_block(r->ck, l, e));
    }
    if (!r->o.calibrated) return PQ_OK;
    PQ_TRY(pq_ckpt_sync(r->ck));
    PQ_TRY(write_journal(r));
    keep_dir(r);
    r->started = 1;
    return PQ_OK;
}

// Every block through the method on its own (rtn, --scales).
static pq_status uncalibrated_blocks(run *r) {
    for (int l = 0; l < r->m->cfg.n_layers; l++) {
        pq_block_out b = {0};
        double t0 = pq_now(), rel, out;
        pq_status s = r->o.m->block(r->state, l, &b);
        r->t_quant += pq_now() - t0;
        if (s == PQ_OK) s = pq_ckpt_put_block(r->ck, l, &b);
        if (r->o.m->done) r->o.m->done(r->state);
        PQ_TRY(s);
        pq_ckpt_block_errors(r->ck, l, &rel, &out);
        layer_event(r, l, rel, out, 0);
    }
    return PQ_OK;
}

// lm_head: RTN for every method (its input statistics are not gathered).
static pq_status quantize_head(run *r) {
    const pq_linear *L = &r->m->lm_head;
    PQ_FAIL_IF(L->fmt != PQ_W_DENSE, PQ_ERR_FORMAT, "%s: lm_head is not a dense weight", r->q->model);
    double t0 = pq_now(), rel;
    char name[1400];
    snprintf(name, sizeof name, "%.1000s/lm_head.weight", r->q->model);
    float *w = pq_alloc((size_t)L->rows * L->cols * sizeof(float));
    PQ_FAIL_IF(!w, PQ_ERR_NOMEM, "out of memory for the %d x %d lm_head", L->rows, L->cols);
    pq_linear_rows(L, 0, L->rows, w);
    pq_qtensor q;
    pq_status s = pq_qtensor_init(&q, &r->o.scheme, L->rows, L->cols, pq_linear_dtype(L));
    if (s == PQ_OK) s = pq_rtn_quantize(w, &r->o.scheme, name, r->pool, &q, &rel);
    pq_free(w);
    r->t_quant += pq_now() - t0;
    json_t *e = s == PQ_OK ? json_pack("{s:s, s:f}", "name", "lm_head", PQ_JSON_REL_ERR, rel) : NULL;
    if (s == PQ_OK) s = e ? pq_ckpt_put_linear(r->ck, "lm_head", L, &q, e) : PQ_FAIL(PQ_ERR_NOMEM, "out of memory");
    json_decref(e);
    pq_qtensor_free(&q);
    return s;
}

// pq.json's "calibration" object (a new reference).
static json_t *calibration_json(const run *r) {
    const pq_quantize_request *q = r->q;
    json_t *c = json_pack("{s:s, s:s, s:I, s:i, s:i, s:I, s:s}", "file", q->calib.path, "sha256", r->calib.sha256,
                          "text_tokens", (json_int_t)r->calib.stream_tokens, "nsamples", r->calib.n, "seqlen",
                          r->calib.len, "seed", (json_int_t)q->calib.seed, "mode", pq_calib_mode_name(q->calib.mode));
    if (c && r->o.bf16 && json_object_set_new(c, "precision", json_string("bf16")))
        json_decref(c), c = NULL;
    return c;
}

// pq.json's members of a calibrated run: the calibration, the method's
// object and the output error (a new object).
static json_t *calibrated_provenance(run *r, const pq_quantize_result *res) {
    pq_method_summary sum = {.report = &r->mem, .damp_raised = r->damp_raised};
    return json_pack("{s:o, s:o, s:{s:f, s:f}}", "calibration", calibration_json(r), r->o.name,
                     r->o.m->provenance(r->state, &sum), PQ_JSON_OUT_ERR, "mean", res->mean_out_err, "max",
                     res->max_out_err);
}

// pq-run.json: what differs from run to run of the same inputs (seconds,
// threads; a calibrated run's memory estimate and measurements) (a new object).
static json_t *run_record(run *r, const pq_quantize_result *res) {
    const pq_calib_report *m = &r->mem;
    json_t *o = json_pack("{s:{s:f, s:f, s:f}, s:i}", "seconds", "hash", r->t_hash, "quantize", r->t_quant, "total",
                          res->seconds, "threads", pq_pool_size(r->pool));
    if (o && r->o.calibrated &&
        json_object_set_new(
            o, "memory",
            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f}", "estimate_bytes",
                      (json_int_t)m->total, "peak_rss_bytes", (json_int_t)m->peak_rss, "peak_gpu_bytes",
                      (json_int_t)m->peak_gpu_bytes, "gpu_estimate_bytes", (json_int_t)m->gpu_bytes, "base_rss_bytes", (json_int_t)m->base_rss, "model_bytes",
                      (json_int_t)m->model_bytes, "activation_bytes", (json_int_t)m->act_bytes, "scratch_bytes",
                      (json_int_t)m->scratch_bytes, "statistics_bytes", (json_int_t)m->stats_bytes, "method_bytes",
                      (json_int_t)m->method_bytes, "seconds_embed", m->t_embed, "seconds_forward", m->t_forward,
                      "seconds_statistics", m->t_stats, "seconds_method", m->t_method)) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

// Before OUT is committed: the journal leaves the directory, which is then
// no longer resumable (a failed commit removes it).
static pq_status finish_journal(run *r) {
    char path[PATH_CAP];
    PQ_TRY(pq_outdir_path(&r->dir, PQ_JOURNAL_NAME, path, sizeof path));
    PQ_FAIL_IF(unlink(path) != 0, PQ_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    r->keep = 0;
    pq_outdir_keep(&r->dir, NULL);
    return PQ_OK;
}

static pq_status finish_quantize(run *r, pq_quantize_result *out, double t0) {
    PQ_TRY(pq_ckpt_commit(r->ck, out));
    if (r->o.calibrated) {
        out->calibrated = 1;
        out->calib_windows = r->calib.n;
        out->calib_len = r->calib.len;
        out->resumed_blocks = r->resumed_blocks;
        out->n_damp_raised = r->damp_raised;
        out->mem_estimate = r->mem.total;
        out->peak_rss = r->mem.peak_rss;
    } else {
        out->mean_out_err = out->max_out_err = 0;
    }
    out->seconds = pq_now() - t0;
    json_t *record = run_record(r, out), *extra = r->o.calibrated ? calibrated_provenance(r, out)
                                                 : mixed(r)       ? json_pack("{s:o}", "calibration", calibration_json(r))
                                                                  : json_object();
    if (extra && r->src &&
        json_object_set_new(extra, "rotation",
                            json_pack("{s:s, s:I, s:s, s:s, s:b, s:b, s:b}", "kind", "hadamard", "seed",
                                      (json_int_t)r->q->rotate_seed, "hidden", r->rot.hidden, "head", r->rot.head,
                                      "hadamard", r->rot.hadamard, "norms_folded", 1, "untied_lm_head",
                                      r->rot.untied)) != 0) {
        json_decref(extra);
        extra = NULL;
    }
    if (extra && mixed(r)) {
        json_t *mj = pq_mix_json(&r->mix, r->choice, r->q->target_bpw, r->plan_bpw, r->plan_loss);
        if (!mj || json_object_set_new(mj, "measured", points_json(r)) != 0 ||
            json_object_set_new(extra, "mixed", mj) != 0) {
            json_decref(extra);
            extra = NULL;
        }
    }
    if (!record || !extra) {
        json_decref(record);
        json_decref(extra);
        return PQ_FAIL(PQ_ERR_NOMEM, "out of memory for pq.json");
    }
    PQ_TRY(pq_ckpt_provenance(r->ck, out, record, extra));
    if (r->q->report) PQ_TRY(write_report(r, out));
    if (r->o.calibrated) PQ_TRY(finish_journal(r));
    return pq_outdir_commit(&r->dir);
}

// On an error s of a run whose temporary directory holds a journal: keeps
// the directory (and the checkpoint's temporary file) for --resume and says
// so. Returns s.
static pq_status keep_for_resume(run *r, pq_status s) {
    if (!r->keep || !r->dir.tmp[0]) return s;
    if (r->started) pq_fail_context(s, "%s: %d of %d blocks done are kept in %s (fix the cause, then --resume)",
                                    r->q->out, r->blocks_done, r->m->cfg.n_layers, r->dir.tmp);
    return s;
}

static void free_run(run *r) {
    hash_join(r); // the thread reads the source: it ends before the model is freed (a run's own error stands)
    pq_mix_plan_free(&r->plan);
    pq_mix_table_free(&r->mix);
    free(r->choice);
    if (r->o.m && r->state) r->o.m->free(r->state);
    pq_ckpt_loaded_free(&r->loaded);
    pq_ckpt_free(r->ck, r->keep);
    pq_outdir_abort(&r->dir);
    free(r->inputs);
    pq_journal_free(&r->leftover);
    pq_scales_writer_free(r->sw);
    pq_calib_data_free(&r->calib);
    pq_scales_close(r->scales);
    pq_pool_free(r->pool);
    pq_model_free(r->m); // the rotation first: it points into the source
    pq_model_free(r->src);
}

pq_status pq_quantize(const pq_quantize_request *q, pq_quantize_progress progress, void *ud,
                      pq_quantize_result *out) {
    memset(out, 0, sizeof *out);
    double t0 = pq_now();
    run r = {.q = q, .progress = progress, .ud = ud, .dir = {.lock_fd = -1, .cleanup = -1}};
    pq_status s;
    PQ_TRY(pq_request_resolve(q, 0, &r.o));
    PQ_TRY_GOTO(s, open_source(&r));
    if (q->scales) {
        PQ_TRY_GOTO(s, pq_scales_open(q->scales, &r.scales));
        PQ_TRY_GOTO(s, source_hash(&r));
        PQ_TRY_GOTO(s, pq_scales_check(r.scales, r.m, r.sha, &r.o.scheme));
    }
    PQ_TRY_GOTO(s, open_outdir(&r));
    if (r.o.calibrated || mixed(&r)) PQ_TRY_GOTO(s, load_calibration(&r));
    if (mixed(&r)) PQ_TRY_GOTO(s, plan_mixed(&r));
    PQ_TRY_GOTO(s, create_method(&r));
    PQ_TRY_GOTO(s, source_hash(&r));
    if (r.o.calibrated) PQ_TRY_GOTO(s, journal_key(&r));
    if (r.adopted) PQ_TRY_GOTO(s, read_leftover(&r));
    PQ_TRY_GOTO(s, begin_checkpoint(&r));
    PQ_TRY_GOTO(s, r.o.calibrated ? drive(&r, checkpoint_block_done) : uncalibrated_blocks(&r));
    if (q->quantize_head) PQ_TRY_GOTO(s, quantize_head(&r));
    PQ_TRY_GOTO(s, finish_quantize(&r, out, t0));
done:
    if (s != PQ_OK) s = keep_for_resume(&r, s);
    free_run(&r);
    if (s != PQ_OK) memset(out, 0, sizeof *out);
    return s;
}

// ---- pq calibrate -------------------------------------------------------------------

static pq_status calibrate(run *r, pq_calibrate_result *res) {
    const pq_quantize_request *q = r->q;
    char path[PATH_CAP];
    PQ_TRY(open_source(r));
    r->spec = (pq_outdir_spec){.final = q->out, .file = 1, .force = q->force};
    PQ_TRY(collect_inputs(r));
    PQ_TRY(pq_outdir_begin(&r->dir, &r->spec));
    note_removed(r);
    PQ_TRY(pq_outdir_file(&r->dir, path, sizeof path));
    PQ_TRY(load_calibration(r));
    PQ_TRY(source_hash(r));
    snprintf(res->source_sha256, sizeof res->source_sha256, "%s", r->sha);
    snprintf(res->calib_sha256, sizeof res->calib_sha256, "%s", r->calib.sha256);
    res->calib_windows = r->calib.n, res->calib_len = r->calib.len;
    PQ_TRY(create_method(r));
    char params[200], calib[96];
    r->o.m->describe(r->o.m, q, params, sizeof params);
    pq_calib_describe(r->calib.n, r->calib.len, q->calib.seed, q->calib.mode, r->o.bf16, calib, sizeof calib);
    pq_scales_meta meta = {r->o.name, res->scheme, params[0] ? params + 2 : "", q->model, r->sha, r->calib.sha256,
                           calib, r->calib.n, r->calib.len, (unsigned long long)q->calib.seed};
    PQ_TRY(pq_scales_writer_create(path, r->m, (pq_smooth_kind)r->o.m->kind, &q->smooth, &r->o.scheme, &meta,
                                   &r->sw));
    PQ_TRY(drive(r, scales_block_done));
    res->mem_estimate = r->mem.total, res->peak_rss = r->mem.peak_rss;
    PQ_TRY(pq_scales_writer_commit(r->sw));
    return pq_outdir_commit(&r->dir);
}

pq_status pq_calibrate(const pq_quantize_request *q, pq_quantize_progress progress, void *ud,
                       pq_calibrate_result *out) {
    memset(out, 0, sizeof *out);
    double t0 = pq_now();
    run r = {.q = q, .progress = progress, .ud = ud, .dir = {.lock_fd = -1, .cleanup = -1}, .cres = out};
    PQ_TRY(pq_request_resolve(q, 1, &r.o));
    snprintf(out->method, sizeof out->method, "%s", r.o.name);
    pq_scheme_describe(&r.o.scheme, out->scheme, sizeof out->scheme);
    pq_status s = calibrate(&r, out);
    free_run(&r);
    if (s != PQ_OK) {
        memset(out, 0, sizeof *out);
        return s;
    }
    struct stat sb;
    out->bytes = stat(q->out, &sb) == 0 ? (unsigned long long)sb.st_size : 0;
    out->mean_out_err = r.n_out ? r.out_sum / r.n_out : 0;
    out->seconds = pq_now() - t0;
    return PQ_OK;
}
