// tools/quant_cli.h — the flags of pq quantize and pq calibrate: one table
// of rows, each written once and shared by the commands that take it, and
// the start both commands share, from argv to a pq_quantize_request (which records
// the flags seen, so that the library refuses one the method does not take).
#ifndef PQ_QUANT_CLI_H
#define PQ_QUANT_CLI_H

#include "quant/quantize.h"
#include "tools/cli.h"

typedef enum { QUANT_CLI_QUANTIZE, QUANT_CLI_CALIBRATE } quant_cli_cmd;

#define QUANT_CLI_MAX_FLAGS 48

typedef struct {
    quant_cli_cmd cmd;
    pq_quantize_request q;
    const char *group, *alpha;                        // parsed into q by quant_cli_request
    int fp8_scale, act_scale, seed, mode, precision, device, zstd, json, rotate, rotate_seed;
    double target_bpw;
    cli_flag flags[QUANT_CLI_MAX_FLAGS];
    int n_flags;
} quant_cli;

// The defaults and the flag rows of command cmd (pointing into a).
void quant_cli_init(quant_cli *a, quant_cli_cmd cmd);

// The progress callback of both commands (ud: a cli_progress labelled
// "pq <cmd>:"): a NOTE on its own line, a LAYER as a bar on a terminal or
// one line per layer, with the errors the event carries.
void quant_cli_progress(void *ud, const pq_quantize_event *e);

// The start both commands share: parse argv (usage and help: the
// command's lines for --help), check the required flags, build the request
// (the model, the flags seen as PQ_ARG_* bits, the values), print its
// one-line description to stderr and label bar. Returns -1 to go on, else
// the exit code: 0 after --help, 2 for a usage error, 1 for another.
int quant_cli_start(quant_cli *a, int argc, char **argv, const char *usage, const char *help, cli_progress *bar);

#endif
