// quant/smooth.c — AWQ / SmoothQuant / static activation scales of one
// block in the calibration driver, and applying a result (see smooth.h).
#include "quant/smooth.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/sys.h"
#include "eval/block_cpu.h"
#include "kernels/ops.h"
#include "quant/awq.h"
#include "quant/rtn.h"
#include "quant/smoothquant.h"

#define SQ_AUTO_GRID 20 // --alpha auto: alpha = i / 20, i = 0..20

pq_smooth_params pq_smooth_default_params(void) {
    return (pq_smooth_params){.alpha = 0.5, .grid = 20, .clip_grid = 20,
                              .search_tokens = 4096};
}

int pq_smooth_has_scales(pq_smooth_kind k) { return k != PQ_SMOOTH_NONE; }

int pq_smooth_has_clip(pq_smooth_kind k, const pq_smooth_params *p, pq_linear_slot slot) {
    return k == PQ_SMOOTH_AWQ && p->clip_grid > 0 && slot != PQ_Q && slot != PQ_K;
}

// The activation quantization a linear of scheme s runs with.
static pq_actq act_of(const pq_scheme *s, float static_scale) {
    int fp8 = s->act == PQ_ACT_FP8_TOKEN || s->act == PQ_ACT_FP8_TENSOR;
    if (s->act == PQ_ACT_NONE) return (pq_actq){PQ_ACTQ_NONE, 0};
    return (pq_actq){fp8 ? PQ_ACTQ_FP8 : PQ_ACTQ_INT8, pq_scheme_act_static(s) ? static_scale : 0};
}

// ---- applying a result --------------------------------------------------------

void pq_smooth_block_free(pq_smooth_block *qb) {
    if (!qb) return;
    for (int s = 0; s < PQ_NLINEAR; s++) pq_qtensor_free(&qb->q[s]);
    memset(qb, 0, sizeof *qb);
}

// The norm or bias a scale of group g folded into, and its length.
static float *folded_vector(pq_fold_block *b, int g, int *n) {
    const pq_input_group *G = &PQ_INPUT_GROUPS[g];
    *n = G->from == PQ_FROM_LINEAR ? b->rows[G->from_slot] : b->c->hidden;
    return G->from == PQ_FROM_ATTN_NORM ? b->attn_norm : G->from == PQ_FROM_MLP_NORM ? b->mlp_norm
                                                                                       : b->bias[G->from_slot];
}

void pq_smooth_fold(pq_fold_block *b, const pq_block_scales *sc, pq_dtype dt, pq_pool *pool) {
    for (int g = 0; g < PQ_NGROUPS; g++)
        if (sc->scale[g]) pq_fold_apply(b, g, sc->scale[g], pool);
    for (int g = 0; g < PQ_NGROUPS; g++) {
        int n;
        float *v = sc->scale[g] ? folded_vector(b, g, &n) : NULL;
        for (int i = 0; v && i < n; i++) v[i] = pq_round_to_dtype(v[i], dt);
    }
}

pq_status pq_smooth_quantize(pq_fold_block *b, const pq_block_scales *sc, const pq_scheme *s, pq_dtype dt, int layer,
                             const char *name, pq_pool *pool, pq_smooth_block *out) {
    memset(out, 0, sizeof *out);
    char what[600];
    for (int k = 0; k < PQ_NLINEAR; k++) {
        out->out_err[k] = -1;
        if (sc->clip[k]) pq_awq_clip_apply(b->w[k], b->rows[k], b->cols[k], s, sc->clip[k]);
        snprintf(what, sizeof what, "%s/model.layers.%d.%s.weight", name, layer, pq_linear_slot_name((pq_linear_slot)k));
        pq_status st = pq_qtensor_init(&out->q[k], s, b->rows[k], b->cols[k], dt);
        if (st == PQ_OK) st = pq_rtn_quantize(b->w[k], s, what, pool, &out->q[k], &out->rel_err[k]);
        if (st != PQ_OK) {
            pq_smooth_block_free(out);
            return st;
        }
        out->q[k].input_scale = sc->act_scale[pq_fold_group_of((pq_linear_slot)k)];
    }
    for (int g = 0; g < PQ_NGROUPS; g++) {
        const pq_input_group *G = &PQ_INPUT_GROUPS[g];
        if (!sc->scale[g]) continue;
        if (G->from == PQ_FROM_ATTN_NORM) out->attn_norm = b->attn_norm;
        else if (G->from == PQ_FROM_MLP_NORM) out->mlp_norm = b->mlp_norm;
        else out->bias[G->from_slot] = b->bias[G->from_slot];
    }
    return PQ_OK;
}

// ---- the method ------------------------------------------------------------

struct pq_smooth {
    pq_smooth_config cfg;
    const pq_config *c;
    int len, K, stride, cap;           // tokens per window, sample windows, token stride, sampled rows
    int ref;                           // the search scores whole blocks (AWQ, SmoothQuant's alpha auto); only then:
    pq_block_scratch rs;               //   one window through the block
    float *kc, *vc, *xw;
    double *inv_freq;
    float *yref;                       //   [K][len][hidden] the unquantized block's output
    float *att, *h;                    //   [K][len][q dim] o_proj's input, [K][len][hidden] the residual after it
    pq_layer Lb;                       //   the block as its passes run it: with BF16 panels (cfg.bf16), else *L
    void *panels;                      //   cfg.bf16: the block's linears' panels, then its candidates'
    size_t cand_at, cand_bytes;        //   where the candidates' panels start, the most one takes
    float *xs[PQ_NGROUPS];             // [cap][cols] sampled inputs of each group
    int ns[PQ_NGROUPS], base;          // rows sampled, sample tokens seen before this window
    float *ys[PQ_NLINEAR];             // [cap][rows] each linear's output on the sampled inputs
    int nys[PQ_NLINEAR];               //   rows sampled (the measuring pass has no down_proj output)
    int sampled_layer;                 // the block the rows sampled are of (pq_smooth_sample)
    float *cand[3];                    // a group's linears as candidates, [rows][cols] each
    float *s_cols, *xd, *y, *y0;       // [cols]; [cap][cols]; [cap][rows] x2
    float *stat, *wmax, *tmp;          // [widest] per-scale statistics
    void *ws;                          // workspace of quantized linears
    size_t ws_bytes;
    pq_fold_block b;
    pq_smooth_block qb;
    pq_block_scales sc;
    float *scale_buf[PQ_NGROUPS];      // sc.scale[g] when the group is smoothed
    // the block being calibrated
    int layer, g;
    const pq_layer *L;
    const float *X;
    const pq_act_stats *st;
};

static int max_i(int a, int b) { return a > b ? a : b; }

void pq_smooth_free(pq_smooth *S) {
    if (!S) return;
    pq_block_scratch_free(&S->rs);
    pq_free(S->kc), pq_free(S->vc), pq_free(S->xw), pq_free(S->yref), pq_free(S->att), pq_free(S->h);
    pq_free(S->panels);
    free(S->inv_freq);
    for (int g = 0; g < PQ_NGROUPS; g++) pq_free(S->xs[g]), pq_free(S->scale_buf[g]);
    for (int k = 0; k < 3; k++) pq_free(S->cand[k]);
    for (int k = 0; k < PQ_NLINEAR; k++) pq_free(S->sc.clip[k]), pq_free(S->ys[k]);
    pq_free(S->s_cols), pq_free(S->xd), pq_free(S->y), pq_free(S->y0);
    pq_free(S->stat), pq_free(S->wmax), pq_free(S->tmp), pq_free(S->ws);
    pq_smooth_block_free(&S->qb);
    pq_fold_block_free(&S->b);
    free(S);
}

void pq_smooth_describe(pq_smooth_kind k, const pq_smooth_params *p, char *buf, size_t cap) {
    char a[32];
    snprintf(a, sizeof a, p->alpha == PQ_ALPHA_AUTO ? "auto" : "%g", p->alpha);
    if (k == PQ_SMOOTH_AWQ)
        snprintf(buf, cap, ", grid %d, clip grid %d, search %d tokens", p->grid, p->clip_grid, p->search_tokens);
    else if (k == PQ_SMOOTH_SQ) snprintf(buf, cap, ", alpha %s, search %d tokens", a, p->search_tokens);
    else snprintf(buf, cap, "%s", "");
}

pq_status pq_smooth_check(pq_smooth_kind k, const pq_smooth_params *p, const pq_scheme *s) {
    PQ_FAIL_IF(k == PQ_SMOOTH_AWQ && pq_scheme_wformat(s) != PQ_W_QPACK, PQ_ERR_ARG,
               "--method awq --scheme %s: AWQ writes the weight-only integer schemes (w4a16, w8a16)",
               pq_scheme_name(s->id));
    PQ_FAIL_IF(k == PQ_SMOOTH_SQ && s->act == PQ_ACT_NONE, PQ_ERR_ARG,
               "--method smoothquant --scheme %s: SmoothQuant is for schemes that quantize activations "
               "(w8a8, fp8-dynamic, fp8-static)", pq_scheme_name(s->id));
    PQ_FAIL_IF(k == PQ_SMOOTH_NONE && !pq_scheme_act_static(s), PQ_ERR_ARG,
               "--scheme %s: nothing to calibrate without smoothing (static activation scales need --act-scale static "
               "or fp8-static)", pq_scheme_name(s->id));
    PQ_FAIL_IF(p->alpha != PQ_ALPHA_AUTO && !(p->alpha >= 0 && p->alpha <= 1), PQ_ERR_ARG,
               "--alpha %g: not in [0, 1] (or auto)", p->alpha);
    PQ_FAIL_IF(p->grid < 1 || p->grid > 1000, PQ_ERR_ARG, "--awq-grid %d: not in 1..1000", p->grid);
    PQ_FAIL_IF(p->clip_grid < 0 || p->clip_grid > 1000, PQ_ERR_ARG, "--awq-clip-grid %d: not in 0..1000", p->clip_grid);
    PQ_FAIL_IF(p->search_tokens < 1, PQ_ERR_ARG, "--search-tokens %d: need at least 1", p->search_tokens);
    return PQ_OK;
}

pq_status pq_smooth_create(const pq_smooth_config *cfg, const pq_calib_data *d, pq_smooth **out, size_t *work_bytes) {
    *out = NULL;
    PQ_TRY(pq_smooth_check(cfg->kind, &cfg->p, &cfg->scheme));
    pq_smooth *S = calloc(1, sizeof *S);
    PQ_FAIL_IF(!S, PQ_ERR_NOMEM, "out of memory");
    const pq_config *c = &cfg->m->cfg;
    const pq_layer *L0 = &cfg->m->layers[0];
    S->cfg = *cfg, S->c = c, S->len = d->len, S->sampled_layer = -1;
    S->ref = cfg->kind == PQ_SMOOTH_AWQ || (cfg->kind == PQ_SMOOTH_SQ && cfg->p.alpha == PQ_ALPHA_AUTO);
    S->K = (int)(((long long)cfg->p.search_tokens + d->len - 1) / d->len);
    S->K = S->K < d->n ? S->K : d->n;
    long long toks = (long long)S->K * d->len;
    S->stride = (int)((toks + PQ_SMOOTH_SAMPLE_TOKENS - 1) / PQ_SMOOTH_SAMPLE_TOKENS);
    S->cap = (int)((toks + S->stride - 1) / S->stride);
    size_t H = (size_t)c->hidden, win = (size_t)d->len * H, kvd = (size_t)c->n_kv_heads * c->head_dim;
    int widest = max_i(c->intermediate, max_i(c->hidden, c->n_heads * c->head_dim)), tallest = 0;
    size_t biggest = 0, bytes = 0;
    for (int k = 0; k < PQ_NLINEAR; k++) {
        size_t n = (size_t)L0->lin[k].rows * L0->lin[k].cols, p = pq_linear_panels_bytes(&L0->lin[k], 1);
        biggest = n > biggest ? n : biggest;
        tallest = max_i(tallest, L0->lin[k].rows);
        S->cand_bytes = p > S->cand_bytes ? p : S->cand_bytes;
    }
    S->cand_at = pq_block_panels_bytes(L0, 1);
    // the block passes of a search that scores whole blocks
    pq_status s = S->ref ? pq_block_scratch_init(&S->rs, c, d->len, d->len, pq_pool_size(cfg->pool), cfg->m->layers,
                                                 1, NULL)
                         : PQ_OK;
    if (s != PQ_OK) {
        free(S);
        return s;
    }
#define ALLOC(p, n) (bytes += (n), ((p) = pq_alloc(n)) != NULL)
    int ok = (!S->ref || (ALLOC(S->kc, d->len * kvd * 4) && ALLOC(S->vc, d->len * kvd * 4) &&
                          ALLOC(S->xw, win * 4) && ALLOC(S->yref, (size_t)S->K * win * 4) &&
                          ALLOC(S->h, (size_t)S->K * win * 4) &&
                          ALLOC(S->att, (size_t)S->K * d->len * c->n_heads * c->head_dim * 4) &&
                          (S->inv_freq = malloc((size_t)(c->head_dim / 2) * sizeof(double))) != NULL &&
                          (!cfg->bf16 || ALLOC(S->panels, S->cand_at + 3 * S->cand_bytes)))) &&
             ALLOC(S->s_cols, (size_t)widest * 4) &&
             ALLOC(S->xd, (size_t)S->cap * widest * 4) && ALLOC(S->y, (size_t)S->cap * tallest * 4) &&
             ALLOC(S->y0, (size_t)S->cap * tallest * 4) && ALLOC(S->stat, (size_t)widest * 4) &&
             ALLOC(S->wmax, (size_t)widest * 4) && ALLOC(S->tmp, (size_t)widest * 4);
    for (int k = 0; k < 3 && ok; k++) ok = ALLOC(S->cand[k], biggest * 4);
    for (int k = 0; k < PQ_NLINEAR && ok; k++) ok = ALLOC(S->ys[k], (size_t)S->cap * L0->lin[k].rows * 4);
    for (int g = 0; g < PQ_NGROUPS && ok; g++) {
        ok = ALLOC(S->xs[g], (size_t)S->cap * pq_input_group_cols(c, g) * 4);
        if (ok && pq_smooth_has_scales(cfg->kind) && pq_fold_usable(c, g))
            ok = ALLOC(S->scale_buf[g], (size_t)pq_input_group_cols(c, g) * 4);
    }
    for (int k = 0; k < PQ_NLINEAR && ok; k++)
        if (pq_smooth_has_clip(cfg->kind, &cfg->p, (pq_linear_slot)k))
            ok = ALLOC(S->sc.clip[k],
                       (size_t)L0->lin[k].rows * pq_awq_ngroups(&cfg->scheme, L0->lin[k].cols) * sizeof(float));
#undef ALLOC
    if (!ok) {
        pq_smooth_free(S);
        return PQ_FAIL(PQ_ERR_NOMEM, "out of memory for the calibration search (%.1f MiB)", bytes / 1048576.0);
    }
    if (S->ref) {
        pq_rope_params rp = {c->rope_theta, c->rope_llama3, c->rope_factor, c->rope_low_freq_factor,
                             c->rope_high_freq_factor, c->rope_orig_max_pos};
        pq_rope_inv_freq(&rp, c->head_dim, S->inv_freq);
        pq_block_rope_prepare(&S->rs, S->inv_freq, c->head_dim, 0, d->len);
    }
    *work_bytes = bytes + 2 * biggest * 4 * PQ_NLINEAR; // + the widened block and its quantized copy (at most)
    *out = S;
    return PQ_OK;
}

// ---- the sample ---------------------------------------------------------------

// Appends the sampled tokens' rows of x [T][cols] to dst [cap][cols] (*n rows so far).
static void take_rows(const pq_smooth *S, float *dst, int *n, const float *x, int T, int cols) {
    for (int t = 0; t < T; t++)
        if ((S->base + t) % S->stride == 0 && *n < S->cap)
            memcpy(dst + (size_t)(*n)++ * cols, x + (size_t)t * cols, (size_t)cols * sizeof(float));
}

static void on_input(void *ud, int layer, pq_linear_slot slot, const float *x, int T, int cols) {
    pq_smooth *S = ud;
    int g = pq_fold_group_of(slot);
    if (slot == PQ_O && S->ref) memcpy(S->att + (size_t)S->base * cols, x, (size_t)T * cols * sizeof(float));
    take_rows(S, S->xs[g], &S->ns[g], x, T, cols);
}

static void on_output(void *ud, int layer, pq_linear_slot slot, const float *y, int T, int rows) {
    pq_smooth *S = ud;
    take_rows(S, S->ys[slot], &S->nys[slot], y, T, rows);
}

// Starts the sample of a block when the driver's pass reaches a new one.
static void begin_sample(pq_smooth *S, int layer, int window) {
    if (layer != S->sampled_layer) {
        memset(S->ns, 0, sizeof S->ns);
        memset(S->nys, 0, sizeof S->nys);
        S->sampled_layer = layer;
    }
    S->base = window * S->len;
}

// One window of X through block L (output in S->xw).
static void run_window(pq_smooth *S, const pq_layer *L, int k, const pq_block_hooks *h) {
    size_t win = (size_t)S->len * S->c->hidden;
    memcpy(S->xw, S->X + (size_t)k * win, win * sizeof(float));
    pq_block_forward_cpu(S->c, L, S->layer, S->xw, S->len, 0, S->kc, S->vc, &S->rs, S->cfg.pool, h);
}

// h = x + o_proj(att) of window k under L (in place on h).
static void attn_residual(pq_smooth *S, const pq_layer *L, int k, float *h) {
    size_t win = (size_t)S->len * S->c->hidden, qd = (size_t)S->c->n_heads * S->c->head_dim;
    memcpy(h, S->X + (size_t)k * win, win * sizeof(float));
    pq_linear_forward(&L->lin[PQ_O], S->att + (size_t)k * S->len * qd, S->len, S->rs.out, S->rs.lin_ws, S->cfg.pool);
    pq_add_cpu(h, S->rs.out, win);
}

// The MLP half of the block (eval/block_cpu.c) on h [len][hidden], in place.
static void mlp_residual(pq_smooth *S, const pq_layer *L, float *h) {
    const pq_config *c = S->c;
    pq_block_scratch *s = &S->rs;
    pq_rmsnorm_cpu(h, L->mlp_norm, S->len, c->hidden, c->rms_eps, s->xn);
    pq_linear_forward(&L->lin[PQ_GATE], s->xn, S->len, s->gate, s->lin_ws, S->cfg.pool);
    pq_linear_forward(&L->lin[PQ_UP], s->xn, S->len, s->up, s->lin_ws, S->cfg.pool);
    pq_swiglu_ref(s->gate, s->up, (size_t)S->len * c->intermediate);
    pq_linear_forward(&L->lin[PQ_DOWN], s->gate, S->len, s->out, s->lin_ws, S->cfg.pool);
    pq_add_cpu(h, s->out, (size_t)S->len * c->hidden);
}

// The output of block L on sample window k (in S->xw), when only group g's
// linears differ from the unquantized block: from the part of the block
// downstream of g's input (the attention's output and the residual after
// it are the unquantized block's otherwise).
static void block_output(pq_smooth *S, const pq_layer *L, int g, int k) {
    size_t win = (size_t)S->len * S->c->hidden;
    pq_linear_slot in = PQ_INPUT_GROUPS[g].input;
    if (in == PQ_Q) return run_window(S, L, k, NULL);
    if (in == PQ_O) attn_residual(S, L, k, S->xw);
    else memcpy(S->xw, S->h + (size_t)k * win, win * sizeof(float));
    mlp_residual(S, L, S->xw);
}

void pq_smooth_sample(void *ud, int layer, int window, pq_linear_slot slot, const float *x, int T, int cols) {
    pq_smooth *S = ud;
    if (S->ref || window >= S->K) return;
    begin_sample(S, layer, window);
    on_input(S, layer, slot, x, T, cols);
}

void pq_smooth_sample_output(void *ud, int layer, int window, pq_linear_slot slot, const float *y, int T, int rows) {
    pq_smooth *S = ud;
    if (S->ref || window >= S->K) return;
    begin_sample(S, layer, window);
    on_output(S, layer, slot, y, T, rows);
}

// The sampled inputs and, where the search scores whole blocks, the
// unquantized block's outputs on the first K windows (else the driver's
// measuring pass sampled the inputs: pq_smooth_sample).
static pq_status take_sample(pq_smooth *S) {
    PQ_FAIL_IF(!S->ref && S->sampled_layer != S->layer, PQ_ERR_ARG,
               "layer %d: no inputs sampled (the driver's sample hook is not pq_smooth_sample)", S->layer);
    if (!S->ref) return PQ_OK;
    // whole blocks: their outputs are the reference (yref)
    pq_block_hooks h = {.linear_input = on_input, .linear_output = on_output, .ud = S};
    size_t win = (size_t)S->len * S->c->hidden;
    memset(S->ns, 0, sizeof S->ns);
    memset(S->nys, 0, sizeof S->nys);
    for (int k = 0; k < S->K; k++) {
        S->base = k * S->len;
        run_window(S, &S->Lb, k, &h);
        memcpy(S->yref + (size_t)k * win, S->xw, win * sizeof(float));
        attn_residual(S, &S->Lb, k, S->h + (size_t)k * win);
    }
    return PQ_OK;
}

// ---- losses ---------------------------------------------------------------------

static void expand(pq_smooth *S, int g, const float *s) {
    for (int j = 0; j < pq_input_group_cols(S->c, g); j++) S->s_cols[j] = s ? s[j] : 1.0f;
}

static pq_status ensure_ws(pq_smooth *S, const pq_linear *L) {
    size_t need = pq_linear_workspace_bytes(L, pq_pool_size(S->cfg.pool));
    if (need <= S->ws_bytes) return PQ_OK;
    pq_free(S->ws);
    S->ws = pq_alloc(need);
    S->ws_bytes = S->ws ? need : 0;
    PQ_FAIL_IF(!S->ws, PQ_ERR_NOMEM, "out of memory for a %zu-byte linear workspace", need);
    return PQ_OK;
}

// cand[k] = RTN(W_m diag(s)) of member k of the current group (S->s_cols),
// as a quantized tensor q.
static pq_status quantize_member(pq_smooth *S, int k, pq_qtensor *q) {
    pq_linear_slot m = PQ_INPUT_GROUPS[S->g].members[k];
    int rows = S->b.rows[m], cols = S->b.cols[m];
    float *w = S->cand[k];
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) w[(size_t)r * cols + j] = S->b.w[m][(size_t)r * cols + j] * S->s_cols[j];
    char what[300];
    snprintf(what, sizeof what, "model.layers.%d.%s (search)", S->layer, pq_linear_slot_name(m));
    PQ_TRY(pq_qtensor_init(q, &S->cfg.scheme, rows, cols, S->cfg.dt));
    pq_status s = pq_rtn_quantize(w, &S->cfg.scheme, what, S->cfg.pool, q, NULL);
    if (s != PQ_OK) pq_qtensor_free(q);
    return s;
}

// Packs W for BF16 products into S->panels at byte offset at.
static pq_status pack(pq_smooth *S, pq_linear *W, size_t at) {
    PQ_TRY(ensure_ws(S, W));
    pq_linear_pack_panels(W, (char *)S->panels + at, 1, S->ws, S->cfg.pool);
    return PQ_OK;
}

// S->Lb: block L as the search's passes run it (its linears packed for BF16 products with cfg.bf16).
static pq_status prepare_block(pq_smooth *S, const pq_layer *L) {
    S->Lb = *L;
    if (!S->panels) return PQ_OK;
    for (int k = 0; k < PQ_NLINEAR; k++) PQ_TRY(ensure_ws(S, &L->lin[k]));
    pq_block_pack_panels(&S->Lb, S->panels, 1, S->ws, S->cfg.pool);
    return PQ_OK;
}

// AWQ: mean squared difference of the block output on the sample windows
// with the group's linears replaced by Q(W s)/s.
static pq_status awq_loss(void *ud, const float *s, double *loss) {
    pq_smooth *S = ud;
    const pq_input_group *G = &PQ_INPUT_GROUPS[S->g];
    expand(S, S->g, s);
    pq_layer Lc = S->Lb;
    for (int k = 0; k < G->n; k++) {
        pq_linear_slot m = G->members[k];
        int rows = S->b.rows[m], cols = S->b.cols[m];
        pq_qtensor q;
        PQ_TRY(quantize_member(S, k, &q));
        pq_linear v = pq_qtensor_linear(&q);
        pq_linear_rows(&v, 0, rows, S->cand[k]);
        pq_qtensor_free(&q);
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < cols; j++) S->cand[k][(size_t)r * cols + j] /= S->s_cols[j];
        Lc.lin[m] = (pq_linear){.fmt = PQ_W_DENSE, .rows = rows, .cols = cols, .dense_type = PQ_DENSE_F32,
                                .w = S->cand[k], .bias = S->L->lin[m].bias};
        if (S->panels) PQ_TRY(pack(S, &Lc.lin[m], S->cand_at + (size_t)k * S->cand_bytes));
    }
    size_t win = (size_t)S->len * S->c->hidden;
    double e = 0;
    for (int k = 0; k < S->K; k++) {
        block_output(S, &Lc, S->g, k);
        const float *ref = S->yref + (size_t)k * win;
        for (size_t i = 0; i < win; i++) e += ((double)S->xw[i] - ref[i]) * ((double)S->xw[i] - ref[i]);
    }
    *loss = e / ((double)S->K * win);
    return PQ_OK;
}

// S->xd = the sampled inputs of group g divided by S->s_cols.
static void scaled_sample(pq_smooth *S, int g) {
    pq_fold_scale_cols(S->xs[g], S->xd, S->ns[g], pq_input_group_cols(S->c, g), S->s_cols, 1, S->cfg.pool);
}

// Sum of squares of y - y0 over n values, and of y0 (optional).
static double sq_diff(const float *y, const float *y0, size_t n, double *norm) {
    double e = 0, z = 0;
    for (size_t i = 0; i < n; i++) e += ((double)y[i] - y0[i]) * ((double)y[i] - y0[i]), z += (double)y0[i] * y0[i];
    if (norm) *norm = z;
    return e;
}

// SmoothQuant auto: squared error of the group's linears' outputs on the
// sampled tokens, quantized W8A8 after smoothing with s, against the
// unquantized linears.
static pq_status sq_loss(pq_smooth *S, const float *s, double *loss) {
    int g = S->g, cols = pq_input_group_cols(S->c, g), T = S->ns[g];
    const pq_input_group *G = &PQ_INPUT_GROUPS[g];
    int fp8 = S->cfg.scheme.act == PQ_ACT_FP8_TOKEN || S->cfg.scheme.act == PQ_ACT_FP8_TENSOR;
    expand(S, g, s);
    scaled_sample(S, g);
    float act = pq_static_act_scale(S->st[g].abs_max, S->s_cols, cols, fp8, S->cfg.dt);
    double e = 0;
    for (int k = 0; k < G->n; k++) {
        pq_linear_slot m = G->members[k];
        pq_linear src = S->L->lin[m];
        src.bias = NULL;
        pq_qtensor q;
        PQ_TRY(quantize_member(S, k, &q));
        pq_linear v = pq_qtensor_linear(&q);
        v.act = act_of(&S->cfg.scheme, act);
        pq_status st = ensure_ws(S, &v);
        if (st == PQ_OK) st = ensure_ws(S, &src);
        if (st == PQ_OK) {
            pq_linear_forward(&src, S->xs[g], T, S->y0, S->ws, S->cfg.pool);
            pq_linear_forward(&v, S->xd, T, S->y, S->ws, S->cfg.pool);
            e += sq_diff(S->y, S->y0, (size_t)T * v.rows, NULL);
        }
        pq_qtensor_free(&q);
        PQ_TRY(st);
    }
    *loss = e;
    return PQ_OK;
}

// ---- scales of one group -----------------------------------------------------

static pq_status awq_scales(pq_smooth *S, int g) {
    int n = pq_input_group_cols(S->c, g);
    const pq_act_stats *st = &S->st[g];
    for (int j = 0; j < n; j++) S->stat[j] = (float)(st->abs_sum[j] / (double)st->n);
    double alpha, loss;
    PQ_TRY(pq_awq_search_scale(S->stat, n, S->cfg.p.grid, awq_loss, S, S->sc.scale[g], S->tmp, &alpha, &loss, NULL));
    S->sc.alpha[g] = (float)alpha;
    return PQ_OK;
}

// S->wmax[j] = max |W[r][j]| over the rows of group S->g's members, for
// the WMAX_COLS columns of task i (fmaxf's result, a NaN never wins,
// without its call per weight).
#define WMAX_COLS 256
static void wmax_task(void *ctx, int i, int tid) {
    pq_smooth *S = ctx;
    const pq_input_group *G = &PQ_INPUT_GROUPS[S->g];
    int n = pq_input_group_cols(S->c, S->g), j0 = i * WMAX_COLS, j1 = n - j0 < WMAX_COLS ? n : j0 + WMAX_COLS;
    for (int j = j0; j < j1; j++) S->wmax[j] = 0;
    for (int k = 0; k < G->n; k++) {
        pq_linear_slot m = G->members[k];
        for (int r = 0; r < S->b.rows[m]; r++)
            for (int j = j0; j < j1; j++) {
                float a = fabsf(S->b.w[m][(size_t)r * n + j]);
                S->wmax[j] = a > S->wmax[j] ? a : S->wmax[j];
            }
    }
}

static pq_status sq_scales(pq_smooth *S, int g) {
    const pq_config *c = S->c;
    const pq_input_group *G = &PQ_INPUT_GROUPS[g];
    int n = pq_input_group_cols(c, g);
    for (int j = 0; j < n; j++) S->stat[j] = S->st[g].abs_max[j];
    pq_pool_for(S->cfg.pool, (n + WMAX_COLS - 1) / WMAX_COLS, wmax_task, S);
    double alpha = S->cfg.p.alpha;
    if (alpha == PQ_ALPHA_AUTO) { // the first minimum of the grid
        double best = INFINITY;
        for (int i = 0; i <= SQ_AUTO_GRID; i++) {
            double l;
            pq_sq_scales(S->stat, S->wmax, n, (double)i / SQ_AUTO_GRID, S->tmp);
            PQ_TRY(sq_loss(S, S->tmp, &l));
            if (l < best) best = l, alpha = (double)i / SQ_AUTO_GRID;
        }
        PQ_FAIL_IF(!(best < INFINITY), PQ_ERR_NUMERIC, "layer %d %s: --alpha auto: no finite output error",
                   S->layer, G->name);
    }
    pq_sq_scales(S->stat, S->wmax, n, alpha, S->sc.scale[g]);
    S->sc.alpha[g] = (float)alpha;
    return PQ_OK;
}

// ---- after the scales ---------------------------------------------------------

// AWQ's clip values of every clipped linear, on the folded block.
static pq_status clip_all(pq_smooth *S) {
    for (int k = 0; k < PQ_NLINEAR; k++) {
        if (!S->sc.clip[k]) continue;
        int g = pq_fold_group_of((pq_linear_slot)k);
        expand(S, g, S->sc.scale[g]);
        scaled_sample(S, g);
        PQ_TRY(pq_awq_search_clip(S->b.w[k], S->b.rows[k], S->b.cols[k], &S->cfg.scheme, S->cfg.dt, S->xd, S->ns[g],
                                  S->cfg.p.clip_grid, 0.5, S->cfg.pool, S->sc.clip[k], NULL, NULL));
    }
    return PQ_OK;
}

// The linears as the final pass runs them (pq_linear views of qb).
static pq_linear quantized_view(const pq_smooth *S, int k) {
    pq_linear v = pq_qtensor_linear(&S->qb.q[k]);
    v.act = act_of(&S->cfg.scheme, S->qb.q[k].input_scale);
    v.bias = S->qb.bias[k] ? S->qb.bias[k] : S->L->lin[k].bias;
    return v;
}

// Output error of each quantized linear on the sampled tokens: x W^T of the
// source (as the sample's pass computed it, where it did and the linear has
// no bias) against (x / s) Q^T (its rows multiplied back by the scale a
// later group folded into them).
static pq_status output_errors(pq_smooth *S) {
    for (int k = 0; k < PQ_NLINEAR; k++) {
        int g = pq_fold_group_of((pq_linear_slot)k), T = S->ns[g];
        pq_linear src = S->L->lin[k], v = quantized_view(S, k);
        const float *y0 = S->nys[k] == T && !src.bias ? S->ys[k] : S->y0;
        src.bias = v.bias = NULL;
        PQ_TRY(ensure_ws(S, &src));
        PQ_TRY(ensure_ws(S, &v));
        expand(S, g, S->sc.scale[g]);
        scaled_sample(S, g);
        if (y0 == S->y0) pq_linear_forward(&src, S->xs[g], T, S->y0, S->ws, S->cfg.pool);
        pq_linear_forward(&v, S->xd, T, S->y, S->ws, S->cfg.pool);
        for (int g2 = 0; g2 < PQ_NGROUPS; g2++) {
            const pq_input_group *G = &PQ_INPUT_GROUPS[g2];
            if (G->from != PQ_FROM_LINEAR || G->from_slot != (pq_linear_slot)k || !S->sc.scale[g2]) continue;
            pq_fold_scale_cols(S->y, S->y, T, v.rows, S->sc.scale[g2], 0, S->cfg.pool);
        }
        double norm, e = sq_diff(S->y, y0, (size_t)T * v.rows, &norm);
        S->qb.out_err[k] = norm > 0 ? e / norm : 0;
    }
    return PQ_OK;
}

pq_status pq_smooth_quantize_block(void *ud, int layer, pq_layer *L, const pq_act_stats *st, const float *X) {
    pq_smooth *S = ud;
    const pq_config *c = S->c;
    int fp8 = S->cfg.scheme.act == PQ_ACT_FP8_TOKEN || S->cfg.scheme.act == PQ_ACT_FP8_TENSOR;
    pq_smooth_block_free(&S->qb);
    pq_fold_block_free(&S->b);
    S->layer = layer, S->L = L, S->X = X, S->st = st;
    PQ_TRY(pq_fold_block_load(c, L, layer, S->cfg.m->dir, S->cfg.pool, &S->b));
    PQ_TRY(prepare_block(S, L));
    PQ_TRY(take_sample(S));
    for (int g = 0; g < PQ_NGROUPS; g++) {
        S->g = g;
        S->sc.scale[g] = S->scale_buf[g]; // NULL: not smoothed (no smoothing method, or no fold: o under GQA)
        S->sc.alpha[g] = -1;
        S->sc.act_scale[g] = 0;
        if (S->cfg.kind == PQ_SMOOTH_AWQ && S->sc.scale[g]) PQ_TRY(awq_scales(S, g));
        if (S->cfg.kind == PQ_SMOOTH_SQ && S->sc.scale[g]) PQ_TRY(sq_scales(S, g));
    }
    pq_smooth_fold(&S->b, &S->sc, S->cfg.dt, S->cfg.pool);
    PQ_TRY(clip_all(S));
    for (int g = 0; g < PQ_NGROUPS && pq_scheme_act_static(&S->cfg.scheme); g++) {
        expand(S, g, S->sc.scale[g]);
        S->sc.act_scale[g] = pq_static_act_scale(st[g].abs_max, S->s_cols, pq_input_group_cols(c, g), fp8, S->cfg.dt);
        PQ_FAIL_IF(S->sc.act_scale[g] == 0, PQ_ERR_NUMERIC, "layer %d %s input: the static activation scale "
                   "overflows %s", layer, PQ_INPUT_GROUPS[g].name, pq_dtype_name(S->cfg.dt));
    }
    PQ_TRY(pq_smooth_quantize(&S->b, &S->sc, &S->cfg.scheme, S->cfg.dt, layer, S->cfg.m->dir, S->cfg.pool, &S->qb));
    PQ_TRY(output_errors(S));
    PQ_TRY(S->cfg.emit(S->cfg.ud, layer, &S->sc, &S->qb));
    if (S->cfg.kind == PQ_SMOOTH_AWQ) return PQ_OK; // the next block's input: the unquantized block's output
    for (int k = 0; k < PQ_NLINEAR; k++) L->lin[k] = quantized_view(S, k);
    if (S->qb.attn_norm) L->attn_norm = S->b.attn_norm;
    if (S->qb.mlp_norm) L->mlp_norm = S->b.mlp_norm;
    return PQ_OK;
}
