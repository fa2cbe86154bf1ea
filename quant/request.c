// quant/request.c — the request: defaults, flag values, resolution against
// the method table, the one-line description (see request.h, quantize.h).
#include "quant/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/version.h"
#include "kernels/cpu.h"
#include "quant/gptq.h"

static const pq_method *const METHODS[] = {&PQ_METHOD_RTN, &PQ_METHOD_GPTQ, &PQ_METHOD_AWQ, &PQ_METHOD_AWQ_GPTQ,
                                           &PQ_METHOD_SMOOTHQUANT, &PQ_METHOD_FP8};
#define NMETHODS (int)(sizeof METHODS / sizeof METHODS[0])

// The flags of the PQ_ARG_* bits, in bit order.
static const char *const FLAGS[] = {"--calib",      "--nsamples",    "--seqlen",          "--seed",
                                    "--calib-mode", "--resume",      "--device",          "--damp",
                                    "--block-size", "--act-order",   "--static-groups",   "--true-sequential",
                                    "--alpha",      "--awq-grid",    "--awq-clip-grid",   "--search-tokens",
                                    "--imatrix",    "--calib-precision"};
#define NFLAGS (int)(sizeof FLAGS / sizeof FLAGS[0])

pq_quantize_request pq_quantize_default_request(void) {
    pq_gptq_params g = pq_gptq_default_params();
    return (pq_quantize_request){
        .scheme = {.group = PQ_GROUP_DEFAULT, .sym = PQ_SYM_DEFAULT},
        .calib = pq_calib_default_params(),
        // act-order with static groups by default, as llm-compressor's GPTQModifier
        // (actorder "static"): without it GPTQ lost to RTN on SmolLM2 (docs/ACCURACY.md)
        .gptq = {.damp = g.damp, .block_size = g.block_size, .act_order = 1, .static_groups = 1},
        .smooth = pq_smooth_default_params(),
        .device = PQ_DEVICE_AUTO,
        .kl_windows = 4,
    };
}

pq_status pq_quantize_parse_alpha(const char *s, double *alpha) {
    if (strcmp(s, "auto") == 0) return *alpha = PQ_ALPHA_AUTO, PQ_OK;
    char *end;
    double a = strtod(s, &end);
    PQ_FAIL_IF(*s == '\0' || *end || !(a >= 0 && a <= 1), PQ_ERR_ARG,
               "--alpha %s: expected a number in [0, 1] or auto", s);
    *alpha = a;
    return PQ_OK;
}

pq_status pq_quantize_parse_group(const char *s, int *group) {
    if (strcmp(s, "auto") == 0) return *group = PQ_GROUP_DEFAULT, PQ_OK;
    if (strcmp(s, "channel") == 0) return *group = PQ_GROUP_CHANNEL, PQ_OK;
    char *end;
    long g = strtol(s, &end, 10);
    PQ_FAIL_IF(*s == '\0' || *end || g <= 0 || g > (1 << 20), PQ_ERR_ARG,
               "--group %s: expected a group size (32, 64, 128), channel or auto", s);
    *group = (int)g;
    return PQ_OK;
}

static const pq_method *find(const char *name) {
    for (int i = 0; i < NMETHODS; i++)
        if (strcmp(name, METHODS[i]->name) == 0) return METHODS[i];
    return NULL;
}

// The method the request asks for: q->method, or with --scales the file's
// (which q->method, if given, must name).
static pq_status method_of(const pq_quantize_request *q, const pq_method **m) {
    const char *name = q->method ? q->method : "rtn";
    *m = find(name);
    PQ_FAIL_IF(!*m, PQ_ERR_ARG, "--method %s: not a method (rtn, gptq, awq, awq+gptq, smoothquant, fp8)", name);
    if (!q->scales) return PQ_OK;
    pq_scales_file *f;
    PQ_TRY(pq_scales_open(q->scales, &f));
    const char *fm = pq_scales_meta_get(f, "pq.method");
    const pq_method *k = fm ? find(fm) : NULL;
    pq_status s = PQ_OK;
    if (!k || !k->smoothing)
        s = PQ_FAIL(PQ_ERR_FORMAT, "%s: pq.method \"%s\" is not a method pq calibrate writes", q->scales,
                    fm ? fm : "(missing)");
    else if (q->method && k != *m)
        s = PQ_FAIL(PQ_ERR_ARG, "--method %s: %s was calibrated with --method %s", q->method, q->scales, fm);
    pq_scales_close(f);
    *m = k;
    return s;
}

// The lowest PQ_ARG_* bit of `bits`, as its flag.
static const char *flag_of(uint32_t bits) {
    for (int i = 0; i < NFLAGS; i++)
        if (bits & (1u << i)) return FLAGS[i];
    return "?";
}

// A parameter given that the run does not take: named with the method and who takes it.
static pq_status check_given(const pq_quantize_request *q, const pq_resolved *o, uint32_t takes) {
    uint32_t extra = q->given & ~takes;
    if (!extra) return PQ_OK;
    const char *flag = flag_of(extra);
    uint32_t bit = extra & -extra;
    PQ_FAIL_IF(q->scales, PQ_ERR_ARG, "%s: --scales applies a finished calibration; it takes no calibration or "
               "search flags (give them to pq calibrate)", flag);
    char who[128] = "";
    size_t n = 0;
    for (int i = 0; i < NMETHODS; i++) {
        const pq_method *m = METHODS[i];
        pq_scheme s;
        int cal = pq_scheme_make(m->scheme, PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, &s) == PQ_OK && m->calibrates(&s);
        if ((m->takes | (cal ? PQ_ARG_CALIBRATION | PQ_ARG_RESUME | PQ_ARG_DEVICE : 0)) & bit)
            n += (size_t)snprintf(who + n, sizeof who - n, "%s%s", n ? ", " : "", m->name);
    }
    return PQ_FAIL(PQ_ERR_ARG, "%s: not a flag of --method %s (it is one of %s)", flag, o->name, who);
}

// What every calibrated run checks: the calibration and the device.
static pq_status check_calibration(const pq_quantize_request *q, const pq_resolved *o) {
    PQ_FAIL_IF(!q->calib.path, PQ_ERR_ARG, "--method %s%s needs calibration text: --calib FILE", o->name,
               pq_scheme_act_static(&o->scheme) ? " with static activation scales" : "");
    PQ_FAIL_IF(q->calib.nsamples < 1, PQ_ERR_ARG, "--nsamples %d: need at least one calibration window",
               q->calib.nsamples);
    PQ_FAIL_IF(q->calib.seqlen < 2, PQ_ERR_ARG, "--seqlen %d: a calibration window needs at least 2 tokens",
               q->calib.seqlen);
    pq_device dev;
    return pq_device_resolve(q->device, &dev);
}

// --target-bpw and its companions: a method that takes a plan, schemes from the menu only.
static pq_status check_mixed(const pq_quantize_request *q, const pq_resolved *o, int calibrate) {
    PQ_FAIL_IF(!(q->target_bpw > 0), PQ_ERR_ARG, "--menu and --report go with --target-bpw B");
    PQ_FAIL_IF(calibrate, PQ_ERR_ARG, "--target-bpw: pq calibrate does not choose schemes");
    PQ_FAIL_IF(o->m != &PQ_METHOD_RTN && o->m != &PQ_METHOD_GPTQ, PQ_ERR_ARG,
               "--target-bpw: with --method rtn or gptq (not %s)", o->name);
    const pq_scheme_args *a = &q->scheme;
    PQ_FAIL_IF((a->name && strcmp(a->name, "w4a16") && strcmp(a->name, "w8a16")) || a->group != PQ_GROUP_DEFAULT ||
                   a->sym != PQ_SYM_DEFAULT || a->bits,
               PQ_ERR_ARG, "--target-bpw: the schemes come from --menu (no --scheme other than w4a16, --group, "
               "--asym, --sym or --bits)");
    PQ_FAIL_IF(q->kl_windows < 1, PQ_ERR_ARG, "--kl-windows %d: need at least 1", q->kl_windows);
    struct stat sb;
    PQ_FAIL_IF(q->report && lstat(q->report, &sb) == 0 && !q->force, PQ_ERR_ARG,
               "--report %s: already exists (--force replaces it)", q->report);
    pq_mix_option opt[PQ_MIX_MAX_MENU];
    int n;
    return pq_mix_menu_parse(q->menu ? q->menu : PQ_MIX_DEFAULT_MENU, opt, &n);
}

pq_status pq_request_resolve(const pq_quantize_request *q, int calibrate, pq_resolved *o) {
    memset(o, 0, sizeof *o);
    PQ_FAIL_IF(calibrate && q->scales, PQ_ERR_ARG, "--scales: pq calibrate writes a scales file, it does not read one");
    PQ_FAIL_IF(q->rotate && strcmp(q->rotate, "none") && strcmp(q->rotate, "hadamard"), PQ_ERR_ARG,
               "--rotate %s: not none or hadamard", q->rotate);
    PQ_FAIL_IF(pq_request_rotates(q) && (calibrate || q->scales), PQ_ERR_ARG, "--rotate: %s", calibrate ?
               "pq calibrate does not rotate" : "a --scales file was calibrated on the unrotated model");
    PQ_TRY(method_of(q, &o->m));
    o->name = o->m->name;
    const pq_scheme_args *a = &q->scheme;
    pq_scheme *s = &o->scheme;
    PQ_FAIL_IF(a->fp8_tensor && a->group != PQ_GROUP_DEFAULT, PQ_ERR_ARG,
               "--fp8-scale tensor and --group exclude each other");
    PQ_TRY(pq_scheme_make(a->name ? a->name : o->m->scheme, a->fp8_tensor ? PQ_GROUP_TENSOR : a->group, a->sym, s));
    if (a->act_static) PQ_TRY(pq_scheme_static_act(s));
    int gguf = pq_scheme_ggml_type(s) >= 0;
    PQ_FAIL_IF(a->gguf_fallback && !gguf, PQ_ERR_ARG, "--fallback: only for the GGUF schemes (gguf-*)");
    s->gguf_fallback = a->gguf_fallback;
    PQ_FAIL_IF(gguf && a->bits, PQ_ERR_ARG, "--bits %d: the GGUF type fixes the bits of %s", a->bits,
               pq_scheme_name(s->id));
    PQ_FAIL_IF(gguf && q->quantize_head, PQ_ERR_ARG, "--quantize-head: a GGUF file stores lm_head in the type "
               "llama.cpp's quantizer picks for %s (formats/gguf_export.h)", pq_scheme_name(s->id));
    PQ_FAIL_IF(gguf && q->zstd_level > 0, PQ_ERR_ARG, "--zstd: a GGUF output is one .gguf file");
    PQ_FAIL_IF(gguf && q->target_bpw > 0, PQ_ERR_ARG, "--target-bpw: a GGUF output has one type per linear (%s); "
               "mixed precision is written as compressed-tensors", pq_scheme_name(s->id));
    PQ_FAIL_IF(gguf && pq_request_rotates(q), PQ_ERR_ARG, "--rotate: not supported with the GGUF schemes (%s)",
               pq_scheme_name(s->id));
    PQ_FAIL_IF(gguf && calibrate, PQ_ERR_ARG, "--scheme %s: pq calibrate's scales apply to the compressed-tensors "
               "schemes; quantize onto GGUF with pq quantize --method awq", pq_scheme_name(s->id));
    PQ_FAIL_IF(a->observer == PQ_OBSERVER_MSE && gguf, PQ_ERR_ARG,
               "--observer mse: the GGUF schemes use ggml's own grids (%s)", pq_scheme_name(s->id));
    PQ_FAIL_IF(a->observer == PQ_OBSERVER_MSE && s->is_float, PQ_ERR_ARG,
               "--observer mse: the %s scheme's FP8 weight scales are minmax only", pq_scheme_name(s->id));
    s->observer = a->observer == PQ_OBSERVER_MSE ? PQ_OBSERVER_MSE : PQ_OBSERVER_MINMAX;
    if (a->bits) {
        PQ_FAIL_IF(a->bits < 2 || a->bits > 8, PQ_ERR_ARG, "--bits %d: not in 2..8", a->bits);
        PQ_FAIL_IF(pq_scheme_wformat(s) != PQ_W_QPACK, PQ_ERR_ARG,
                   "--bits %d: only the weight-only integer schemes (w4a16, w8a16) take another width", a->bits);
        s->bits = a->bits;
    }
    PQ_FAIL_IF(q->zstd_level < 0 || q->zstd_level > 22, PQ_ERR_ARG, "zstd level %d not in 1..22", q->zstd_level);
    PQ_FAIL_IF(!q->model || !q->out, PQ_ERR_ARG, "a model and an output %s are required",
               calibrate ? "file" : "directory");
    struct stat sb; // what the output protocol refuses at its start, said before any work (formats/outdir.h)
    int exists = lstat(q->out, &sb) == 0;
    PQ_FAIL_IF(calibrate && exists && S_ISDIR(sb.st_mode), PQ_ERR_ARG, "%s: is a directory; pq calibrate writes a "
               "file (give a file's path)", q->out);
    PQ_FAIL_IF(exists && !q->force, PQ_ERR_ARG, "%s: already exists (--force replaces it)", q->out);
    // rtn with static activation scales calibrates them as the fp8 method does (no smoothing)
    if (o->m == &PQ_METHOD_RTN && pq_scheme_act_static(s)) o->m = &PQ_METHOD_FP8;
    PQ_FAIL_IF(calibrate && (!o->m->smoothing || strcmp(o->name, "rtn") == 0), PQ_ERR_ARG,
               "--method %s: pq calibrate runs awq, smoothquant or fp8", o->name);
    PQ_FAIL_IF(calibrate && q->resume, PQ_ERR_ARG, "--resume: pq calibrate is not resumable (rerun it)");
    o->calibrated = o->m->calibrates(s) && !q->scales;
    // bf16 asked for, or auto on a CPU with AMX tiles (PQ_ISA=avx512 turns them off) for a method that takes it
    pq_calib_precision p = q->calib.precision;
    o->bf16 = o->calibrated && (p == PQ_CALIB_PRECISION_BF16 ||
                                (p == PQ_CALIB_PRECISION_AUTO && !o->m->auto_f32 && pq_cpu_amx()));
    uint32_t takes = q->scales ? 0 : o->m->takes;
    if (o->calibrated) takes |= PQ_ARG_CALIBRATION | PQ_ARG_RESUME | PQ_ARG_DEVICE;
    if (q->target_bpw > 0) takes |= PQ_ARG_CALIBRATION | PQ_ARG_DEVICE; // the sensitivity measurement
    PQ_TRY(check_given(q, o, takes));
    PQ_TRY(o->m->check(o->m, q, s, o->calibrated));
    if (o->calibrated || q->target_bpw > 0) PQ_TRY(check_calibration(q, o));
    if (q->target_bpw > 0 || q->menu || q->report) PQ_TRY(check_mixed(q, o, calibrate));
    return PQ_OK;
}

pq_status pq_quantize_describe(const pq_quantize_request *q, int calibrate, char *buf, size_t cap) {
    pq_resolved o;
    PQ_TRY(pq_request_resolve(q, calibrate, &o));
    char desc[64], cal[1400] = "", meth[200] = "";
    pq_scheme_describe(&o.scheme, desc, sizeof desc);
    if (o.calibrated) {
        o.m->describe(o.m, q, meth, sizeof meth);
        snprintf(cal, sizeof cal, ", calibration %.1000s %d x %d tokens (%s, seed %llu)%s%s%s", q->calib.path,
                 q->calib.nsamples, q->calib.seqlen, pq_calib_mode_name(q->calib.mode),
                 (unsigned long long)q->calib.seed, meth, o.bf16 ? ", bf16 products" : "",
                 q->resume ? ", --resume" : "");
    }
    if (q->scales) snprintf(cal, sizeof cal, ", scales %.1000s", q->scales);
    char rot[64] = "", mix[200] = "";
    if (q->target_bpw > 0)
        snprintf(mix, sizeof mix, ", mixed to %g bits per weight (menu %.100s, KL on %d windows%s)", q->target_bpw,
                 q->menu ? q->menu : PQ_MIX_DEFAULT_MENU, q->kl_windows, q->measure_all ? ", every item measured" : "");
    if (pq_request_rotates(q)) snprintf(rot, sizeof rot, ", rotated (hadamard, seed %llu)",
                                        (unsigned long long)q->rotate_seed);
    if (q->target_bpw > 0) snprintf(desc, sizeof desc, "mixed");
    snprintf(buf, cap, "%s -> %s: %s %s (%s)%s%s%s%s%s%s", q->model, q->out, o.name, desc,
             pq_scheme_format(&o.scheme), mix, rot, cal, q->quantize_head ? ", lm_head too" : "", q->zstd_level > 0 ? ", + zstd" : "",
             q->force ? ", --force" : "");
    return PQ_OK;
}
