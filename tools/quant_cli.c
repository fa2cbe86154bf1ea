// tools/quant_cli.c — the flag rows of pq quantize and pq calibrate (see quant_cli.h).
#include "tools/quant_cli.h"

#include <limits.h>
#include <stdio.h>

#include "quant/gptq.h"
#include "quant/mixed.h"

enum { Q = 1 << QUANT_CLI_QUANTIZE, C = 1 << QUANT_CLI_CALIBRATE, QC = Q | C };

// One row: the commands that take it and the flag.
typedef struct {
    int cmds;
    cli_flag f;
} row;

void quant_cli_init(quant_cli *a, quant_cli_cmd cmd) {
    *a = (quant_cli){.cmd = cmd, .q = pq_quantize_default_request(), .group = "auto", .alpha = "0.5",
                     .device = PQ_DEVICE_AUTO};
    pq_quantize_request *q = &a->q;
    const row rows[] = {
        {Q, {.name = "-o", .kind = FLAG_STR, .dst = &q->out, .help = "output directory, or FILE.gguf for a gguf-* "
             "scheme (required; must not exist unless --force)", .metavar = "OUT"}},
        {C, {.name = "-o", .kind = FLAG_STR, .dst = &q->out, .help = "the scales file to write (required; must not "
             "exist unless --force)", .metavar = "SCALES"}},
        {QC, {.name = "--scheme", .kind = FLAG_STR, .dst = &q->scheme.name, .help = "w4a16 | w8a16 | w8a8 | fp8 "
             "(weight only) | fp8-dynamic | fp8-static | gguf-q4_0 | gguf-q4_1 | gguf-q8_0 | gguf-q4_k (a GGUF file "
             "llama.cpp runs) (none: w4a16; smoothquant: w8a8; fp8: fp8-static)",
             .metavar = "S"}},
        {Q, {.name = "--method", .kind = FLAG_STR, .dst = &q->method, .help = "rtn | gptq | awq | awq+gptq | "
             "smoothquant | fp8 (static activation scales, no smoothing) (none: rtn, or --scales')", .metavar = "M"}},
        {C, {.name = "--method", .kind = FLAG_STR, .dst = &q->method, .help = "awq | smoothquant | fp8 (static "
             "activation scales, no smoothing) (required)", .metavar = "M"}},
        {Q, {.name = "--scales", .kind = FLAG_STR, .dst = &q->scales, .help = "apply a pq calibrate result instead "
             "of calibrating", .metavar = "FILE"}},
        {QC, {.name = "--act-scale", .kind = FLAG_CHOICE, .dst = &a->act_scale, .help = "w8a8 activations: per "
             "token at run time, or one calibrated scale per tensor", .choices = "dynamic|static"}},
        {QC, {.name = "--group", .kind = FLAG_STR, .dst = &a->group, .help = "32 | 64 | 128 | channel | auto "
             "(w4a16: 128, others: channel)", .metavar = "G"}},
        {QC, {.name = "--sym", .kind = FLAG_BOOL, .dst = &q->scheme.sym, .help = "symmetric weights, no zero point "
             "(default for every scheme)", .value = 1}},
        {QC, {.name = "--asym", .kind = FLAG_BOOL, .dst = &q->scheme.sym, .help = "asymmetric weights with zero "
             "points (w4a16 only)"}},
        {QC, {.name = "--observer", .kind = FLAG_CHOICE, .dst = &q->scheme.observer, .help = "integer weight "
             "scales from each group's min/max, or the shrink of it with the least error (mse)",
             .choices = "minmax|mse"}},
        {QC, {.name = "--fp8-scale", .kind = FLAG_CHOICE, .dst = &a->fp8_scale, .help = "fp8 weight scales per "
             "output channel or per tensor", .choices = "channel|tensor"}},
        {Q, {.name = "--fallback", .kind = FLAG_BOOL, .dst = &q->scheme.gguf_fallback, .help = "gguf-* schemes: "
             "store linears whose rows are not whole blocks as llama-quantize does (Q4_K -> Q5_0, else F16) instead "
             "of refusing", .value = 1}},
        {Q, {.name = "--quantize-head", .kind = FLAG_BOOL, .dst = &q->quantize_head, .help = "quantize lm_head too "
             "(untied models; default: FP16)", .value = 1}},
        {Q, {.name = "--rotate", .kind = FLAG_CHOICE, .dst = &a->rotate, .help = "rotate the residual stream by a "
             "randomized Hadamard matrix first, folded into the weights (norms folded, a tied lm_head untied): the "
             "same function, fewer outliers; OUT stays an ordinary checkpoint", .choices = "none|hadamard"}},
        {Q, {.name = "--rotate-seed", .kind = FLAG_INT, .dst = &a->rotate_seed, .help = "--rotate: seed of the "
             "rotation's random signs", .metavar = "S", .min = 0, .max = INT_MAX}},
        {Q, {.name = "--target-bpw", .kind = FLAG_DOUBLE, .dst = &q->target_bpw, .help = "choose a scheme per group "
             "of linears (q/k/v, o, gate/up, down of each block) from --menu, least predicted KL at this average of "
             "bits per weight (rtn, gptq; needs --calib; 0 = off)", .metavar = "B", .min = 0, .max = 16}},
        {Q, {.name = "--menu", .kind = FLAG_STR, .dst = &q->menu, .help = "--target-bpw: the items, w<bits>[g<32|"
             "64|128>][a] or fp16 (default " PQ_MIX_DEFAULT_MENU ")", .metavar = "LIST"}},
        {Q, {.name = "--kl-windows", .kind = FLAG_INT, .dst = &q->kl_windows, .help = "--target-bpw: calibration "
             "windows the sensitivity's KL is measured on", .metavar = "N", .min = 1, .max = 1 << 20}},
        {Q, {.name = "--measure-all", .kind = FLAG_BOOL, .dst = &q->measure_all, .help = "--target-bpw: measure the "
             "KL of every group with every item (else: the cheapest item's, scaled by output error)", .value = 1}},
        {Q, {.name = "--report", .kind = FLAG_STR, .dst = &q->report, .help = "--target-bpw: also write an HTML "
             "report (.svg: the plots alone) of the sensitivity, the choice and PPL against bits per weight",
             .metavar = "FILE"}},
        {Q, {.name = "--zstd", .kind = FLAG_BOOL, .dst = &a->zstd, .help = "also write model.safetensors.zst (zstd "
             "level 9)", .value = 1}},
        {Q, {.name = "--force", .kind = FLAG_BOOL, .dst = &q->force, .help = "replace an existing OUT once the new "
             "one is complete", .value = 1}},
        {C, {.name = "--force", .kind = FLAG_BOOL, .dst = &q->force, .help = "replace an existing SCALES", .value = 1}},
        {QC, {.name = "--bits", .kind = FLAG_INT, .dst = &q->scheme.bits, .help = "weight bits 2..8 for w4a16 / "
             "w8a16 (0 = the scheme's)", .metavar = "N"}},
        {QC, {.name = "--calib", .kind = FLAG_STR, .dst = &q->calib.path, .help = "calibrated methods: calibration "
             "text file", .metavar = "FILE", .bit = PQ_ARG_CALIB}},
        {QC, {.name = "--nsamples", .kind = FLAG_INT, .dst = &q->calib.nsamples, .help = "calibrated methods: "
             "calibration windows", .metavar = "N", .bit = PQ_ARG_NSAMPLES, .min = 1, .max = 1 << 20}},
        {QC, {.name = "--seqlen", .kind = FLAG_INT, .dst = &q->calib.seqlen, .help = "calibrated methods: tokens "
             "per window (clamped to the model's context)", .metavar = "L", .bit = PQ_ARG_SEQLEN,
             .min = 2, .max = 1 << 24}},
        {QC, {.name = "--seed", .kind = FLAG_INT, .dst = &a->seed, .help = "calibrated methods: seed of the window "
             "choice", .metavar = "S", .bit = PQ_ARG_SEED, .min = 0, .max = INT_MAX}},
        {QC, {.name = "--calib-mode", .kind = FLAG_CHOICE, .dst = &a->mode, .help = "calibrated methods: windows at "
             "seeded random starts, or consecutive", .choices = "random|concat", .bit = PQ_ARG_CALIB_MODE}},
        {QC, {.name = "--calib-precision", .kind = FLAG_CHOICE, .dst = &a->precision, .help = "calibrated methods: "
              "the products of the CPU block passes: bf16 (inputs rounded to BF16, f32 sums) or f32; auto: bf16 "
              "where the CPU has AMX tiles (awq+gptq: f32), else f32 (the GPU's passes are 16-bit always)",
              .choices = "auto|f32|bf16",
              .bit = PQ_ARG_CALIB_PRECISION}},
        {QC, {.name = "--alpha", .kind = FLAG_STR, .dst = &a->alpha, .help = "smoothquant: migration strength in "
             "[0, 1], or auto (searched per group)", .metavar = "A", .bit = PQ_ARG_ALPHA}},
        {QC, {.name = "--awq-grid", .kind = FLAG_INT, .dst = &q->smooth.grid, .help = "awq, awq+gptq: alpha "
             "candidates i/N over [0, 1)", .metavar = "N", .bit = PQ_ARG_AWQ_GRID, .min = 1, .max = 1000}},
        {QC, {.name = "--awq-clip-grid", .kind = FLAG_INT, .dst = &q->smooth.clip_grid, .help = "awq, awq+gptq: "
             "clip candidates 1 - i/N down to 0.5 (0: no clipping)", .metavar = "N", .bit = PQ_ARG_AWQ_CLIP_GRID,
             .min = 0, .max = 1000}},
        {QC, {.name = "--search-tokens", .kind = FLAG_INT, .dst = &q->smooth.search_tokens, .help = "awq, "
             "awq+gptq, smoothquant: tokens of whole windows the searches measure their error on", .metavar = "N",
             .bit = PQ_ARG_SEARCH_TOKENS, .min = 1, .max = 1 << 30}},
        {Q, {.name = "--damp", .kind = FLAG_DOUBLE, .dst = &q->gptq.damp, .help = "gptq, awq+gptq: "
             "dampening, a fraction of the Hessian's mean diagonal", .metavar = "X", .bit = PQ_ARG_DAMP,
             .min = PQ_GPTQ_DAMP_MIN, .max = PQ_GPTQ_DAMP_MAX}},
        {Q, {.name = "--block-size", .kind = FLAG_INT, .dst = &q->gptq.block_size, .help = "gptq, awq+gptq: "
             "columns per lazy batch update", .metavar = "N", .bit = PQ_ARG_BLOCK_SIZE, .min = 1, .max = 65536}},
        {Q, {.name = "--act-order", .kind = FLAG_BOOL, .dst = &q->gptq.act_order, .help = "gptq, awq+gptq: "
             "columns in descending order of the Hessian diagonal (default)", .value = 1, .bit = PQ_ARG_ACT_ORDER}},
        {Q, {.name = "--no-act-order", .kind = FLAG_BOOL, .dst = &q->gptq.act_order, .help = "gptq, awq+gptq: "
             "columns in natural order", .value = 0, .bit = PQ_ARG_ACT_ORDER}},
        {Q, {.name = "--static-groups", .kind = FLAG_BOOL, .dst = &q->gptq.static_groups, .help = "gptq, awq+gptq: "
             "group scales from the unmodified weights, groups in natural order, no g_idx (default)", .value = 1,
             .bit = PQ_ARG_STATIC_GROUPS}},
        {Q, {.name = "--no-static-groups", .kind = FLAG_BOOL, .dst = &q->gptq.static_groups, .help = "gptq, awq+gptq: "
             "group scales on the fly; with act-order the groups follow the column order (weight_g_idx)", .value = 0,
             .bit = PQ_ARG_STATIC_GROUPS}},
        {Q, {.name = "--true-sequential", .kind = FLAG_BOOL, .dst = &q->gptq.true_sequential, .help = "gptq: q/k/v, "
             "o, gate/up, down in turn, each calibrated on the quantized earlier ones", .value = 1,
             .bit = PQ_ARG_TRUE_SEQUENTIAL}},
        {Q, {.name = "--imatrix", .kind = FLAG_BOOL, .dst = &q->gptq.imatrix, .help = "gptq, gguf-q4_k: choose "
             "each super-block's scales and mins weighted by diag(X^T X), as llama.cpp's importance matrix", .value = 1,
             .bit = PQ_ARG_IMATRIX}},
        {Q, {.name = "--resume", .kind = FLAG_BOOL, .dst = &q->resume, .help = "calibrated methods: continue an "
             "interrupted run into the same OUT", .value = 1, .bit = PQ_ARG_RESUME}},
        {QC, {.name = "--device", .kind = FLAG_CHOICE, .dst = &a->device, .help = "calibrated methods: where X^T X "
             "and the block passes run (gptq; the other methods search on the CPU); cuda without a GPU is an error",
             .choices = "auto|cpu|cuda", .bit = PQ_ARG_DEVICE}},
        {QC, {.name = "--threads", .kind = FLAG_INT, .dst = &q->nthreads, .help = "CPU threads (0 = all cores)",
             .metavar = "N", .min = 0, .max = PQ_MAX_THREADS}},
        {QC, {.name = "--json", .kind = FLAG_BOOL, .dst = &a->json, .help = "print the result as JSON", .value = 1}},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (!(rows[i].cmds & (1 << cmd))) continue;
        PQ_ASSERT(a->n_flags < QUANT_CLI_MAX_FLAGS);
        a->flags[a->n_flags++] = rows[i].f;
    }
}

// The model (argv's positional), the flags seen (their PQ_ARG_* bits) and
// the values into a->q; a bad --group or --alpha is a usage error (2).
static int request(quant_cli *a, const char *cmd, const char *model, unsigned seen) {
    pq_quantize_request *q = &a->q;
    q->model = model;
    q->given = seen;
    q->calib.seed = (uint64_t)a->seed;
    q->calib.mode = (pq_calib_mode)a->mode;
    q->calib.precision = (pq_calib_precision)a->precision;
    q->device = (pq_device)a->device;
    q->scheme.fp8_tensor = a->fp8_scale == 1;
    q->scheme.act_static = a->act_scale == 1;
    q->rotate = a->rotate ? "hadamard" : NULL;
    q->rotate_seed = (uint64_t)a->rotate_seed;
    q->zstd_level = a->zstd ? 9 : 0; // level 19 gains ~3% on packed weights at ~20x the time
    pq_status s = pq_quantize_parse_group(a->group, &q->scheme.group);
    if (s == PQ_OK) s = pq_quantize_parse_alpha(a->alpha, &q->smooth.alpha);
    if (s != PQ_OK) return cli_fail(cmd, s);
    return 0;
}

int quant_cli_start(quant_cli *a, int argc, char **argv, const char *usage, const char *help, cli_progress *bar) {
    const int calibrate = a->cmd == QUANT_CLI_CALIBRATE;
    const char *cmd = calibrate ? "calibrate" : "quantize";
    const char *pos[1];
    unsigned seen = 0;
    cli_command c = {cmd, usage, help, a->flags, a->n_flags, 1, pos, &seen};
    int rc = cli_parse(&c, argc, argv);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (!a->q.out || (calibrate && !a->q.method)) {
        fprintf(stderr, "pq %s: %s required (see pq %s --help)\n", cmd,
                calibrate ? "-o SCALES and --method are" : "-o OUT is", cmd);
        return 2;
    }
    if ((rc = request(a, cmd, pos[0], seen)) != 0) return rc;
    char line[1024];
    pq_status s = pq_quantize_describe(&a->q, calibrate, line, sizeof line);
    if (s != PQ_OK) return cli_fail(cmd, s);
    fprintf(stderr, "pq %s: %s\n", cmd, line);
    cli_progress_init(bar, calibrate ? "pq calibrate:" : "pq quantize:");
    return -1;
}

void quant_cli_progress(void *ud, const pq_quantize_event *e) {
    cli_progress *bar = ud;
    if (e->kind == PQ_QUANTIZE_NOTE) {
        if (bar->tty) fputc('\n', stderr);
        fprintf(stderr, "%s %s\n", bar->label, e->note);
        return;
    }
    char extra[128];
    int n = 0;
    if (e->layer_rel_err >= 0) n = snprintf(extra, sizeof extra, "rel sq err %.3e", e->layer_rel_err);
    if (e->layer_out_err >= 0)
        snprintf(extra + n, sizeof extra - n, "%soutput rel sq err %.3e%s", n ? ", " : "", e->layer_out_err,
                 e->resumed ? " (resumed)" : "");
    if (bar->tty) cli_progress_update(bar, e->done, e->total, extra);
    else fprintf(stderr, "%s layer %d/%d %s\n", bar->label, e->done, e->total, extra); // one line per layer
}
