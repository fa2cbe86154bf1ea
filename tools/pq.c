// pq — the command-line entry point: dispatches to one file per subcommand.
#include <stdio.h>
#include <string.h>

#include "common/version.h"
#include "tools/cli.h"
#include "tools/commands.h"

typedef struct {
    const char *name;
    int (*main)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand COMMANDS[] = {
    {"calibrate", main_calibrate, "calibrate AWQ / SmoothQuant / FP8 scales and write them to a scales file"},
    {"convert", main_convert, "write a GGUF file as a Hugging Face checkpoint"},
    {"export", main_export, "write a model or packed checkpoint as a GGUF file llama.cpp runs"},
    {"generate", main_generate, "generate text from a model: prefill, then decode token by token (--chat for chat models)"},
    {"inspect", main_inspect, "what is in a model or packed checkpoint: arch, tensors, dtypes, size"},
    {"ppl", main_ppl, "perplexity of a model on a text file"},
    {"quantize", main_quantize, "quantize a model and write a compressed-tensors checkpoint"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: pq <command> [options]   (pq <command> --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        fprintf(out, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fprintf(out, "  %-10s %s\n", "version", "print the version");
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return cli_finish_stdout("help", 0);
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("pq %s\n", PQ_VERSION);
        return cli_finish_stdout("version", 0);
    }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (strcmp(cmd, COMMANDS[i].name) == 0) {
            cli_signals(cmd);
            return cli_finish_stdout(cmd, COMMANDS[i].main(argc - 1, argv + 1));
        }
    fprintf(stderr, "pq: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
