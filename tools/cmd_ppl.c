// pq ppl — perplexity of a model (FP16 or packed) on a text file.
#include <jansson.h>
#include <limits.h>
#include <stdio.h>

#include "eval/ppl.h"
#include "tools/cli.h"
#include "tools/commands.h"

static void progress(void *ud, int done, int total, double ppl) {
    char extra[64];
    snprintf(extra, sizeof extra, "ppl %.4f", ppl);
    cli_progress_update(ud, done, total, extra);
}

int main_ppl(int argc, char **argv) {
    pq_ppl_job job = pq_ppl_default_job();
    int protocol = PQ_PPL_GPTQ, device = PQ_DEVICE_AUTO, json = 0;
    const char *pos[1];
    const cli_flag flags[] = {
        {.name = "--text", .kind = FLAG_STR, .dst = &job.text, .help = "text file to score (UTF-8)", .metavar = "FILE"},
        {.name = "--ctx", .kind = FLAG_INT, .dst = &job.ctx, .help = "window length in tokens (0: 2048 gptq / 512 "
             "llamacpp, clamped to the model)", .metavar = "N", .min = 0, .max = 1 << 24},
        {.name = "--protocol", .kind = FLAG_CHOICE, .dst = &protocol, .help = "gptq: papers' table protocol; "
             "llamacpp: llama-perplexity's", .choices = "gptq|llamacpp"},
        {.name = "--bos", .kind = FLAG_BOOL, .dst = &job.bos, .help = "feed BOS at the start of every window",
             .value = 1},
        {.name = "--no-bos", .kind = FLAG_BOOL, .dst = &job.bos, .help = "never feed BOS (default: gptq no, "
             "llamacpp as the tokenizer)"},
        {.name = "--max-windows", .kind = FLAG_INT, .dst = &job.max_windows, .help = "score at most N windows (0 = "
             "all)", .metavar = "N", .min = 0, .max = INT_MAX},
        {.name = "--device", .kind = FLAG_CHOICE, .dst = &device, .help = "where to run", .choices = "auto|cpu|cuda"},
        {.name = "--threads", .kind = FLAG_INT, .dst = &job.nthreads, .help = "CPU threads (0 = all cores)",
             .metavar = "N", .min = 0, .max = PQ_MAX_THREADS},
        {.name = "--kl-base", .kind = FLAG_STR, .dst = &job.kl_base, .help = "also the KL divergence of MODEL's "
             "next-token distributions from BASE's (any model pq reads) on the same windows", .metavar = "BASE"},
        {.name = "--json", .kind = FLAG_BOOL, .dst = &json, .help = "print the result as JSON", .value = 1},
    };
    cli_command cmd = {"ppl", "MODEL --text FILE [options]", "Perplexity of MODEL on a text file.", flags,
                       sizeof flags / sizeof flags[0], 1, pos, NULL};
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (!job.text) {
        fprintf(stderr, "pq ppl: --text FILE is required (see pq ppl --help)\n");
        return 2;
    }
    job.model = pos[0];
    job.protocol = (pq_ppl_protocol)protocol;
    job.device = (pq_device)device;
    fprintf(stderr, "pq ppl: model %s, text %s, protocol %s\n", job.model, job.text,
            protocol == PQ_PPL_GPTQ ? "gptq" : "llamacpp");
    cli_progress bar;
    cli_progress_init(&bar, "pq ppl:");
    pq_ppl_report rep;
    pq_status s = pq_ppl_eval(&job, progress, &bar, &rep);
    if (s != PQ_OK) return cli_fail("ppl", s);
    const pq_ppl_result *r = &rep.r;
    const pq_kld_result *k = &rep.kl;
    if (json) {
        json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:b, s:f, s:f, s:f, s:I, s:i, s:I, s:f, s:f, s:f, s:s}", "model", job.model,
                              "text", job.text, "protocol", protocol == PQ_PPL_GPTQ ? "gptq" : "llamacpp", "ctx",
                              rep.ctx, "bos", rep.bos, "ppl", r->ppl, "ppl_stderr", r->ppl_stderr, "nll_total",
                              r->nll_total, "tokens_scored", (json_int_t)r->n_scored, "windows", r->n_windows,
                              "text_tokens", (json_int_t)rep.n_text_tokens, "tokens_per_s", r->tokens_per_s,
                              "seconds", r->seconds, "cpu_seconds", r->cpu_seconds, "engine", rep.engine);
        if (o && rep.has_kl)
            json_object_set_new(
                o, "kl_divergence",
                json_pack("{s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "base",
                          job.kl_base, "ppl_base", k->ppl_base, "kld_mean", k->mean, "kld_mean_stderr", k->mean_err,
                          "kld_median", k->median, "kld_p90", k->p90, "kld_p99", k->p99, "kld_p99_9", k->p999,
                          "kld_max", k->max, "kld_min", k->min, "top1_agreement", k->top1, "top1_agreement_stderr",
                          k->top1_err, "ln_ppl_ratio", k->ln_ratio, "ln_ppl_ratio_stderr", k->ln_ratio_err,
                          "ppl_ratio", k->ratio, "ppl_ratio_stderr", k->ratio_err));
        return cli_print_json("ppl", o);
    }
    printf("PPL = %.4f +/- %.4f  (%lld tokens scored, %d windows of %d%s, %.0f tokens/s, %s)\n", r->ppl, r->ppl_stderr,
           r->n_scored, r->n_windows, rep.ctx, rep.bos ? " with BOS" : "", r->tokens_per_s, rep.engine);
    if (rep.has_kl) {
        printf("KL divergence from %s (PPL %.4f), %lld tokens:\n", job.kl_base, k->ppl_base, (long long)k->n);
        printf("  Mean    KLD: %10.6f +/- %.6f\n  Median  KLD: %10.6f\n  90.0%%   KLD: %10.6f\n"
               "  99.0%%   KLD: %10.6f\n  99.9%%   KLD: %10.6f\n  Maximum KLD: %10.6f\n",
               k->mean, k->mean_err, k->median, k->p90, k->p99, k->p999, k->max);
        printf("  Same top-1:  %6.3f +/- %.3f %%\n  ln(PPL/PPL base): %.6f +/- %.6f\n  PPL/PPL base:     %.6f +/- %.6f\n",
               100 * k->top1, 100 * k->top1_err, k->ln_ratio, k->ln_ratio_err, k->ratio, k->ratio_err);
    }
    return 0;
}
