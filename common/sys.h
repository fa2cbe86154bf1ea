// common/sys.h — small process-level helpers: aligned memory, clocks, RSS.
#ifndef PQ_SYS_H
#define PQ_SYS_H

#include <stddef.h>
#include <stdint.h>

// 64-byte aligned allocation; NULL on failure (or size 0). Free with pq_free.
void *pq_alloc(size_t bytes);
void *pq_calloc(size_t bytes);
void pq_free(void *p); // NULL-safe

// Monotonic wall clock in seconds.
double pq_now(void);

// CPU time of this process (every thread, user + system) in seconds.
double pq_cpu_seconds(void);

// Peak resident set size of this process in bytes (VmHWM), 0 if unknown.
size_t pq_peak_rss_bytes(void);
// Current resident set size in bytes (VmRSS), 0 if unknown.
size_t pq_rss_bytes(void);
// Resets the peak (VmHWM) to the current RSS (Linux /proc/self/clear_refs),
// so that pq_peak_rss_bytes measures one phase. Returns 0 on success.
int pq_peak_rss_reset(void);

#endif
