// common/status.h — how every pq library call reports failure.
//
// Library code never prints and never exits. A failing call records one line
// ("formats/safetensors.c:88: model.safetensors: tensor 'x' data_offsets
// [12,9] end before start") in a thread-local buffer and returns a non-OK
// pq_status. Only tools/ turns that into text and an exit code.
#ifndef PQ_STATUS_H
#define PQ_STATUS_H

#include <stdio.h>
#include <stdlib.h>

typedef enum {
    PQ_OK = 0,
    PQ_ERR_ARG,       // caller passed something invalid (a usage error)
    PQ_ERR_IO,        // open/read/write/fsync/rename failed
    PQ_ERR_FORMAT,    // a file's contents are malformed or inconsistent
    PQ_ERR_NOMEM,     // an allocation failed
    PQ_ERR_NUMERIC,   // NaN/Inf, a failed factorization
    PQ_ERR_CUDA,      // a CUDA / cuBLAS call failed
    PQ_ERR_NO_DEVICE, // a GPU was asked for and there is none
} pq_status;

// The message of the most recent failure on this thread ("" if none).
// Valid until the next failing pq call on the same thread.
const char *pq_last_error(void);

// Short name of a status code ("format error", ...). Never NULL.
const char *pq_status_name(pq_status s);

// Records "file:line: message" and returns code. Use through PQ_FAIL_IF.
pq_status pq_fail_(pq_status code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

// Prepends "context: " to the current error message (e.g. a file name when a
// lower layer only knew an offset) and returns code.
pq_status pq_fail_context(pq_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// Records msg as it is (a failure another thread recorded, from its
// pq_last_error) and returns code.
pq_status pq_fail_message(pq_status code, const char *msg);

#define PQ_FAIL(code, ...) pq_fail_((code), __FILE__, __LINE__, __VA_ARGS__)

#define PQ_FAIL_IF(cond, code, ...)                                   \
    do {                                                              \
        if (cond) return pq_fail_((code), __FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

#define PQ_TRY(expr)                    \
    do {                                \
        pq_status pq_try_s_ = (expr);   \
        if (pq_try_s_ != PQ_OK) return pq_try_s_; \
    } while (0)

// For functions that clean up through a `done:` label: sets `st` and jumps.
#define PQ_CHECK_GOTO(cond, st, code, ...)                            \
    do {                                                              \
        if (cond) { (st) = pq_fail_((code), __FILE__, __LINE__, __VA_ARGS__); goto done; } \
    } while (0)

#define PQ_TRY_GOTO(st, expr)                 \
    do {                                      \
        (st) = (expr);                        \
        if ((st) != PQ_OK) goto done;         \
    } while (0)

// A compile-time check in a header compiled both as C (gcc) and as C++
// (nvcc): a struct layout the host code and the CUDA kernels share.
#ifdef __cplusplus
#define PQ_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define PQ_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif
#define PQ_ROUND_UP(n, m) (((n) + (m) - 1) / (m) * (m))

// A broken invariant (a bug in pq, not bad data): print and abort.
#define PQ_ASSERT(x)                                                         \
    do {                                                                     \
        if (!(x)) {                                                          \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #x); \
            abort();                                                         \
        }                                                                    \
    } while (0)

#endif
