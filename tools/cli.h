// tools/cli.h — what every subcommand shares: a table-driven flag parser
// (which also prints --help with every default), progress output, and the
// mapping from a pq_status to an exit code.
#ifndef PQ_CLI_H
#define PQ_CLI_H

#include <stdio.h>

#include "common/status.h"

typedef enum { FLAG_INT, FLAG_DOUBLE, FLAG_STR, FLAG_BOOL, FLAG_CHOICE } flag_kind;

typedef struct {
    const char *name;     // "--ctx"
    flag_kind kind;
    void *dst;            // int*, double*, const char**, int* (bool: set to `value`), int* (choice index)
    const char *help;
    const char *choices;  // FLAG_CHOICE: "gptq|llamacpp" (index stored); FLAG_BOOL: NULL
    int value;            // FLAG_BOOL: value stored when the flag is given
    const char *metavar;  // "N", "FILE"
    unsigned bit;         // set in the command's *seen when the flag is given (0: none)
    double min, max;      // FLAG_INT / FLAG_DOUBLE: the valid range, checked by the parser and shown in
                          // --help (max > min; both 0: any value)
} cli_flag;

typedef struct {
    const char *name;         // "ppl"
    const char *synopsis;     // "MODEL --text FILE [options]"
    const char *summary;      // one line
    const cli_flag *flags;
    int n_flags;
    int n_positional;         // required positional arguments
    const char **positional;  // filled with argv pointers
    unsigned *seen;           // receives the bits of the flags given (NULL: not recorded)
} cli_command;

// Parses argv[1..] (argv[0] is the subcommand): every value checked against
// its kind and range. Returns 0 on success, 1 if
// --help was printed (exit 0), -1 on a usage error (already printed; exit 2).
int cli_parse(const cli_command *cmd, int argc, char **argv);
void cli_usage(const cli_command *cmd, FILE *out);

// Exit code for a failed library call after printing "pq <cmd>: <message>":
// 2 for usage errors (PQ_ERR_ARG), 1 otherwise.
int cli_fail(const char *cmd, pq_status s);

// Progress on stderr: a redrawn bar on a terminal, otherwise a line each
// time `done` crosses another tenth of `total`.
typedef struct {
    const char *label;
    int tty;
    int last_tenth;
    double t0;
} cli_progress;
void cli_progress_init(cli_progress *p, const char *label);
void cli_progress_update(cli_progress *p, int done, int total, const char *extra);

// Prints obj (stolen: freed here) on stdout as one line of JSON, strings
// escaped, reals with 10 significant digits; returns 0. NULL (json_pack
// failed: out of memory, or a path that is not UTF-8) prints one line on
// stderr instead and returns 1.
typedef struct json_t json_t;
int cli_print_json(const char *cmd, json_t *obj);

// Parses "auto|cpu|cuda"-style device names (index into that list).
extern const char *const CLI_DEVICE_CHOICES;

// Installs the handlers every command runs under, for messages as "pq
// <cmd>: ...": SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGPIPE remove the
// temporary outputs registered in common/cleanup.h (a resumable run's is
// kept, with a line saying so) and end the process by the signal; SIGBUS in
// a mapped input file (truncated while pq reads it) prints one line naming
// the file, removes the temporary outputs and exits 1. SIGXFSZ is ignored:
// a write past a file size limit fails (EFBIG) like one to a full disk.
void cli_signals(const char *cmd);

// After a command: its results must have reached stdout. A write error
// (a full disk, a closed pipe) prints one line and turns rc into 1.
int cli_finish_stdout(const char *cmd, int rc);

#endif
