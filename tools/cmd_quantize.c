// pq quantize — quantize a model and write a compressed-tensors checkpoint.
#include <jansson.h>
#include <signal.h>
#include <stdio.h>

#include "quant/quantize.h"
#include "formats/scheme.h"
#include "tools/cli.h"
#include "tools/commands.h"

typedef struct {
    cli_progress bar;
} progress_state;

static void progress(void *ud, const pq_quantize_event *e) {
    progress_state *ps = ud;
    if (e->kind == PQ_QUANTIZE_NOTE) {
        if (ps->bar.tty) fputc('\n', stderr);
        fprintf(stderr, "pq quantize: %s\n", e->note);
        return;
    }
    char extra[96];
    int n = snprintf(extra, sizeof extra, "rel err %.3e", e->layer_rel_err);
    if (e->layer_out_err >= 0) snprintf(extra + n, sizeof extra - n, ", output err %.3e%s", e->layer_out_err,
                                        e->resumed ? " (resumed)" : "");
    if (ps->bar.tty) cli_progress_update(&ps->bar, e->done, e->total, extra);
    else fprintf(stderr, "pq quantize: layer %d/%d %s\n", e->done, e->total, extra); // one line per layer
}

int main_quantize(int argc, char **argv) {
    pq_quantize_params p = pq_quantize_default_params();
    const char *group = "auto", *alpha = "0.5", *pos[1];
    int fp8_scale = 0, zstd = 0, json = 0, seed = 0, mode = 0, device = PQ_DEVICE_AUTO, act_scale = 0;
    const cli_flag flags[] = {
        {"-o", FLAG_STR, &p.out, "output directory (required; must not exist unless --force)", NULL, 0, "OUT"},
        {"--scheme", FLAG_STR, &p.scheme,
         "w4a16 | w8a16 | w8a8 | fp8 (weight only) | fp8-dynamic | fp8-static (none: w4a16; smoothquant: w8a8; "
         "fp8: fp8-static)", NULL, 0, "S"},
        {"--method", FLAG_STR, &p.method,
         "rtn | gptq | awq | smoothquant | fp8 (static activation scales, no smoothing) (none: rtn, or --scales')",
         NULL, 0, "M"},
        {"--scales", FLAG_STR, &p.scales, "apply a pq calibrate result instead of calibrating", NULL, 0, "FILE"},
        {"--act-scale", FLAG_CHOICE, &act_scale, "w8a8 activations: per token at run time, or one calibrated scale "
         "per tensor", "dynamic|static", 0, NULL},
        {"--group", FLAG_STR, &group, "32 | 64 | 128 | channel | auto (w4a16: 128, others: channel)", NULL, 0, "G"},
        {"--sym", FLAG_BOOL, &p.sym, "symmetric weights, no zero point (default for every scheme)", NULL, 1, NULL},
        {"--asym", FLAG_BOOL, &p.sym, "asymmetric weights with zero points (w4a16 only)", NULL, 0, NULL},
        {"--fp8-scale", FLAG_CHOICE, &fp8_scale, "fp8 weight scales per output channel or per tensor",
         "channel|tensor", 0, NULL},
        {"--quantize-head", FLAG_BOOL, &p.quantize_head, "quantize lm_head too (untied models; default: FP16)",
         NULL, 1, NULL},
        {"--zstd", FLAG_BOOL, &zstd, "also write model.safetensors.zst (zstd level 9)", NULL, 1, NULL},
        {"--force", FLAG_BOOL, &p.force, "replace an existing OUT once the new one is complete", NULL, 1, NULL},
        {"--bits", FLAG_INT, &p.bits, "weight bits 2..8 for w4a16 / w8a16 (0 = the scheme's)", NULL, 0, "N"},
        {"--calib", FLAG_STR, &p.calib.path, "calibrated methods: calibration text file", NULL, 0, "FILE"},
        {"--nsamples", FLAG_INT, &p.calib.nsamples, "calibrated methods: calibration windows", NULL, 0, "N"},
        {"--seqlen", FLAG_INT, &p.calib.seqlen, "calibrated methods: tokens per window (clamped to the model's "
         "context)", NULL, 0, "L"},
        {"--seed", FLAG_INT, &seed, "calibrated methods: seed of the window choice", NULL, 0, "S"},
        {"--calib-mode", FLAG_CHOICE, &mode, "calibrated methods: windows at seeded random starts, or consecutive",
         "random|concat", 0, NULL},
        {"--alpha", FLAG_STR, &alpha, "smoothquant: migration strength in [0, 1], or auto (searched per group)", NULL,
         0, "A"},
        {"--awq-grid", FLAG_INT, &p.smooth.grid, "awq: alpha candidates i/N over [0, 1)", NULL, 0, "N"},
        {"--awq-clip-grid", FLAG_INT, &p.smooth.clip_grid, "awq: clip candidates 1 - i/N down to 0.5 (0: no clipping)",
         NULL, 0, "N"},
        {"--search-tokens", FLAG_INT, &p.smooth.search_tokens, "awq, smoothquant: tokens of whole windows the "
         "searches measure their error on", NULL, 0, "N"},
        {"--damp", FLAG_DOUBLE, &p.damp, "gptq: dampening, a fraction of the Hessian's mean diagonal", NULL, 0, "X"},
        {"--block-size", FLAG_INT, &p.block_size, "gptq: columns per lazy batch update", NULL, 0, "N"},
        {"--act-order", FLAG_BOOL, &p.act_order, "gptq: columns in descending order of the Hessian diagonal", NULL, 1,
         NULL},
        {"--static-groups", FLAG_BOOL, &p.static_groups, "gptq: group scales from the unmodified weights", NULL, 1,
         NULL},
        {"--true-sequential", FLAG_BOOL, &p.true_sequential,
         "gptq: q/k/v, o, gate/up, down in turn, each calibrated on the quantized earlier ones", NULL, 1, NULL},
        {"--resume", FLAG_BOOL, &p.resume, "calibrated methods: continue an interrupted run into the same OUT", NULL, 1, NULL},
        {"--device", FLAG_CHOICE, &device, "gptq: where the Hessians are accumulated (the other methods search on "
         "the CPU)", "auto|cpu|cuda", 0, NULL},
        {"--threads", FLAG_INT, &p.nthreads, "CPU threads (0 = all cores)", NULL, 0, "N"},
        {"--json", FLAG_BOOL, &json, "print the result as JSON", NULL, 1, NULL},
    };
    cli_command cmd = {"quantize", "MODEL -o OUT [options]",
                       "Quantize MODEL (FP16/BF16/F32) and write OUT, a compressed-tensors checkpoint "
                       "(vLLM / SGLang load it; so does pq ppl).",
                       flags, sizeof flags / sizeof flags[0], 1, pos};
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (!p.out) {
        fprintf(stderr, "pq quantize: -o OUT is required (see pq quantize --help)\n");
        return 2;
    }
    if (seed < 0) {
        fprintf(stderr, "pq quantize: --seed %d: must be 0 or more\n", seed);
        return 2;
    }
    p.model = pos[0];
    p.calib.seed = (uint64_t)seed;
    p.calib.mode = (pq_calib_mode)mode;
    p.device = (pq_device)device;
    p.fp8_tensor = fp8_scale == 1;
    p.act_static = act_scale == 1;
    p.zstd_level = zstd ? 9 : 0; // level 19 gains ~3% on packed weights at ~20x the time
    char line[1024];
    pq_status s = pq_quantize_parse_group(group, &p.group);
    if (s == PQ_OK) s = pq_quantize_parse_alpha(alpha, &p.smooth.alpha);
    if (s == PQ_OK) s = pq_quantize_describe(&p, line, sizeof line);
    if (s != PQ_OK) return cli_fail("quantize", s);
    fprintf(stderr, "pq quantize: %s\n", line);
    signal(SIGXFSZ, SIG_IGN); // a file size limit then fails the write (EFBIG), reported like a full disk
    progress_state ps;
    cli_progress_init(&ps.bar, "pq quantize:");
    pq_quantize_result r;
    s = pq_quantize(&p, progress, &ps, &r);
    if (s != PQ_OK) return cli_fail("quantize", s);
    rc = 0;
    if (json) {
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:I, s:I, s:f, s:f, s:f, s:I, s:I, s:s, s:f}", "out",
                              p.out, "scheme", r.scheme, "method", r.method, "format", r.format,
                              "quantized_linears", r.n_quantized, "ragged_linears", r.n_ragged, "quantized_weights",
                              (json_int_t)r.n_weights, "quantized_bytes", (json_int_t)r.quant_bytes, "bits_per_weight",
                              r.bits_per_weight, "rel_error_mean", r.mean_rel_err, "rel_error_max", r.max_rel_err,
                              "output_bytes", (json_int_t)r.out_bytes, "zst_bytes", (json_int_t)r.zst_bytes,
                              "source_sha256", r.source_sha256, "seconds", r.seconds);
        if (o && r.calibrated &&
            json_object_update_new(
                o, json_pack("{s:f, s:f, s:i, s:i, s:i, s:i, s:I, s:I}", "output_rel_error_mean", r.mean_out_err,
                             "output_rel_error_max", r.max_out_err, "calibration_windows", r.calib_windows,
                             "calibration_seqlen", r.calib_len, "resumed_blocks", r.resumed_blocks, "damp_raised",
                             r.n_damp_raised, "memory_estimate_bytes", (json_int_t)r.mem_estimate, "peak_rss_bytes",
                             (json_int_t)r.peak_rss)) != 0) {
            json_decref(o);
            o = NULL;
        }
        rc = cli_print_json("quantize", o);
    } else {
        printf("%s: %s (%s), %d linears at %.4f bits per weight, rel err mean %.3e max %.3e, %llu bytes",
               p.out, r.scheme, r.format, r.n_quantized, r.bits_per_weight, r.mean_rel_err, r.max_rel_err,
               r.out_bytes);
        if (r.zst_bytes) printf(" (zstd %llu, ratio %.3f)", r.zst_bytes, (double)r.out_bytes / (double)r.zst_bytes);
        if (r.calibrated)
            printf(", output err mean %.3e max %.3e on %d x %d calibration tokens, peak %.1f MiB (estimate %.1f MiB)",
                   r.mean_out_err, r.max_out_err, r.calib_windows, r.calib_len, r.peak_rss / 1048576.0,
                   r.mem_estimate / 1048576.0);
        printf(", %.2f s\n", r.seconds);
    }
    if (r.n_ragged)
        fprintf(stderr, "pq quantize: note: %d linears have in_features that are not a multiple of the group (a "
                "shorter last group): pq runs them, but compressed-tensors' decompression and vLLM's kernels "
                "need a multiple\n", r.n_ragged);
    return rc;
}
