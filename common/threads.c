#include "threads.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

// A loop's items are claimed through `claim`: the loop's generation in the
// high 32 bits, the next item in the low 32, so a worker that wakes late (or
// is preempted between reading the loop and claiming) can never take an
// item of a later loop with the earlier loop's function. The caller returns
// when every item has been done (`done`), not when every worker has woken:
// on a busy machine a worker may not run for milliseconds, and a decode step
// runs hundreds of loops.
//
// Waking a sleeping thread costs tens of microseconds on a VM, more than a
// decode step's small linears take: so a worker that finished a loop, and
// the caller waiting for the last items, first poll for up to SPIN_NS
// (yielding the CPU between polls, so an idle thread never keeps a runnable
// one off a busy machine's cores), and only then sleep on the condition
// variable. A decode step's loops follow each other within microseconds.
#define SPIN_NS 100000
struct pq_pool {
    int nthreads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t start, finished;
    // the current loop (written under mu before the generation is published)
    void (*fn)(void *, int, int);
    void *ctx;
    int n;
    uint32_t generation;     // bumped for every loop; workers wait for a new one
    _Atomic uint64_t claim;  // generation << 32 | next item
    atomic_int done;         // items of the current loop finished
    _Atomic uint32_t published; // generation, for polling without the mutex
    int sleepers;            // workers waiting on `start` (under mu)
    atomic_int stop;
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// Polls, yielding the CPU between looks, for up to SPIN_NS until a loop
// after `seen` is published or the pool stops (checked again under mu).
static void poll_new_loop(pq_pool *p, uint32_t seen) {
    uint64_t end = now_ns() + SPIN_NS;
    while (atomic_load(&p->published) == seen && !atomic_load(&p->stop) && now_ns() < end) sched_yield();
}

// The same, until the current loop's n items are done.
static void poll_done(pq_pool *p, int n) {
    uint64_t end = now_ns() + SPIN_NS;
    while (atomic_load(&p->done) < n && now_ns() < end) sched_yield();
}

typedef struct { pq_pool *pool; int tid; } worker_arg;

typedef struct {
    void (*fn)(void *, int, int);
    void *ctx;
    int n;
    uint32_t gen;
} loop_view;

// Runs items of loop v until none is left; the thread that finishes the
// last one wakes the caller.
static void run_items(pq_pool *p, const loop_view *v, int tid) {
    uint64_t cur = atomic_load(&p->claim);
    for (;;) {
        if ((uint32_t)(cur >> 32) != v->gen || (uint32_t)cur >= (uint32_t)v->n) return;
        if (!atomic_compare_exchange_weak(&p->claim, &cur, cur + 1)) continue;
        v->fn(v->ctx, (int)(uint32_t)cur, tid);
        if (atomic_fetch_add(&p->done, 1) + 1 == v->n) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->finished);
            pthread_mutex_unlock(&p->mu);
        }
        cur = atomic_load(&p->claim);
    }
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    pq_pool *p = wa->pool;
    int tid = wa->tid;
    free(wa);
    uint32_t seen = 0;
    for (;;) {
        poll_new_loop(p, seen);
        pthread_mutex_lock(&p->mu);
        while (!p->stop && p->generation == seen) {
            p->sleepers++;
            pthread_cond_wait(&p->start, &p->mu);
            p->sleepers--;
        }
        if (p->stop) break;
        seen = p->generation;
        loop_view v = {p->fn, p->ctx, p->n, seen};
        pthread_mutex_unlock(&p->mu);
        run_items(p, &v, tid);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int pq_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

pq_status pq_pool_create(int nthreads, pq_pool **out) {
    *out = NULL;
    PQ_FAIL_IF(nthreads < 0 || nthreads > PQ_MAX_THREADS, PQ_ERR_ARG, "--threads %d: not in 0..%d (0: one per CPU)",
               nthreads, PQ_MAX_THREADS);
    if (nthreads == 0) nthreads = pq_cpu_count();
    pq_pool *p = calloc(1, sizeof *p);
    PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "thread pool: out of memory");
    p->nthreads = nthreads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->finished, NULL);
    p->threads = calloc((size_t)nthreads, sizeof *p->threads);
    if (!p->threads) { pq_pool_free(p); return PQ_FAIL(PQ_ERR_NOMEM, "thread pool: out of memory"); }
    for (int t = 1; t < nthreads; t++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (wa) { wa->pool = p; wa->tid = t; }
        if (!wa || pthread_create(&p->threads[t], NULL, worker_main, wa) != 0) {
            free(wa);
            p->nthreads = t; // join only what started
            pq_pool_free(p);
            return PQ_FAIL(PQ_ERR_NOMEM, "thread pool: cannot start thread %d of %d", t, nthreads);
        }
    }
    *out = p;
    return PQ_OK;
}

void pq_pool_free(pq_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    for (int t = 1; t < p->nthreads; t++) pthread_join(p->threads[t], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->finished);
    free(p->threads);
    free(p);
}

int pq_pool_size(const pq_pool *p) { return p ? p->nthreads : 1; }

void pq_pool_for(pq_pool *p, int n, void (*fn)(void *ctx, int i, int tid), void *ctx) {
    if (n <= 0) return;
    if (!p || p->nthreads == 1 || n == 1) {
        for (int i = 0; i < n; i++) fn(ctx, i, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    uint32_t gen = ++p->generation;
    atomic_store(&p->done, 0);
    atomic_store(&p->claim, (uint64_t)gen << 32);
    atomic_store(&p->published, gen);
    if (p->sleepers) pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    loop_view v = {fn, ctx, n, gen};
    run_items(p, &v, 0);
    poll_done(p, n);
    pthread_mutex_lock(&p->mu);
    while (atomic_load(&p->done) < n) pthread_cond_wait(&p->finished, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
