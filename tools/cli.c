#include "cli.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
        if (dflt[0]) fprintf(out, "  %-26s %s (default: %s)\n", left, f->help, dflt);
        else fprintf(out, "  %-26s %s\n", left, f->help);
    }
    fprintf(out, "  %-26s %s\n", "--help", "print this help");
}

static int usage_error(const cli_command *cmd, const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "pq %s: ", cmd->name);
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, " (see pq %s --help)\n", cmd->name);
    return -1;
}

static int parse_value(const cli_command *cmd, const cli_flag *f, const char *v) {
    char *end;
    errno = 0;
    switch (f->kind) {
    case FLAG_INT: {
        long x = strtol(v, &end, 10);
        if (*v == '\0' || *end || errno || x < -2147483647L || x > 2147483647L)
            return usage_error(cmd, "%s: '%s' is not an integer", f->name, v);
        *(int *)f->dst = (int)x;
        return 0;
    }
    case FLAG_DOUBLE: {
        double x = strtod(v, &end);
        if (*v == '\0' || *end || errno) return usage_error(cmd, "%s: '%s' is not a number", f->name, v);
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
            if (!f) return usage_error(cmd, "unknown option %s%s", a, "");
            if (cmd->seen) *cmd->seen |= f->bit;
            if (f->kind == FLAG_BOOL) {
                if (eq) return usage_error(cmd, "%s takes no value%s", f->name, "");
                *(int *)f->dst = f->value;
                continue;
            }
            const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v) return usage_error(cmd, "%s needs a value%s", f->name, "");
            if (parse_value(cmd, f, v) != 0) return -1;
            continue;
        }
        if (npos >= cmd->n_positional) return usage_error(cmd, "unexpected argument '%s'%s", a, "");
        cmd->positional[npos++] = a;
    }
    if (npos < cmd->n_positional) return usage_error(cmd, "missing argument%s%s", "", "");
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
