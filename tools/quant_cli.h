// tools/quant_cli.h — the flags of pq quantize and pq calibrate: one table
// of rows, each written once and shared by the commands that take it, and
// the step from the parsed flags to a pq_quantize_request (which records
// the flags seen, so that the library refuses one the method does not take).
#ifndef PQ_QUANT_CLI_H
#define PQ_QUANT_CLI_H

#include "quant/quantize.h"
#include "tools/cli.h"

typedef enum { QUANT_CLI_QUANTIZE, QUANT_CLI_CALIBRATE } quant_cli_cmd;

#define QUANT_CLI_MAX_FLAGS 40

typedef struct {
    pq_quantize_request q;
    const char *group, *alpha;                        // parsed into q by quant_cli_request
    int fp8_scale, act_scale, seed, mode, device, zstd, json;
    cli_flag flags[QUANT_CLI_MAX_FLAGS];
    int n_flags;
} quant_cli;

// The defaults and the flag rows of command cmd (pointing into a).
void quant_cli_init(quant_cli *a, quant_cli_cmd cmd);

// The progress callback of both commands (ud: a cli_progress labelled
// "pq <cmd>:"): a NOTE on its own line, a LAYER as a bar on a terminal or
// one line per layer, with the errors the event carries.
void quant_cli_progress(void *ud, const pq_quantize_event *e);

// After cli_parse: the model (argv's positional), the flags seen (their
// PQ_ARG_* bits) and the values into a->q. Usage errors (a
// bad --group or --alpha) print one line and return 2; 0 otherwise.
int quant_cli_request(quant_cli *a, const char *cmd, const char *model, unsigned seen);

#endif
