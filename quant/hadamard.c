// quant/hadamard.c — randomized Hadamard transforms (see hadamard.h).
#include "quant/hadamard.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sys.h"

// splitmix64: the seeded generator (as calib/data.c uses for its windows).
static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Uniform in (0, 1).
static double next_unit(uint64_t *s) { return ((double)(next_u64(s) >> 11) + 0.5) / 9007199254740992.0; }

static int is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

static int is_prime(int q) {
    if (q < 2) return 0;
    for (int d = 2; (long long)d * d <= q; d++)
        if (q % d == 0) return 0;
    return 1;
}

// The Paley construction of order b, if one exists: 'P' (Paley I) or 'Q'
// (Paley II) and its prime; 0 otherwise. Powers of two are Sylvester's.
static char paley_kind(int b, int *q) {
    if (is_pow2(b)) return 0;
    if (is_prime(b - 1) && (b - 1) % 4 == 3) return *q = b - 1, 'P';
    if (b % 2 == 0 && is_prime(b / 2 - 1) && (b / 2 - 1) % 4 == 1) return *q = b / 2 - 1, 'Q';
    return 0;
}

// S[(q+1)][(q+1)]: the core of both Paley constructions (skew for q = 3 mod 4,
// symmetric for q = 1 mod 4); entries 0, +-1.
static void paley_core(int q, int skew, int *S, int *sq) {
    int n = q + 1;
    memset(sq, 0, (size_t)q * sizeof *sq); // the quadratic character, tabulated
    for (long long y = 1; y < q; y++) sq[y * y % q] = 1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int v;
            if (i == 0 && j == 0) v = 0;
            else if (i == 0) v = 1;
            else if (j == 0) v = skew ? -1 : 1;
            else {
                int d = ((j - i) % q + q) % q;
                v = d == 0 ? 0 : sq[d] ? 1 : -1;
            }
            S[i * n + j] = v;
        }
}

// Factor b (Paley I or II) as a normalized double matrix m[b][b]; 0 when
// out of memory.
static int paley_matrix(char kind, int q, int b, double *m) {
    int n = q + 1;
    int *S = malloc(((size_t)n * n + (size_t)q) * sizeof *S);
    if (!S) return 0;
    paley_core(q, kind == 'P', S, S + (size_t)n * n);
    double norm = 1.0 / sqrt((double)b);
    if (kind == 'P') { // H = I + S
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) m[i * b + j] = (S[i * n + j] + (i == j)) * norm;
    } else { // 0 -> [[1,-1],[-1,-1]], +-1 -> +-[[1,1],[1,-1]]
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                int s = S[i * n + j];
                int blk[4] = {1, -1, -1, -1};
                if (s) blk[0] = s, blk[1] = s, blk[2] = s, blk[3] = -s;
                for (int a = 0; a < 2; a++)
                    for (int c = 0; c < 2; c++) m[(2 * i + a) * b + 2 * j + c] = blk[a * 2 + c] * norm;
            }
    }
    free(S);
    return 1;
}

// A random orthogonal m[k][k]: Gaussian rows orthonormalized by modified
// Gram-Schmidt, twice.
static void random_orthogonal(int k, uint64_t *rng, double *m) {
    for (int i = 0; i < k * k; i += 2) { // Box-Muller pairs
        double u = next_unit(rng), v = next_unit(rng), r = sqrt(-2.0 * log(u));
        m[i] = r * cos(2 * M_PI * v);
        if (i + 1 < k * k) m[i + 1] = r * sin(2 * M_PI * v);
    }
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < k; i++) {
            double *ri = m + (size_t)i * k;
            for (int j = 0; j < i; j++) {
                const double *rj = m + (size_t)j * k;
                double d = 0;
                for (int c = 0; c < k; c++) d += ri[c] * rj[c];
                for (int c = 0; c < k; c++) ri[c] -= d * rj[c];
            }
            double nn = 0;
            for (int c = 0; c < k; c++) nn += ri[c] * ri[c];
            nn = 1.0 / sqrt(nn);
            for (int c = 0; c < k; c++) ri[c] *= nn;
        }
}

// Hadamard orders whose product is n (a power of two last), smallest
// Paley order first; the count, or -1 if there is none.
static int hadamard_factors(int n, int *orders, int cap) {
    if (n == 1) return 0;
    if (is_pow2(n)) {
        if (cap < 1) return -1;
        orders[0] = n;
        return 1;
    }
    for (int b = 12; b <= n && cap > 1; b += 4) {
        int q;
        if (n % b || !paley_kind(b, &q)) continue;
        int k = hadamard_factors(n / b, orders + 1, cap - 1);
        if (k < 0) continue;
        orders[0] = b;
        return k + 1;
    }
    return -1;
}

pq_status pq_rot_make(int n, uint64_t seed, pq_rot *out) {
    memset(out, 0, sizeof *out);
    PQ_FAIL_IF(n < 1 || n > (1 << 24), PQ_ERR_ARG, "rotation order %d not in 1..2^24", n);
    out->n = n;
    out->seed = seed;
    int orders[PQ_ROT_MAX_FACTORS], k = hadamard_factors(n, orders, PQ_ROT_MAX_FACTORS - 1), rnd = 0;
    if (k < 0) { // the largest divisor with a Hadamard matrix, times a random orthogonal rest
        for (int d = n / 2; d >= 1; d--) {
            if (n % d || (k = hadamard_factors(d, orders, PQ_ROT_MAX_FACTORS - 1)) < 0) continue;
            rnd = n / d;
            break;
        }
    }
    uint64_t rng = seed ^ 0x5851f42d4c957f2dull;
    out->sign = pq_alloc((size_t)n * sizeof(double));
    PQ_FAIL_IF(!out->sign, PQ_ERR_NOMEM, "out of memory for a rotation of order %d", n);
    for (int i = 0; i < n; i++) out->sign[i] = next_u64(&rng) >> 63 ? -1.0 : 1.0;
    if (rnd) {
        out->order[out->nf] = rnd, out->kind[out->nf] = 'R';
        out->m[out->nf++] = pq_alloc((size_t)rnd * rnd * sizeof(double));
        if (!out->m[out->nf - 1]) goto nomem;
        random_orthogonal(rnd, &rng, out->m[out->nf - 1]);
    }
    for (int i = 0; i < k; i++) {
        int b = orders[i], q = 0;
        char kind = paley_kind(b, &q);
        out->order[out->nf] = b;
        out->kind[out->nf] = kind ? kind : 'S';
        out->nf++;
        if (kind) {
            out->m[out->nf - 1] = pq_alloc((size_t)b * b * sizeof(double));
            if (!out->m[out->nf - 1] || !paley_matrix(kind, q, b, out->m[out->nf - 1])) goto nomem;
        }
    }
    return PQ_OK;
nomem:
    pq_rot_free(out);
    return PQ_FAIL(PQ_ERR_NOMEM, "out of memory for a rotation of order %d", n);
}

void pq_rot_free(pq_rot *r) {
    if (!r) return;
    for (int i = 0; i < r->nf; i++) pq_free(r->m[i]);
    pq_free(r->sign);
    memset(r, 0, sizeof *r);
}

// x[a][o][b] <- x[a][.][b] M along the middle axis (a dense factor).
static void apply_dense(const double *M, int o, int A, int B, double *x, double *ws) {
    double *v = ws, *y = ws + o;
    for (int a = 0; a < A; a++)
        for (int b = 0; b < B; b++) {
            double *base = x + (size_t)a * o * B + b;
            for (int i = 0; i < o; i++) v[i] = base[(size_t)i * B];
            for (int j = 0; j < o; j++) y[j] = 0;
            for (int i = 0; i < o; i++) {
                const double *mi = M + (size_t)i * o;
                for (int j = 0; j < o; j++) y[j] += v[i] * mi[j];
            }
            for (int j = 0; j < o; j++) base[(size_t)j * B] = y[j];
        }
}

// The same for a Sylvester factor of order o: the fast Walsh-Hadamard
// transform (H symmetric, so x H = H x), normalized.
static void apply_sylvester(int o, int A, int B, double *x) {
    double norm = 1.0 / sqrt((double)o);
    for (int a = 0; a < A; a++) {
        double *blk = x + (size_t)a * o * B;
        for (int h = 1; h < o; h *= 2)
            for (int i = 0; i < o; i += 2 * h)
                for (int j = i; j < i + h; j++)
                    for (int b = 0; b < B; b++) {
                        double u = blk[(size_t)j * B + b], w = blk[(size_t)(j + h) * B + b];
                        blk[(size_t)j * B + b] = u + w;
                        blk[(size_t)(j + h) * B + b] = u - w;
                    }
        for (size_t i = 0; i < (size_t)o * B; i++) blk[i] *= norm;
    }
}

void pq_rot_apply(const pq_rot *r, double *x, int rows, double *ws) {
    for (int row = 0; row < rows; row++) {
        double *v = x + (size_t)row * r->n;
        for (int i = 0; i < r->n; i++) v[i] *= r->sign[i];
        int A = 1, B = r->n;
        for (int f = 0; f < r->nf; f++) {
            int o = r->order[f];
            B /= o;
            if (r->kind[f] == 'S') apply_sylvester(o, A, B, v);
            else apply_dense(r->m[f], o, A, B, v, ws);
            A *= o;
        }
    }
}

void pq_rot_matrix(const pq_rot *r, double *q, double *ws) {
    memset(q, 0, (size_t)r->n * r->n * sizeof(double));
    for (int i = 0; i < r->n; i++) q[(size_t)i * r->n + i] = 1;
    pq_rot_apply(r, q, r->n, ws);
}

void pq_rot_describe(const pq_rot *r, char *buf, size_t cap) {
    static const char *const NAMES[] = {"Sylvester", "Paley I", "Paley II", "random orthogonal"};
    size_t n = (size_t)snprintf(buf, cap, "%d =%s", r->n, r->nf ? "" : " 1 (identity)");
    for (int f = 0; f < r->nf && n < cap; f++) {
        int k = r->kind[f] == 'S' ? 0 : r->kind[f] == 'P' ? 1 : r->kind[f] == 'Q' ? 2 : 3, q = 0;
        paley_kind(r->order[f], &q);
        n += (size_t)snprintf(buf + n, cap - n, "%s %d (%s", f ? " x" : "", r->order[f], NAMES[k]);
        if (n < cap && (k == 1 || k == 2)) n += (size_t)snprintf(buf + n, cap - n, ", q %d", q);
        if (n < cap) n += (size_t)snprintf(buf + n, cap - n, ")");
    }
}

int pq_rot_is_hadamard(const pq_rot *r) {
    for (int f = 0; f < r->nf; f++)
        if (r->kind[f] == 'R') return 0;
    return 1;
}
