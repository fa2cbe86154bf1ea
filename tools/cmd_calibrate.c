// pq calibrate — run a smoothing method's search and write its scales file.
#include <jansson.h>
#include <stdio.h>

#include "quant/calibrate.h"
#include "tools/cli.h"
#include "tools/commands.h"

static void progress(void *ud, const pq_quantize_event *e) {
    cli_progress *bar = ud;
    if (e->kind == PQ_QUANTIZE_NOTE) {
        if (bar->tty) fputc('\n', stderr);
        fprintf(stderr, "pq calibrate: %s\n", e->note);
        return;
    }
    char extra[64];
    snprintf(extra, sizeof extra, "output err %.3e", e->layer_out_err);
    if (bar->tty) cli_progress_update(bar, e->done, e->total, extra);
    else fprintf(stderr, "pq calibrate: layer %d/%d %s\n", e->done, e->total, extra); // one line per layer
}

int main_calibrate(int argc, char **argv) {
    pq_quantize_params p = pq_quantize_default_params();
    const char *group = "auto", *alpha = "0.5", *pos[1];
    int fp8_scale = 0, json = 0, seed = 0, mode = 0, device = PQ_DEVICE_AUTO, act_scale = 0;
    const cli_flag flags[] = {
        {"-o", FLAG_STR, &p.out, "the scales file to write (required; must not exist unless --force)", NULL, 0,
         "SCALES"},
        {"--method", FLAG_STR, &p.method, "awq | smoothquant | fp8 (static activation scales, no smoothing)", NULL, 0,
         "M"},
        {"--scheme", FLAG_STR, &p.scheme, "the scheme to search for (none: awq w4a16, smoothquant w8a8, fp8 "
         "fp8-static)", NULL, 0, "S"},
        {"--group", FLAG_STR, &group, "32 | 64 | 128 | channel | auto", NULL, 0, "G"},
        {"--sym", FLAG_BOOL, &p.sym, "symmetric weights", NULL, 1, NULL},
        {"--asym", FLAG_BOOL, &p.sym, "asymmetric weights with zero points (w4a16 only)", NULL, 0, NULL},
        {"--bits", FLAG_INT, &p.bits, "weight bits 2..8 for w4a16 / w8a16 (0 = the scheme's)", NULL, 0, "N"},
        {"--fp8-scale", FLAG_CHOICE, &fp8_scale, "fp8 weight scales per output channel or per tensor",
         "channel|tensor", 0, NULL},
        {"--act-scale", FLAG_CHOICE, &act_scale, "w8a8 activations: per token at run time, or one calibrated scale "
         "per tensor", "dynamic|static", 0, NULL},
        {"--calib", FLAG_STR, &p.calib.path, "calibration text file (required)", NULL, 0, "FILE"},
        {"--nsamples", FLAG_INT, &p.calib.nsamples, "calibration windows", NULL, 0, "N"},
        {"--seqlen", FLAG_INT, &p.calib.seqlen, "tokens per window (clamped to the model's context)", NULL, 0, "L"},
        {"--seed", FLAG_INT, &seed, "seed of the window choice", NULL, 0, "S"},
        {"--calib-mode", FLAG_CHOICE, &mode, "windows at seeded random starts, or consecutive", "random|concat", 0,
         NULL},
        {"--alpha", FLAG_STR, &alpha, "smoothquant: migration strength in [0, 1], or auto (searched per group)", NULL,
         0, "A"},
        {"--awq-grid", FLAG_INT, &p.smooth.grid, "awq: alpha candidates i/N over [0, 1)", NULL, 0, "N"},
        {"--awq-clip-grid", FLAG_INT, &p.smooth.clip_grid, "awq: clip candidates 1 - i/N down to 0.5 (0: no clipping)",
         NULL, 0, "N"},
        {"--search-tokens", FLAG_INT, &p.smooth.search_tokens, "awq, smoothquant: tokens of whole windows the "
         "searches measure their error on", NULL, 0, "N"},
        {"--force", FLAG_BOOL, &p.force, "replace an existing SCALES", NULL, 1, NULL},
        {"--device", FLAG_CHOICE, &device, "accepted for symmetry; the searches run on the CPU", "auto|cpu|cuda", 0,
         NULL},
        {"--threads", FLAG_INT, &p.nthreads, "CPU threads (0 = all cores)", NULL, 0, "N"},
        {"--json", FLAG_BOOL, &json, "print the result as JSON", NULL, 1, NULL},
    };
    cli_command cmd = {"calibrate", "MODEL --calib FILE --method awq|smoothquant|fp8 -o SCALES [options]",
                       "Calibrate MODEL and write the per-channel scales (AWQ clip values, static activation scales) "
                       "that pq quantize --scales applies.",
                       flags, sizeof flags / sizeof flags[0], 1, pos};
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (!p.out || !p.method) {
        fprintf(stderr, "pq calibrate: -o SCALES and --method are required (see pq calibrate --help)\n");
        return 2;
    }
    if (seed < 0) {
        fprintf(stderr, "pq calibrate: --seed %d: must be 0 or more\n", seed);
        return 2;
    }
    p.model = pos[0];
    p.calib.seed = (uint64_t)seed;
    p.calib.mode = (pq_calib_mode)mode;
    p.device = (pq_device)device;
    p.fp8_tensor = fp8_scale == 1;
    p.act_static = act_scale == 1;
    char line[1024];
    pq_status s = pq_quantize_parse_group(group, &p.group);
    if (s == PQ_OK) s = pq_quantize_parse_alpha(alpha, &p.smooth.alpha);
    if (s == PQ_OK) s = pq_quantize_describe(&p, line, sizeof line);
    if (s != PQ_OK) return cli_fail("calibrate", s);
    fprintf(stderr, "pq calibrate: %s\n", line);
    cli_progress bar;
    cli_progress_init(&bar, "pq calibrate:");
    pq_calibrate_result r;
    s = pq_calibrate(&p, progress, &bar, &r);
    if (s != PQ_OK) return cli_fail("calibrate", s);
    if (json)
        return cli_print_json(
            "calibrate",
            json_pack("{s:s, s:s, s:s, s:i, s:f, s:f, s:i, s:i, s:s, s:s, s:I, s:I, s:I, s:f}", "out", p.out, "method",
                      r.method, "scheme", r.scheme, "blocks", r.blocks, "output_rel_error_mean", r.mean_out_err,
                      "output_rel_error_max", r.max_out_err, "calibration_windows", r.calib_windows,
                      "calibration_seqlen", r.calib_len, "calibration_sha256", r.calib_sha256, "source_sha256",
                      r.source_sha256, "bytes", (json_int_t)r.bytes, "memory_estimate_bytes",
                      (json_int_t)r.mem_estimate, "peak_rss_bytes", (json_int_t)r.peak_rss, "seconds", r.seconds));
    else
        printf("%s: %s %s scales of %d blocks, output err mean %.3e max %.3e on %d x %d calibration tokens, %llu "
               "bytes, %.2f s\n", p.out, r.method, r.scheme, r.blocks, r.mean_out_err, r.max_out_err, r.calib_windows,
               r.calib_len, r.bytes, r.seconds);
    return 0;
}
