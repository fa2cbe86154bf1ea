// common/threads.h: every item of every loop runs exactly once, with a tid
// inside the pool, its writes visible when pq_pool_for returns, and never
// with another loop's function (loops alternate between two functions on
// separate arrays, on more threads than cores so that workers are preempted
// and wake late).
#include <stdatomic.h>

#include "common/threads.h"
#include "tests/test.h"

#define MAXN 64

typedef struct {
    int *slot;        // [MAXN] the loop's writes (plain stores)
    atomic_int *hits; // [MAXN] executions per item
    int tag, nthreads;
    atomic_int bad_tid;
} loop_ctx;

static void item(void *c, int i, int tid) {
    loop_ctx *l = c;
    if (tid < 0 || tid >= l->nthreads) atomic_fetch_add(&l->bad_tid, 1);
    atomic_fetch_add(&l->hits[i], 1);
    l->slot[i] = l->tag;
}

static void item_other(void *c, int i, int tid) { item(c, i, tid); }

static void check_pool(int nthreads, int loops) {
    pq_pool *pool;
    if (pq_pool_create(nthreads, &pool) != PQ_OK) { PQ_CHECK(0, "pool of %d (%s)", nthreads, pq_last_error()); return; }
    int slots[2][MAXN];
    atomic_int hits[2][MAXN];
    loop_ctx ctx[2] = {{slots[0], hits[0], 0, nthreads, 0}, {slots[1], hits[1], 0, nthreads, 0}};
    int wrong = 0, stale = 0;
    for (int k = 0; k < loops; k++) {
        int w = k & 1, n = 1 + (int)(pq_test_u64() % MAXN);
        loop_ctx *l = &ctx[w];
        l->tag = k + 1;
        for (int i = 0; i < MAXN; i++) atomic_store(&l->hits[i], 0);
        pq_pool_for(pool, n, w ? item_other : item, l);
        for (int i = 0; i < MAXN; i++) {
            wrong += atomic_load(&l->hits[i]) != (i < n);
            stale += i < n && l->slot[i] != k + 1;
        }
    }
    PQ_CHECK(!wrong && !stale && !ctx[0].bad_tid && !ctx[1].bad_tid,
             "pool of %d threads, %d loops of 1..%d items: each item once, tid in range, writes visible "
             "(%d wrong counts, %d stale writes)", nthreads, loops, MAXN, wrong, stale);
    pq_pool_free(pool);
}

int main(void) {
    pq_test_seed();
    check_pool(2, 20000);
    check_pool(5, 20000);
    check_pool(1, 100);
    return pq_test_done();
}
