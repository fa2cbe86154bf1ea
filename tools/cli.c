#include "cli.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/sys.h"

const char *const CLI_DEVICE_CHOICES = "auto|cpu|cuda";

// Index of `value` in "a|b|c", or -1.
static int choice_index(const char *choices, const char *value) {
    int idx = 0;
    size_t vlen = strlen(value);
    for (const char *p = choices;; idx++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == vlen && strncmp(p, value, len) == 0) return idx;
        if (!bar) return -1;
        p = bar + 1;
    }
}

static const char *choice_name(const char *choices, int index, char *buf, size_t cap) {
    const char *p = choices;
    for (int i = 0; i < index && p; i++) {
        p = strchr(p, '|');
        if (p) p++;
    }
    if (!p) return "?";
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    snprintf(buf, cap, "%.*s", (int)len, p);
    return buf;
}

// "0..1024" (integers) or "[1e-12, 100]" (reals).
static const char *range_str(const cli_flag *f, char *buf, size_t cap) {
    if (f->kind == FLAG_INT) snprintf(buf, cap, "%.0f..%.0f", f->min, f->max);
    else snprintf(buf, cap, "[%g, %g]", f->min, f->max);
    return buf;
}

void cli_usage(const cli_command *cmd, FILE *out) {
    fprintf(out, "usage: pq %s %s\n%s\n\noptions:\n", cmd->name, cmd->synopsis, cmd->summary);
    for (int i = 0; i < cmd->n_flags; i++) {
        const cli_flag *f = &cmd->flags[i];
        char left[64], dflt[128] = "", tmp[64];
        switch (f->kind) {
        case FLAG_INT: snprintf(dflt, sizeof dflt, "%d", *(int *)f->dst); break;
        case FLAG_DOUBLE: snprintf(dflt, sizeof dflt, "%g", *(double *)f->dst); break;
        case FLAG_STR: snprintf(dflt, sizeof dflt, "%s", *(const char **)f->dst ? *(const char **)f->dst : "none"); break;
        case FLAG_CHOICE: snprintf(dflt, sizeof dflt, "%s", choice_name(f->choices, *(int *)f->dst, tmp, sizeof tmp)); break;
        case FLAG_BOOL: break;
        }
        if (f->kind == FLAG_CHOICE) snprintf(left, sizeof left, "%s %s", f->name, f->choices);
        else if (f->kind == FLAG_BOOL) snprintf(left, sizeof left, "%s", f->name);
        else snprintf(left, sizeof left, "%s %s", f->name, f->metavar ? f->metavar : "X");
        if (f->max > f->min) {
            size_t n = strlen(dflt);
            snprintf(dflt + n, sizeof dflt - n, ", valid %s", range_str(f, tmp, sizeof tmp));
        }
        if (dflt[0]) fprintf(out, "  %-26s %s (default: %s)\n", left, f->help, dflt);
        else fprintf(out, "  %-26s %s\n", left, f->help);
    }
    fprintf(out, "  %-26s %s\n", "--help", "print this help");
}

static int usage_error(const cli_command *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const cli_command *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "pq %s: ", cmd->name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see pq %s --help)\n", cmd->name);
    va_end(ap);
    return -1;
}

static int parse_value(const cli_command *cmd, const cli_flag *f, const char *v) {
    char *end, range[64];
    errno = 0;
    switch (f->kind) {
    case FLAG_INT: {
        long x = strtol(v, &end, 10);
        if (*v == '\0' || *end) return usage_error(cmd, "%s: '%s' is not an integer", f->name, v);
        if (f->max > f->min && (errno || x < f->min || x > f->max))
            return usage_error(cmd, "%s %s: not in %s", f->name, v, range_str(f, range, sizeof range));
        if (errno || x < -2147483647L || x > 2147483647L)
            return usage_error(cmd, "%s %s: out of range", f->name, v);
        *(int *)f->dst = (int)x;
        return 0;
    }
    case FLAG_DOUBLE: {
        double x = strtod(v, &end); // an underflow (1e-320) is a value, judged by the range
        if (*v == '\0' || *end || x != x) return usage_error(cmd, "%s: '%s' is not a number", f->name, v);
        if (f->max > f->min && !(x >= f->min && x <= f->max))
            return usage_error(cmd, "%s %s: not in %s", f->name, v, range_str(f, range, sizeof range));
        *(double *)f->dst = x;
        return 0;
    }
    case FLAG_STR: *(const char **)f->dst = v; return 0;
    case FLAG_CHOICE: {
        int idx = choice_index(f->choices, v);
        if (idx < 0) return usage_error(cmd, "%s: '%s' is not one of the choices", f->name, v);
        *(int *)f->dst = idx;
        return 0;
    }
    case FLAG_BOOL: break;
    }
    return 0;
}

int cli_parse(const cli_command *cmd, int argc, char **argv) {
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { cli_usage(cmd, stdout); return 1; }
        if (a[0] == '-' && a[1] != '\0') {
            const char *eq = strchr(a, '=');
            size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
            const cli_flag *f = NULL;
            for (int k = 0; k < cmd->n_flags && !f; k++)
                if (strlen(cmd->flags[k].name) == nlen && strncmp(cmd->flags[k].name, a, nlen) == 0) f = &cmd->flags[k];
            if (!f) return usage_error(cmd, "unknown option %s", a);
            if (cmd->seen) *cmd->seen |= f->bit;
            if (f->kind == FLAG_BOOL) {
                if (eq) return usage_error(cmd, "%s takes no value", f->name);
                *(int *)f->dst = f->value;
                continue;
            }
            const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v) return usage_error(cmd, "%s needs a value", f->name);
            if (parse_value(cmd, f, v) != 0) return -1;
            continue;
        }
        if (npos >= cmd->n_positional) return usage_error(cmd, "unexpected argument '%s'", a);
        cmd->positional[npos++] = a;
    }
    if (npos < cmd->n_positional) return usage_error(cmd, "missing argument");
    return 0;
}

int cli_fail(const char *cmd, pq_status s) {
    fprintf(stderr, "pq %s: %s\n", cmd, pq_last_error());
    return s == PQ_ERR_ARG ? 2 : 1;
}

void cli_progress_init(cli_progress *p, const char *label) {
    p->label = label;
    p->tty = isatty(2);
    p->last_tenth = 0;
    p->t0 = pq_now();
}

void cli_progress_update(cli_progress *p, int done, int total, const char *extra) {
    double el = pq_now() - p->t0;
    if (p->tty) {
        int width = 30, fill = total ? (int)((long long)done * width / total) : width;
        fprintf(stderr, "\r%s [%.*s%*s] %d/%d %s %.0fs", p->label, fill, "##############################",
                width - fill, "", done, total, extra ? extra : "", el);
        if (done == total) fputc('\n', stderr);
        fflush(stderr);
        return;
    }
    int tenth = total ? (int)((long long)done * 10 / total) : 10;
    if (tenth > p->last_tenth || done == total) {
        p->last_tenth = tenth;
        fprintf(stderr, "%s %d/%d %s %.0fs\n", p->label, done, total, extra ? extra : "", el);
    }
}

int cli_print_json(const char *cmd, json_t *obj) {
    if (!obj) {
        fprintf(stderr, "pq %s: cannot write the result as JSON (out of memory, or a path that is not UTF-8)\n", cmd);
        return 1;
    }
    json_dumpf(obj, stdout, JSON_REAL_PRECISION(10));
    putchar('\n');
    json_decref(obj);
    return 0;
}

// ---- signals and stdout ---------------------------------------------------------

static char sig_prefix[64] = "pq"; // "pq <cmd>", for the bus error's line

static void say(const char *s) {
    ssize_t w = write(2, s, strlen(s));
    (void)w;
}

static void on_signal(int sig) {
    pq_cleanup_run();
    signal(sig, SIG_DFL);
    raise(sig); // delivered once the handler returns: the process ends by the signal
}

static void on_bus(int sig, siginfo_t *si, void *ctx) {
    const char *path = pq_cleanup_map_path(si->si_addr);
    if (path) {
        say(sig_prefix), say(": "), say(path);
        say(": changed on disk while pq was reading it (it is shorter than when it was opened)\n");
    }
    pq_cleanup_run();
    if (path) _exit(1);
    signal(sig, SIG_DFL); // not an input file: a bug, reported by the default action
}

void cli_signals(const char *cmd) {
    snprintf(sig_prefix, sizeof sig_prefix, "pq %s", cmd);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, NULL);
    sa.sa_handler = NULL;
    sa.sa_sigaction = on_bus;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGBUS, &sa, NULL);
    // a file size limit (ulimit -f) fails the write with EFBIG, reported like
    // a full disk and cleaned up, instead of killing the process mid-write
    signal(SIGXFSZ, SIG_IGN);
}

int cli_finish_stdout(const char *cmd, int rc) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return rc;
    fprintf(stderr, "pq %s: cannot write the result to stdout: %s\n", cmd, errno ? strerror(errno) : "write error");
    return 1;
}
