#include "status.h"

#include <stdarg.h>
#include <string.h>

// Big enough for a message naming three paths of PATH_MAX (4096) bytes; a
// longer one keeps its start (file:line, the first path) and its end (the
// reason), with the middle replaced by " ... ".
#define ERROR_CAP 16384
#define SCRATCH_CAP 65536

static _Thread_local char last_error[ERROR_CAP];
static _Thread_local char scratch[SCRATCH_CAP];

const char *pq_last_error(void) { return last_error; }

const char *pq_status_name(pq_status s) {
    switch (s) {
    case PQ_OK: return "ok";
    case PQ_ERR_ARG: return "invalid argument";
    case PQ_ERR_IO: return "I/O error";
    case PQ_ERR_FORMAT: return "format error";
    case PQ_ERR_NOMEM: return "out of memory";
    case PQ_ERR_NUMERIC: return "numerical error";
    case PQ_ERR_CUDA: return "CUDA error";
    case PQ_ERR_NO_DEVICE: return "no device";
    }
    return "unknown status";
}

// scratch (n bytes) into last_error as one line, eliding its middle when it
// does not fit.
static void store(size_t n) {
    if (n >= SCRATCH_CAP) n = SCRATCH_CAP - 1;
    if (n < ERROR_CAP) {
        memcpy(last_error, scratch, n);
        last_error[n] = '\0';
    } else {
        static const char gap[] = " ... ";
        size_t head = ERROR_CAP / 2, tail = ERROR_CAP - 1 - head - (sizeof gap - 1);
        memcpy(last_error, scratch, head);
        memcpy(last_error + head, gap, sizeof gap - 1);
        memcpy(last_error + head + sizeof gap - 1, scratch + n - tail, tail);
        last_error[ERROR_CAP - 1] = '\0';
    }
    // one line, always: a message quoting file contents must not break it
    for (char *p = last_error; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
}

pq_status pq_fail_(pq_status code, const char *file, int line, const char *fmt, ...) {
    int n = snprintf(scratch, sizeof scratch, "%s:%d: ", file, line);
    if (n < 0 || (size_t)n >= sizeof scratch) n = 0;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(scratch + n, sizeof scratch - (size_t)n, fmt, ap);
    va_end(ap);
    store((size_t)n + (m > 0 ? (size_t)m : 0));
    return code;
}

pq_status pq_fail_message(pq_status code, const char *msg) {
    int n = snprintf(scratch, sizeof scratch, "%s", msg);
    store(n > 0 ? (size_t)n : 0);
    return code;
}

pq_status pq_fail_context(pq_status code, const char *fmt, ...) {
    static _Thread_local char old[ERROR_CAP];
    memcpy(old, last_error, sizeof old);
    // keep "file:line: " first so the origin stays visible
    const char *colon = strstr(old, ": ");
    size_t head = colon && colon - old < 64 ? (size_t)(colon - old) + 2 : 0;
    memcpy(scratch, old, head);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(scratch + head, sizeof scratch - head, fmt, ap);
    va_end(ap);
    size_t n = head + (m > 0 ? (size_t)m : 0);
    if (n < sizeof scratch) n += (size_t)snprintf(scratch + n, sizeof scratch - n, ": %s", old + head);
    store(n);
    return code;
}
