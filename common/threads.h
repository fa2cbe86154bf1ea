// common/threads.h — a fixed pool of worker threads running parallel loops.
//
// pq_pool_for(pool, n, fn, ctx) calls fn(ctx, i, tid) once for every i in
// [0, n), spread over the pool's threads (the caller is thread 0), and
// returns when all calls are done. tid is in [0, pq_pool_size(pool)) and
// identifies a per-thread scratch slot. A NULL pool runs the loop serially
// on the calling thread. One loop at a time per pool.
#ifndef PQ_THREADS_H
#define PQ_THREADS_H

#include "status.h"

typedef struct pq_pool pq_pool;

#define PQ_MAX_THREADS 1024

// nthreads 0 means one thread per online CPU; 1..PQ_MAX_THREADS that many;
// anything else is PQ_ERR_ARG ("--threads N: not in 0..1024"). On error *out
// is NULL.
pq_status pq_pool_create(int nthreads, pq_pool **out);
void pq_pool_free(pq_pool *pool); // NULL-safe
int pq_pool_size(const pq_pool *pool); // 1 for NULL

void pq_pool_for(pq_pool *pool, int n, void (*fn)(void *ctx, int i, int tid), void *ctx);

// Number of online CPUs (at least 1).
int pq_cpu_count(void);

#endif
