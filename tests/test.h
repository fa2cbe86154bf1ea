// tests/test.h — the tiny shared test header.
//
// Each test binary prints one line per check: "ok - what", "FAIL - what:
// detail" or "skip - what: why", and exits non-zero if any check failed.
// tests/run.sh counts the lines of every binary and prints the totals.
#ifndef PQ_TEST_H
#define PQ_TEST_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int pq_test_failures;

#define PQ_CHECK(cond, ...)                                         \
    do {                                                            \
        if (cond) { printf("ok - "); printf(__VA_ARGS__); printf("\n"); } \
        else { pq_test_failures++; printf("FAIL - "); printf(__VA_ARGS__); \
               printf(" (%s:%d: %s)\n", __FILE__, __LINE__, #cond); }      \
        fflush(stdout);                                             \
    } while (0)

static inline void pq_test_skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("skip - ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

// Where ../shared lives (PQ_SHARED overrides); tests run from the repo root.
static inline const char *pq_test_shared(void) {
    const char *s = getenv("PQ_SHARED");
    return s && *s ? s : "../shared";
}

// Joins the shared root and a relative path into a static buffer.
static inline const char *pq_test_path(const char *rel) {
    static char buf[8][1024];
    static int slot;
    char *b = buf[slot++ & 7];
    snprintf(b, sizeof buf[0], "%s/%s", pq_test_shared(), rel);
    return b;
}

// Relative L2 error ||got - want|| / ||want|| in double.
static inline double pq_rel_l2(const float *got, const float *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

// |got - want| <= atol + rtol*|want| everywhere; prints the worst element on failure.
static inline int pq_allclose(const float *got, const float *want, size_t n, double atol, double rtol) {
    size_t worst = 0;
    double worst_excess = -1;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]), lim = atol + rtol * fabs((double)want[i]);
        if (!(err <= lim) && (err - lim > worst_excess || isnan(err))) {
            worst_excess = isnan(err) ? INFINITY : err - lim;
            worst = i;
        }
    }
    if (worst_excess < 0) return 1;
    printf("    worst element %zu: got %.9g want %.9g\n", worst, got[worst], want[worst]);
    return 0;
}

// Deterministic-per-call but fresh-per-run random numbers (xorshift), seeded
// from the clock unless PQ_TEST_SEED is set; the seed is printed so a
// failure can be replayed.
static uint64_t pq_test_rng_state;
static inline void pq_test_seed(void) {
    const char *s = getenv("PQ_TEST_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 10) : 0;
    if (!seed) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        seed = (uint64_t)t.tv_nsec * 2654435761u + (uint64_t)t.tv_sec;
    }
    pq_test_rng_state = seed | 1;
    printf("# seed %llu (PQ_TEST_SEED to replay)\n", (unsigned long long)seed);
}
static inline uint64_t pq_test_u64(void) {
    uint64_t x = pq_test_rng_state;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return pq_test_rng_state = x;
}
// uniform in [-1, 1)
static inline float pq_test_uniform(void) { return (float)((pq_test_u64() >> 40) * (2.0 / 16777216.0) - 1.0); }
static inline float pq_test_normal(void) {
    double u1 = ((pq_test_u64() >> 11) + 1.0) / 9007199254740993.0, u2 = (pq_test_u64() >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
}
static inline void pq_test_fill(float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = scale * pq_test_normal();
}
// poison an output so unwritten elements show up
static inline void pq_test_poison(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = NAN;
}

// Skips the rest of a GPU test function when there is no device; with
// PQ_REQUIRE_GPU=1 (make test-gpu) a missing device is a failure instead.
#define PQ_SKIP_UNLESS_GPU(have_gpu, what)                                  \
    do {                                                                    \
        if (!(have_gpu)) {                                                  \
            const char *req = getenv("PQ_REQUIRE_GPU");                     \
            if (req && *req == '1') { pq_test_failures++; printf("FAIL - %s: no GPU (make test-gpu)\n", what); } \
            else pq_test_skip("%s: no GPU", what);                          \
            return;                                                         \
        }                                                                   \
    } while (0)

static inline int pq_test_done(void) { return pq_test_failures ? 1 : 0; }

// Runs this test binary again in a child process with PQ_ISA=isa (and arg
// as its one argument, or none): one check, "<what> checks pass under
// PQ_ISA=<isa>".
static inline void pq_test_rerun_with_isa(const char *what, const char *isa, const char *arg) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("PQ_ISA", isa, 1);
        execl("/proc/self/exe", "test", arg, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    PQ_CHECK(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s checks pass under PQ_ISA=%s", what, isa);
}

#endif
