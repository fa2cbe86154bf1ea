// pq convert — a GGUF file written out as a Hugging Face checkpoint.
#include <jansson.h>
#include <stdio.h>

#include "eval/convert.h"
#include "tools/cli.h"
#include "tools/commands.h"

static void progress(void *ud, int done, int total, const char *tensor) {
    cli_progress_update(ud, done, total, tensor);
}

int main_convert(int argc, char **argv) {
    pq_convert_params p = pq_convert_default_params();
    int json = 0;
    const char *pos[1];
    const cli_flag flags[] = {
        {.name = "-o", .kind = FLAG_STR, .dst = &p.out, .help = "output directory (required; must not exist unless "
             "--force)", .metavar = "DIR"},
        {.name = "--dtype", .kind = FLAG_STR, .dst = &p.dtype, .help = "f16 | bf16 | f32 for every tensor (default: "
             "F16/BF16/F32 as stored, dequantized block types as F32, exact)", .metavar = "T"},
        {.name = "--force", .kind = FLAG_BOOL, .dst = &p.force, .help = "replace an existing DIR once the new one is "
             "complete", .value = 1},
        {.name = "--json", .kind = FLAG_BOOL, .dst = &json, .help = "print the result as JSON", .value = 1},
    };
    cli_command cmd = {"convert", "FILE.gguf -o DIR [options]",
                       "Write a GGUF file as a Hugging Face checkpoint (config.json, model.safetensors, tokenizer).",
                       flags, sizeof flags / sizeof flags[0], 1, pos, NULL};
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (!p.out) {
        fprintf(stderr, "pq convert: -o DIR is required (see pq convert --help)\n");
        return 2;
    }
    p.gguf = pos[0];
    fprintf(stderr, "pq convert: %s -> %s, dtype %s\n", p.gguf, p.out, p.dtype ? p.dtype : "as stored");
    cli_progress bar;
    cli_progress_init(&bar, "pq convert:");
    pq_convert_result r;
    pq_status s = pq_convert_gguf(&p, progress, &bar, &r);
    if (s != PQ_OK) return cli_fail("convert", s);
    if (json)
        return cli_print_json("convert", json_pack("{s:s, s:s, s:s, s:i, s:I, s:I}", "gguf", p.gguf, "out", p.out,
                                                   "architecture", r.arch, "tensors", r.tensors, "parameters",
                                                   (json_int_t)r.params, "bytes", (json_int_t)r.bytes));
    printf("%s: %s, %lld parameters, %d tensors, model.safetensors %llu bytes\n", p.out, r.arch, r.params, r.tensors,
           r.bytes);
    return 0;
}
