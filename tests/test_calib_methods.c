// AWQ, SmoothQuant and static activation scales (quant/fold, awq,
// smoothquant, smooth, scales): the block hooks the sample is taken by show
// each linear's exact input and output; folding is exact on the fixture and on a
// random block for every entry of the fold table; AWQ alpha = 0 is RTN,
// the grid search picks the minimum, clipping never increases the error;
// SmoothQuant lowers the W8A8 error of a layer with outlier channels; an
// all-zero activation channel gives finite scales end to end; the INT8 and
// FP8 static checkpoints run equal to the reference with their input_scale;
// a truncated scales file names the file.
#include "tests/lib/model_random.h"
#include "tests/test.h"

#include "calib/data.h"
#include "common/half.h"
#include "common/sys.h"
#include "eval/block_cpu.h"
#include "eval/model.h"
#include "formats/fileio.h"
#include "kernels/blas.h"
#include "kernels/ops.h"
#include "quant/awq.h"
#include "quant/fold.h"
#include "quant/quantize.h"
#include "quant/rtn.h"
#include "quant/scales.h"
#include "quant/smooth.h"
#include "quant/smoothquant.h"

// RTN into a new quantized tensor q (the caller frees it, also on error).
static pq_status rtn_new(const float *w, int rows, int cols, const pq_scheme *s, pq_dtype dt, const char *name,
                         pq_pool *pool, pq_qtensor *q, double *err) {
    pq_status st = pq_qtensor_init(q, s, rows, cols, dt);
    return st != PQ_OK ? st : pq_rtn_quantize(w, s, name, pool, q, err);
}

#define T_TOK 24

// ---- the block's hooks ------------------------------------------------------------

// What one forward of block 0 showed its hooks: each group's input and
// each linear's output (their first calls), and the number of calls.
typedef struct {
    float *in[PQ_NLINEAR], *out[PQ_NLINEAR];
    int n_in[PQ_NLINEAR], n_out[PQ_NLINEAR];
} seen;

static void keep(float **dst, int *n, const float *x, size_t count) {
    if ((*n)++ == 0) *dst = memcpy(malloc(count * sizeof(float)), x, count * sizeof(float));
}

static void saw_input(void *ud, int layer, pq_linear_slot slot, const float *x, int T, int cols) {
    seen *v = ud;
    keep(&v->in[slot], &v->n_in[slot], x, (size_t)T * cols);
}

static void saw_output(void *ud, int layer, pq_linear_slot slot, const float *y, int T, int rows) {
    seen *v = ud;
    keep(&v->out[slot], &v->n_out[slot], y, (size_t)T * rows);
}

// linear_output sees each linear's output as pq_linear_forward makes it
// from the input linear_input saw (bit for bit: the q and k outputs before
// RoPE), once per forward; inputs_only stops before down_proj, so its
// output is not shown.
static void test_block_hooks(pq_pool *pool) {
    pq_model *m;
    if (pq_model_open(pq_test_path("fixtures/stories260K"), &m) != PQ_OK) {
        printf("FAIL - fixture: %s\n", pq_last_error());
        return;
    }
    const pq_config *c = &m->cfg;
    const pq_layer *L = &m->layers[0];
    size_t kvd = (size_t)c->n_kv_heads * c->head_dim, n = (size_t)T_TOK * c->hidden, ws_bytes = 0;
    for (int k = 0; k < PQ_NLINEAR; k++) {
        size_t b = pq_linear_workspace_bytes(&L->lin[k], pq_pool_size(pool));
        ws_bytes = b > ws_bytes ? b : ws_bytes;
    }
    float *x = malloc(n * 4), *y = malloc((size_t)T_TOK * c->intermediate * 4), *kc = pq_alloc(T_TOK * kvd * 4),
          *vc = pq_alloc(T_TOK * kvd * 4);
    void *ws = pq_alloc(ws_bytes);
    pq_block_scratch s;
    double inv[64];
    pq_rope_params rp = {c->rope_theta, 0, 0, 0, 0, 0};
    pq_rope_inv_freq(&rp, c->head_dim, inv);
    PQ_ASSERT(pq_block_scratch_init(&s, c, T_TOK, T_TOK, pq_pool_size(pool), L, 1, NULL) == PQ_OK && kc && vc && ws);
    pq_block_rope_prepare(&s, inv, c->head_dim, 0, T_TOK);
    for (int inputs_only = 0; inputs_only < 2; inputs_only++) {
        seen v;
        memset(&v, 0, sizeof v);
        pq_block_hooks h = {.linear_input = saw_input, .linear_output = saw_output, .ud = &v,
                            .inputs_only = inputs_only};
        pq_test_fill(x, n, 1.0f);
        pq_block_forward_cpu(c, L, 0, x, T_TOK, 0, kc, vc, &s, pool, &h);
        int ok = 1, once = 1;
        for (int k = 0; k < PQ_NLINEAR; k++) {
            pq_linear_slot in = PQ_INPUT_GROUPS[pq_fold_group_of((pq_linear_slot)k)].input;
            int shown = !(inputs_only && k == PQ_DOWN);
            once = once && v.n_out[k] == shown && ((pq_linear_slot)k != in || v.n_in[k] == 1);
            if (!shown || !v.out[k] || !v.in[in]) continue;
            pq_linear_forward(&L->lin[k], v.in[in], T_TOK, y, ws, pool);
            ok = ok && !memcmp(y, v.out[k], (size_t)T_TOK * L->lin[k].rows * sizeof(float));
        }
        PQ_CHECK(once, "block hooks%s: each group's input and each linear's output shown once%s",
                 inputs_only ? " (inputs_only)" : "", inputs_only ? ", down_proj's output not" : "");
        PQ_CHECK(ok, "block hooks%s: every output shown equals the linear's forward of the input shown",
                 inputs_only ? " (inputs_only)" : "");
        for (int k = 0; k < PQ_NLINEAR; k++) free(v.in[k]), free(v.out[k]);
    }
    pq_block_scratch_free(&s);
    free(x), free(y), pq_free(kc), pq_free(vc), pq_free(ws);
    pq_model_free(m);
}

// ---- folding ----------------------------------------------------------------------

// Block L (widened) on x [T_TOK][hidden] into y.
static void forward(const pq_config *c, const pq_layer *L, const float *x, float *y, pq_pool *pool) {
    pq_block_scratch s;
    size_t kvd = (size_t)c->n_kv_heads * c->head_dim;
    float *kc = pq_alloc(T_TOK * kvd * 4), *vc = pq_alloc(T_TOK * kvd * 4);
    double inv[64];
    pq_rope_params rp = {c->rope_theta, 0, 0, 0, 0, 0};
    pq_rope_inv_freq(&rp, c->head_dim, inv);
    PQ_ASSERT(pq_block_scratch_init(&s, c, T_TOK, T_TOK, pq_pool_size(pool), L, 1, NULL) == PQ_OK && kc && vc);
    pq_block_rope_prepare(&s, inv, c->head_dim, 0, T_TOK);
    memcpy(y, x, (size_t)T_TOK * c->hidden * sizeof(float));
    pq_block_forward_cpu(c, L, 0, y, T_TOK, 0, kc, vc, &s, pool, NULL);
    pq_block_scratch_free(&s);
    pq_free(kc), pq_free(vc);
}

// Folds random scales (log-uniform in [1/4, 4]) into group g (-1: every
// foldable one) of a copy of L and returns max |y' - y| / max |y| of the
// block output; *same: whether loading and folding over the pool gave the
// bits of the same in line (no pool).
static double fold_error(const pq_config *c, const pq_layer *L, int g, pq_pool *pool, int *same) {
    pq_fold_block a, b, l;
    PQ_ASSERT(pq_fold_block_load(c, L, 0, "t", pool, &a) == PQ_OK && pq_fold_block_load(c, L, 0, "t", pool, &b) == PQ_OK &&
              pq_fold_block_load(c, L, 0, "t", NULL, &l) == PQ_OK);
    for (int k = 0; k < PQ_NGROUPS; k++) {
        if ((g >= 0 && k != g) || !pq_fold_usable(c, k)) continue;
        int n = pq_input_group_cols(c, k);
        float *s = malloc((size_t)n * sizeof(float));
        for (int i = 0; i < n; i++) s[i] = powf(4.0f, pq_test_uniform());
        pq_fold_apply(&b, k, s, pool);
        pq_fold_apply(&l, k, s, NULL);
        free(s);
    }
    *same = !memcmp(b.attn_norm, l.attn_norm, (size_t)c->hidden * 4) &&
            !memcmp(b.mlp_norm, l.mlp_norm, (size_t)c->hidden * 4);
    for (int k = 0; k < PQ_NLINEAR; k++)
        *same = *same && !memcmp(b.w[k], l.w[k], (size_t)b.rows[k] * b.cols[k] * 4) &&
                (!b.bias[k] || !memcmp(b.bias[k], l.bias[k], (size_t)b.rows[k] * 4));
    pq_fold_block_free(&l);
    size_t n = (size_t)T_TOK * c->hidden;
    float *x = malloc(n * 4), *y0 = malloc(n * 4), *y1 = malloc(n * 4);
    pq_test_fill(x, n, 1.0f);
    pq_layer La = pq_fold_block_layer(&a), Lb = pq_fold_block_layer(&b);
    forward(c, &La, x, y0, pool);
    forward(c, &Lb, x, y1, pool);
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs((double)y1[i] - y0[i])), m = fmax(m, fabs((double)y0[i]));
    free(x), free(y0), free(y1);
    pq_fold_block_free(&a), pq_fold_block_free(&b);
    return e / m;
}

// The bound: a fold adds one f32 rounding to every folded weight and norm
// value (relative 2^-24) on top of the block's own f32 arithmetic, whose
// sums of at most ~200 terms move by ~sqrt(K) ulps each; measured ~1e-7 of
// the output's largest element. 2^-17 (7.6e-6) leaves a wide margin and is
// still 60x below what the smallest scale error (2^-11, an FP16 rounding of
// a scale) would cause.
#define FOLD_BOUND 0x1p-17

static void test_fold(pq_pool *pool) {
    pq_model *m;
    if (pq_model_open(pq_test_path("fixtures/stories260K"), &m) != PQ_OK) {
        printf("FAIL - fixture: %s\n", pq_last_error());
        return;
    }
    PQ_CHECK(!pq_fold_usable(&m->cfg, 1) && pq_fold_usable(&m->cfg, 0) && pq_fold_usable(&m->cfg, 2) &&
                 pq_fold_usable(&m->cfg, 3),
             "fold table on the fixture (8 heads on 4 kv heads): o <- v_proj not used (GQA), the other three are");
    int same = 1;
    for (int g = -1; g < PQ_NGROUPS; g++) {
        double worst = 0;
        if (g >= 0 && !pq_fold_usable(&m->cfg, g)) continue;
        for (int l = 0; l < m->cfg.n_layers; l++) {
            int ok;
            worst = fmax(worst, fold_error(&m->cfg, &m->layers[l], g, pool, &ok));
            same &= ok;
        }
        PQ_CHECK(worst <= FOLD_BOUND, "fold, fixture (FP16 widened), %s <- %s: block output moves "
                 "%.2e of its max (bound 2^-17)", g < 0 ? "every group" : PQ_INPUT_GROUPS[g].name,
                 g < 0 ? "its producer (o: not folded)" : PQ_INPUT_GROUPS[g].from == PQ_FROM_LINEAR
                     ? pq_linear_slot_name(PQ_INPUT_GROUPS[g].from_slot) : "a norm", worst);
    }
    pq_model_free(m);
    // random: 6 heads of 16 with their own kv heads (o <- v applies), a ragged intermediate, a v_proj bias
    pq_config c = {.arch = PQ_ARCH_QWEN2, .arch_name = "Qwen2ForCausalLM", .hidden = 96, .intermediate = 200,
                   .n_layers = 1, .n_heads = 6, .n_kv_heads = 6, .head_dim = 16, .vocab = 50, .max_pos = 64,
                   .rms_eps = 1e-6f, .rope_theta = 10000.0f, .tie_embeddings = 1, .qkv_bias = 1};
    PQ_ASSERT(pq_model_random(&c, PQ_DENSE_F32, pq_test_u64(), &m) == PQ_OK);
    pq_layer *L = &m->layers[0];
    float bias[96], norm[96];
    pq_test_fill(bias, 96, 0.5f);
    for (int i = 0; i < 96; i++) norm[i] = 0.5f + pq_test_uniform() * 0.4f;
    memcpy(L->attn_norm, norm, sizeof norm);
    L->lin[PQ_V].bias = bias;
    for (int g = -1; g < PQ_NGROUPS; g++) {
        int ok;
        double e = fold_error(&c, L, g, pool, &ok);
        same &= ok;
        PQ_CHECK(e <= FOLD_BOUND, "fold, random block (6 heads, v bias, intermediate 200), %s: %.2e of the max",
                 g < 0 ? "every group" : PQ_INPUT_GROUPS[g].name, e);
    }
    PQ_CHECK(same, "fold: widening and folding over the pool give the bits of the same in line (fixture and "
             "random blocks, every group)");
    L->lin[PQ_V].bias = NULL;
    pq_model_free(m);
    PQ_CHECK(pq_fold_usable(&c, 1), "fold table with 6 heads on 6 kv heads: o <- v_proj used");
}

// ---- AWQ --------------------------------------------------------------------------

static pq_scheme scheme(int group, int sym) {
    pq_scheme s;
    PQ_ASSERT(pq_scheme_make("w4a16", group, sym, &s) == PQ_OK);
    return s;
}

typedef struct {
    int rows, cols, T;
    const float *w, *x;
    pq_scheme s;
} lin_case;

// ||X W^T - X (Q(W s)/s)^T||^2 / T: AWQ's loss for one linear.
static pq_status lin_loss(void *ud, const float *s, double *loss) {
    lin_case *c = ud;
    size_t n = (size_t)c->rows * c->cols;
    float *w = calloc(n, 4), *y0 = malloc((size_t)c->T * c->rows * 4), *y1 = malloc((size_t)c->T * c->rows * 4);
    for (size_t i = 0; i < n; i++) w[i] = c->w[i] * s[i % c->cols];
    pq_qtensor q;
    PQ_ASSERT(rtn_new(w, c->rows, c->cols, &c->s, PQ_DT_F16, "t", NULL, &q, NULL) == PQ_OK);
    pq_linear v = pq_qtensor_linear(&q);
    pq_linear_rows(&v, 0, c->rows, w);
    pq_qtensor_free(&q);
    for (size_t i = 0; i < n; i++) w[i] /= s[i % c->cols];
    pq_sgemm_nt(c->T, c->rows, c->cols, 1, c->x, c->cols, c->w, c->cols, 0, y0, c->rows);
    pq_sgemm_nt(c->T, c->rows, c->cols, 1, c->x, c->cols, w, c->cols, 0, y1, c->rows);
    double e = 0;
    for (size_t i = 0; i < (size_t)c->T * c->rows; i++) e += ((double)y1[i] - y0[i]) * ((double)y1[i] - y0[i]);
    *loss = e / c->T;
    free(w), free(y0), free(y1);
    return PQ_OK;
}

// alpha implied by s for xmean = {e, 1}: s0 = e^(alpha/2); loss minimal at 0.35
static pq_status crafted_loss(void *ud, const float *s, double *loss) {
    double a = 2 * log(s[0]);
    *loss = (a - 0.35) * (a - 0.35);
    return PQ_OK;
}

static void test_awq(pq_pool *pool) {
    float xm[5] = {3.0f, 0.0f, 1e-6f, 0.2f, 50.0f}, s[5], tmp[5];
    pq_awq_scales(xm, 5, 0.0, s);
    int ones = 1;
    for (int j = 0; j < 5; j++) ones &= s[j] == 1.0f;
    PQ_CHECK(ones, "AWQ alpha = 0: every scale exactly 1 (a zero-activation channel too)");
    pq_awq_scales(xm, 5, 0.7, s);
    int fin = 1;
    for (int j = 0; j < 5; j++) fin &= isfinite(s[j]) && s[j] > 0;
    PQ_CHECK(fin && fabs(sqrt((double)s[4] * s[1]) - 1) < 1e-6,
             "AWQ alpha 0.7: finite positive scales (zero channel floored at 1e-4), sqrt(max * min) = 1");
    // alpha = 0 quantizes exactly as RTN: codes and scales
    int rows = 24, cols = 172;
    size_t n = (size_t)rows * cols;
    float *w = malloc(n * 4), *ones_s = malloc((size_t)cols * 4);
    pq_test_fill(w, n, 0.05f);
    for (int j = 0; j < cols; j++) ones_s[j] = 1;
    for (int sym = 0; sym <= 1; sym++) {
        pq_scheme sc = scheme(32, sym);
        pq_qtensor a, b;
        float *wc = malloc(n * 4);
        memcpy(wc, w, n * 4);
        for (size_t i = 0; i < n; i++) wc[i] *= ones_s[i % cols];
        PQ_ASSERT(rtn_new(w, rows, cols, &sc, PQ_DT_F16, "a", NULL, &a, NULL) == PQ_OK &&
                  rtn_new(wc, rows, cols, &sc, PQ_DT_F16, "b", NULL, &b, NULL) == PQ_OK);
        int words = pq_qpack_words_per_row(cols, 4);
        PQ_CHECK(!memcmp(a.packed, b.packed, (size_t)rows * words * 4) && !memcmp(a.scales, b.scales, a.nscales * 4) &&
                     (sym || !memcmp(a.zeros, b.zeros, (size_t)a.nscales)),
                 "AWQ alpha = 0 (s = 1), g32 %s, ragged 172 columns: the codes, scales and zeros of RTN", sym ? "sym" : "asym");
        pq_qtensor_free(&a), pq_qtensor_free(&b);
        free(wc);
    }
    // the grid search returns the grid's first minimum
    float xm2[2] = {(float)M_E, 1.0f}, best[2];
    double alpha, loss, hist[20];
    pq_status st = pq_awq_search_scale(xm2, 2, 20, crafted_loss, NULL, best, tmp, &alpha, &loss, hist);
    int argmin = 0;
    for (int i = 1; i < 20; i++) argmin = hist[i] < hist[argmin] ? i : argmin;
    PQ_CHECK(st == PQ_OK && fabs(alpha - 0.35) < 1e-12 && argmin == 7 && loss == hist[7],
             "AWQ search, crafted loss (alpha - 0.35)^2: picks alpha = 0.35 = grid point 7 of 20");
    // a linear whose input has outlier channels: AWQ's loss
    int lc = 128, lr = 64, T = 256;
    float *lw = malloc((size_t)lr * lc * 4), *lx = malloc((size_t)T * lc * 4), *mean = calloc(lc, 4), *sb = malloc(lc * 4),
          *st2 = malloc(lc * 4);
    pq_test_fill(lw, (size_t)lr * lc, 0.05f);
    pq_test_fill(lx, (size_t)T * lc, 1.0f);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < 4; j++) lx[(size_t)t * lc + 17 * j + 3] *= 30.0f; // 4 outlier channels
    for (int t = 0; t < T; t++)
        for (int j = 0; j < lc; j++) mean[j] += fabsf(lx[(size_t)t * lc + j]) / T;
    lin_case cs = {lr, lc, T, lw, lx, scheme(64, 1)};
    st = pq_awq_search_scale(mean, lc, 20, lin_loss, &cs, sb, st2, &alpha, &loss, hist);
    argmin = 0;
    for (int i = 1; i < 20; i++) argmin = hist[i] < hist[argmin] ? i : argmin;
    PQ_CHECK(st == PQ_OK && loss == hist[argmin] && alpha == argmin / 20.0 && alpha > 0 && loss < hist[0],
             "AWQ search, W4 g64 linear with 4 outlier input channels: alpha %.2f, output error %.3g < RTN's %.3g",
             alpha, loss, hist[0]);
    // clip search: never worse than no clipping, per row group, sym and asym, ragged last group
    for (int sym = 0; sym <= 1; sym++) {
        pq_scheme sc = scheme(32, sym);
        int ng = pq_awq_ngroups(&sc, cols);
        float *x = malloc((size_t)T * cols * 4), *clip = malloc((size_t)rows * ng * 4), *wc = malloc(n * 4);
        pq_test_fill(x, (size_t)T * cols, 1.0f);
        for (size_t i = 0; i < n; i += 37) w[i] *= 6; // heavy tails
        double e, e0;
        st = pq_awq_search_clip(w, rows, cols, &sc, PQ_DT_F16, x, T, 20, 0.5, pool, clip, &e, &e0);
        int in_range = 1, shrunk = 0;
        for (int r = 0; r < rows; r++)
            for (int g = 0; g < ng; g++) {
                float m = 0;
                for (int c = g * 32; c < cols && c < g * 32 + 32; c++) m = fmaxf(m, fabsf(w[(size_t)r * cols + c]));
                float cv = clip[(size_t)r * ng + g];
                in_range &= cv <= m && cv >= 0.5f * m;
                shrunk += cv < m;
            }
        // recompute each row group's error with and without the clip, independently
        memcpy(wc, w, n * 4);
        pq_awq_clip_apply(wc, rows, cols, &sc, clip);
        pq_qtensor qa, qb;
        float *da = malloc(n * 4), *db = malloc(n * 4);
        PQ_ASSERT(rtn_new(wc, rows, cols, &sc, PQ_DT_F16, "c", NULL, &qa, NULL) == PQ_OK &&
                  rtn_new(w, rows, cols, &sc, PQ_DT_F16, "d", NULL, &qb, NULL) == PQ_OK);
        pq_linear va = pq_qtensor_linear(&qa), vb = pq_qtensor_linear(&qb);
        pq_linear_rows(&va, 0, rows, da);
        pq_linear_rows(&vb, 0, rows, db);
        int never_worse = 1;
        for (int r = 0; r < rows; r++)
            for (int g = 0; g < ng; g++) {
                double ea = 0, eb = 0;
                for (int t = 0; t < T; t++) {
                    double pa = 0, pb = 0;
                    for (int c = g * 32; c < cols && c < g * 32 + 32; c++) {
                        double xv = x[(size_t)t * cols + c], wv = w[(size_t)r * cols + c];
                        pa += xv * (da[(size_t)r * cols + c] - wv), pb += xv * (db[(size_t)r * cols + c] - wv);
                    }
                    ea += pa * pa, eb += pb * pb;
                }
                never_worse &= ea <= eb * (1 + 1e-6) + 1e-12; // f32 products summed in another order
            }
        PQ_CHECK(st == PQ_OK && in_range && shrunk > 0 && never_worse && e <= e0,
                 "AWQ clip, g32 %s, 172 columns: clips in [0.5, 1] of each row group's max (%d shrunk), no row group's "
                 "output error above the unclipped one, total %.4g <= %.4g", sym ? "sym" : "asym", shrunk, e, e0);
        pq_qtensor_free(&qa), pq_qtensor_free(&qb);
        free(x), free(clip), free(wc), free(da), free(db);
    }
    free(w), free(ones_s), free(lw), free(lx), free(mean), free(sb), free(st2);
}

// ---- SmoothQuant --------------------------------------------------------------------

// Relative error of y = x W^T run W8A8 (INT8 weights per channel, INT8
// activations static per tensor or dynamic per token), smoothed with s or not.
static double w8a8_error(const float *w, const float *x, int rows, int cols, int T, const float *s, int stat) {
    float *ws = malloc((size_t)rows * cols * 4), *xs = malloc((size_t)T * cols * 4), *amax = calloc(cols, 4);
    float *y0 = malloc((size_t)T * rows * 4), *y1 = malloc((size_t)T * rows * 4);
    for (size_t i = 0; i < (size_t)rows * cols; i++) ws[i] = w[i] * (s ? s[i % cols] : 1);
    for (size_t i = 0; i < (size_t)T * cols; i++) xs[i] = x[i] / (s ? s[i % cols] : 1);
    for (size_t i = 0; i < (size_t)T * cols; i++) amax[i % cols] = fmaxf(amax[i % cols], fabsf(x[i]));
    pq_scheme sc;
    PQ_ASSERT(pq_scheme_make("w8a8", PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, &sc) == PQ_OK);
    pq_qtensor q;
    PQ_ASSERT(rtn_new(ws, rows, cols, &sc, PQ_DT_F16, "t", NULL, &q, NULL) == PQ_OK);
    pq_linear v = pq_qtensor_linear(&q);
    v.act = (pq_actq){PQ_ACTQ_INT8, stat ? pq_static_act_scale(amax, s, cols, 0, PQ_DT_F16) : 0};
    pq_linear_forward_ref(&v, xs, T, y1);
    pq_sgemm_nt(T, rows, cols, 1, x, cols, w, cols, 0, y0, rows);
    double e = pq_rel_l2(y1, y0, (size_t)T * rows);
    pq_qtensor_free(&q);
    free(ws), free(xs), free(amax), free(y0), free(y1);
    return e;
}

static void test_smoothquant(void) {
    int rows = 64, cols = 128, T = 128;
    float *w = malloc((size_t)rows * cols * 4), *x = malloc((size_t)T * cols * 4), *amax = calloc(cols, 4),
          *wmax = calloc(cols, 4), *s = malloc(cols * 4);
    pq_test_fill(w, (size_t)rows * cols, 0.05f);
    pq_test_fill(x, (size_t)T * cols, 1.0f);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < 3; j++) x[(size_t)t * cols + 40 * j + 5] *= 60.0f; // outlier channels, as in LLMs
    for (size_t i = 0; i < (size_t)T * cols; i++) amax[i % cols] = fmaxf(amax[i % cols], fabsf(x[i]));
    for (size_t i = 0; i < (size_t)rows * cols; i++) wmax[i % cols] = fmaxf(wmax[i % cols], fabsf(w[i]));
    pq_sq_scales(amax, wmax, cols, 0.5, s);
    for (int stat = 1; stat >= 0; stat--) {
        double plain = w8a8_error(w, x, rows, cols, T, NULL, stat), smooth = w8a8_error(w, x, rows, cols, T, s, stat);
        PQ_CHECK(smooth < plain, "SmoothQuant alpha 0.5, 3 outlier channels (60x): W8A8 %s error %.4f < %.4f without",
                 stat ? "static per-tensor" : "dynamic per-token", smooth, plain);
    }
    // a channel whose activations (or weights) are all zero: s = 1, nothing infinite
    float a[4] = {0, 2, 0, 1}, wm[4] = {1, 0, 0, 2}, sc[4], zeros[4] = {0};
    pq_sq_scales(a, wm, 4, 0.5, sc);
    float z = pq_static_act_scale(zeros, NULL, 4, 1, PQ_DT_F16), z8 = pq_static_act_scale(zeros, NULL, 4, 0, PQ_DT_BF16);
    PQ_CHECK(sc[0] == 1 && sc[1] == 1 && sc[2] == 1 && fabsf(sc[3] - sqrtf(0.5f)) < 1e-6f && z == 0x1p-10f &&
                 z8 == 0x1p-7f,
             "zero activation or weight channel: s = 1; an all-zero input: static scale = the dtype's eps (%g, %g)", z, z8);
    // the formula by hand at alphas other than 0.5 (a swap of alpha and 1 - alpha shows)
    float ax[2] = {16, 0.25f}, wx[2] = {4, 9}, s2[2], s8[2];
    pq_sq_scales(ax, wx, 2, 0.25, s2);
    pq_sq_scales(ax, wx, 2, 0.75, s8);
    PQ_CHECK(fabsf(s2[0] - 2.0f / powf(4, 0.75f)) < 1e-6f && fabsf(s2[1] - powf(0.25f, 0.25f) / powf(9, 0.75f)) < 1e-6f &&
                 fabsf(s8[0] - 8.0f / powf(4, 0.25f)) < 1e-5f && fabsf(s8[1] - powf(0.25f, 0.75f) / sqrtf(3)) < 1e-6f,
             "SmoothQuant s = max|x|^a / max|W|^(1-a) at a = 0.25 (%g, %g) and 0.75 (%g, %g)", s2[0], s2[1], s8[0], s8[1]);
    float am[3] = {127.5f, 3, 1}, s3[3] = {1, 1, 1};
    PQ_CHECK(pq_static_act_scale(am, s3, 3, 0, PQ_DT_F32) == 1.0f && pq_static_act_scale(am, s3, 3, 1, PQ_DT_F32) ==
                 (float)(127.5 / 448),
             "static activation scales: amax / 127.5 (INT8), amax / 448 (FP8), as compressed-tensors' calculate_qparams");
    double al;
    PQ_CHECK(pq_quantize_parse_alpha("1.5", &al) == PQ_ERR_ARG && pq_quantize_parse_alpha("-0.1", &al) == PQ_ERR_ARG &&
                 pq_quantize_parse_alpha("x", &al) == PQ_ERR_ARG && pq_quantize_parse_alpha("auto", &al) == PQ_OK &&
                 al == PQ_ALPHA_AUTO && pq_quantize_parse_alpha("0.75", &al) == PQ_OK && al == 0.75,
             "--alpha: outside [0, 1] or not a number refused; auto and 0.75 accepted");
    free(w), free(x), free(amax), free(wmax), free(s);
}

// ---- end to end on a random model with a dead channel ------------------------------

typedef struct {
    int blocks, finite, act_static;
    double out_err[2][PQ_NLINEAR]; // of the first two blocks
} collect;

static pq_status on_block(void *ud, int layer, const pq_block_scales *sc, const pq_smooth_block *qb) {
    collect *c = ud;
    c->blocks++;
    for (int g = 0; g < PQ_NGROUPS; g++) {
        c->finite &= c->act_static ? sc->act_scale[g] > 0 && isfinite(sc->act_scale[g]) : sc->act_scale[g] == 0;
        for (int i = 0; sc->scale[g] && i < 16; i++) c->finite &= isfinite(sc->scale[g][i]) && sc->scale[g][i] > 0;
    }
    for (int k = 0; k < PQ_NLINEAR; k++) c->finite &= isfinite(qb->out_err[k]) && qb->out_err[k] > 0; // rows were sampled
    if (layer < 2) memcpy(c->out_err[layer], qb->out_err, sizeof qb->out_err);
    if (qb->attn_norm)
        for (int i = 0; i < 64; i++) c->finite &= isfinite(qb->attn_norm[i]);
    return PQ_OK;
}

static pq_status pass_done(void *ud, int layer, int resumed) { return PQ_OK; }

static void test_dead_channel(pq_pool *pool) {
    pq_config c = {.arch = PQ_ARCH_LLAMA, .arch_name = "LlamaForCausalLM", .hidden = 64, .intermediate = 160,
                   .n_layers = 2, .n_heads = 4, .n_kv_heads = 4, .head_dim = 16, .vocab = 100, .max_pos = 64,
                   .rms_eps = 1e-5f, .rope_theta = 10000.0f, .tie_embeddings = 1, .bos_id = 1};
    pq_model *m;
    PQ_ASSERT(pq_model_random(&c, PQ_DENSE_F16, 3, &m) == PQ_OK);
    for (int l = 0; l < 2; l++) m->layers[l].attn_norm[7] = 0, m->layers[l].mlp_norm[9] = 0; // dead channels
    int32_t s[3000];
    for (int i = 0; i < 3000; i++) s[i] = (int32_t)(pq_test_u64() % 100);
    pq_calib_params p = pq_calib_default_params();
    p.nsamples = 4, p.seqlen = 32;
    pq_calib_data d;
    PQ_ASSERT(pq_calib_windows(s, 3000, 1, &p, c.max_pos, "t", &d) == PQ_OK);
    const char *names[] = {"smoothquant", "awq"};
    for (int k = 0; k < 2; k++) {
        collect col = {.finite = 1, .act_static = !k};
        pq_smooth_config cfg = {.m = m, .kind = k ? PQ_SMOOTH_AWQ : PQ_SMOOTH_SQ, .dt = PQ_DT_F16,
                                .p = pq_smooth_default_params(), .pool = pool, .emit = on_block, .ud = &col};
        PQ_ASSERT(pq_scheme_make(k ? "w4a16" : "w8a8", k ? 32 : PQ_GROUP_DEFAULT, PQ_SYM_DEFAULT, &cfg.scheme) == PQ_OK);
        if (!k) PQ_ASSERT(pq_scheme_static_act(&cfg.scheme) == PQ_OK);
        pq_smooth *S;
        size_t work;
        pq_status st = pq_smooth_create(&cfg, &d, &S, &work);
        pq_calib_method meth = {.stats = PQ_STAT_ABS, .quantize_block = pq_smooth_quantize_block,
                                .sample = pq_smooth_sample, .sample_output = pq_smooth_sample_output,
                                .block_done = pass_done, .ud = S};
        pq_calib_run_params rp = {.pool = pool, .device = PQ_DEVICE_CPU};
        pq_calib_report rep;
        if (st == PQ_OK) st = pq_calib_run(m, &d, &meth, &rp, &rep);
        PQ_CHECK(st == PQ_OK && col.blocks == 2 && col.finite,
                 "%s through the driver, input_layernorm[7] and post_attention_layernorm[9] zero (dead channels): "
                 "finite scales, norms and output errors (> 0) in every block%s%s", names[k], st ? ": " : "",
                 st ? pq_last_error() : "");
        if (!k && S) { // the output errors' source side sampled or computed: the same bits
            collect again = {.finite = 1, .act_static = 1};
            cfg.ud = &again;
            pq_smooth_free(S);
            st = pq_smooth_create(&cfg, &d, &S, &work);
            meth.sample_output = NULL, meth.ud = S;
            if (st == PQ_OK) st = pq_calib_run(m, &d, &meth, &rp, &rep);
            PQ_CHECK(st == PQ_OK && again.blocks == 2 && !memcmp(again.out_err, col.out_err, sizeof col.out_err),
                     "smoothquant: output errors from the measuring pass's sampled outputs == from a forward of "
                     "their own (no sample_output hook), bit for bit");
        }
        if (!k && S) { // without the sample hook a fixed-alpha SmoothQuant has nothing to measure errors on
            meth.sample = NULL;
            st = pq_calib_run(m, &d, &meth, &rp, &rep);
            PQ_CHECK(st == PQ_ERR_ARG && strstr(pq_last_error(), "no inputs sampled"),
                     "smoothquant through a driver without the sample hook: PQ_ERR_ARG (%s)", pq_last_error());
        }
        pq_smooth_free(S);
    }
    pq_calib_data_free(&d);
    pq_model_free(m);
}

// ---- static checkpoints on the fixture -------------------------------------------------

static void rm_rf(const char *path) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) printf("# could not remove %s\n", path);
}

static float tensor_scalar(const pq_st *st, const char *name) {
    const pq_tensor *t = pq_st_find(st, name);
    uint16_t h;
    if (!t || t->nbytes != 2) return NAN;
    memcpy(&h, t->data, 2);
    return pq_fp16_to_f32(h);
}

static void test_static(pq_pool *pool) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/pq-test-static-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        printf("FAIL - mkdtemp\n");
        return;
    }
    const char *methods[] = {"smoothquant", "fp8"};
    for (int k = 0; k < 2; k++) {
        char out[300];
        snprintf(out, sizeof out, "%s/%s", dir, methods[k]);
        pq_quantize_request p = pq_quantize_default_request();
        p.model = pq_test_path("fixtures/stories260K"), p.out = out, p.method = methods[k], p.scheme.act_static = !k;
        p.calib.path = pq_test_path("data/c4_validation_2k.txt"), p.calib.nsamples = 4, p.calib.seqlen = 128;
        p.nthreads = 2;
        pq_quantize_result r;
        pq_model *m = NULL;
        pq_status st = pq_quantize(&p, NULL, NULL, &r);
        if (st == PQ_OK) st = pq_model_open(out, &m);
        int scales_match = st == PQ_OK, exact = 1, close = 1, checked = 0;
        char name[256];
        for (int l = 0; st == PQ_OK && l < m->cfg.n_layers; l++)
            for (int s = 0; s < PQ_NLINEAR; s++) {
                const pq_linear *L = &m->layers[l].lin[s];
                snprintf(name, sizeof name, "model.layers.%d.%s.input_scale", l, pq_linear_slot_name((pq_linear_slot)s));
                scales_match &= L->act.static_scale > 0 && L->act.static_scale == tensor_scalar(m->st, name) &&
                                L->act.type == (k ? PQ_ACTQ_FP8 : PQ_ACTQ_INT8);
                int T = 37;
                float *x = malloc((size_t)T * L->cols * 4), *y = malloc((size_t)T * L->rows * 4),
                      *yr = malloc((size_t)T * L->rows * 4);
                void *ws = pq_alloc(pq_linear_workspace_bytes(L, pq_pool_size(pool)));
                pq_test_fill(x, (size_t)T * L->cols, 2.0f);
                pq_test_poison(y, (size_t)T * L->rows);
                pq_linear_forward(L, x, T, y, ws, pool);
                pq_linear_forward_ref(L, x, T, yr);
                if (!k) exact &= memcmp(y, yr, (size_t)T * L->rows * 4) == 0;
                // FP8: fp32 sums of exact products vs the exact double sum: cols 2^-24 relative to the sum of
                // |products| (kernels/w8a8.h), bounded here by the output's scale
                else close &= pq_allclose(y, yr, (size_t)T * L->rows, 1e-4, 1e-4);
                checked++;
                free(x), free(y), free(yr);
                pq_free(ws);
            }
        if (!k)
            PQ_CHECK(st == PQ_OK && scales_match && exact && checked == 35,
                     "w8a8 static (smoothquant): %d linears load act.static_scale = their input_scale tensor; the engine "
                     "equals pq_linear_forward_ref bit for bit%s%s", checked, st ? ": " : "", st ? pq_last_error() : "");
        else
            PQ_CHECK(st == PQ_OK && scales_match && close && checked == 35,
                     "fp8-static (--method fp8): %d linears load act.static_scale = their input_scale tensor; the "
                     "engine equals pq_linear_forward_ref within fp32 summation%s%s", checked, st ? ": " : "",
                     st ? pq_last_error() : "");
        pq_model_free(m);
        rm_rf(out);
    }
    // a truncated scales file: the reader's error names the file
    char path[300], trunc[300];
    snprintf(path, sizeof path, "%s/s.safetensors", dir);
    snprintf(trunc, sizeof trunc, "%s/t.safetensors", dir);
    pq_quantize_request p = pq_quantize_default_request();
    p.model = pq_test_path("fixtures/stories260K"), p.out = path, p.method = "fp8";
    p.calib.path = pq_test_path("data/c4_validation_2k.txt"), p.calib.nsamples = 2, p.calib.seqlen = 64;
    pq_calibrate_result cr;
    pq_status st = pq_calibrate(&p, NULL, NULL, &cr);
    char *bytes = NULL;
    size_t len = 0;
    if (st == PQ_OK) st = pq_file_read(path, 1 << 20, &bytes, &len);
    if (st == PQ_OK) st = pq_file_write_atomic(trunc, bytes, len / 2);
    pq_scales_file *f = NULL;
    pq_status so = st == PQ_OK ? pq_scales_open(trunc, &f) : st;
    PQ_CHECK(st == PQ_OK && so == PQ_ERR_FORMAT && strstr(pq_last_error(), trunc) != NULL,
             "a scales file cut in half: PQ_ERR_FORMAT naming it (%s)", pq_last_error());
    pq_scales_close(f);
    free(bytes);
    rm_rf(dir);
}

int main(void) {
    pq_test_seed();
    PQ_ASSERT(pq_blas_init() == PQ_OK);
    pq_pool *pool;
    pq_pool_create(2, &pool);
    test_block_hooks(pool);
    test_fold(pool);
    test_awq(pool);
    test_smoothquant();
    test_dead_channel(pool);
    test_static(pool);
    pq_pool_free(pool);
    return pq_test_done();
}
