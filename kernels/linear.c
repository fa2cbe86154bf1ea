#include "linear.h"

#include "common/sys.h"
#include "kernels/cpu.h"
#include "kernels/gemm.h"
#include "kernels/w8a8.h"

// Rows per task of the W8A8 GEMM path (its panels).
#define PANEL_ROWS 128
// The GEMM path (kernels/gemm.h): tokens packed and multiplied at a time (the
// workspace cannot depend on T), the most weight rows one task packs, and
// the bytes its packed panels may take (they stay in L2 while every token
// block of the chunk passes over them).
#define GEMM_CHUNK 512
#define GEMM_TASK_ROWS 128
#define GEMM_TASK_BYTES (512 * 1024)
// Rows widened (pq_linear_rows) and packed at a time: 16 rows of up to ~700
// columns stay in L1, and fill whole cache lines of a panel's half (16
// floats wide with AVX-512, two halves of 8 with AVX2). Every tile's nr
// is a multiple of it or smaller.
#define PACK_ROWS 16
// Rows per task of the GEMV path: at least GEMV_ROWS, and about GEMV_TASKS
// tasks per thread, so that each thread streams long runs of consecutive rows
// (the kernels prefetch ahead within their rows; every task start is a cold
// stream).
#define GEMV_ROWS 32
#define GEMV_TASKS 8

void pq_linear_rows(const pq_linear *W, int r0, int n, float *out) {
    switch (W->fmt) {
    case PQ_W_DENSE: pq_dense_rows_cpu(W->dense_type, W->w, W->cols, r0, n, out); return;
    case PQ_W_QPACK: pq_qpack_rows_cpu(&W->q, r0, n, out); return;
    case PQ_W_INT8: pq_int8_rows_cpu(&W->i8, r0, n, out); return;
    case PQ_W_FP8: pq_fp8_rows_cpu(&W->f8, r0, n, out); return;
    }
}

void pq_linear_rows_ref(const pq_linear *W, int r0, int n, float *out) {
    switch (W->fmt) {
    case PQ_W_DENSE: pq_dense_rows_ref(W->dense_type, W->w, W->cols, r0, n, out); return;
    case PQ_W_QPACK: pq_qpack_rows_ref(&W->q, r0, n, out); return;
    case PQ_W_INT8: pq_int8_rows_ref(&W->i8, r0, n, out); return;
    case PQ_W_FP8: pq_fp8_rows_ref(&W->f8, r0, n, out); return;
    }
}

// xp: the activations prepared by pq_qpack_gemv_prepare_cpu (PQ_W_QPACK only)
static void gemv_cpu(const pq_linear *W, int r0, int n, const float *x, const float *xp, int T, float *y, int ldy) {
    switch (W->fmt) {
    case PQ_W_DENSE: pq_dense_gemv_cpu(W->dense_type, W->w, W->cols, r0, n, x, T, y, ldy); return;
    case PQ_W_QPACK: pq_qpack_gemv_cpu(&W->q, r0, n, x, T, xp, y, ldy); return;
    case PQ_W_INT8: pq_int8_gemv_cpu(&W->i8, r0, n, x, T, y, ldy); return;
    case PQ_W_FP8: pq_fp8_gemv_cpu(&W->f8, r0, n, x, T, y, ldy); return;
    }
}

size_t pq_linear_weight_bytes(const pq_linear *W) {
    switch (W->fmt) {
    case PQ_W_DENSE: return (size_t)W->rows * W->cols * (W->dense_type == PQ_DENSE_F32 ? 4 : 2);
    case PQ_W_QPACK: return pq_qpack_stored_bytes(&W->q);
    case PQ_W_INT8: return pq_int8_stored_bytes(&W->i8);
    case PQ_W_FP8: return pq_fp8_stored_bytes(&W->f8);
    }
    return 0;
}

// W8A8: tokens are quantized and multiplied W8A8_CHUNK at a time (the
// workspace cannot depend on T); tasks of the quantization step hold
// W8A8_QTOKENS tokens.
#define W8A8_CHUNK 512
#define W8A8_QTOKENS 16

// The quantized chunk (+ its decoded copy for FP8), then per-thread
// scratch: a packed INT8 panel, or an FP8 panel decoded.
static size_t w8a8_shared_bytes(const pq_linear *W) {
    size_t b = pq_w8a8_act_bytes(W8A8_CHUNK, W->cols);
    return W->act.type == PQ_ACTQ_FP8 ? b + (pq_w8a8_fp8_decoded_bytes(W8A8_CHUNK, W->cols) + 63) / 64 * 64 : b;
}

static size_t w8a8_thread_bytes(const pq_linear *W) {
    size_t b = W->act.type == PQ_ACTQ_INT8 ? pq_w8a8_gemm_scratch_bytes(PANEL_ROWS, W->cols)
                                           : pq_w8a8_fp8_scratch_bytes(PANEL_ROWS, W->cols);
    return (b + 63) / 64 * 64;
}

// The prepared activations of one QPACK linear, rounded to a cache line so
// that a group's (pq_linear_forward_group) lie side by side.
static size_t xp_bytes(const pq_linear *W) {
    return (pq_qpack_gemv_prepare_bytes(&W->q, PQ_GEMV_MAX_T) + 63) / 64 * 64;
}

// Per-thread floats of the GEMM path: a task's packed panels, and the
// PACK_ROWS rows pq_linear_rows dequantizes at a time (dense weights are
// widened while packed).
static size_t gemm_thread_floats(const pq_linear *W) {
    return (size_t)(GEMM_TASK_ROWS + (W->fmt != PQ_W_DENSE ? PACK_ROWS : 0)) * W->cols;
}

// Floats of the GEMM path's packed chunk of tokens: the CPU tile's packed
// activations, or (for BF16 panels on AMX) BF16 rows, whichever is larger.
static size_t gemm_x_floats(pq_gemm_tile tl, int cols) {
    size_t f32 = pq_gemm_x_floats(tl, GEMM_CHUNK, cols), amx = (size_t)GEMM_CHUNK * pq_gemm_amx_ld(cols) / 2;
    return f32 > amx ? f32 : amx;
}

// The GEMV path uses the start of the workspace for the prepared activations;
// the GEMM path the packed activations of a chunk, then each thread's
// scratch. W8A8 linears: the quantized activations, then the panels.
size_t pq_linear_workspace_bytes(const pq_linear *W, int nthreads) {
    if (W->act.type != PQ_ACTQ_NONE) return w8a8_shared_bytes(W) + (size_t)nthreads * w8a8_thread_bytes(W);
    pq_gemm_tile tl = pq_gemm_tile_cpu();
    size_t gemm = (gemm_x_floats(tl, W->cols) + (size_t)nthreads * gemm_thread_floats(W)) * sizeof(float);
    size_t xp = W->fmt == PQ_W_QPACK ? PQ_LINEAR_GROUP_MAX * xp_bytes(W) : 0;
    return gemm > xp ? gemm : xp;
}

typedef struct {
    const pq_linear *W;
    const float *x;
    int T;
    float *y;
    float *ws;
    int chunk;
} job;

static void add_bias(const pq_linear *W, int T, float *y, int r0, int n) {
    if (!W->bias) return;
    for (int t = 0; t < T; t++)
        for (int r = r0; r < r0 + n; r++) y[(size_t)t * W->rows + r] += W->bias[r];
}

static void gemv_chunk(void *ctx, int p, int tid) {
    job *j = ctx;
    const pq_linear *W = j->W;
    int r0 = p * j->chunk, n = W->rows - r0 < j->chunk ? W->rows - r0 : j->chunk;
    gemv_cpu(W, r0, n, j->x, j->ws, j->T, j->y, W->rows);
    add_bias(W, j->T, j->y, r0, n);
}

// Panel height: a function of the shape only (never of the thread count),
// so every output element is computed by the same sgemm call whatever the
// pool size and results are bit-identical across --threads: PANEL_ROWS for
// large matrices, down to 16 rows (about 16 panels) for small ones.
static int panel_rows(int rows) {
    int p = (rows / 16 + 15) / 16 * 16;
    return p < 16 ? 16 : p > PANEL_ROWS ? PANEL_ROWS : p;
}

// Rows per task of the GEMV path: at least GEMV_ROWS, about GEMV_TASKS per thread.
static int gemv_rows(int rows, int nthreads) {
    int per_task = (rows + GEMV_TASKS * nthreads - 1) / (GEMV_TASKS * nthreads);
    return per_task < GEMV_ROWS ? GEMV_ROWS : (per_task + 15) / 16 * 16;
}

// The member of a group whose tasks hold task p: first[i] is the first
// task of member i (first[0] = 0, increasing).
static int member_of(const int *first, int p) {
    int i = 0;
    while (p >= first[i + 1]) i++;
    return i;
}

// ---- GEMM (more than PQ_GEMV_MAX_T tokens) -------------------------------

// Up to PQ_LINEAR_GROUP_MAX linears of one input, one chunk of tokens: the
// tasks are row ranges of every member, one after another.
typedef struct {
    const pq_linear *W[PQ_LINEAR_GROUP_MAX];
    float *y[PQ_LINEAR_GROUP_MAX];      // the chunk's first output row
    int task_rows[PQ_LINEAR_GROUP_MAX];
    int first[PQ_LINEAR_GROUP_MAX + 1]; // task index where each member starts
    pq_gemm_tile tl;
    const float *x;                     // the chunk's first token
    int T;                              // tokens in the chunk
    float *xp;                          // the chunk, packed (amx: BF16 rows, pq_gemm_amx_pack_x)
    float *scratch;                     // per-thread scratch, thread_floats apart
    size_t thread_floats;
    int bf16, amx;                      // BF16 products (the members' panels); on AMX tiles
} gemm_job;

// Rows per task: whole panels, at most GEMM_TASK_ROWS and GEMM_TASK_BYTES of
// packed panels, and the panels per task that give the threads the most
// even share (assuming tasks of equal cost); the larger on a tie. Any split
// gives the same bits (kernels/gemm.h).
static int gemm_task_rows(const pq_linear *W, pq_gemm_tile tl, int nthreads) {
    int panels = (W->rows + tl.nr - 1) / tl.nr;
    int cap = (int)(GEMM_TASK_BYTES / ((size_t)W->cols * sizeof(float))) / tl.nr;
    if (cap > GEMM_TASK_ROWS / tl.nr) cap = GEMM_TASK_ROWS / tl.nr;
    if (cap < 1) cap = 1;
    int best = 1;
    long best_span = -1;
    for (int per = cap; per >= 1; per--) {
        int tasks = (panels + per - 1) / per;
        long span = (long)((tasks + nthreads - 1) / nthreads) * per;
        if (best_span < 0 || span < best_span) best = per, best_span = span;
    }
    return best * tl.nr;
}

static void gemm_pack_x_task(void *ctx, int i, int tid) {
    gemm_job *g = ctx;
    int cols = g->W[0]->cols, nb = (g->T + g->tl.mr - 1) / g->tl.mr;
    int b0 = i * 8, n = nb - b0 < 8 ? nb - b0 : 8;
    if (g->amx) { // 8 blocks of mr tokens: the same split of the chunk
        int t0 = b0 * g->tl.mr, nt = g->T - t0 < n * g->tl.mr ? g->T - t0 : n * g->tl.mr;
        pq_gemm_amx_pack_x(g->x, cols, t0, nt, (uint16_t *)g->xp);
        return;
    }
    pq_gemm_pack_x(g->tl, g->x, g->T, cols, b0, n, g->xp);
    if (g->bf16) pq_bf16_round_n(g->xp + (size_t)b0 * g->tl.mr * cols, (size_t)n * g->tl.mr * cols);
}

// Rows rj..rj+nj-1 of W packed as one panel wp (nj <= nr); rows: a
// PACK_ROWS x cols buffer (quantized formats are widened through it).
static void pack_panel(const pq_linear *W, pq_gemm_tile tl, int rj, int nj, float *wp, float *rows) {
    int cols = W->cols;
    if (nj < tl.nr) pq_gemm_pad_w(tl, nj, cols, wp);
    if (W->fmt == PQ_W_DENSE) { // widened while packed
        pq_gemm_pack_dense(tl, W->dense_type, W->w, cols, rj, 0, nj, wp);
        return;
    }
    // PACK_ROWS rows at a time, widened into a buffer that stays in L1
    for (int i = 0; i < nj; i += PACK_ROWS) {
        int ni = nj - i < PACK_ROWS ? nj - i : PACK_ROWS;
        pq_linear_rows(W, rj + i, ni, rows);
        pq_gemm_pack_w(tl, rows, i, ni, cols, wp);
    }
}

static void gemm_task(void *ctx, int p, int tid) {
    gemm_job *g = ctx;
    int m = member_of(g->first, p);
    const pq_linear *W = g->W[m];
    pq_gemm_tile tl = g->tl;
    int cols = W->cols, r0 = (p - g->first[m]) * g->task_rows[m];
    int n = W->rows - r0 < g->task_rows[m] ? W->rows - r0 : g->task_rows[m], np = (n + tl.nr - 1) / tl.nr;
    if (g->amx) { // r0: a whole number of 32-row blocks
        pq_gemm_amx((const uint16_t *)g->xp, g->T, cols, W->panels, r0, n, g->y[m], W->rows);
        add_bias(W, g->T, g->y[m], r0, n);
        return;
    }
    float *scratch = g->scratch + (size_t)tid * g->thread_floats;
    const float *panels = W->panels ? (const float *)W->panels + (size_t)r0 * cols : scratch; // whole panels
    for (int j = 0; !W->panels && j < np; j++) {
        int rj = r0 + j * tl.nr, nj = r0 + n - rj < tl.nr ? r0 + n - rj : tl.nr;
        pack_panel(W, tl, rj, nj, scratch + (size_t)j * tl.nr * cols, scratch + (size_t)GEMM_TASK_ROWS * cols);
    }
    for (int t = 0; t < g->T; t += tl.mr) {
        int mt = g->T - t < tl.mr ? g->T - t : tl.mr;
        const float *xb = g->xp + (size_t)t * cols;
        for (int j = 0; j < np; j++) {
            int rj = r0 + j * tl.nr, nj = r0 + n - rj < tl.nr ? r0 + n - rj : tl.nr;
            pq_gemm_block_cpu(tl, xb, panels + (size_t)j * tl.nr * cols, cols, mt, nj,
                              g->y[m] + (size_t)t * W->rows + rj, W->rows);
        }
    }
    add_bias(W, g->T, g->y[m], r0, n);
}

// The AMX layout's rows per block (kernels/gemm.h): tasks and panels take whole ones.
#define AMX_ROWS 32

size_t pq_linear_panels_bytes(const pq_linear *W, int bf16) {
    if (W->act.type != PQ_ACTQ_NONE) return 0;
    if (bf16 && pq_cpu_amx()) return pq_gemm_amx_w_values(W->rows, W->cols) * sizeof(uint16_t);
    pq_gemm_tile tl = pq_gemm_tile_cpu();
    return (size_t)(W->rows + tl.nr - 1) / tl.nr * tl.nr * W->cols * sizeof(float);
}

typedef struct {
    const pq_linear *W;
    pq_gemm_tile tl;
    void *buf;
    float *scratch; // per thread, PACK_ROWS x cols floats apart
    int bf16;
} panels_job;

// Panel p: f32 (rounded to BF16 for bf16), or AMX_ROWS rows of the AMX layout.
static void panels_task(void *ctx, int p, int tid) {
    panels_job *j = ctx;
    int cols = j->W->cols, rows = j->W->rows;
    float *scratch = j->scratch + (size_t)tid * PACK_ROWS * cols;
    if (j->bf16 && pq_cpu_amx()) {
        int r0 = p * AMX_ROWS, n = rows - r0 < AMX_ROWS ? rows - r0 : AMX_ROWS;
        for (int i = 0; i < n; i += PACK_ROWS) {
            int ni = n - i < PACK_ROWS ? n - i : PACK_ROWS;
            pq_linear_rows(j->W, r0 + i, ni, scratch);
            pq_gemm_amx_pack_w(scratch, r0 + i, ni, cols, j->buf);
        }
        if (r0 + n == rows) pq_gemm_amx_pad_w(rows, cols, j->buf);
        return;
    }
    int rj = p * j->tl.nr, nj = rows - rj < j->tl.nr ? rows - rj : j->tl.nr;
    float *wp = (float *)j->buf + (size_t)rj * cols;
    pack_panel(j->W, j->tl, rj, nj, wp, scratch);
    if (j->bf16) pq_bf16_round_n(wp, (size_t)j->tl.nr * cols);
}

void pq_linear_pack_panels(pq_linear *W, void *buf, int bf16, void *ws, pq_pool *pool) {
    PQ_ASSERT(W->act.type == PQ_ACTQ_NONE);
    panels_job j = {W, pq_gemm_tile_cpu(), buf, ws, bf16};
    W->panels = NULL;
    int unit = bf16 && pq_cpu_amx() ? AMX_ROWS : j.tl.nr;
    pq_pool_for(pool, (W->rows + unit - 1) / unit, panels_task, &j);
    W->panels = buf;
    W->bf16 = bf16;
}

// y[i] = x W[i]^T + b[i] for n linears of the same cols, GEMM_CHUNK tokens at a time.
static void gemm_forward(const pq_linear *const *W, float *const *y, int n, const float *x, int T, void *ws,
                         pq_pool *pool) {
    int nthreads = pq_pool_size(pool), cols = W[0]->cols;
    gemm_job g = {.tl = pq_gemm_tile_cpu(), .xp = ws, .bf16 = W[0]->panels && W[0]->bf16};
    g.amx = g.bf16 && pq_cpu_amx();
    g.scratch = g.xp + gemm_x_floats(g.tl, cols);
    for (int i = 0; i < n; i++) {
        PQ_ASSERT(W[i]->cols == cols && (W[i]->panels && W[i]->bf16) == g.bf16);
        size_t f = gemm_thread_floats(W[i]);
        if (f > g.thread_floats) g.thread_floats = f;
        g.W[i] = W[i];
        g.task_rows[i] = gemm_task_rows(W[i], g.amx ? (pq_gemm_tile){g.tl.mr, AMX_ROWS} : g.tl, nthreads);
        g.first[i + 1] = g.first[i] + (W[i]->rows + g.task_rows[i] - 1) / g.task_rows[i];
    }
    for (int t0 = 0; t0 < T; t0 += GEMM_CHUNK) {
        g.T = T - t0 < GEMM_CHUNK ? T - t0 : GEMM_CHUNK;
        g.x = x + (size_t)t0 * cols;
        for (int i = 0; i < n; i++) g.y[i] = y[i] + (size_t)t0 * W[i]->rows;
        int blocks = (g.T + g.tl.mr - 1) / g.tl.mr;
        pq_pool_for(pool, (blocks + 7) / 8, gemm_pack_x_task, &g);
        pq_pool_for(pool, g.first[n], gemm_task, &g);
    }
}

// ---- W8A8 --------------------------------------------------------------

typedef struct {
    const pq_linear *W;
    const float *x;     // the chunk's first token
    pq_w8a8_act a;      // the chunk, quantized
    void *xd;           // FP8: the chunk decoded (pq_w8a8_fp8_decode_cpu)
    pq_w8a8_out o;
    char *scratch;      // per-thread scratch, w8a8_thread_bytes apart
    int chunk;          // rows per task
} w8a8_job;

static void w8a8_quantize(void *ctx, int i, int tid) {
    w8a8_job *j = ctx;
    const pq_linear *W = j->W;
    int t0 = i * W8A8_QTOKENS, nt = j->a.T - t0 < W8A8_QTOKENS ? j->a.T - t0 : W8A8_QTOKENS;
    pq_w8a8_act part = j->a;
    part.T = nt;
    part.q += (size_t)t0 * part.ld;
    part.scale += t0;
    part.sum += t0;
    const float *x = j->x + (size_t)t0 * W->cols;
    if (W->act.type == PQ_ACTQ_INT8) {
        pq_actq_int8_cpu(x, nt, W->cols, W->act.static_scale, &part);
    } else {
        pq_actq_fp8_cpu(x, nt, W->cols, W->act.static_scale, &part);
        pq_w8a8_fp8_decode_cpu(&j->a, t0, nt, j->xd);
    }
}

static void w8a8_rows(void *ctx, int p, int tid) {
    w8a8_job *j = ctx;
    const pq_linear *W = j->W;
    int r0 = p * j->chunk, n = W->rows - r0 < j->chunk ? W->rows - r0 : j->chunk;
    void *scratch = j->scratch + (size_t)tid * w8a8_thread_bytes(W);
    if (W->act.type == PQ_ACTQ_INT8) pq_w8a8_gemm_cpu(&W->i8, r0, n, &j->a, &j->o, scratch);
    else pq_w8a8_fp8_cpu(&W->f8, r0, n, &j->a, j->xd, &j->o, scratch);
}

// Rows per task for T tokens: gemv_rows for a few; else panels of at most
// PANEL_ROWS, about 2 per thread for INT8 (any split gives the same exact
// sums), panel_rows for FP8 (fp32 sums must not depend on the thread count).
static int w8a8_task_rows(const pq_linear *W, int T, int nthreads) {
    if (T <= PQ_GEMV_MAX_T) return gemv_rows(W->rows, nthreads);
    if (W->act.type == PQ_ACTQ_FP8) return panel_rows(W->rows);
    int per = (W->rows + 2 * nthreads - 1) / (2 * nthreads);
    per = (per + PQ_W8A8_PACK_ROWS - 1) / PQ_W8A8_PACK_ROWS * PQ_W8A8_PACK_ROWS;
    return per > PANEL_ROWS ? PANEL_ROWS : per;
}

// Members that quantize their input alike (the same activation type and
// static scale: one linear, or SmoothQuant's q/k/v or gate/up): per chunk
// of tokens the input quantized once, then every member's row tasks in one
// pool call.
static int same_act(const pq_linear *const *W, int n) {
    for (int i = 1; i < n; i++)
        if (W[i]->act.type != W[0]->act.type || W[i]->act.static_scale != W[0]->act.static_scale) return 0;
    return 1;
}

typedef struct {
    w8a8_job member[PQ_LINEAR_GROUP_MAX];
    int first[PQ_LINEAR_GROUP_MAX + 1]; // task index where each member starts
} w8a8_group_job;

static void w8a8_group_rows(void *ctx, int p, int tid) {
    w8a8_group_job *g = ctx;
    int i = member_of(g->first, p);
    w8a8_rows(&g->member[i], p - g->first[i], tid);
}

static void w8a8_forward(const pq_linear *const *W, float *const *y, int n, const float *x, int T, void *ws,
                         pq_pool *pool) {
    int cols = W[0]->cols;
    for (int i = 0; i < n; i++)
        PQ_ASSERT(((W[i]->act.type == PQ_ACTQ_INT8 && W[i]->fmt == PQ_W_INT8) ||
                   (W[i]->act.type == PQ_ACTQ_FP8 && W[i]->fmt == PQ_W_FP8)) &&
                  W[i]->cols == cols && cols <= PQ_W8A8_MAX_COLS);
    size_t act_bytes = pq_w8a8_act_bytes(W8A8_CHUNK, cols);
    for (int t0 = 0; t0 < T; t0 += W8A8_CHUNK) {
        int nt = T - t0 < W8A8_CHUNK ? T - t0 : W8A8_CHUNK;
        w8a8_group_job g = {.first = {0}};
        for (int i = 0; i < n; i++) {
            g.member[i] = (w8a8_job){W[i], x + (size_t)t0 * cols, pq_w8a8_act_view(ws, nt, cols),
                                     (float *)((char *)ws + act_bytes), {y[i] + (size_t)t0 * W[i]->rows, NULL,
                                     W[i]->rows, W[i]->bias}, (char *)ws + w8a8_shared_bytes(W[i]),
                                     w8a8_task_rows(W[i], nt, pq_pool_size(pool))};
            g.first[i + 1] = g.first[i] + (W[i]->rows + g.member[i].chunk - 1) / g.member[i].chunk;
        }
        pq_pool_for(pool, (nt + W8A8_QTOKENS - 1) / W8A8_QTOKENS, w8a8_quantize, &g.member[0]);
        pq_pool_for(pool, g.first[n], w8a8_group_rows, &g);
    }
}

// The specification: the _ref quantizer, then the _ref product.
static void w8a8_forward_ref(const pq_linear *W, const float *x, int T, float *y) {
    void *mem = pq_alloc(pq_w8a8_act_bytes(T, W->cols));
    PQ_ASSERT(mem);
    pq_w8a8_act a = pq_w8a8_act_view(mem, T, W->cols);
    pq_w8a8_out o = {y, NULL, W->rows, W->bias};
    if (W->act.type == PQ_ACTQ_INT8) {
        pq_actq_int8_ref(x, T, W->cols, W->act.static_scale, &a);
        pq_w8a8_gemm_ref(&W->i8, 0, W->rows, &a, &o);
    } else {
        pq_actq_fp8_ref(x, T, W->cols, W->act.static_scale, &a);
        pq_w8a8_fp8_ref(&W->f8, 0, W->rows, &a, &o);
    }
    pq_free(mem);
}

// ---- every format ------------------------------------------------------

void pq_linear_forward(const pq_linear *W, const float *x, int T, float *y, void *ws, pq_pool *pool) {
    if (T <= 0) return;
    if (W->act.type != PQ_ACTQ_NONE) { w8a8_forward(&W, &y, 1, x, T, ws, pool); return; }
    job j = {W, x, T, y, ws, 0};
    if (T <= PQ_GEMV_MAX_T) {
        if (W->fmt == PQ_W_QPACK) pq_qpack_gemv_prepare_cpu(&W->q, x, T, ws);
        j.chunk = gemv_rows(W->rows, pq_pool_size(pool));
        pq_pool_for(pool, (W->rows + j.chunk - 1) / j.chunk, gemv_chunk, &j);
    } else {
        gemm_forward(&W, &y, 1, x, T, ws, pool);
    }
}

// The tasks of a group: each member's GEMV tasks as pq_linear_forward cuts
// them (so every output is computed by the same kernel call), one after another.
typedef struct {
    job member[PQ_LINEAR_GROUP_MAX];
    int first[PQ_LINEAR_GROUP_MAX + 1]; // task index where each member starts
    int n;
} group_job;

static void group_chunk(void *ctx, int p, int tid) {
    group_job *g = ctx;
    int i = member_of(g->first, p);
    gemv_chunk(&g->member[i], p - g->first[i], tid);
}

void pq_linear_forward_group(const pq_linear *const *W, float *const *y, int n, const float *x, int T, void *ws,
                             pq_pool *pool) {
    PQ_ASSERT(n >= 1 && n <= PQ_LINEAR_GROUP_MAX);
    int weight_only = 1;
    for (int i = 0; i < n; i++) weight_only = weight_only && W[i]->act.type == PQ_ACTQ_NONE;
    if (T > 0 && W[0]->act.type != PQ_ACTQ_NONE && same_act(W, n)) {
        w8a8_forward(W, y, n, x, T, ws, pool);
        return;
    }
    if (T <= 0 || !weight_only) { // mixed members go one by one
        for (int i = 0; i < n; i++) pq_linear_forward(W[i], x, T, y[i], ws, pool);
        return;
    }
    if (T > PQ_GEMV_MAX_T) { // prefill: x packed once for all members
        gemm_forward(W, y, n, x, T, ws, pool);
        return;
    }
    group_job g = {.n = n};
    char *xp = ws;
    for (int i = 0; i < n; i++) {
        job *j = &g.member[i];
        *j = (job){W[i], x, T, y[i], (float *)xp, gemv_rows(W[i]->rows, pq_pool_size(pool))};
        if (W[i]->fmt == PQ_W_QPACK) {
            pq_qpack_gemv_prepare_cpu(&W[i]->q, x, T, j->ws);
            xp += xp_bytes(W[i]);
        }
        g.first[i + 1] = g.first[i] + (W[i]->rows + j->chunk - 1) / j->chunk;
    }
    pq_pool_for(pool, g.first[n], group_chunk, &g);
}

void pq_linear_forward_ref(const pq_linear *W, const float *x, int T, float *y) {
    if (W->act.type != PQ_ACTQ_NONE) { w8a8_forward_ref(W, x, T, y); return; }
    float *row = malloc((size_t)W->cols * sizeof(float));
    PQ_ASSERT(row);
    for (int r = 0; r < W->rows; r++) {
        pq_linear_rows_ref(W, r, 1, row);
        for (int t = 0; t < T; t++) {
            double acc = 0;
            for (int c = 0; c < W->cols; c++) acc += (double)row[c] * x[(size_t)t * W->cols + c];
            y[(size_t)t * W->rows + r] = (float)acc + (W->bias ? W->bias[r] : 0.0f);
        }
    }
    free(row);
}
