#include "threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

struct pq_pool {
    int nthreads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t start, finished;
    // the current loop
    void (*fn)(void *, int, int);
    void *ctx;
    int n;
    atomic_int next;
    int generation;  // bumped for every loop; workers wait for a new one
    int active;      // workers still inside the current loop
    int stop;
};

typedef struct { pq_pool *pool; int tid; } worker_arg;

static void run_items(pq_pool *p, int tid) {
    for (;;) {
        int i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n) break;
        p->fn(p->ctx, i, tid);
    }
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    pq_pool *p = wa->pool;
    int tid = wa->tid;
    free(wa);
    int seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->generation == seen) pthread_cond_wait(&p->start, &p->mu);
        if (p->stop) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_items(p, tid);
        pthread_mutex_lock(&p->mu);
        if (--p->active == 0) pthread_cond_signal(&p->finished);
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
    atomic_store(&p->next, 0);
    p->active = p->nthreads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    run_items(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->active > 0) pthread_cond_wait(&p->finished, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
