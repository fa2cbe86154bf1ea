// tests/test_ggml_grid.c — quant/ggml_grid: RTN and GPTQ onto llama.cpp's
// grids (the GGUF schemes). Fresh random matrices every run:
//   - RTN of a GGUF scheme's matrix is pq_ggml_quant_ref byte for byte and
//     its dense values are the blocks' exact dequantization;
//   - H = I: GPTQ gives RTN's bytes (grids on the way and static), for every
//     type a GGUF scheme can give a matrix (Q4_0, Q4_1, Q8_0, Q4_K, and
//     llama.cpp's fallbacks Q5_0 and F16);
//   - on correlated inputs GPTQ's output error ||X (W - W')^T||^2 is below
//     RTN's on the same grids (Q4_K also with importance weights and static
//     grids), and the dense values are the blocks' dequantization;
//   - 1 and 3 threads give identical bytes;
//   - a batch of 288 columns (block size 300 on Q4_0) fits the workspace;
//   - the output error from GPTQ's loss with a dead column on Q4_1, whose
//     grid has no exact 0.
#include "tests/test.h"

#include "common/sys.h"
#include "kernels/blas.h"
#include "kernels/ggml_dequant.h"
#include "kernels/ggml_quant.h"
#include "quant/ggml_grid.h"
#include "quant/rtn.h"

static pq_scheme scheme(const char *name, int fallback) {
    pq_scheme s;
    if (pq_scheme_make(name, PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, &s) != PQ_OK) abort();
    s.gguf_fallback = fallback;
    return s;
}

static float *hessian_of(const float *x, int T, int cols) {
    float *h = malloc((size_t)cols * cols * sizeof(float));
    for (int i = 0; i < cols; i++)
        for (int j = 0; j < cols; j++) {
            double s = 0;
            for (int t = 0; t < T; t++) s += (double)x[(size_t)t * cols + i] * x[(size_t)t * cols + j];
            h[(size_t)i * cols + j] = (float)s;
        }
    return h;
}

// Correlated inputs with channels of very different scales (as LLM activations).
static float *correlated_inputs(int T, int cols) {
    float *z = malloc((size_t)T * cols * sizeof(float)), *a = malloc((size_t)cols * cols * sizeof(float));
    float *x = malloc((size_t)T * cols * sizeof(float));
    pq_test_fill(z, (size_t)T * cols, 1.0f);
    for (int i = 0; i < cols; i++)
        for (int j = 0; j < cols; j++)
            a[(size_t)i * cols + j] = (i == j ? 1.0f : 0.0f) + 0.5f * pq_test_normal() / sqrtf((float)(i + 1));
    for (int t = 0; t < T; t++)
        for (int j = 0; j < cols; j++) {
            double s = 0;
            for (int i = 0; i < cols; i++) s += (double)z[(size_t)t * cols + i] * a[(size_t)i * cols + j];
            x[(size_t)t * cols + j] = (float)s * (1.0f + 4.0f * (j % 7 == 0));
        }
    free(z), free(a);
    return x;
}

static double output_error(const float *w, const float *wq, int rows, int cols, const float *x, int T) {
    double num = 0, den = 0;
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < T; t++) {
            double a = 0, b = 0;
            for (int c = 0; c < cols; c++) {
                a += (double)w[(size_t)r * cols + c] * x[(size_t)t * cols + c];
                b += (double)wq[(size_t)r * cols + c] * x[(size_t)t * cols + c];
            }
            num += (a - b) * (a - b);
            den += a * a;
        }
    return num / den;
}

// Whether q's dense values are exactly its blocks' dequantization.
static int dense_is_blocks(const pq_qtensor *q) {
    float *y = malloc((size_t)q->cols * sizeof(float));
    size_t rb = pq_qtensor_row_bytes(q);
    int same = 1;
    for (int r = 0; r < q->rows && same; r++) {
        pq_ggml_dequant_ref((pq_ggml_type)q->ggml, q->blocks + (size_t)r * rb, y, q->cols);
        same = memcmp(y, q->dense + (size_t)r * q->cols, (size_t)q->cols * sizeof(float)) == 0;
    }
    free(y);
    return same;
}

static pq_status gptq(const float *w, int rows, int cols, const float *h, const pq_scheme *s, int stat,
                      const float *imx, pq_pool *pool, pq_qtensor *q) {
    pq_gptq_params p = pq_gptq_default_params();
    p.static_groups = stat;
    p.act_order = stat; // act-order needs static grids on GGUF blocks
    pq_gptq_hessian hh;
    void *hws = pq_alloc(pq_gptq_hessian_bytes(cols)), *ws = pq_alloc(pq_ggml_gptq_solve_bytes(rows, cols, &p, 3));
    pq_status st = pq_qtensor_init(q, s, rows, cols, PQ_DT_F16);
    if (st == PQ_OK) st = pq_gptq_prepare(h, cols, &p, "test", hws, pool, &hh);
    if (st == PQ_OK) st = pq_ggml_gptq_solve(w, rows, &hh, &p, imx, "test", ws, pool, q, NULL);
    pq_free(hws), pq_free(ws);
    return st;
}

static void test_rtn(pq_pool *pool) {
    const char *names[] = {"gguf-q4_0", "gguf-q4_1", "gguf-q8_0", "gguf-q4_k"};
    int rows = 24, cols = 512;
    float *w = malloc((size_t)rows * cols * sizeof(float));
    uint8_t *want = malloc((size_t)rows * cols * 2);
    for (int i = 0; i < 4; i++) {
        pq_scheme s = scheme(names[i], 0);
        pq_test_fill(w, (size_t)rows * cols, 0.05f);
        pq_qtensor q;
        pq_status st = pq_qtensor_init(&q, &s, rows, cols, PQ_DT_F16);
        double rel = -1;
        if (st == PQ_OK) st = pq_rtn_quantize(w, &s, "test", pool, &q, &rel);
        size_t rb = st == PQ_OK ? pq_qtensor_row_bytes(&q) : 0;
        for (int r = 0; r < rows && st == PQ_OK; r++)
            pq_ggml_quant_ref((pq_ggml_type)q.ggml, w + (size_t)r * cols, want + (size_t)r * rb, cols, NULL);
        PQ_CHECK(st == PQ_OK && q.is_ggml && memcmp(q.blocks, want, (size_t)rows * rb) == 0 && dense_is_blocks(&q) &&
                     rel > 0 && rel < 0.02,
                 "%s: RTN = ggml's quantizer byte for byte, dense = the blocks' values, rel sq error %.2e", names[i], rel);
        pq_qtensor_free(&q);
    }
    free(w), free(want);
}

static void test_identity(pq_pool *pool) {
    struct {
        const char *name;
        int cols, fallback;
        pq_ggml_type want;
    } cs[] = {{"gguf-q4_0", 96, 0, PQ_GGML_Q4_0}, {"gguf-q4_1", 64, 0, PQ_GGML_Q4_1}, {"gguf-q8_0", 160, 0, PQ_GGML_Q8_0},
              {"gguf-q4_k", 512, 0, PQ_GGML_Q4_K}, {"gguf-q4_k", 96, 1, PQ_GGML_Q5_0}, {"gguf-q4_0", 40, 1, PQ_GGML_F16}};
    int rows = 40;
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        int cols = cs[k].cols;
        pq_scheme s = scheme(cs[k].name, cs[k].fallback);
        float *w = malloc((size_t)rows * cols * sizeof(float)), *h = calloc((size_t)cols * cols, sizeof(float));
        pq_test_fill(w, (size_t)rows * cols, 0.05f);
        for (int i = 0; i < cols; i++) h[(size_t)i * cols + i] = 1;
        for (int stat = 0; stat < 2; stat++) {
            pq_qtensor g, r;
            pq_status st = gptq(w, rows, cols, h, &s, stat, NULL, pool, &g);
            pq_status sr = pq_qtensor_init(&r, &s, rows, cols, PQ_DT_F16);
            if (sr == PQ_OK) sr = pq_rtn_quantize(w, &s, "rtn", pool, &r, NULL);
            int same = st == PQ_OK && sr == PQ_OK && g.ggml == (int)cs[k].want &&
                       memcmp(g.blocks, r.blocks, (size_t)rows * pq_qtensor_row_bytes(&r)) == 0 && dense_is_blocks(&g);
            PQ_CHECK(same, "H = I: GPTQ == RTN byte for byte, %s with %d columns (%s)%s", cs[k].name, cols,
                     pq_ggml_type_get(cs[k].want)->name, stat ? ", static grids and act-order" : "");
            pq_qtensor_free(&g), pq_qtensor_free(&r);
        }
        free(w), free(h);
    }
}

// A lazy batch of whole 32-value blocks longer than a Q4_K super-block
// (block size 300: 288 columns) fits pq_ggml_gptq_solve_bytes' workspace; it
// once was sized for 256 and the batch ran past its end.
static void test_long_batch(pq_pool *pool) {
    int rows = 70, cols = 512;
    pq_scheme s = scheme("gguf-q4_0", 0);
    pq_gptq_params p = pq_gptq_default_params();
    p.block_size = 300;
    float *w = malloc((size_t)rows * cols * sizeof(float)), *h = calloc((size_t)cols * cols, sizeof(float));
    pq_test_fill(w, (size_t)rows * cols, 0.05f);
    for (int i = 0; i < cols; i++) h[(size_t)i * cols + i] = 1;
    pq_gptq_hessian hh;
    pq_qtensor g, r;
    void *hws = pq_alloc(pq_gptq_hessian_bytes(cols)), *ws = pq_alloc(pq_ggml_gptq_solve_bytes(rows, cols, &p, 2));
    pq_status st = pq_qtensor_init(&g, &s, rows, cols, PQ_DT_F16), sr = pq_qtensor_init(&r, &s, rows, cols, PQ_DT_F16);
    if (st == PQ_OK) st = pq_gptq_prepare(h, cols, &p, "test", hws, pool, &hh);
    if (st == PQ_OK) st = pq_ggml_gptq_solve(w, rows, &hh, &p, NULL, "test", ws, pool, &g, NULL);
    if (sr == PQ_OK) sr = pq_rtn_quantize(w, &s, "rtn", pool, &r, NULL);
    PQ_CHECK(st == PQ_OK && sr == PQ_OK && memcmp(g.blocks, r.blocks, (size_t)rows * pq_qtensor_row_bytes(&r)) == 0,
             "H = I, Q4_0, block size 300 (batches of 288 columns): GPTQ == RTN byte for byte");
    pq_qtensor_free(&g), pq_qtensor_free(&r), pq_free(hws), pq_free(ws), free(w), free(h);
}

static void test_beats_rtn(pq_pool *pool) {
    int rows = 64, cols = 512, T = 1024;
    float *w = malloc((size_t)rows * cols * sizeof(float)), *x = correlated_inputs(T, cols);
    pq_test_fill(w, (size_t)rows * cols, 0.05f);
    float *h = hessian_of(x, T, cols), *diag = malloc((size_t)cols * sizeof(float));
    for (int c = 0; c < cols; c++) diag[c] = h[(size_t)c * cols + c];
    struct {
        const char *name;
        int stat, imatrix;
    } cs[] = {{"gguf-q4_0", 0, 0}, {"gguf-q4_1", 0, 0}, {"gguf-q8_0", 0, 0}, {"gguf-q4_k", 0, 0},
              {"gguf-q4_k", 0, 1}, {"gguf-q4_k", 1, 0}, {"gguf-q4_0", 1, 0}};
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        pq_scheme s = scheme(cs[k].name, 0);
        pq_qtensor g, r;
        pq_status st = gptq(w, rows, cols, h, &s, cs[k].stat, cs[k].imatrix ? diag : NULL, pool, &g);
        pq_status sr = pq_qtensor_init(&r, &s, rows, cols, PQ_DT_F16);
        if (sr == PQ_OK) sr = pq_rtn_quantize(w, &s, "rtn", pool, &r, NULL);
        double eg = st == PQ_OK ? output_error(w, g.dense, rows, cols, x, T) : 1;
        double er = sr == PQ_OK ? output_error(w, r.dense, rows, cols, x, T) : 0;
        PQ_CHECK(st == PQ_OK && eg < er && dense_is_blocks(&g), "%s%s%s: GPTQ output error %.4e < RTN %.4e (%.2fx lower)",
                 cs[k].name, cs[k].imatrix ? " imatrix" : "", cs[k].stat ? " static grids, act-order" : "", eg, er,
                 er / eg);
        pq_qtensor_free(&g), pq_qtensor_free(&r);
    }
    free(w), free(x), free(h), free(diag);
}

static void test_threads(void) {
    int rows = 150, cols = 512, T = 600;
    float *w = malloc((size_t)rows * cols * sizeof(float)), *x = correlated_inputs(T, cols);
    pq_test_fill(w, (size_t)rows * cols, 0.05f);
    float *h = hessian_of(x, T, cols);
    pq_scheme s = scheme("gguf-q4_k", 0);
    pq_pool *p1, *p3;
    pq_pool_create(1, &p1), pq_pool_create(3, &p3);
    pq_qtensor a, b;
    pq_status sa = gptq(w, rows, cols, h, &s, 0, NULL, p1, &a), sb = gptq(w, rows, cols, h, &s, 0, NULL, p3, &b);
    PQ_CHECK(sa == PQ_OK && sb == PQ_OK && memcmp(a.blocks, b.blocks, (size_t)rows * pq_qtensor_row_bytes(&a)) == 0,
             "gguf-q4_k GPTQ with 1 and 3 threads: identical blocks");
    pq_qtensor_free(&a), pq_qtensor_free(&b);
    pq_pool_free(p1), pq_pool_free(p3);
    free(w), free(x), free(h);
}

// pq_gptq_errors on a grid whose 0 is no value (Q4_1's d q + m): a dead
// column's weight is zeroed and quantized to a value near, not at, 0, so the
// loss holds a term for it that the output error must not (X's column is 0).
static void test_errors_dead(pq_pool *pool) {
    int rows = 16, cols = 128, T = 300;
    pq_scheme s = scheme("gguf-q4_1", 0);
    float *w = malloc((size_t)rows * cols * sizeof(float)), *x = correlated_inputs(T, cols);
    pq_test_fill(w, (size_t)rows * cols, 0.05f);
    for (int t = 0; t < T; t++) x[(size_t)t * cols + 3] = 0; // column 3 dead
    float *h = hessian_of(x, T, cols);
    pq_gptq_params p = pq_gptq_default_params();
    pq_gptq_hessian hh;
    pq_qtensor q;
    double loss = -1, rel = -1, out = -1;
    void *hws = pq_alloc(pq_gptq_hessian_bytes(cols)), *ws = pq_alloc(pq_ggml_gptq_solve_bytes(rows, cols, &p, 2));
    void *ews = pq_alloc(pq_gptq_errors_bytes(rows, cols, 2));
    pq_status st = pq_qtensor_init(&q, &s, rows, cols, PQ_DT_F16);
    if (st == PQ_OK) st = pq_gptq_prepare(h, cols, &p, "test", hws, pool, &hh);
    if (st == PQ_OK) st = pq_ggml_gptq_solve(w, rows, &hh, &p, NULL, "test", ws, pool, &q, &loss);
    double num = 0, dead_q = 0;
    if (st == PQ_OK) {
        pq_linear L = pq_qtensor_linear(&q);
        pq_gptq_errors(w, &L, &hh, loss, ews, pool, &rel, &out);
        for (int r = 0; r < rows; r++) {
            dead_q = fmax(dead_q, fabs(q.dense[(size_t)r * cols + 3]));
            for (int a = 0; a < cols; a++)
                for (int b = 0; b < cols; b++)
                    num += ((double)w[(size_t)r * cols + a] - q.dense[(size_t)r * cols + a]) * h[(size_t)a * cols + b] *
                           ((double)w[(size_t)r * cols + b] - q.dense[(size_t)r * cols + b]);
        }
    }
    PQ_CHECK(st == PQ_OK && hh.n_dead == 1 && dead_q > 0 && fabs(out - num) <= 1e-9 * num,
             "Q4_1, a dead column quantized to up to %.3g: output error from the loss %.12g = tr(dW H dW^T) %.12g",
             dead_q, out, num);
    if (st == PQ_OK) pq_qtensor_free(&q);
    pq_free(hws), pq_free(ws), pq_free(ews);
    free(w), free(x), free(h);
}

int main(void) {
    pq_test_seed();
    if (pq_blas_init() != PQ_OK) {
        printf("FAIL - OpenBLAS: %s\n", pq_last_error());
        return 1;
    }
    pq_pool *pool;
    pq_pool_create(2, &pool);
    test_rtn(pool);
    test_identity(pool);
    test_long_batch(pool);
    test_beats_rtn(pool);
    test_errors_dead(pool);
    test_threads();
    pq_pool_free(pool);
    return pq_test_failures ? 1 : 0;
}
