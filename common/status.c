#include "status.h"

#include <stdarg.h>
#include <string.h>

static _Thread_local char last_error[1024];

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

pq_status pq_fail_(pq_status code, const char *file, int line, const char *fmt, ...) {
    int n = snprintf(last_error, sizeof last_error, "%s:%d: ", file, line);
    if (n < 0 || (size_t)n >= sizeof last_error) n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
    va_end(ap);
    // one line, always: a message quoting file contents must not break it
    for (char *p = last_error; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return code;
}

pq_status pq_fail_context(pq_status code, const char *fmt, ...) {
    char prefix[512], old[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    // keep "file:line: " first so the origin stays visible
    const char *msg = old;
    const char *colon = strstr(old, ": ");
    size_t head = 0;
    if (colon && colon - old < 64) { head = (size_t)(colon - old) + 2; msg = old + head; }
    char joined[sizeof old + sizeof prefix + 4];
    snprintf(joined, sizeof joined, "%.*s%s: %s", (int)head, old, prefix, msg);
    memcpy(last_error, joined, sizeof last_error - 1);
    last_error[sizeof last_error - 1] = '\0';
    for (char *p = last_error; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return code;
}
