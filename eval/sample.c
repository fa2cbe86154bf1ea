#include "eval/sample.h"

#include <math.h>
#include <stdlib.h>

void pq_rng_seed(pq_rng *r, uint64_t seed) { r->s = seed; }

uint64_t pq_rng_next(pq_rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double pq_rng_uniform(pq_rng *r) { return (double)(pq_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

// Candidates the top-p search selects first when top-k is off; doubled until
// the kept mass reaches top_p.
#define FIRST_SELECT 256

struct pq_sampler {
    pq_sample_params p;
    int vocab;
    pq_rng rng;
    int32_t *cand;  // [vocab] the best candidates, best first
};

pq_sample_params pq_sample_default_params(void) {
    return (pq_sample_params){.temp = 0.0, .top_k = 40, .top_p = 0.95, .seed = 0};
}

pq_status pq_sample_check(const pq_sample_params *p) {
    PQ_FAIL_IF(!(p->temp >= 0) || isinf(p->temp), PQ_ERR_ARG, "--temp %g: must be a finite number >= 0", p->temp);
    PQ_FAIL_IF(p->top_k < 0, PQ_ERR_ARG, "--top-k %d: must be >= 0 (0 = off)", p->top_k);
    PQ_FAIL_IF(!(p->top_p > 0 && p->top_p <= 1), PQ_ERR_ARG, "--top-p %g: must be in (0, 1] (1 = off)", p->top_p);
    return PQ_OK;
}

pq_status pq_sampler_create(const pq_sample_params *p, int vocab, pq_sampler **out) {
    *out = NULL;
    PQ_TRY(pq_sample_check(p));
    PQ_FAIL_IF(vocab < 1, PQ_ERR_ARG, "a vocabulary of %d ids", vocab);
    pq_sampler *s = calloc(1, sizeof *s);
    PQ_FAIL_IF(!s, PQ_ERR_NOMEM, "out of memory");
    s->cand = malloc((size_t)vocab * sizeof *s->cand);
    if (!s->cand) {
        free(s);
        return PQ_FAIL(PQ_ERR_NOMEM, "out of memory for a sampler of %d ids", vocab);
    }
    s->p = *p;
    s->vocab = vocab;
    pq_rng_seed(&s->rng, p->seed);
    *out = s;
    return PQ_OK;
}

void pq_sampler_free(pq_sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s);
}

// The total order: a before b.
static int better(const float *l, int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); }

// Sift h[i] down a heap of n whose root is the worst candidate.
static void sift_down(const float *l, int32_t *h, int n, int i) {
    for (;;) {
        int w = i, a = 2 * i + 1, b = a + 1;
        if (a < n && better(l, h[w], h[a])) w = a;
        if (b < n && better(l, h[w], h[b])) w = b;
        if (w == i) return;
        int32_t t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

// The best n of all ids into h[0..n), best first.
static void select_best(const float *l, int vocab, int n, int32_t *h) {
    for (int i = 0; i < n; i++) h[i] = i;
    for (int i = n / 2 - 1; i >= 0; i--) sift_down(l, h, n, i);
    for (int32_t id = n; id < vocab; id++)
        if (better(l, id, h[0])) {
            h[0] = id;
            sift_down(l, h, n, 0);
        }
    for (int k = n - 1; k > 0; k--) { // heap sort: the worst goes last
        int32_t t = h[0];
        h[0] = h[k];
        h[k] = t;
        sift_down(l, h, k, 0);
    }
}

static double weight(const float *l, int32_t id, float mx, double temp) { return exp(((double)l[id] - mx) / temp); }

pq_status pq_sampler_pick(pq_sampler *s, const float *logits, int32_t *id) {
    int V = s->vocab, best = -1;
    for (int i = 0; i < V; i++) {
        PQ_FAIL_IF(isnan(logits[i]) || logits[i] == INFINITY, PQ_ERR_NUMERIC, "logit of token %d is %g", i,
                   (double)logits[i]);
        if (logits[i] > -INFINITY && (best < 0 || logits[i] > logits[best])) best = i;
    }
    PQ_FAIL_IF(best < 0, PQ_ERR_NUMERIC, "no finite logit among %d tokens", V);
    *id = best;
    const pq_sample_params *p = &s->p;
    if (p->temp == 0) return PQ_OK;
    float mx = logits[best];
    int k = p->top_k > 0 && p->top_k < V ? p->top_k : V;
    if (k == V && p->top_p >= 1) { // the whole distribution, in id order
        double total = 0;
        for (int i = 0; i < V; i++) total += weight(logits, i, mx, p->temp);
        double u = pq_rng_uniform(&s->rng) * total, cum = 0;
        for (int i = 0; i < V; i++) {
            double w = weight(logits, i, mx, p->temp);
            cum += w;
            if (w > 0) *id = i;
            if (cum > u && w > 0) break;
        }
        return PQ_OK;
    }
    // the top-k set's mass, then the shortest prefix of it holding top_p of that
    double total = 0, cum = 0;
    int n = k, kept;
    if (k < V) {
        select_best(logits, V, k, s->cand);
        for (int i = 0; i < k; i++) total += weight(logits, s->cand[i], mx, p->temp);
    } else {
        for (int i = 0; i < V; i++) total += weight(logits, i, mx, p->temp);
        n = FIRST_SELECT < V ? FIRST_SELECT : V;
        select_best(logits, V, n, s->cand);
    }
    for (;;) {
        cum = 0;
        for (kept = 0; kept < n && (kept == 0 || cum < p->top_p * total); kept++)
            cum += weight(logits, s->cand[kept], mx, p->temp);
        if (cum >= p->top_p * total || n == k) break;
        n = 2 * n < k ? 2 * n : k; // the mass is not reached yet: select more candidates
        select_best(logits, V, n, s->cand);
    }
    double u = pq_rng_uniform(&s->rng) * cum;
    cum = 0;
    *id = s->cand[0];
    for (int i = 0; i < kept; i++) {
        double w = weight(logits, s->cand[i], mx, p->temp);
        cum += w;
        if (w > 0) *id = s->cand[i];
        if (cum > u && w > 0) break;
    }
    return PQ_OK;
}
