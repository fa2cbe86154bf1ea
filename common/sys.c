#include "sys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void *pq_alloc(size_t bytes) {
    if (bytes == 0) return NULL;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded < bytes) return NULL;
    return aligned_alloc(64, rounded);
}

void *pq_calloc(size_t bytes) {
    void *p = pq_alloc(bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

void pq_free(void *p) { free(p); }

double pq_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

double pq_cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static size_t status_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t kib = 0, klen = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, klen) == 0) { kib = strtoull(line + klen, NULL, 10); break; }
    fclose(f);
    return kib * 1024;
}

size_t pq_peak_rss_bytes(void) { return status_kib("VmHWM:"); }
size_t pq_rss_bytes(void) { return status_kib("VmRSS:"); }

int pq_peak_rss_reset(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}
