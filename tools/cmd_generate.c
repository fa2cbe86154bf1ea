// pq generate — text from a model (FP16, packed, or anything pq_model_open
// takes): the prompt prefilled, then one token at a time through the KV
// cache, streamed to stdout.
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "eval/generate.h"
#include "tools/cli.h"
#include "tools/commands.h"

static void on_text(void *ud, const char *text, size_t len) {
    fwrite(text, 1, len, stdout);
    fflush(stdout);
}

static json_t *id_array(const int32_t *ids, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) json_array_append_new(a, json_integer(ids[i]));
    return a;
}

int main_generate(int argc, char **argv) {
    pq_generate_job job = pq_generate_default_job();
    int device = PQ_DEVICE_AUTO, json = 0, seed = 0;
    const char *pos[1];
    const cli_flag flags[] = {
        {.name = "--prompt", .kind = FLAG_STR, .dst = &job.prompt, .help = "the prompt (UTF-8)", .metavar = "TEXT"},
        {.name = "-n", .kind = FLAG_INT, .dst = &job.max_new, .help = "generate at most N tokens", .metavar = "N",
             .min = 1, .max = 1 << 24},
        {.name = "--temp", .kind = FLAG_DOUBLE, .dst = &job.sample.temp, .help = "temperature (0 = greedy: the most "
             "likely token)", .metavar = "T", .min = 0, .max = 1e6},
        {.name = "--top-k", .kind = FLAG_INT, .dst = &job.sample.top_k, .help = "sample among the K most likely "
             "tokens (0 = all; with --temp > 0)", .metavar = "K", .min = 0, .max = INT_MAX},
        {.name = "--top-p", .kind = FLAG_DOUBLE, .dst = &job.sample.top_p, .help = "then among the fewest holding "
             "mass P (1 = all; with --temp > 0)", .metavar = "P", .min = 0, .max = 1},
        {.name = "--seed", .kind = FLAG_INT, .dst = &seed, .help = "random seed of the sampler (a seed repeats a run "
             "exactly)", .metavar = "S", .min = 0, .max = INT_MAX},
        {.name = "--chat", .kind = FLAG_BOOL, .dst = &job.chat, .help = "wrap the prompt in the model's chat template "
             "(ChatML or Llama 3)", .value = 1},
        {.name = "--max-ctx", .kind = FLAG_INT, .dst = &job.max_ctx, .help = "KV cache positions (0 = prompt + N, at "
             "most the model's)", .metavar = "N", .min = 0, .max = 1 << 24},
        {.name = "--device", .kind = FLAG_CHOICE, .dst = &device, .help = "where to run", .choices = "auto|cpu|cuda"},
        {.name = "--threads", .kind = FLAG_INT, .dst = &job.nthreads, .help = "CPU threads (0 = all cores)",
             .metavar = "N", .min = 0, .max = PQ_MAX_THREADS},
        {.name = "--json", .kind = FLAG_BOOL, .dst = &json, .help = "print text, token ids and speeds as JSON instead "
             "of streaming the text", .value = 1},
    };
    cli_command cmd = {"generate", "MODEL --prompt TEXT [options]",
                       "Generate text from MODEL: prefill the prompt, then decode token by token with the KV cache.",
                       flags, sizeof flags / sizeof flags[0], 1, pos, NULL};
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (!job.prompt) {
        fprintf(stderr, "pq generate: --prompt TEXT is required (see pq generate --help)\n");
        return 2;
    }
    if (seed < 0) {
        fprintf(stderr, "pq generate: --seed %d: must be >= 0 (see pq generate --help)\n", seed);
        return 2;
    }
    job.model = pos[0];
    job.device = (pq_device)device;
    job.sample.seed = (uint64_t)seed;
    if (job.sample.temp == 0)
        fprintf(stderr, "pq generate: model %s, greedy, at most %d tokens%s\n", job.model, job.max_new,
                job.chat ? ", chat" : "");
    else
        fprintf(stderr, "pq generate: model %s, temp %g, top-k %d, top-p %g, seed %d, at most %d tokens%s\n",
                job.model, job.sample.temp, job.sample.top_k, job.sample.top_p, seed, job.max_new,
                job.chat ? ", chat" : "");
    pq_generate_report rep;
    pq_status s = pq_generate_run(&job, json ? NULL : on_text, NULL, &rep);
    if (s != PQ_OK) return cli_fail("generate", s);
    const pq_generate_result *r = &rep.r;
    if (!json) putchar('\n');
    fprintf(stderr,
            "pq generate: prompt %d tokens, %.1f tokens/s; generated %d tokens (stop: %s), decode %.1f tokens/s "
            "(%d steps); %s\n",
            r->n_prompt, r->prompt_tps, r->n_generated, pq_stop_reason_name(r->stop), r->decode_tps, r->n_decode,
            rep.engine);
    if (json) {
        json_t *o = json_pack(
            "{s:s, s:s, s:s?, s:s#, s:o, s:o, s:s, s:i, s:f, s:f, s:f, s:i, s:i, s:f, s:f, s:f, s:i, s:s}", "model",
            job.model, "prompt", job.prompt, "chat", rep.chat[0] ? rep.chat : NULL, "text", rep.text,
            strlen(rep.text), "prompt_ids", id_array(rep.prompt_ids, r->n_prompt), "ids",
            id_array(r->ids, r->n_generated), "stop", pq_stop_reason_name(r->stop), "prompt_tokens", r->n_prompt,
            "prompt_seconds", r->prompt_seconds, "prompt_cpu_seconds", r->prompt_cpu_seconds, "prompt_tokens_per_s",
            r->prompt_tps, "generated_tokens", r->n_generated, "decode_steps", r->n_decode, "decode_seconds",
            r->decode_seconds, "decode_cpu_seconds", r->decode_cpu_seconds, "decode_tokens_per_s", r->decode_tps,
            "max_ctx", rep.max_ctx, "engine", rep.engine);
        pq_generate_report_free(&rep);
        return cli_print_json("generate", o);
    }
    pq_generate_report_free(&rep);
    return 0;
}
