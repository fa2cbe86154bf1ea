// Calibration (calib/): window selection (seeded, concat, clamping, short
// text, bad counts), the activation statistics against a naive double sum,
// the output error against its definition, and the streaming driver on a
// random model: thread-count independence, true-sequential, resume from a
// later block, and X^T X on the GPU against the CPU (skipped without one).
#include "tests/lib/cuda_wrappers.h"
#include "tests/lib/model_random.h"
#include "tests/test.h"

#include <unistd.h>

#include "calib/block_gpu.h"
#include "calib/data.h"
#include "calib/driver.h"
#include "calib/stats.h"
#include "calib/xtx_cuda.h"
#include "common/sys.h"
#include "kernels/cuda_host.h"
#include "formats/fileio.h"
#include "formats/sha256.h"
#include "kernels/blas.h"
#include "quant/rtn.h"

// RTN into a new quantized tensor q (the caller frees it, also on error).
static pq_status rtn_new(const float *w, int rows, int cols, const pq_scheme *s, pq_dtype dt, const char *name,
                         pq_pool *pool, pq_qtensor *q, double *err) {
    pq_status st = pq_qtensor_init(q, s, rows, cols, dt);
    return st != PQ_OK ? st : pq_rtn_quantize(w, s, name, pool, q, err);
}

// ---- windows ---------------------------------------------------------------------

static int32_t *stream_of(size_t n) {
    int32_t *s = malloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) s[i] = (int32_t)(7 + i % 1000); // the value says where it came from
    return s;
}

// Every window is [bos] + a contiguous slice of the stream.
static int windows_are_slices(const pq_calib_data *d, const int32_t *s, size_t n, int bos, size_t *starts) {
    for (int w = 0; w < d->n; w++) {
        const int32_t *t = d->tokens + (size_t)w * d->len;
        int off = bos >= 0;
        if (bos >= 0 && t[0] != bos) return 0;
        size_t start = (size_t)(t[off] - 7);
        while (start < n && s[start] != t[off]) start += 1000; // ids repeat every 1000 tokens
        for (; start < n; start += 1000)
            if (start + d->len - off <= n && memcmp(s + start, t + off, (d->len - off) * sizeof(int32_t)) == 0) break;
        if (start >= n) return 0;
        if (starts) starts[w] = start;
    }
    return 1;
}

static void test_windows(void) {
    size_t n = 5000;
    int32_t *s = stream_of(n);
    pq_calib_params p = pq_calib_default_params();
    p.nsamples = 16, p.seqlen = 300, p.seed = 42;
    pq_calib_data a, b, c;
    pq_status sa = pq_calib_windows(s, n, 1, &p, 2048, "t", &a), sb = pq_calib_windows(s, n, 1, &p, 2048, "t", &b);
    p.seed = 43;
    pq_status sc = pq_calib_windows(s, n, 1, &p, 2048, "t", &c);
    size_t starts[16];
    PQ_CHECK(sa == PQ_OK && sb == PQ_OK && sc == PQ_OK && a.n == 16 && a.len == 300 && !a.note[0] &&
                 windows_are_slices(&a, s, n, 1, starts),
             "random: 16 windows of 300 = BOS + 299-token slices of the stream");
    PQ_CHECK(memcmp(a.tokens, b.tokens, 16 * 300 * sizeof(int32_t)) == 0 &&
                 memcmp(a.tokens, c.tokens, 16 * 300 * sizeof(int32_t)) != 0,
             "random: the same seed gives the same windows, another seed others");
    int distinct = 0;
    for (int i = 1; i < 16; i++) distinct += starts[i] != starts[0];
    PQ_CHECK(distinct >= 14, "random: starts spread over the text (first starts %zu %zu %zu)", starts[0], starts[1],
             starts[2]);
    pq_calib_data_free(&a), pq_calib_data_free(&b), pq_calib_data_free(&c);

    // the expected starts of seed 0, pinned: a change of the generator changes every calibration
    p.seed = 0, p.nsamples = 3;
    pq_calib_windows(s, n, -1, &p, 2048, "t", &a);
    int sl = windows_are_slices(&a, s, n, -1, starts);
    PQ_CHECK(a.len == 300 && sl && starts[0] == 259 && starts[1] == 151 && starts[2] == 649,
             "no BOS: plain 300-token slices; seed 0 starts at 259, 151, 649 (%zu %zu %zu)", starts[0], starts[1],
             starts[2]);
    pq_calib_data_free(&a);

    p.mode = PQ_CALIB_CONCAT, p.nsamples = 4, p.seqlen = 100;
    int ok = pq_calib_windows(s, n, 1, &p, 2048, "t", &a) == PQ_OK && a.n == 4 && !a.note[0];
    for (int w = 0; ok && w < 4; w++)
        ok = a.tokens[w * 100] == 1 && memcmp(a.tokens + w * 100 + 1, s + w * 99, 99 * sizeof(int32_t)) == 0;
    PQ_CHECK(ok, "concat: window k = BOS + stream[99k, 99k + 99)");
    pq_calib_data_free(&a);
    p.nsamples = 100; // 5000 / 99 = 50 windows
    PQ_CHECK(pq_calib_windows(s, n, 1, &p, 2048, "t", &a) == PQ_OK && a.n == 50 &&
                 strstr(a.note, "holds 50 consecutive windows of 100 tokens: using 50, not --nsamples 100"),
             "concat: a short text gives fewer windows with a note: %s", a.note);
    pq_calib_data_free(&a);

    p.mode = PQ_CALIB_RANDOM, p.nsamples = 2, p.seqlen = 4096;
    PQ_CHECK(pq_calib_windows(s, n, 1, &p, 512, "t", &a) == PQ_OK && a.len == 512 &&
                 strstr(a.note, "--seqlen 4096 clamped to the model's max_position_embeddings 512"),
             "seqlen clamped to max_position_embeddings: %s", a.note);
    pq_calib_data_free(&a);
    p.seqlen = 512;
    PQ_CHECK(pq_calib_windows(s, 300, 1, &p, 2048, "short.txt", &a) == PQ_ERR_FORMAT &&
                 strstr(pq_last_error(), "short.txt: 300 tokens of text, fewer than one calibration window of 511"),
             "a text shorter than one window: %s", pq_last_error());
    PQ_CHECK(pq_calib_windows(s, 511, 1, &p, 2048, "t", &a) == PQ_OK && a.n == 2, "a text of exactly one window");
    pq_calib_data_free(&a);
    p.nsamples = 0;
    PQ_CHECK(pq_calib_windows(s, n, 1, &p, 2048, "t", &a) == PQ_ERR_ARG && strstr(pq_last_error(), "--nsamples 0"),
             "nsamples 0 refused: %s", pq_last_error());
    p.nsamples = 2, p.seqlen = 0;
    PQ_CHECK(pq_calib_windows(s, n, -1, &p, 2048, "t", &a) == PQ_ERR_ARG && strstr(pq_last_error(), "--seqlen 0"),
             "seqlen 0 refused: %s", pq_last_error());
    p.seqlen = 1;
    PQ_CHECK(pq_calib_windows(s, n, 1, &p, 2048, "t", &a) == PQ_ERR_ARG, "seqlen 1 with a BOS refused: %s",
             pq_last_error());
    // a model context of one position with a BOS: no room for text (concat
    // divided by the zero window length)
    p.seqlen = 16, p.mode = PQ_CALIB_CONCAT;
    PQ_CHECK(pq_calib_windows(s, n, 1, &p, 1, "t", &a) == PQ_ERR_FORMAT &&
                 strstr(pq_last_error(), "max_position_embeddings 1 leaves no room"),
             "max_position_embeddings 1 with a BOS refused, not a division by zero: %s", pq_last_error());
    p.mode = PQ_CALIB_RANDOM;
    pq_calib_mode m;
    PQ_CHECK(pq_calib_parse_mode("concat", &m) == PQ_OK && m == PQ_CALIB_CONCAT &&
                 pq_calib_parse_mode("shuffle", &m) == PQ_ERR_ARG,
             "--calib-mode parsing: %s", pq_last_error());
    free(s);
}

// pq_calib_load on the fixture's tokenizer: hash of the bytes, BOS windows.
static void test_load(void) {
    pq_tokenizer *tok;
    if (pq_tok_load(pq_test_path("fixtures/stories260K"), &tok) != PQ_OK) { // a broken tokenizer is no reason to skip
        PQ_CHECK(0, "calibration text through the fixture tokenizer: %s", pq_last_error());
        return;
    }
    char path[] = "/tmp/pq-calib-XXXXXX";
    int fd = mkstemp(path);
    const char *text = "Once upon a time there was a little girl. She liked to play in the park with her dog.\n\n"
                       "One day the dog ran away. The girl was sad, but her mother helped her look for it.\n";
    pq_file_write_atomic(path, text, strlen(text));
    pq_calib_params p = pq_calib_default_params();
    p.path = path, p.nsamples = 3, p.seqlen = 16;
    pq_calib_data d;
    pq_status s = pq_calib_load(&p, tok, 512, &d);
    pq_sha256 h;
    char want[65];
    pq_sha256_init(&h);
    pq_sha256_update(&h, text, strlen(text));
    pq_sha256_hex(&h, want);
    PQ_CHECK(s == PQ_OK && d.n == 3 && d.len == 16 && d.tokens[0] == pq_tok_bos(tok) && d.stream_tokens > 16 &&
                 strcmp(d.sha256, want) == 0,
             "a text file: %zu tokens, windows start with BOS %d, SHA-256 of its bytes", d.stream_tokens,
             pq_tok_bos(tok));
    pq_calib_data_free(&d);
    p.seqlen = 512;
    s = pq_calib_load(&p, tok, 512, &d);
    PQ_CHECK(s == PQ_ERR_FORMAT && strstr(pq_last_error(), path) && strstr(pq_last_error(), "fewer than one"),
             "a text too short for one window of 512: %s", pq_last_error());
    p.path = "/nonexistent/calib.txt";
    PQ_CHECK(pq_calib_load(&p, tok, 512, &d) == PQ_ERR_IO && strstr(pq_last_error(), "/nonexistent/calib.txt"),
             "a missing text file: %s", pq_last_error());
    close(fd);
    unlink(path);
    pq_tok_free(tok);
}

// ---- statistics --------------------------------------------------------------------

static void test_stats(pq_pool *pool1, pq_pool *pool3) {
    int cols = 300, T = 77, nwin = 3; // 300 columns: two tiles, the second ragged
    float *x = malloc((size_t)nwin * T * cols * sizeof(float));
    pq_test_fill(x, (size_t)nwin * T * cols, 1.0f);
    for (int t = 0; t < nwin * T; t++) x[(size_t)t * cols + 11] *= 30; // an outlier channel
    pq_act_stats a, b;
    pq_act_stats_init(&a, cols, PQ_STAT_ABS | PQ_STAT_XTX);
    pq_act_stats_init(&b, cols, PQ_STAT_ABS | PQ_STAT_XTX);
    for (int w = 0; w < nwin; w++) {
        pq_act_stats_add(&a, x + (size_t)w * T * cols, T, PQ_STAT_ABS | PQ_STAT_XTX, pool1);
        pq_act_stats_add(&b, x + (size_t)w * T * cols, T, PQ_STAT_ABS | PQ_STAT_XTX, pool3);
    }
    pq_act_stats_finish(&a, pool1);
    pq_act_stats_finish(&b, pool3);
    double worst = 0;
    int sym = 1, absok = 1;
    for (int i = 0; i < cols; i++) {
        double s = 0, mx = 0;
        for (int t = 0; t < nwin * T; t++) s += fabs(x[(size_t)t * cols + i]), mx = fmax(mx, fabs(x[(size_t)t * cols + i]));
        absok &= fabs(a.abs_sum[i] - s) <= 1e-9 * s && a.abs_max[i] == (float)mx;
        for (int j = 0; j < cols; j++) {
            double h = 0, n2 = 0;
            for (int t = 0; t < nwin * T; t++) {
                double u = x[(size_t)t * cols + i], v = x[(size_t)t * cols + j];
                h += u * v, n2 += fabs(u * v);
            }
            // f32 sums of 231 products: |error| <= ~231 * 2^-24 * sum |x_i x_j|
            worst = fmax(worst, fabs(a.xtx[(size_t)i * cols + j] - h) / (n2 * 231 * 0x1p-24));
            sym &= a.xtx[(size_t)i * cols + j] == a.xtx[(size_t)j * cols + i];
        }
    }
    PQ_CHECK(worst <= 1 && sym && a.n == nwin * T, "X^T X vs a double sum: worst error %.3f of the f32 bound, symmetric",
             worst);
    PQ_CHECK(absok, "sum |x| and max |x| per channel");
    PQ_CHECK(memcmp(a.xtx, b.xtx, (size_t)cols * cols * 4) == 0 && memcmp(a.abs_sum, b.abs_sum, (size_t)cols * 8) == 0,
             "statistics bit-identical with 1 and 3 threads");

    // output error: tr(dW H dW^T) / tr(W H W^T) against ||(W - Q) X^T||^2 / ||W X^T||^2
    int rows = 70;
    float *w = malloc((size_t)rows * cols * sizeof(float)), *d = malloc((size_t)rows * cols * sizeof(float));
    pq_test_fill(w, (size_t)rows * cols, 0.05f);
    pq_scheme sc = {PQ_SCHEME_W4A16, 4, 0, 32, 1, PQ_ACT_NONE, PQ_ACTORDER_NONE, PQ_OBSERVER_MINMAX, 0};
    pq_qtensor q;
    rtn_new(w, rows, cols, &sc, PQ_DT_F16, "w", NULL, &q, NULL);
    pq_linear L = pq_qtensor_linear(&q);
    pq_linear_rows_ref(&L, 0, rows, d);
    double num = 0, den = 0;
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < nwin * T; t++) {
            double y = 0, yq = 0;
            for (int c = 0; c < cols; c++) {
                y += (double)w[(size_t)r * cols + c] * x[(size_t)t * cols + c];
                yq += (double)d[(size_t)r * cols + c] * x[(size_t)t * cols + c];
            }
            num += (y - yq) * (y - yq), den += y * y;
        }
    void *ws1 = pq_alloc(pq_act_stats_error_bytes(rows, cols, 1)), *ws3 = pq_alloc(pq_act_stats_error_bytes(rows, cols, 3));
    double e1 = pq_act_stats_output_error(&a, w, &L, ws1, pool1), e3 = pq_act_stats_output_error(&a, w, &L, ws3, pool3);
    PQ_CHECK(fabs(e1 - num / den) <= 1e-4 * (num / den) && e1 == e3,
             "output error from X^T X %.6e = direct %.6e (1 and 3 threads equal)", e1, num / den);
    pq_qtensor_free(&q);
    pq_free(ws1), pq_free(ws3);
    free(w), free(d), free(x);
    pq_act_stats_free(&a), pq_act_stats_free(&b);
}

// ---- the driver --------------------------------------------------------------------

#define MAXL 4
typedef struct {
    const pq_model *m;
    pq_qtensor q[MAXL][PQ_NLINEAR];
    uint64_t hash;   // FNV-1a over every statistic the method saw from block hash_from on, in order
    int hash_from, groups, loaded, done;
    float *xtx[MAXL][PQ_NGROUPS]; // copies of the X^T X seen (keep_xtx)
    int keep_xtx;
} test_method;

static void fnv(uint64_t *h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) *h = (*h ^ b[i]) * 1099511628211ull;
}

// RTN of a source linear into q, installed into L (bias kept).
static pq_status rtn_install(test_method *t, int layer, int s, pq_layer *L) {
    const pq_linear *src = &t->m->layers[layer].lin[s];
    float *w = malloc((size_t)src->rows * src->cols * sizeof(float));
    pq_linear_rows(src, 0, src->rows, w);
    pq_scheme sc = {PQ_SCHEME_W4A16, 4, 0, 32, 0, PQ_ACT_NONE, PQ_ACTORDER_NONE, PQ_OBSERVER_MINMAX, 0};
    pq_qtensor_free(&t->q[layer][s]);
    pq_status st = rtn_new(w, src->rows, src->cols, &sc, PQ_DT_F16, "t", NULL, &t->q[layer][s], NULL);
    free(w);
    PQ_TRY(st);
    L->lin[s] = pq_qtensor_linear(&t->q[layer][s]);
    L->lin[s].bias = src->bias;
    return PQ_OK;
}

static pq_status tm_group(void *ud, int layer, int g, pq_layer *L, const pq_act_stats *st) {
    test_method *t = ud;
    if (layer >= t->hash_from) {
        if (st->xtx) fnv(&t->hash, st->xtx, (size_t)st->cols * st->cols * sizeof(float));
        fnv(&t->hash, st->abs_sum, (size_t)st->cols * sizeof(double));
        fnv(&t->hash, &st->n, sizeof st->n);
    }
    t->groups++;
    if (t->keep_xtx && st->xtx) {
        size_t n = (size_t)st->cols * st->cols;
        t->xtx[layer][g] = malloc(n * sizeof(float));
        memcpy(t->xtx[layer][g], st->xtx, n * sizeof(float));
    }
    for (int k = 0; k < PQ_INPUT_GROUPS[g].n; k++) PQ_TRY(rtn_install(t, layer, PQ_INPUT_GROUPS[g].members[k], L));
    return PQ_OK;
}

static pq_status tm_load(void *ud, int layer, pq_layer *L) {
    test_method *t = ud;
    t->loaded++;
    for (int s = 0; s < PQ_NLINEAR; s++) PQ_TRY(rtn_install(t, layer, s, L));
    return PQ_OK;
}

static pq_status tm_done(void *ud, int layer, int resumed) {
    test_method *t = ud;
    t->done++;
    return PQ_OK;
}

typedef struct {
    pq_status st;
    uint64_t hash;
    int groups, loaded, done;
    pq_calib_report rep;
    int same_layers;
} drive_result;

// One driver run with the RTN test method. xtx (NULL: not kept) gets the
// X^T X of every block and group, malloc'd.
static drive_result drive_on(pq_model *m, const pq_calib_data *d, pq_pool *pool, int true_seq, int first,
                             int hash_from, int stats, pq_device device, float *xtx[MAXL][PQ_NGROUPS]) {
    test_method t = {.m = m, .hash = 1469598103934665603ull, .hash_from = hash_from, .keep_xtx = xtx != NULL};
    pq_calib_method meth = {.stats = stats, .quantize_group = tm_group, .load_block = tm_load, .block_done = tm_done,
                            .ud = &t};
    pq_calib_run_params p = {.true_sequential = true_seq, .pool = pool, .device = device, .first_block = first};
    pq_layer before[MAXL];
    memcpy(before, m->layers, (size_t)m->cfg.n_layers * sizeof *before);
    drive_result r = {0};
    r.st = pq_calib_run(m, d, &meth, &p, &r.rep);
    r.hash = t.hash, r.groups = t.groups, r.loaded = t.loaded, r.done = t.done;
    r.same_layers = memcmp(before, m->layers, (size_t)m->cfg.n_layers * sizeof *before) == 0;
    for (int l = 0; l < MAXL; l++)
        for (int s = 0; s < PQ_NLINEAR; s++) pq_qtensor_free(&t.q[l][s]);
    if (xtx) memcpy(xtx, t.xtx, sizeof t.xtx);
    return r;
}

static drive_result drive(pq_model *m, const pq_calib_data *d, pq_pool *pool, int true_seq, int first, int hash_from,
                          int stats) {
    return drive_on(m, d, pool, true_seq, first, hash_from, stats, PQ_DEVICE_CPU, NULL);
}

// The driver's test model and calibration windows.
static pq_config driver_config(void) {
    return (pq_config){.arch = PQ_ARCH_LLAMA, .arch_name = "LlamaForCausalLM", .hidden = 128, .intermediate = 344,
                       .n_layers = 3, .n_heads = 4, .n_kv_heads = 2, .head_dim = 32, .vocab = 300, .max_pos = 128,
                       .rms_eps = 1e-5f, .rope_theta = 10000.0f, .tie_embeddings = 1, .bos_id = 1, .eos_id = 2};
}

// A random model of config c (seed 7) and 5 windows of 40 random tokens;
// 0 (after a FAIL line) if the model cannot be made.
static int driver_setup(const pq_config *c, pq_model **m, pq_calib_data *d) {
    if (pq_model_random(c, PQ_DENSE_F16, 7, m) != PQ_OK) {
        printf("FAIL - random model: %s\n", pq_last_error());
        return 0;
    }
    size_t n = 4000;
    int32_t *s = malloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) s[i] = (int32_t)(pq_test_u64() % 300);
    pq_calib_params p = pq_calib_default_params();
    p.nsamples = 5, p.seqlen = 40;
    pq_calib_windows(s, n, 1, &p, c->max_pos, "t", d);
    free(s);
    return 1;
}

static void test_driver(pq_pool *pool1, pq_pool *pool3) {
    pq_config c = driver_config();
    pq_model *m;
    pq_calib_data d;
    if (!driver_setup(&c, &m, &d)) return;
    const int both = PQ_STAT_XTX | PQ_STAT_ABS;
    drive_result a = drive(m, &d, pool1, 0, 0, 0, both), b = drive(m, &d, pool3, 0, 0, 0, both);
    PQ_CHECK(a.st == PQ_OK && a.groups == 12 && a.done == 3 && a.loaded == 0 && a.same_layers,
             "driver: 3 blocks x 4 input groups measured and quantized, the model's linears restored after");
    PQ_CHECK(b.st == PQ_OK && a.hash == b.hash, "driver: every statistic bit-identical with 1 and 3 threads");
    drive_result ts = drive(m, &d, pool3, 1, 0, 0, both);
    PQ_CHECK(ts.st == PQ_OK && ts.groups == 12 && ts.hash != a.hash,
             "true-sequential: o, gate/up and down see inputs of the quantized earlier linears (other statistics)");
    // resume at block 2: blocks 0 and 1 installed by load_block and only
    // re-run; block 2 must see exactly the statistics of an uninterrupted run
    drive_result full = drive(m, &d, pool1, 0, 0, 2, both), res = drive(m, &d, pool3, 0, 2, 2, both);
    PQ_CHECK(full.st == PQ_OK && res.st == PQ_OK && res.loaded == 2 && res.groups == 4 && res.done == 3 &&
                 res.hash == full.hash,
             "resume at block 2: blocks 0-1 re-run from their quantized weights, block 2's statistics bit-identical");
    drive_result none = drive(m, &d, pool1, 0, 3, 0, both);
    PQ_CHECK(none.st == PQ_OK && none.loaded == 0 && none.done == 0, "resume with every block done: nothing runs");
    PQ_CHECK(a.rep.act_bytes == (size_t)5 * 40 * 128 * 4 && a.rep.total > a.rep.act_bytes && a.rep.peak_rss > 0,
             "driver: memory estimate %zu bytes (activations %zu), measured peak %zu", a.rep.total, a.rep.act_bytes,
             a.rep.peak_rss);
    // a non-finite activation is caught at the end of its block
    float keep = m->layers[1].mlp_norm[3];
    m->layers[1].mlp_norm[3] = INFINITY;
    drive_result bad = drive(m, &d, pool1, 0, 0, 0, PQ_STAT_ABS);
    m->layers[1].mlp_norm[3] = keep;
    PQ_CHECK(bad.st == PQ_ERR_NUMERIC && strstr(pq_last_error(), "block 1 output is not finite"),
             "an Inf activation is refused by block: %s", pq_last_error());
    // the window tokens must be in the vocabulary
    d.tokens[3] = 300;
    drive_result oov = drive(m, &d, pool1, 0, 0, 0, PQ_STAT_ABS);
    PQ_CHECK(oov.st == PQ_ERR_FORMAT && strstr(pq_last_error(), "does not belong to this model"),
             "token out of range: a format error (the tokenizer is another model's): %s", pq_last_error());
    pq_calib_data_free(&d);
    pq_model_free(m);
}

// ---- GPU ---------------------------------------------------------------------------

// X^T X from device activations (calib/xtx_cuda.h through the test wrapper)
// against the CPU accumulation of the same 16-bit values, in FP16 and BF16.
static void test_xtx_cuda(pq_pool *pool) {
    int have = pq_cuda_device_count() > 0;
    PQ_SKIP_UNLESS_GPU(have, "X^T X on the GPU (cublasGemmEx on 16-bit activations) vs the CPU tiles");
    int cols = 300, T = 200;
    for (int k = 0; k < 2; k++) {
        pq_act_dtype dt = k ? PQ_ACT_BF16 : PQ_ACT_F16;
        float *x = malloc((size_t)T * cols * sizeof(float)), *g = calloc((size_t)cols * cols, sizeof(float));
        pq_test_fill(x, (size_t)T * cols, 1.0f);
        pq_cuda_test_round(dt, x, (size_t)T * cols); // the values the device holds
        pq_act_stats a;
        pq_act_stats_init(&a, cols, PQ_STAT_XTX);
        pq_act_stats_add(&a, x, T, PQ_STAT_XTX, pool);
        pq_act_stats_add(&a, x, T / 2, PQ_STAT_XTX, pool);
        pq_status s = pq_cuda_test_xtx(dt, x, T, T / 2, cols, g);
        double worst = 0;
        for (int i = 0; i < cols; i++)
            for (int j = i; j < cols; j++) {
                double want = a.xtx[(size_t)i * cols + j];
                // exact products of 16-bit values, both f32 sums of 300 terms of
                // N(0,1): ~300 * 2^-24 * sqrt(300) apart
                worst = fmax(worst, fabs(g[(size_t)i * cols + j] - want) / (1 + fabs(want)));
            }
        PQ_CHECK(s == PQ_OK && worst < 1e-4, "X^T X on the GPU (%s) = the CPU's (worst relative difference %.2e): %s",
                 pq_act_dtype_name(dt), worst, s == PQ_OK ? "" : pq_last_error());
        pq_act_stats_free(&a);
        free(x), free(g);
    }
}

// The driver with its block passes and X^T X on the GPU against the CPU run:
// the GPU block computes in FP16 inputs / f32 sums, so each activation is
// within ~2^-11 relative of the CPU's and X^T X within ~1e-3 (tolerance
// 1e-2); two GPU runs are bit-identical; no pass fell back to the CPU.
static void test_driver_cuda(pq_pool *pool) {
    int have = pq_cuda_device_count() > 0;
    PQ_SKIP_UNLESS_GPU(have, "calibration driver on the GPU (block passes + X^T X) vs the CPU");
    pq_config c = driver_config();
    pq_model *m;
    pq_calib_data d;
    if (!driver_setup(&c, &m, &d)) return;
    const int both = PQ_STAT_XTX | PQ_STAT_ABS;
    float *xc[MAXL][PQ_NGROUPS] = {{0}}, *xg[MAXL][PQ_NGROUPS] = {{0}};
    drive_result cpu = drive_on(m, &d, pool, 0, 0, 0, both, PQ_DEVICE_CPU, xc);
    drive_result gpu = drive_on(m, &d, pool, 0, 0, 0, both, PQ_DEVICE_CUDA, xg);
    drive_result again = drive_on(m, &d, pool, 0, 0, 0, both, PQ_DEVICE_CUDA, NULL);
    double worst = 0;
    for (int l = 0; l < c.n_layers; l++)
        for (int g = 0; g < PQ_NGROUPS; g++) {
            int cols = pq_input_group_cols(&c, g);
            double num = 0, den = 0;
            for (size_t i = 0; xc[l][g] && xg[l][g] && i < (size_t)cols * cols; i++) {
                double e = (double)xg[l][g][i] - xc[l][g][i];
                num += e * e, den += (double)xc[l][g][i] * xc[l][g][i];
            }
            worst = fmax(worst, xc[l][g] && xg[l][g] && den > 0 ? sqrt(num / den) : 1.0);
            free(xc[l][g]), free(xg[l][g]);
        }
    PQ_CHECK(cpu.st == PQ_OK && gpu.st == PQ_OK && gpu.rep.on_gpu && gpu.rep.cpu_passes == 0 &&
                 gpu.rep.peak_gpu_bytes > 0 && gpu.groups == 12 && gpu.done == 3 && gpu.same_layers && worst < 1e-2,
             "driver on the GPU: 12 groups, X^T X of every block within %.1e of the CPU run's (limit 1e-2), no CPU "
             "fallback, %.1f MiB of device memory in use at most: %s", worst, gpu.rep.peak_gpu_bytes / 1048576.0,
             gpu.st == PQ_OK ? "ok" : pq_last_error());
    PQ_CHECK(again.st == PQ_OK && again.hash == gpu.hash, "driver on the GPU: a second run bit-identical");
    pq_calib_data_free(&d);
    pq_model_free(m);
}

static void test_no_gpu(void) {
    if (pq_cuda_device_count() > 0) return;
    pq_xtx_cuda *h;
    PQ_CHECK(pq_xtx_cuda_create(64, PQ_ACT_F16, NULL, &h) == PQ_ERR_NO_DEVICE && !h, "X^T X on the GPU without one: %s",
             pq_last_error());
    pq_config c = driver_config();
    pq_calib_gpu *g;
    PQ_CHECK(pq_calib_gpu_create(&c, PQ_ACT_F16, 2, 40, &g) == PQ_ERR_NO_DEVICE && !g, "GPU block passes without a GPU: %s",
             pq_last_error());
}

int main(void) {
    pq_test_seed();
    if (pq_blas_init() != PQ_OK) {
        printf("FAIL - OpenBLAS: %s\n", pq_last_error());
        return 1;
    }
    pq_pool *p1, *p3;
    pq_pool_create(1, &p1);
    pq_pool_create(3, &p3);
    test_windows();
    test_load();
    test_stats(p1, p3);
    test_driver(p1, p3);
    test_no_gpu();
    test_xtx_cuda(p3);
    test_driver_cuda(p3);
    pq_pool_free(p1);
    pq_pool_free(p3);
    return pq_test_done();
}
