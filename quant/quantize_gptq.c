// quant/quantize_gptq.c — the calibrated path of `pq quantize` (GPTQ): the
// calibration windows, GPTQ plugged into the calibration driver
// (calib/driver.h), and the journal that makes a run resumable (shared with
// the smoothing methods, quant/quantize_smooth.c).
//
// Resume strategy: the journal (pq-journal.json in OUT's temporary
// directory, replaced atomically) records the number of finished blocks,
// the pq.json entries of their linears and a SHA-256 of every input and flag
// the output depends on. It is written after a block's tensors are in the
// temporary model.safetensors.tmp and fsync'd, so a block the journal counts
// is on disk; a block cut short is simply redone (its tensors rewritten). To
// rebuild the input of the first unfinished block, the finished blocks are
// re-run from their quantized weights read back from the .tmp file: that
// costs one forward pass per finished block and nothing on an uninterrupted
// run, where storing the activations instead (N x L x hidden f32 per block,
// 2 GiB for TinyLlama at 128 x 2048) would cost a large write per block. The
// quantized weights read back are the same values the uninterrupted run
// computed with (scales are exact in their stored dtype), so the re-run
// reproduces its activations bit for bit and the resumed output is
// byte-identical.
//
// A test hook, for tests/cli/test_cli_gptq.sh only: PQ_TEST_KILL_AFTER_BLOCK=k
// sends the process SIGKILL once the k-th block's tensors are written but
// before they are fsync'd and journaled; PQ_TEST_KILL_AFTER_JOURNAL=k right
// after the k-th block is journaled.
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/sys.h"
#include "common/version.h"
#include "kernels/cuda_host.h"
#include "formats/fileio.h"
#include "formats/packed.h"
#include "formats/sha256.h"
#include "formats/tokenizer/tokenizer.h"
#include "quant/quantize_run.h"

#define JOURNAL "pq-journal.json"
#define LOCK "pq.lock"
#define PATH_CAP 4096

// ---- calibration data and the inputs hash ----------------------------------

// SHA-256 of one canonical line naming everything the output depends on.
static void inputs_hash(pq_quantize_run *r) {
    const pq_quantize_params *p = r->p;
    char desc[64], line[8192];
    pq_scheme_describe(&r->scheme, desc, sizeof desc);
    pq_device dev;
    int gpu = pq_device_resolve(p->device, &dev) == PQ_OK && dev == PQ_DEVICE_CUDA;
    const pq_smooth_params *sp = &r->sp;
    snprintf(line, sizeof line,
             "pq %s|source %s %s|method %s|scheme %s actorder %d|head %d|calib %s %d x %d %s seed %llu|damp %.17g "
             "block %d act %d static %d sequential %d|xtx %s|smooth %d alpha %.17g grid %d clip %d tokens %d",
             PQ_VERSION, p->model, r->sha, r->method, desc, (int)r->scheme.actorder, p->quantize_head,
             r->calib.sha256, r->calib.n, r->calib.len, pq_calib_mode_name(p->calib.mode),
             (unsigned long long)p->calib.seed, p->damp, p->block_size, p->act_order, p->static_groups,
             p->true_sequential, r->smooth ? "none" : gpu ? "cuda" : "cpu", (int)sp->kind, sp->alpha, sp->grid,
             sp->clip_grid, sp->search_tokens);
    pq_sha256 h;
    pq_sha256_init(&h);
    pq_sha256_update(&h, line, strlen(line));
    pq_sha256_hex(&h, r->inputs);
}

pq_status pq_qrun_calib_prepare(pq_quantize_run *r) {
    const pq_quantize_params *p = r->p;
    pq_device dev;
    PQ_TRY(pq_device_resolve(p->device, &dev));
    pq_tokenizer *tok;
    PQ_TRY(pq_tok_load(p->model, &tok));
    pq_status s = pq_calib_load(&p->calib, tok, r->m->cfg.max_pos, &r->calib);
    pq_tok_free(tok);
    PQ_TRY(s);
    if (r->calib.note[0]) pq_qrun_note(r, "calibration: %s", r->calib.note);
    r->gptq = (pq_gptq_params){.bits = r->scheme.bits, .group = r->scheme.group, .sym = r->scheme.sym,
                               .damp = p->damp, .block_size = p->block_size, .act_order = p->act_order,
                               .static_groups = p->static_groups};
    inputs_hash(r);
    return PQ_OK;
}

// ---- the journal ------------------------------------------------------------

static pq_status journal_path(const pq_quantize_run *r, char *path) {
    return pq_outdir_path(&r->dir, JOURNAL, path, PATH_CAP);
}

static pq_status journal_write(pq_quantize_run *r) {
    char path[PATH_CAP];
    PQ_TRY(journal_path(r, path));
    json_t *doc = json_pack("{s:i, s:s, s:i, s:i, s:O}", "pq_journal", 1, "inputs", r->inputs, "blocks_done",
                            r->blocks_done, "damp_raised", r->n_damp_raised, "layers", r->layers);
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    PQ_FAIL_IF(!text, PQ_ERR_NOMEM, "out of memory");
    pq_status s = pq_file_write_atomic(path, text, strlen(text));
    free(text);
    return s;
}

// Reads an adopted directory's journal: blocks done, the entries of their
// linears (added to the totals in order, as the interrupted run did).
static pq_status journal_read(pq_quantize_run *r) {
    char path[PATH_CAP], *text;
    size_t len;
    PQ_TRY(journal_path(r, path));
    PQ_TRY(pq_file_read(path, (size_t)256 << 20, &text, &len));
    json_error_t err;
    json_t *doc = json_loadb(text, len, 0, &err);
    free(text);
    pq_status s = PQ_OK;
    json_t *inputs = json_object_get(doc, "inputs"), *done = json_object_get(doc, "blocks_done");
    json_t *layers = json_object_get(doc, "layers"), *damp = json_object_get(doc, "damp_raised");
    int nl = r->m->cfg.n_layers;
    PQ_CHECK_GOTO(!json_is_string(inputs) || !json_is_integer(done) || !json_is_array(layers) ||
                      !json_is_integer(damp) || json_integer_value(done) < 0 || json_integer_value(done) > nl ||
                      json_array_size(layers) != (size_t)json_integer_value(done) * PQ_NLINEAR,
                  s, PQ_ERR_FORMAT, "%s: damaged journal; pass --force (without --resume) to start over", path);
    PQ_CHECK_GOTO(strcmp(json_string_value(inputs), r->inputs) != 0, s, PQ_ERR_ARG,
                  "%s: the interrupted run in %s used other inputs or flags (model, calibration text, scheme, "
                  "GPTQ settings or device); rerun with the same ones, or with --force (without --resume) to "
                  "start over", r->p->out, r->dir.tmp);
    r->blocks_done = (int)json_integer_value(done);
    r->n_damp_raised = (int)json_integer_value(damp);
    for (size_t i = 0; i < json_array_size(layers) && s == PQ_OK; i++) {
        json_t *e = json_array_get(layers, i);
        PQ_CHECK_GOTO(!json_is_real(json_object_get(e, "rel_error")), s, PQ_ERR_FORMAT, "%s: damaged journal entry %zu",
                      path, i);
        s = pq_qrun_record(r, &r->m->layers[i / PQ_NLINEAR].lin[i % PQ_NLINEAR], json_incref(e));
    }
done:
    json_decref(doc);
    return s;
}

// ---- OUT's temporary directory ----------------------------------------------

static pq_status lock_dir(pq_quantize_run *r) {
    char path[PATH_CAP];
    PQ_TRY(pq_outdir_path(&r->dir, LOCK, path, sizeof path));
    r->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    PQ_FAIL_IF(r->lock_fd < 0, PQ_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    PQ_FAIL_IF(flock(r->lock_fd, LOCK_EX | LOCK_NB) != 0, PQ_ERR_ARG,
               "%s: another pq quantize is writing it (%s is locked)", r->p->out, r->dir.tmp);
    return PQ_OK;
}

pq_status pq_qrun_calib_outdir(pq_quantize_run *r) {
    const pq_quantize_params *p = r->p;
    char tmp[PATH_CAP];
    int found;
    PQ_TRY(pq_outdir_find_leftover(p->out, JOURNAL, tmp, sizeof tmp, &found));
    if (found && !p->resume) {
        PQ_FAIL_IF(!p->force, PQ_ERR_ARG,
                   "%s: an interrupted run left %s; pass --resume to continue it or --force to start over", p->out,
                   tmp);
        PQ_TRY(pq_outdir_adopt(&r->dir, p->out, tmp, p->force));
        r->keep = 1; // not removed while another process holds it
        PQ_TRY(lock_dir(r));
        pq_qrun_note(r, "removing the interrupted run's %s (--force)", tmp);
        pq_outdir_abort(&r->dir);
        r->keep = 0;
        close(r->lock_fd);
        r->lock_fd = -1;
        found = 0;
    }
    if (!found) {
        if (p->resume) pq_qrun_note(r, "--resume: no interrupted run of %s to continue; starting", p->out);
        PQ_TRY(pq_outdir_begin(&r->dir, p->out, p->force));
        return lock_dir(r);
    }
    PQ_TRY(pq_outdir_adopt(&r->dir, p->out, tmp, p->force));
    r->adopted = r->keep = 1; // whatever fails from here on, the interrupted run stays
    PQ_TRY(lock_dir(r));
    PQ_TRY(journal_read(r));
    pq_qrun_note(r, "resuming %s: %d of %d blocks done", r->dir.tmp, r->blocks_done, r->m->cfg.n_layers);
    return PQ_OK;
}

pq_status pq_qrun_calib_started(pq_quantize_run *r) {
    PQ_TRY(pq_st_writer_sync(r->w));
    PQ_TRY(journal_write(r));
    r->keep = r->started = 1;
    return PQ_OK;
}

pq_status pq_qrun_calib_failed(pq_quantize_run *r, pq_status s) {
    if (!r->keep || !r->dir.tmp[0]) return s;
    pq_st_writer_keep_tmp(r->w);
    if (r->started) pq_fail_context(s, "%s: %d of %d blocks done are kept in %s (fix the cause, then --resume)",
                                    r->p->out, r->blocks_done, r->m->cfg.n_layers, r->dir.tmp);
    r->dir.tmp[0] = '\0'; // not removed by pq_outdir_abort
    return s;
}

pq_status pq_qrun_calib_finish(pq_quantize_run *r) {
    char path[PATH_CAP];
    PQ_TRY(journal_path(r, path));
    PQ_FAIL_IF(unlink(path) != 0, PQ_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    PQ_TRY(pq_outdir_path(&r->dir, LOCK, path, sizeof path));
    PQ_FAIL_IF(unlink(path) != 0, PQ_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    return PQ_OK;
}

void pq_qrun_calib_free(pq_quantize_run *r) {
    if (r->lock_fd >= 0) close(r->lock_fd);
    r->lock_fd = -1;
    pq_calib_data_free(&r->calib);
    pq_st_close(r->tmp_st);
    r->tmp_st = NULL;
}

json_t *pq_qrun_calib_provenance(const pq_quantize_run *r) {
    const pq_quantize_params *p = r->p;
    const pq_calib_report *m = &r->mem;
    if (r->smooth) // the method's own object instead of "gptq"
        return json_pack("{s:{s:s, s:s, s:I, s:i, s:i, s:I, s:s}, s:o, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
                         "s:f, s:f, s:f, s:f}}",
                         "calibration", "file", p->calib.path, "sha256", r->calib.sha256, "text_tokens",
                         (json_int_t)r->calib.stream_tokens, "nsamples", r->calib.n, "seqlen", r->calib.len, "seed",
                         (json_int_t)p->calib.seed, "mode", pq_calib_mode_name(p->calib.mode),
                         r->method, pq_qrun_smooth_provenance(r),
                         "memory", "estimate_bytes", (json_int_t)m->total, "peak_rss_bytes", (json_int_t)m->peak_rss,
                         "base_rss_bytes", (json_int_t)m->base_rss, "model_bytes", (json_int_t)m->model_bytes,
                         "activation_bytes", (json_int_t)m->act_bytes, "scratch_bytes", (json_int_t)m->scratch_bytes,
                         "statistics_bytes", (json_int_t)m->stats_bytes, "method_bytes", (json_int_t)m->method_bytes,
                         "seconds_embed", m->t_embed, "seconds_forward", m->t_forward, "seconds_statistics",
                         m->t_stats, "seconds_search", m->t_method);
    return json_pack("{s:{s:s, s:s, s:I, s:i, s:i, s:I, s:s}, s:{s:i, s:f, s:i, s:b, s:b, s:b, s:i, s:s, s:s, s:i}, "
                     "s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f}}",
                     "calibration", "file", p->calib.path, "sha256", r->calib.sha256, "text_tokens",
                     (json_int_t)r->calib.stream_tokens, "nsamples", r->calib.n, "seqlen", r->calib.len, "seed",
                     (json_int_t)p->calib.seed, "mode", pq_calib_mode_name(p->calib.mode),
                     "gptq", "bits", r->gptq.bits, "damp", r->gptq.damp, "block_size", r->gptq.block_size,
                     "act_order", r->gptq.act_order, "static_groups", r->gptq.static_groups, "true_sequential",
                     p->true_sequential, "damp_raised", r->n_damp_raised, "hessian_device", m->on_gpu ? "cuda" : "cpu",
                     "forward_device", m->on_gpu ? "cuda" : "cpu", "forward_cpu_fallbacks", m->cpu_passes,
                     "memory", "estimate_bytes", (json_int_t)m->total, "peak_rss_bytes", (json_int_t)m->peak_rss,
                     "peak_gpu_bytes", (json_int_t)m->peak_gpu_bytes,
                     "base_rss_bytes", (json_int_t)m->base_rss, "model_bytes", (json_int_t)m->model_bytes,
                     "activation_bytes", (json_int_t)m->act_bytes, "scratch_bytes", (json_int_t)m->scratch_bytes,
                     "statistics_bytes", (json_int_t)m->stats_bytes, "method_bytes", (json_int_t)m->method_bytes,
                     "seconds_embed", m->t_embed, "seconds_forward", m->t_forward, "seconds_statistics", m->t_stats,
                     "seconds_gptq", m->t_method);
}

// ---- GPTQ as a calibration method -----------------------------------------------

typedef struct {
    pq_quantize_run *r;
    pq_qtensor q[PQ_NLINEAR];          // the current block's quantized linears
    pq_packed_owned own[PQ_NLINEAR];   // a resumed block's linears read back
    float *row;                        // [widest] one dequantized row
    void *hws, *sws, *ews;             // Hessian, solve and output-error workspaces
    double blk_err, blk_out;           // sums over the current block
} gptq_method;

static void module_name(char *out, size_t cap, int layer, int slot) {
    snprintf(out, cap, "model.layers.%d.%s", layer, pq_linear_slot_name((pq_linear_slot)slot));
}

// ||W - W'||^2 / ||W||^2 (the figure RTN reports too).
static double weight_error(gptq_method *g, const float *w, const pq_linear *q) {
    double e2 = 0, n2 = 0;
    for (int r = 0; r < q->rows; r++) {
        pq_linear_rows(q, r, 1, g->row);
        for (int c = 0; c < q->cols; c++) {
            double x = w[(size_t)r * q->cols + c], d = x - g->row[c];
            e2 += d * d;
            n2 += x * x;
        }
    }
    return n2 > 0 ? e2 / n2 : 0;
}

// The widened source weight of a linear, checked for NaN / Inf.
static pq_status widen(pq_quantize_run *r, const char *module, const pq_linear *L) {
    PQ_FAIL_IF(L->fmt != PQ_W_DENSE, PQ_ERR_FORMAT, "%s: %s is not a dense weight", r->p->model, module);
    pq_linear_rows(L, 0, L->rows, r->buf);
    size_t n = (size_t)L->rows * L->cols;
    for (size_t i = 0; i < n; i++)
        PQ_FAIL_IF(!isfinite(r->buf[i]), PQ_ERR_NUMERIC, "%s/%s.weight: weight [%zu, %zu] is %s", r->p->model, module,
                   i / L->cols, i % L->cols, isnan(r->buf[i]) ? "NaN" : "Inf");
    return PQ_OK;
}

static pq_status quantize_linear(gptq_method *g, int layer, int slot, pq_layer *L, const pq_gptq_hessian *h,
                                 const pq_act_stats *st) {
    pq_quantize_run *r = g->r;
    const pq_linear *src = &L->lin[slot];
    char module[256];
    module_name(module, sizeof module, layer, slot);
    PQ_TRY(widen(r, module, src));
    pq_qtensor *q = &g->q[slot];
    PQ_TRY(pq_qtensor_init(q, &r->scheme, src->rows, src->cols, pq_qrun_scale_dtype(src)));
    if (pq_gptq_has_g_idx(&r->gptq, src->cols)) {
        q->g_idx = pq_alloc((size_t)src->cols * sizeof(int32_t));
        PQ_FAIL_IF(!q->g_idx, PQ_ERR_NOMEM, "%s: out of memory", module);
    }
    double loss;
    PQ_TRY(pq_gptq_solve(r->buf, src->rows, h, &r->gptq, module, g->sws, r->pool, q, &loss));
    pq_linear view = pq_qtensor_linear(q);
    view.bias = src->bias;
    double rel = weight_error(g, r->buf, &view), out = pq_act_stats_output_error(st, r->buf, &view, g->ews, r->pool);
    PQ_TRY(pq_packed_put(r->w, module, q));
    L->lin[slot] = view;
    g->blk_err += rel;
    g->blk_out += out;
    return pq_qrun_record(r, src, json_pack("{s:s, s:f, s:f, s:f, s:i}", "name", module, "rel_error", rel,
                                            "output_rel_error", out, "damp", h->damp, "dead_columns", h->n_dead));
}

static pq_status quantize_group(void *ud, int layer, int gi, pq_layer *L, const pq_act_stats *st) {
    gptq_method *g = ud;
    pq_quantize_run *r = g->r;
    const pq_input_group *grp = &PQ_INPUT_GROUPS[gi];
    char name[256];
    snprintf(name, sizeof name, "model.layers.%d %s input", layer, grp->name);
    pq_gptq_hessian h;
    PQ_TRY(pq_gptq_prepare(st->xtx, st->cols, &r->gptq, name, g->hws, r->pool, &h));
    if (h.retries) {
        r->n_damp_raised++;
        pq_qrun_note(r, "warning: %s: the Hessian is not positive definite with damp %g; raised to %g", name,
                     r->gptq.damp, h.damp);
    }
    for (int k = 0; k < grp->n; k++) PQ_TRY(quantize_linear(g, layer, grp->members[k], L, &h, st));
    return PQ_OK;
}

// The size of .tmp is its final size (unwritten tensors read as zeros), so
// that the reader validates it; then the finished blocks' tensors are read.
static pq_status open_tmp(pq_quantize_run *r) {
    const char *path = pq_st_writer_tmp_path(r->w);
    PQ_FAIL_IF(truncate(path, (off_t)pq_st_writer_total_bytes(r->w)) != 0, PQ_ERR_IO, "%s: cannot extend: %s", path,
               strerror(errno));
    r->tmp_info = (pq_packed_info){.quantized = 1, .scheme = r->scheme};
    snprintf(r->tmp_info.format, sizeof r->tmp_info.format, "%s", pq_scheme_format(&r->scheme));
    return pq_st_open(path, &r->tmp_st);
}

pq_status pq_qrun_tmp_load(pq_quantize_run *r, int layer, pq_layer *L, pq_packed_owned own[PQ_NLINEAR]) {
    if (!r->tmp_st) PQ_TRY(open_tmp(r));
    char module[256];
    for (int s = 0; s < PQ_NLINEAR; s++) {
        const float *bias = L->lin[s].bias;
        module_name(module, sizeof module, layer, s);
        PQ_TRY(pq_packed_load(r->tmp_st, &r->tmp_info, module, L->lin[s].rows, L->lin[s].cols, &L->lin[s], &own[s]));
        L->lin[s].bias = bias;
    }
    return PQ_OK;
}

static pq_status load_block(void *ud, int layer, pq_layer *L) {
    gptq_method *g = ud;
    return pq_qrun_tmp_load(g->r, layer, L, g->own);
}

static void test_kill(const char *var, int blocks) {
    const char *v = getenv(var);
    if (v && atoi(v) == blocks) raise(SIGKILL);
}

pq_status pq_qrun_block_journaled(pq_quantize_run *r, int layer) {
    test_kill("PQ_TEST_KILL_AFTER_BLOCK", layer + 1);
    PQ_TRY(pq_st_writer_sync(r->w));
    r->blocks_done = layer + 1;
    PQ_TRY(journal_write(r));
    test_kill("PQ_TEST_KILL_AFTER_JOURNAL", layer + 1);
    return PQ_OK;
}

static pq_status block_done(void *ud, int layer, int resumed) {
    gptq_method *g = ud;
    pq_quantize_run *r = g->r;
    pq_quantize_event e = {.kind = PQ_QUANTIZE_LAYER, .done = layer + 1, .total = r->m->cfg.n_layers,
                           .resumed = resumed};
    if (resumed) {
        for (int s = 0; s < PQ_NLINEAR; s++)
            for (int i = 0; i < PQ_PACKED_MAX_OWNED; i++) pq_free(g->own[s].p[i]), g->own[s].p[i] = NULL;
        for (int s = 0; s < PQ_NLINEAR; s++) {
            json_t *entry = json_array_get(r->layers, (size_t)layer * PQ_NLINEAR + s);
            g->blk_err += json_real_value(json_object_get(entry, "rel_error"));
            g->blk_out += json_real_value(json_object_get(entry, "output_rel_error"));
        }
    } else {
        for (int s = 0; s < PQ_NLINEAR; s++) pq_qtensor_free(&g->q[s]);
        PQ_TRY(pq_qrun_block_journaled(r, layer));
    }
    e.layer_rel_err = g->blk_err / PQ_NLINEAR;
    e.layer_out_err = g->blk_out / PQ_NLINEAR;
    g->blk_err = g->blk_out = 0;
    if (r->progress) r->progress(r->ud, &e);
    return PQ_OK;
}

// The method's memory: the Hessian and solve workspaces of the largest
// group and linear, the output-error workspace, one block's quantized
// tensors, the widened weight (r->buf, allocated by the stage).
static pq_status alloc_method(gptq_method *g, pq_calib_method *meth) {
    pq_quantize_run *r = g->r;
    const pq_config *c = &r->m->cfg;
    size_t hb = 0, sb = 0, eb = 0, qb = 0, wb = 0;
    int widest = 0, nt = pq_pool_size(r->pool);
    for (int gi = 0; gi < PQ_NGROUPS; gi++) {
        int cols = pq_input_group_cols(c, gi);
        hb = pq_gptq_hessian_bytes(cols) > hb ? pq_gptq_hessian_bytes(cols) : hb;
        widest = cols > widest ? cols : widest;
    }
    for (int s = 0; s < PQ_NLINEAR; s++) {
        const pq_linear *L = &r->m->layers[0].lin[s];
        size_t b = pq_gptq_solve_bytes(L->rows, L->cols, &r->gptq), e = pq_act_stats_error_bytes(L->rows, L->cols, nt);
        sb = b > sb ? b : sb;
        eb = e > eb ? e : eb;
        qb += (size_t)pq_scheme_matrix_bytes(&r->scheme, L->rows, L->cols, 4) + (size_t)L->cols * 4;
        wb = (size_t)L->rows * L->cols * 4 > wb ? (size_t)L->rows * L->cols * 4 : wb;
    }
    g->hws = pq_alloc(hb);
    g->sws = pq_alloc(sb);
    g->ews = pq_alloc(eb);
    g->row = pq_alloc((size_t)widest * sizeof(float));
    PQ_FAIL_IF(!g->hws || !g->sws || !g->ews || !g->row, PQ_ERR_NOMEM,
               "out of memory for the GPTQ workspaces (%.1f MiB)", (hb + sb + eb) / 1048576.0);
    *meth = (pq_calib_method){.stats = PQ_STAT_XTX, .work_bytes = hb + sb + eb + qb + wb,
                              .quantize_group = quantize_group, .load_block = load_block, .block_done = block_done,
                              .ud = g};
    return PQ_OK;
}

pq_status pq_qrun_calib_blocks(pq_quantize_run *r) {
    if (r->smooth) return pq_qrun_smooth_blocks(r);
    gptq_method g = {.r = r};
    pq_calib_method meth;
    pq_status s = alloc_method(&g, &meth);
    pq_calib_run_params rp = {.true_sequential = r->p->true_sequential, .pool = r->pool, .device = r->p->device,
                              .first_block = r->blocks_done};
    if (s == PQ_OK) {
        pq_calib_estimate(r->m, &r->calib, &meth, &rp, &r->mem);
        const pq_calib_report *m = &r->mem;
        pq_qrun_note(r, "memory estimate %.1f MiB: %.1f resident now + %.1f mapped weights + %.1f activations (%d x %d "
                        "x %d f32) + %.1f block scratch + %.1f statistics + %.1f GPTQ",
                     m->total / 1048576.0, m->base_rss / 1048576.0, m->model_bytes / 1048576.0,
                     m->act_bytes / 1048576.0, r->calib.n, r->calib.len, r->m->cfg.hidden,
                     m->scratch_bytes / 1048576.0, m->stats_bytes / 1048576.0, m->method_bytes / 1048576.0);
        double t0 = pq_now();
        s = pq_calib_run(r->m, &r->calib, &meth, &rp, &r->mem);
        r->t_quant = pq_now() - t0;
    }
    if (s == PQ_OK && r->mem.on_gpu)
        pq_qrun_note(r, "peak memory %.1f MiB (estimate %.1f MiB, ratio %.2f); GPU memory in use at most %.1f MiB%s",
                     r->mem.peak_rss / 1048576.0, r->mem.total / 1048576.0,
                     (double)r->mem.peak_rss / (double)r->mem.total, r->mem.peak_gpu_bytes / 1048576.0,
                     r->mem.cpu_passes ? " (some block passes ran on the CPU: the CUDA backend refused their linears)"
                                       : "");
    else if (s == PQ_OK)
        pq_qrun_note(r, "peak memory %.1f MiB (estimate %.1f MiB, ratio %.2f)", r->mem.peak_rss / 1048576.0,
                     r->mem.total / 1048576.0, (double)r->mem.peak_rss / (double)r->mem.total);
    for (int k = 0; k < PQ_NLINEAR; k++) {
        pq_qtensor_free(&g.q[k]);
        for (int i = 0; i < PQ_PACKED_MAX_OWNED; i++) pq_free(g.own[k].p[i]);
    }
    pq_free(g.hws);
    pq_free(g.sws);
    pq_free(g.ews);
    pq_free(g.row);
    return s;
}
