// pq export — a model or packed checkpoint written as a GGUF file llama.cpp runs.
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "eval/export.h"
#include "formats/gguf_export.h"
#include "tools/cli.h"
#include "tools/commands.h"

static void progress(void *ud, int done, int total) { cli_progress_update(ud, done, total, "layers"); }

int main_export(int argc, char **argv) {
    pq_export_params p = pq_export_default_params();
    int json = 0;
    const char *to = NULL, *type = "f16", *pos[1];
    const cli_flag flags[] = {
        {.name = "--to", .kind = FLAG_STR, .dst = &to, .help = "the format to write (required): gguf", .metavar = "FMT"},
        {.name = "-o", .kind = FLAG_STR, .dst = &p.out, .help = "output file (required; must not exist unless --force)",
         .metavar = "FILE"},
        {.name = "--type", .kind = FLAG_STR, .dst = &type, .help = "f16 | q8_0 | q4_0 | q4_1 | q5_0 | q4_k | q6_k: "
             "the linears' type (embeddings and head as llama-quantize picks for it)", .metavar = "T"},
        {.name = "--fallback", .kind = FLAG_BOOL, .dst = &p.fallback, .help = "store linears whose rows are not whole "
             "blocks of the type as llama-quantize does (Q4_K -> Q5_0, Q6_K -> Q8_0, else F16) instead of refusing",
         .value = 1},
        {.name = "--exact", .kind = FLAG_BOOL, .dst = &p.exact, .help = "refuse a packed linear whose codes cannot be "
             "written as they are, instead of re-quantizing it", .value = 1},
        {.name = "--threads", .kind = FLAG_INT, .dst = &p.nthreads, .help = "worker threads (0: all cores)",
         .metavar = "N", .min = 0, .max = 1024},
        {.name = "--force", .kind = FLAG_BOOL, .dst = &p.force, .help = "replace an existing FILE once the new one is "
             "complete", .value = 1},
        {.name = "--json", .kind = FLAG_BOOL, .dst = &json, .help = "print the result as JSON", .value = 1},
    };
    cli_command cmd = {"export", "MODEL_OR_PACKED --to gguf -o FILE.gguf [options]",
                       "Write a model, packed checkpoint or GGUF file as a GGUF file llama.cpp runs.", flags,
                       sizeof flags / sizeof flags[0], 1, pos, NULL};
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (!to) {
        fprintf(stderr, "pq export: --to FMT is required: pq exports to gguf (see pq export --help)\n");
        return 2;
    }
    if (strcmp(to, "gguf") != 0) {
        fprintf(stderr, "pq export: --to %s: pq exports to gguf only (see pq export --help)\n", to);
        return 2;
    }
    if (!p.out) {
        fprintf(stderr, "pq export: -o FILE is required (see pq export --help)\n");
        return 2;
    }
    if (pq_gguf_parse_type(type, &p.type) != PQ_OK) return cli_fail("export", PQ_ERR_ARG);
    p.model = pos[0];
    fprintf(stderr, "pq export: %s -> %s: gguf %s%s%s\n", p.model, p.out, type, p.fallback ? ", --fallback" : "",
            p.exact ? ", --exact" : "");
    cli_progress bar;
    cli_progress_init(&bar, "pq export:");
    pq_export_result r;
    pq_status s = pq_export_gguf(&p, progress, &bar, &r);
    if (s != PQ_OK) return cli_fail("export", s);
    if (r.requantized)
        fprintf(stderr, "pq export: note: %d of %d linears re-quantized with round to nearest (%s)\n", r.requantized,
                r.linears, r.requant_reason);
    if (r.fallback)
        fprintf(stderr, "pq export: note: %d linears stored in llama.cpp's fallback type (--fallback)\n", r.fallback);
    if (json)
        return cli_print_json(
            "export", json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:i, s:f, s:I, s:f, s:I, "
                                "s:f}",
                                "model", p.model, "out", p.out, "to", "gguf", "type", r.type, "source", r.source,
                                "tensors", r.tensors, "linears", r.linears, "exact", r.exact, "copied", r.copied,
                                "quantized", r.quantized, "requantized", r.requantized, "requantized_reason",
                                r.requant_reason, "fallback", r.fallback, "max_weight_change", r.max_weight_change,
                                "linear_weights", (json_int_t)r.linear_weights, "bits_per_weight", r.bits_per_weight,
                                "bytes", (json_int_t)r.bytes, "seconds", r.seconds));
    printf("%s: gguf %s from %s, %d tensors (%d linears: %d codes kept, %d copied, %d quantized, %d re-quantized, %d "
           "fallback), %.3f bits per linear weight, %llu bytes",
           p.out, r.type, r.source, r.tensors, r.linears, r.exact, r.copied, r.quantized, r.requantized, r.fallback,
           r.bits_per_weight, r.bytes);
    if (r.exact) printf(", largest weight change %.3g", r.max_weight_change);
    printf("\n");
    return 0;
}
