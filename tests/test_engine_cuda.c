// The CUDA backend: every device op against its C reference (kernels/ops.h,
// kernels/attention.h, kernels/linear.h) on fresh random inputs, then the
// whole GPU engine against the CPU engine (and the fixture goldens) on the
// stories260K fixture and on random models with the features the fixture
// lacks (q/k/v bias, sliding window, BF16/F32 weights, untied head,
// head_dim 64/128, Llama 3 RoPE scaling), on the fixture quantized by
// pq_quantize (w4a16 g32, fp8: the quantized kernels inside the engine),
// decode steps from a CUDA graph against plain launches, the loss on the
// device against the CPU's, and --device auto's fallback to the CPU. Ops
// run in FP16 and BF16. Without a GPU only the "no device"
// checks run; the rest print skip (FAIL under make test-gpu).
#include "common/half.h"
#include "common/sys.h"
#include "kernels/cuda_host.h"
#include "eval/engine.h"
#include "kernels/loss.h"
#include "kernels/ops.h"
#include "kernels/ops_cuda.h"
#include "quant/quantize.h"
#include "tests/lib/cuda_wrappers.h"
#include "tests/lib/model_random.h"
#include "tests/test.h"

static int have_gpu;

// The CPU engine carries activations in f32; the GPU engine rounds the
// inputs of every matrix product and the KV cache to the model's 16-bit
// activation type (FP16: 2^-11 relative, ~2.8e-4 rms per element); over the
// fixture's 5 blocks this gives ~1e-3 relative L2 on the logits, so 2e-3
// with some margin (FP16 weights are exact on both).
#define ENGINE_TOL 2e-3
// A model stored in BF16 runs with BF16 activations: 8 times FP16's
// rounding (2^-8), so 8 times the tolerance.
#define ENGINE_TOL_BF16 1.6e-2
// A quantized checkpoint: as ENGINE_TOL, plus the weights the GPU rounds to
// FP16 (grouped INT4 in the GEMV, every format in the prefill panels: 2^-12
// rms relative per weight, ~2e-4 per linear output), so 3e-3.
#define ENGINE_TOL_PACKED 3e-3

// ---- no device --------------------------------------------------------------------

static void check_no_device(void) {
    if (have_gpu) {
        pq_test_skip("--device cuda without a GPU fails with PQ_ERR_NO_DEVICE: this machine has a GPU");
        return;
    }
    pq_model *m;
    pq_status s = pq_model_open(pq_test_path("fixtures/stories260K"), &m);
    PQ_CHECK(s == PQ_OK, "fixture model opens (%s)", pq_last_error());
    if (s != PQ_OK) return;
    pq_engine_params p = pq_engine_default_params();
    p.device = PQ_DEVICE_CUDA;
    pq_engine *e = (pq_engine *)1;
    s = pq_engine_create(m, &p, &e);
    PQ_CHECK(s == PQ_ERR_NO_DEVICE && e == NULL && strstr(pq_last_error(), "--device cuda: "),
             "--device cuda without a GPU fails with PQ_ERR_NO_DEVICE (%s)", pq_last_error());
    p.device = PQ_DEVICE_AUTO;
    s = pq_engine_create(m, &p, &e);
    PQ_CHECK(s == PQ_OK && pq_engine_device(e) == PQ_DEVICE_CPU, "--device auto without a GPU runs on the CPU (%s)",
             s == PQ_OK ? pq_engine_describe(e) : pq_last_error());
    if (s == PQ_OK) pq_engine_free(e);
    pq_model_free(m);
}

// ---- ops ----------------------------------------------------------------------------

static const pq_act_dtype DTS[] = {PQ_ACT_F16, PQ_ACT_BF16};

static void check_embed(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "embedding gather on the GPU");
    int vocab = 301, n = 77, T = 19;
    for (int d = 0; d < 2; d++) {
        pq_act_dtype dt = DTS[d];
        float *table = malloc((size_t)vocab * n * 4);
        int32_t tok[19];
        float *got = malloc((size_t)T * n * 4), *want = malloc((size_t)T * n * 4);
        pq_test_fill(table, (size_t)vocab * n, 1.0f);
        pq_cuda_test_round(dt, table, (size_t)vocab * n); // the table the device holds
        for (int t = 0; t < T; t++) tok[t] = (int32_t)(pq_test_u64() % (uint64_t)vocab);
        tok[0] = vocab - 1;
        for (int t = 0; t < T; t++)
            for (int i = 0; i < n; i++) want[t * n + i] = table[(size_t)tok[t] * n + i];
        pq_test_poison(got, (size_t)T * n);
        pq_status s = pq_cuda_test_embed(dt, table, vocab, n, tok, T, got);
        // 16-bit -> f32 is exact
        PQ_CHECK(s == PQ_OK && memcmp(got, want, (size_t)T * n * 4) == 0,
                 "embedding gather (%s) == reference, bit for bit (%s)", pq_act_dtype_name(dt), pq_last_error());
        free(table); free(got); free(want);
    }
}

static void check_rmsnorm(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "RMSNorm on the GPU");
    const int shapes[][2] = {{5, 64}, {3, 4099}, {1, 8192}, {70, 172}};
    for (int d = 0; d < 2; d++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            pq_act_dtype dt = DTS[d];
            int T = shapes[k][0], n = shapes[k][1];
            float *x = malloc((size_t)T * n * 4), *w = malloc((size_t)n * 4);
            float *got = malloc((size_t)T * n * 4), *want = malloc((size_t)T * n * 4);
            pq_test_fill(x, (size_t)T * n, 3.0f);
            for (int i = 0; i < n; i++) w[i] = 1.0f + 0.5f * pq_test_uniform();
            pq_rmsnorm_ref(x, w, T, n, 1e-5f, want);
            pq_test_poison(got, (size_t)T * n);
            pq_status s = pq_cuda_test_rmsnorm(dt, x, w, T, n, 1e-5f, got);
            // the 16-bit output: rounding <= 2^-11 (FP16) / 2^-8 (BF16) relative;
            // the f32 sum of squares moves the scale by ~1e-6; atol covers FP16
            // subnormals (6e-8 steps)
            double rtol = dt == PQ_ACT_BF16 ? 8e-3 : 1e-3;
            PQ_CHECK(s == PQ_OK && pq_allclose(got, want, (size_t)T * n, 1e-6, rtol),
                     "RMSNorm (%s) [%d x %d] vs reference (%s)", pq_act_dtype_name(dt), T, n, pq_last_error());
            free(x); free(w); free(got); free(want);
        }
}

static void check_rope(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "RoPE on the GPU");
    struct { int hd, n_heads, extra, pos0, T, llama3, device_pos; } cases[] = {
        {8, 8, 0, 0, 7, 0, 0},   {64, 3, 5, 1000, 9, 0, 0}, {128, 2, 0, 4000, 4, 1, 0}, {2, 4, 1, 17, 33, 0, 0},
        {64, 4, 0, 1234, 1, 0, 1}, {128, 2, 3, 7000, 1, 1, 1}, // a decode step's position read from the device
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int hd = cases[k].hd, half = hd / 2, T = cases[k].T, pos0 = cases[k].pos0;
        int stride = cases[k].n_heads * hd + cases[k].extra; // extra columns must stay untouched
        pq_rope_params rp = {10000.0f, 0, 0, 0, 0, 0};
        if (cases[k].llama3) rp = (pq_rope_params){500000.0f, 1, 8.0f, 1.0f, 4.0f, 8192};
        double *f = malloc((size_t)half * sizeof(double));
        pq_rope_inv_freq(&rp, hd, f);
        size_t nx = (size_t)T * stride, nt = (size_t)T * half;
        float *x = malloc(nx * 4), *want = malloc(nx * 4);
        float *cs = malloc(nt * 4), *sn = malloc(nt * 4), *cs_ref = malloc(nt * 4), *sn_ref = malloc(nt * 4);
        pq_test_fill(x, nx, 2.0f);
        memcpy(want, x, nx * 4);
        pq_rope_table(f, hd, pos0, T, cs_ref, sn_ref);
        pq_rope_apply_ref(want, T, stride, cases[k].n_heads, hd, cs_ref, sn_ref);
        pq_test_poison(cs, nt);
        pq_test_poison(sn, nt);
        pq_status s = pq_cuda_test_rope(f, hd, pos0, cases[k].device_pos, T, stride, cases[k].n_heads, x, cs, sn);
        // the tables are cos/sin in double rounded to f32 on both sides (device
        // and glibc double cos/sin agree to ~1 ulp of double, so the f32 values
        // differ by at most 1 f32 ulp, 6e-8); the rotation is the same f32
        // operations without contraction
        PQ_CHECK(s == PQ_OK && pq_allclose(cs, cs_ref, nt, 1.2e-7, 0) && pq_allclose(sn, sn_ref, nt, 1.2e-7, 0),
                 "RoPE tables hd %d pos0 %d%s%s vs reference (%s)", hd, pos0, cases[k].llama3 ? " llama3" : "",
                 cases[k].device_pos ? " (position on the device)" : "", pq_last_error());
        PQ_CHECK(s == PQ_OK && pq_allclose(x, want, nx, 1e-6, 1e-6), "RoPE rotation hd %d x %d heads (stride %d) vs reference",
                 hd, cases[k].n_heads, stride);
        free(f); free(x); free(want); free(cs); free(sn); free(cs_ref); free(sn_ref);
    }
}

static uint16_t to16(pq_act_dtype dt, float f) { return dt == PQ_ACT_BF16 ? pq_f32_to_bf16(f) : pq_f32_to_fp16(f); }

static void check_swiglu_add_convert(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "SwiGLU, add and f32 -> 16-bit on the GPU");
    size_t n = 10007;
    float *g = malloc(n * 4), *u = malloc(n * 4), *got = malloc(n * 4), *want = malloc(n * 4);
    for (int d = 0; d < 2; d++) {
        pq_act_dtype dt = DTS[d];
        pq_test_fill(g, n, 3.0f);
        pq_test_fill(u, n, 1.0f);
        g[0] = -100.0f; // silu saturates to -0
        g[1] = 60.0f;
        g[2] = 400.0f, u[2] = 300.0f; // 120000: beyond FP16 (Inf there), a BF16 value
        memcpy(want, g, n * 4);
        pq_swiglu_ref(want, u, n);
        pq_test_poison(got, n);
        pq_status s = pq_cuda_test_swiglu(dt, g, u, n, got);
        // the 16-bit output (2^-11 / 2^-8 relative) after expf (<= 2 ulp) and an IEEE divide
        int ok = s == PQ_OK && pq_allclose(got + 3, want + 3, n - 3, 1e-7, dt == PQ_ACT_BF16 ? 8e-3 : 1e-3) &&
                 got[0] == 0.0f && fabsf(got[1] - want[1]) <= 1e-3f * fabsf(want[1]);
        ok &= dt == PQ_ACT_BF16 ? fabsf(got[2] - want[2]) <= 8e-3f * want[2] : isinf(got[2]);
        PQ_CHECK(ok, "SwiGLU (%s) vs reference, 1.2e5 %s (%s)", pq_act_dtype_name(dt),
                 dt == PQ_ACT_BF16 ? "kept" : "Inf as in FP16", pq_last_error());
    }

    pq_test_fill(g, n, 3.0f);
    pq_test_fill(u, n, 1.0f);
    memcpy(want, g, n * 4);
    pq_add_ref(want, u, n);
    memcpy(got, g, n * 4);
    pq_status s = pq_cuda_test_add(got, u, n);
    // one correctly rounded f32 add on both sides
    PQ_CHECK(s == PQ_OK && memcmp(got, want, n * 4) == 0, "add == reference, bit for bit (%s)", pq_last_error());

    // values from FP16 subnormals to beyond its range (overflow to Inf)
    uint16_t *h = malloc(n * 2), *h_ref = malloc(n * 2);
    for (size_t i = 0; i < n; i++) g[i] = pq_test_normal() * ldexpf(1.0f, (int)(pq_test_u64() % 50) - 30);
    g[0] = INFINITY;
    g[1] = -65520.0f; // the first value that rounds to -Inf in FP16
    g[2] = 65519.0f;  // the largest that rounds to 65504
    g[3] = NAN;
    g[4] = 3.0e38f;   // Inf in FP16, a finite BF16 value
    for (int d = 0; d < 2; d++) {
        pq_act_dtype dt = DTS[d];
        for (size_t i = 0; i < n; i++) h_ref[i] = to16(dt, g[i]);
        s = pq_cuda_test_f32_to_act(dt, g, n, h);
        int ok = s == PQ_OK && memcmp(h + 4, h_ref + 4, (n - 4) * 2) == 0 && memcmp(h, h_ref, 3 * 2) == 0;
        ok &= (h[3] & 0x7fff) > (dt == PQ_ACT_BF16 ? 0x7f80 : 0x7c00); // a NaN, whatever its payload
        PQ_CHECK(ok, "f32 -> %s == common/half.h's rounding, bit for bit (%s)", pq_act_dtype_name(dt), pq_last_error());
    }
    free(g); free(u); free(got); free(want); free(h); free(h_ref);
}

// The KV-cache store: the rows written are dt(k), dt(v); every other row
// keeps its NaN.
static void check_kv_store(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "KV-cache store on the GPU");
    struct { int T, kvd, pos0, n_ctx, device_pos; } cases[] = {{7, 64, 0, 16, 0}, {1, 256, 30, 40, 0}, {1, 96, 13, 20, 1}};
    for (int d = 0; d < 2; d++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            pq_act_dtype dt = DTS[d];
            int T = cases[c].T, kvd = cases[c].kvd, pos0 = cases[c].pos0, n_ctx = cases[c].n_ctx;
            size_t nk = (size_t)T * kvd, nc = (size_t)n_ctx * kvd;
            float *k = malloc(nk * 4), *v = malloc(nk * 4), *kc = malloc(nc * 4), *vc = malloc(nc * 4);
            pq_test_fill(k, nk, 2.0f);
            pq_test_fill(v, nk, 2.0f);
            pq_status s = pq_cuda_test_kv_store(dt, k, v, T, kvd, pos0, cases[c].device_pos, n_ctx, kc, vc);
            pq_cuda_test_round(dt, k, nk);
            pq_cuda_test_round(dt, v, nk);
            int ok = s == PQ_OK;
            for (int r = 0; ok && r < n_ctx; r++)
                for (int i = 0; ok && i < kvd; i++) {
                    size_t at = (size_t)r * kvd + i;
                    if (r >= pos0 && r < pos0 + T) ok = kc[at] == k[(size_t)(r - pos0) * kvd + i] &&
                                                        vc[at] == v[(size_t)(r - pos0) * kvd + i];
                    else ok = isnan(kc[at]) && isnan(vc[at]);
                }
            PQ_CHECK(ok, "KV store (%s) of %d rows at %d%s: rows written exactly, the others untouched (%s)",
                     pq_act_dtype_name(dt), T, pos0, cases[c].device_pos ? " (position on the device)" : "",
                     pq_last_error());
            free(k); free(v); free(kc); free(vc);
        }
}

// The loss on the device against pq_nll_ref (kernels/loss.h), on rows with
// logits of a wide range, at a small and a 128k vocabulary.
static void check_nll(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "log-softmax loss on the GPU");
    const int shapes[][2] = {{5, 512}, {3, 128256}, {9, 1000}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int n = shapes[k][0], V = shapes[k][1];
        float *l = malloc((size_t)n * V * 4), *got = malloc((size_t)n * 4);
        int32_t *tg = malloc((size_t)n * 4);
        pq_test_fill(l, (size_t)n * V, 8.0f);
        for (int i = 0; i < n; i++) tg[i] = (int32_t)(pq_test_u64() % (uint64_t)V);
        tg[1] = -1;               // not scored: 0
        l[(size_t)2 * V + 7] = 90; // one dominant logit
        tg[2] = 7;
        pq_test_poison(got, (size_t)n);
        pq_status s = pq_cuda_test_nll(l, n, V, tg, got);
        // f32 sums on the device vs double (kernels/ops_cuda.h: ~1e-6 relative
        // at 128k); 1e-5 absolute for the near-zero loss of row 2
        int ok = s == PQ_OK;
        double worst = 0;
        for (int i = 0; ok && i < n; i++) {
            double want = tg[i] < 0 ? 0.0 : pq_nll_ref(l + (size_t)i * V, V, tg[i]);
            double e = fabs(got[i] - want);
            worst = fmax(worst, e);
            ok = e <= 1e-5 + 1e-5 * fabs(want);
        }
        PQ_CHECK(ok, "loss of %d rows at vocabulary %d vs pq_nll_ref (worst %.2e) (%s)", n, V, worst, pq_last_error());
        free(l); free(got); free(tg);
    }
}

static void check_attention(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "attention on the GPU");
    struct { pq_attn_shape s; int T, pos0; float qscale; } cases[] = {
        {{8, 4, 8, 0}, 37, 0, 1.0f},     // the fixture's shape, prefill
        {{8, 4, 8, 0}, 1, 36, 1.0f},     // and one decode step
        {{4, 1, 128, 0}, 9, 100, 1.0f},  // multi-query, several key tiles
        {{6, 2, 64, 16}, 50, 30, 3.0f},  // sliding window, peaky softmax
        {{2, 2, 256, 0}, 3, 40, 1.0f},   // the largest head_dim
        {{4, 2, 96, 5}, 20, 0, 1.0f},    // head_dim not a multiple of 32, tiny window
        {{2, 1, 2, 0}, 70, 5, 1.0f},     // tiny head_dim
        {{32, 8, 128, 0}, 1, 700, 1.0f}, // Llama-3-8B shape, decode over a long cache
        {{32, 8, 128, 0}, 1, 3000, 1.0f},// and a cache long enough for many KV splits
        {{8, 2, 64, 100}, 1, 500, 1.0f}, // decode with a sliding window
    };
    for (int d = 0; d < 2; d++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            pq_act_dtype dt = DTS[d];
            const pq_attn_shape *a = &cases[c].s;
            int T = cases[c].T, pos0 = cases[c].pos0, n_ctx = pos0 + T + 5;
            size_t qn = (size_t)T * a->n_heads * a->head_dim, kn = (size_t)(pos0 + T) * a->n_kv * a->head_dim;
            float *q = malloc(qn * 4), *k = malloc(kn * 4), *v = malloc(kn * 4), *got = malloc(qn * 4),
                  *want = malloc(qn * 4);
            pq_test_fill(q, qn, cases[c].qscale);
            pq_test_fill(k, kn, 1.0f);
            pq_test_fill(v, kn, 1.0f);
            // the device cache is 16-bit: the reference runs on the same rounded keys/values
            pq_cuda_test_round(dt, k, kn);
            pq_cuda_test_round(dt, v, kn);
            pq_attention_ref(a, q, k, v, T, pos0, want);
            // paths: the automatic choice, the prefill kernel on any T, and the
            // decode kernel with the position as an argument and on the device
            pq_attn_path paths[] = {PQ_ATTN_AUTO, PQ_ATTN_PREFILL, PQ_ATTN_DECODE, PQ_ATTN_DECODE_DEVPOS};
            const char *pn[] = {"auto", "prefill kernel", "decode kernel", "decode kernel, position on the device"};
            for (int p = 0; p < (T == 1 ? 4 : 2); p++) {
                pq_test_poison(got, qn);
                pq_status s = pq_cuda_test_attention(a, dt, paths[p], q, k, v, T, pos0, n_ctx, got);
                // the 16-bit Q (prefill: Q is rounded to feed the tensor cores) and
                // P.V in 16 bits add ~2^-11 (FP16) / 2^-8 (BF16) relative per term:
                // outputs of magnitude ~1 within 2e-3 / 1.6e-2 of the double reference
                double tol = dt == PQ_ACT_BF16 ? 1.6e-2 : 2e-3;
                PQ_CHECK(s == PQ_OK && pq_allclose(got, want, qn, tol, tol),
                         "attention (%s, %s) %d/%d heads hd %d window %d, T %d at pos0 %d vs reference (%s)",
                         pq_act_dtype_name(dt), pn[p], a->n_heads, a->n_kv, a->head_dim, a->window, T, pos0,
                         pq_last_error());
            }
            free(q); free(k); free(v); free(got); free(want);
        }
    pq_attn_shape bad = {2, 1, 258, 0};
    float q[516] = {0}, out[516];
    float kv[258] = {0};
    pq_status s = pq_cuda_test_attention(&bad, PQ_ACT_F16, PQ_ATTN_AUTO, q, kv, kv, 1, 0, 1, out);
    PQ_CHECK(s == PQ_ERR_ARG, "head_dim 258 refused by the CUDA attention (%s)", pq_last_error());
}

// W as an F16 / BF16 pq_linear (the ref's view of what the device holds).
static uint16_t *to16_weight(const pq_linear *W, pq_act_dtype dt) {
    size_t n = (size_t)W->rows * W->cols;
    uint16_t *w16 = malloc(n * 2);
    float *row = malloc((size_t)W->cols * 4);
    for (int r = 0; r < W->rows; r++) {
        pq_linear_rows_ref(W, r, 1, row);
        for (int c = 0; c < W->cols; c++) w16[(size_t)r * W->cols + c] = to16(dt, row[c]);
    }
    free(row);
    return w16;
}

static void check_linear(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "dense linear layers (cuBLAS) on the GPU");
    struct { pq_dense_type wt; pq_act_dtype dt; int rows, cols, T, bias; } cases[] = {
        {PQ_DENSE_F16, PQ_ACT_F16, 67, 172, 1, 0},   {PQ_DENSE_F16, PQ_ACT_F16, 64, 64, 33, 0},
        {PQ_DENSE_BF16, PQ_ACT_F16, 200, 96, 5, 1},  {PQ_DENSE_F32, PQ_ACT_F16, 130, 300, 300, 1},
        {PQ_DENSE_BF16, PQ_ACT_BF16, 200, 96, 5, 1}, {PQ_DENSE_F32, PQ_ACT_BF16, 130, 300, 40, 0},
    };
    const char *names[] = {"F32", "F16", "BF16"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int R = cases[c].rows, C = cases[c].cols, T = cases[c].T;
        pq_act_dtype dt = cases[c].dt;
        size_t n = (size_t)R * C, es = cases[c].wt == PQ_DENSE_F32 ? 4 : 2;
        void *w = malloc(n * es);
        for (size_t i = 0; i < n; i++) {
            float f = 0.05f * pq_test_normal();
            if (cases[c].wt == PQ_DENSE_F32) ((float *)w)[i] = f;
            else if (cases[c].wt == PQ_DENSE_F16) ((uint16_t *)w)[i] = pq_f32_to_fp16(f);
            else ((uint16_t *)w)[i] = pq_f32_to_bf16(f);
        }
        float *bias = malloc((size_t)R * 4), *x = malloc((size_t)T * C * 4);
        float *got = malloc((size_t)T * R * 4), *want = malloc((size_t)T * R * 4);
        pq_test_fill(bias, (size_t)R, 1.0f);
        pq_test_fill(x, (size_t)T * C, 1.0f);
        pq_cuda_test_round(dt, x, (size_t)T * C); // as the device sees it
        pq_linear W = {.fmt = PQ_W_DENSE, .rows = R, .cols = C, .dense_type = cases[c].wt, .w = w,
                       .bias = cases[c].bias ? bias : NULL};
        uint16_t *w16 = to16_weight(&W, dt);
        pq_linear W16 = W;
        W16.dense_type = dt == PQ_ACT_BF16 ? PQ_DENSE_BF16 : PQ_DENSE_F16;
        W16.w = w16;
        pq_linear_forward_ref(&W16, x, T, want);
        pq_test_poison(got, (size_t)T * R);
        pq_status s = pq_cuda_test_qlinear(&W, dt, x, T, PQ_CUDA_PATH_AUTO, got, NULL);
        // same 16-bit operands; f32 vs double accumulation of C exact products:
        // ~sqrt(C) 2^-24 |terms| ~ 1e-7 absolute on outputs of magnitude ~1;
        // 1e-4 leaves room for tensor-core accumulation details, while an
        // indexing error would be O(1)
        PQ_CHECK(s == PQ_OK && pq_allclose(got, want, (size_t)T * R, 1e-4, 1e-4),
                 "linear %s as %s [%d x %d]%s, T %d vs reference on the rounded weight (%s)", names[cases[c].wt],
                 pq_act_dtype_name(dt), R, C, cases[c].bias ? " + bias" : "", T, pq_last_error());
        free(w); free(w16); free(bias); free(x); free(got); free(want);
    }
    float big[4] = {1.0f, -2.0f, 1e5f, 0.5f}, x[2] = {1, 1}, y[2];
    pq_linear W = {.fmt = PQ_W_DENSE, .rows = 2, .cols = 2, .dense_type = PQ_DENSE_F32, .w = big};
    pq_status s = pq_cuda_test_qlinear(&W, PQ_ACT_F16, x, 1, PQ_CUDA_PATH_AUTO, y, NULL);
    PQ_CHECK(s == PQ_ERR_NUMERIC && strstr(pq_last_error(), "FP16"),
             "an F32 weight beyond the FP16 range is refused for FP16 activations (%s)", pq_last_error());
    s = pq_cuda_test_qlinear(&W, PQ_ACT_BF16, x, 1, PQ_CUDA_PATH_AUTO, y, NULL);
    float want1 = pq_bf16_to_f32(pq_f32_to_bf16(1e5f)) + 0.5f; // exact in f32
    PQ_CHECK(s == PQ_OK && y[1] == want1, "the same weight runs in BF16: y = %g, want %g (%s)", y[1], want1,
             pq_last_error());
}

// ---- the engine ----------------------------------------------------------------------

// Logits of tokens[0..n) in one prefill.
static pq_status prefill_logits(pq_engine *e, const int32_t *tok, int n, float *out) {
    pq_status s = pq_engine_forward(e, tok, n, 0);
    return s == PQ_OK ? pq_engine_logits(e, 0, n, out) : s;
}

// Logits of tokens[0..n): a prefill of 3, then one token at a time from the cache.
static pq_status decode_logits(pq_engine *e, const int32_t *tok, int n, int V, float *out) {
    int n0 = n < 3 ? n : 3;
    pq_status s = prefill_logits(e, tok, n0, out);
    for (int i = n0; i < n && s == PQ_OK; i++) {
        s = pq_engine_forward(e, tok + i, 1, i);
        if (s == PQ_OK) s = pq_engine_logits(e, 0, 1, out + (size_t)i * V);
    }
    return s;
}

// GPU vs CPU on tokens, prefill and decode, within tol (relative L2 of the logits).
static void compare_engines(const char *what, pq_engine *gpu, pq_engine *cpu, const int32_t *tok, int n, int V,
                            double tol) {
    size_t nl = (size_t)n * V;
    float *g = malloc(nl * 4), *c = malloc(nl * 4), *d = malloc(nl * 4);
    pq_test_poison(g, nl);
    pq_test_poison(d, nl);
    pq_status s = prefill_logits(cpu, tok, n, c);
    PQ_CHECK(s == PQ_OK, "%s: CPU engine runs (%s)", what, pq_last_error());
    s = prefill_logits(gpu, tok, n, g);
    double err = pq_rel_l2(g, c, nl);
    PQ_CHECK(s == PQ_OK && err < tol, "%s: GPU prefill of %d tokens vs CPU engine, logits rel L2 %.2e (%s)", what, n,
             err, s == PQ_OK ? "ok" : pq_last_error());
    s = decode_logits(gpu, tok, n, V, d);
    double err_g = pq_rel_l2(d, g, nl), err_c = pq_rel_l2(d, c, nl);
    // decode runs the same FP16 operands through T=1 products: only f32
    // summation order (and the odd FP16 rounding it flips) differs from the
    // GPU prefill; a KV-cache bug would be O(1)
    PQ_CHECK(s == PQ_OK && err_g < tol && err_c < tol,
             "%s: GPU decode (prefill 3, then 1 at a time) vs GPU prefill rel L2 %.2e, vs CPU %.2e (%s)", what, err_g,
             err_c, s == PQ_OK ? "ok" : pq_last_error());
    free(g); free(c); free(d);
}

static const int32_t PROMPT0[] = {1, 403, 407, 261, 378};
static const int32_t PROMPT1[] = {1, 317, 269, 274, 287, 263, 377, 267, 265, 282, 295, 433, 426};

static void check_fixture(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "GPU engine on the stories260K fixture");
    pq_model *m;
    pq_st *golden = NULL;
    pq_status s = pq_model_open(pq_test_path("fixtures/stories260K"), &m);
    PQ_CHECK(s == PQ_OK, "fixture model opens (%s)", pq_last_error());
    if (s != PQ_OK) return;
    pq_engine_params p = pq_engine_default_params();
    pq_engine *gpu = NULL, *cpu = NULL;
    s = pq_engine_create(m, &p, &gpu); // AUTO picks the GPU when there is one
    PQ_CHECK(s == PQ_OK && pq_engine_device(gpu) == PQ_DEVICE_CUDA && strncmp(pq_engine_describe(gpu), "cuda (", 6) == 0,
             "--device auto picks the GPU: %s (%s)", s == PQ_OK ? pq_engine_describe(gpu) : "", pq_last_error());
    p.device = PQ_DEVICE_CPU;
    if (s == PQ_OK) s = pq_engine_create(m, &p, &cpu);
    if (s != PQ_OK) goto done;
    int V = m->cfg.vocab;
    compare_engines("fixture prompt0", gpu, cpu, PROMPT0, 5, V, ENGINE_TOL);
    compare_engines("fixture prompt1", gpu, cpu, PROMPT1, 13, V, ENGINE_TOL);
    // prompts 0..3 of golden/golden.json against run.c's fp32 logits
    s = pq_st_open(pq_test_path("fixtures/stories260K/golden/golden.safetensors"), &golden);
    PQ_CHECK(s == PQ_OK, "golden.safetensors opens (%s)", pq_last_error());
    for (int k = 0; k < 4 && golden; k++) {
        char name[64];
        snprintf(name, sizeof name, "prompt%d.tokens", k);
        const pq_tensor *tt = pq_st_find(golden, name);
        snprintf(name, sizeof name, "prompt%d.logits", k);
        const pq_tensor *lt = pq_st_find(golden, name);
        if (!tt || !lt || tt->dtype != PQ_DT_I32 || lt->dtype != PQ_DT_F32) {
            PQ_CHECK(0, "golden prompt%d present", k);
            continue;
        }
        int T = (int)tt->shape[0];
        int32_t *tok = malloc((size_t)T * 4);
        float *want = malloc(lt->nbytes), *got = malloc(lt->nbytes);
        memcpy(tok, tt->data, (size_t)T * 4);
        memcpy(want, lt->data, lt->nbytes);
        pq_test_poison(got, (size_t)T * V);
        s = prefill_logits(gpu, tok, T, got);
        double err = pq_rel_l2(got, want, (size_t)T * V);
        PQ_CHECK(s == PQ_OK && err < ENGINE_TOL, "fixture prompt%d (%d tokens): GPU logits rel L2 %.2e vs golden (%s)", k,
                 T, err, s == PQ_OK ? "ok" : pq_last_error());
        char what[64];
        snprintf(what, sizeof what, "fixture prompt%d", k);
        if (k >= 2) compare_engines(what, gpu, cpu, tok, T, V, ENGINE_TOL);
        free(tok); free(want); free(got);
    }
    // bad calls: rows outside the last call, a context beyond the cache
    float row[512];
    s = pq_engine_forward(gpu, PROMPT0, 5, 0);
    if (s == PQ_OK) s = pq_engine_logits(gpu, 3, 3, row);
    PQ_CHECK(s == PQ_ERR_ARG, "logits rows past the last call refused (%s)", pq_last_error());
    s = pq_engine_forward(gpu, PROMPT0, 1, 100000);
    PQ_CHECK(s == PQ_ERR_ARG, "position past the context refused (%s)", pq_last_error());
done:
    pq_st_close(golden);
    pq_engine_free(gpu);
    pq_engine_free(cpu);
    pq_model_free(m);
}

// The loss of rows 2.. of tokens[0..n) (targets: the next token; the last
// row and row 5 not scored) on the GPU (pq_engine_nll: reduced on the
// device) against the CPU engine, within tol nats each.
static void compare_nll(const char *what, pq_engine *gpu, pq_engine *cpu, const int32_t *tok, int n, double tol) {
    int32_t *tg = malloc((size_t)n * 4);
    double *ng = malloc((size_t)n * sizeof(double)), *nc = malloc((size_t)n * sizeof(double));
    for (int i = 0; i + 1 < n; i++) tg[i] = tok[i + 1];
    tg[n - 1] = -1, tg[5] = -1;
    pq_status s = pq_engine_forward(gpu, tok, n, 0);
    if (s == PQ_OK) s = pq_engine_nll(gpu, 2, n - 2, tg + 2, ng + 2);
    pq_status s2 = pq_engine_forward(cpu, tok, n, 0);
    if (s2 == PQ_OK) s2 = pq_engine_nll(cpu, 2, n - 2, tg + 2, nc + 2);
    double worst = 0;
    int zeros = s == PQ_OK && ng[5] == 0.0 && ng[n - 1] == 0.0;
    for (int i = 2; s == PQ_OK && s2 == PQ_OK && i < n; i++) worst = fmax(worst, fabs(ng[i] - nc[i]));
    PQ_CHECK(s == PQ_OK && s2 == PQ_OK && zeros && worst < tol,
             "%s: loss of %d rows on the device vs the CPU engine: worst difference %.2e nats (limit %.0e), unscored "
             "rows 0 (%s)", what, n - 2, worst, tol, pq_last_error());
    free(tg); free(ng); free(nc);
}

// Decode steps replayed from a CUDA graph against the same steps launched
// one by one (no_graphs): the graph holds the same kernels with the same
// launch shapes (the decode attention's split count depends on the cache
// length only; the position is read from the device instead of passed), so
// the logits must be bit-identical. And the loss computed on the device
// (pq_engine_nll) against the CPU engine's on the same tokens.
static void check_graphs_and_nll(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "CUDA-graph decode vs plain launches, and the loss on the device vs the CPU");
    pq_model *m;
    pq_status s = pq_model_open(pq_test_path("fixtures/stories260K"), &m);
    PQ_CHECK(s == PQ_OK, "fixture model opens (%s)", pq_last_error());
    if (s != PQ_OK) return;
    pq_engine_params p = pq_engine_default_params();
    pq_engine *graph = NULL, *plain = NULL, *cpu = NULL;
    p.device = PQ_DEVICE_CUDA;
    s = pq_engine_create(m, &p, &graph);
    p.no_graphs = 1;
    if (s == PQ_OK) s = pq_engine_create(m, &p, &plain);
    p.device = PQ_DEVICE_CPU;
    if (s == PQ_OK) s = pq_engine_create(m, &p, &cpu);
    PQ_CHECK(s == PQ_OK, "engines built (%s)", pq_last_error());
    if (s == PQ_OK) {
        const int n = 40, V = m->cfg.vocab;
        int32_t tok[40];
        tok[0] = 1;
        for (int i = 1; i < n; i++) tok[i] = (int32_t)(pq_test_u64() % (uint64_t)V);
        size_t nl = (size_t)n * V;
        float *a = malloc(nl * 4), *b = malloc(nl * 4);
        pq_test_poison(a, nl);
        pq_test_poison(b, nl);
        pq_status sa = decode_logits(graph, tok, n, V, a), sb = decode_logits(plain, tok, n, V, b);
        PQ_CHECK(sa == PQ_OK && sb == PQ_OK && memcmp(a, b, nl * 4) == 0,
                 "%d decode steps: CUDA-graph replay == plain launches, bit for bit (%s)", n - 3, pq_last_error());
        compare_nll("fixture", graph, cpu, tok, n, 2e-2);
        free(a); free(b);
    }
    pq_engine_free(graph);
    pq_engine_free(plain);
    pq_engine_free(cpu);
    pq_model_free(m);
}

// A random model with config c, q/k/v biases when c->qkv_bias.
static pq_status random_model(const pq_config *c, pq_dense_type dt, pq_model **out) {
    PQ_TRY(pq_model_random(c, dt, pq_test_u64(), out));
    pq_model *m = *out;
    for (int l = 0; l < c->n_layers && c->qkv_bias; l++)
        for (int i = PQ_Q; i <= PQ_V; i++) {
            pq_layer *L = &m->layers[l];
            L->bias[i] = pq_alloc((size_t)L->lin[i].rows * sizeof(float));
            PQ_FAIL_IF(!L->bias[i], PQ_ERR_NOMEM, "out of memory");
            pq_test_fill(L->bias[i], (size_t)L->lin[i].rows, 0.5f);
            L->lin[i].bias = L->bias[i];
        }
    for (int l = 0; l < c->n_layers; l++) // norms that are not all ones
        for (int i = 0; i < c->hidden; i++) {
            m->layers[l].attn_norm[i] = 1.0f + 0.3f * pq_test_uniform();
            m->layers[l].mlp_norm[i] = 1.0f + 0.3f * pq_test_uniform();
        }
    return PQ_OK;
}

static void check_random_models(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "GPU engine on random models (bias, sliding window, BF16/F32, head_dim 64/128, vocab 49152)");
    pq_config qwen = {.arch = PQ_ARCH_QWEN2, .arch_name = "Qwen2ForCausalLM", .hidden = 256, .intermediate = 688,
                      .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 64, .vocab = 1000, .max_pos = 256,
                      .rms_eps = 1e-6f, .rope_theta = 1000000.0f, .tie_embeddings = 0, .qkv_bias = 1,
                      .sliding_window = 24, .bos_id = -1, .eos_id = -1};
    pq_config llama3 = {.arch = PQ_ARCH_LLAMA, .arch_name = "LlamaForCausalLM", .hidden = 256, .intermediate = 512,
                        .n_layers = 3, .n_heads = 2, .n_kv_heads = 1, .head_dim = 128, .vocab = 777, .max_pos = 256,
                        .rms_eps = 1e-5f, .rope_theta = 500000.0f, .tie_embeddings = 1, .bos_id = -1, .eos_id = -1,
                        .rope_llama3 = 1, .rope_factor = 8.0f, .rope_low_freq_factor = 1.0f,
                        .rope_high_freq_factor = 4.0f, .rope_orig_max_pos = 8192};
    // SmolLM2-135M's shapes and vocabulary (49152), 2 of its 30 layers: the
    // loss on the device over a real vocabulary
    pq_config smol = {.arch = PQ_ARCH_LLAMA, .arch_name = "LlamaForCausalLM", .hidden = 576, .intermediate = 1536,
                      .n_layers = 2, .n_heads = 9, .n_kv_heads = 3, .head_dim = 64, .vocab = 49152, .max_pos = 256,
                      .rms_eps = 1e-5f, .rope_theta = 100000.0f, .tie_embeddings = 1, .bos_id = -1, .eos_id = -1};
    struct { const pq_config *c; pq_dense_type dt; const char *what; } cases[] = {
        {&qwen, PQ_DENSE_BF16, "random Qwen2 (BF16, bias, window 24, untied head)"},
        {&llama3, PQ_DENSE_F32, "random Llama 3 (F32, hd 128, MQA, rope scaling, tied)"},
        {&smol, PQ_DENSE_F16, "random SmolLM2-135M shapes (F16, vocab 49152, 2 layers)"},
    };
    const double tols[] = {ENGINE_TOL_BF16, ENGINE_TOL, ENGINE_TOL};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        pq_model *m = NULL;
        pq_engine *gpu = NULL, *cpu = NULL;
        pq_status s = random_model(cases[k].c, cases[k].dt, &m);
        pq_engine_params p = pq_engine_default_params();
        p.max_ctx = 128;
        p.device = PQ_DEVICE_CUDA;
        if (s == PQ_OK) s = pq_engine_create(m, &p, &gpu);
        p.device = PQ_DEVICE_CPU;
        if (s == PQ_OK) s = pq_engine_create(m, &p, &cpu);
        PQ_CHECK(s == PQ_OK, "%s: engines built (%s)", cases[k].what, pq_last_error());
        if (s == PQ_OK) {
            int n = 60, V = m->cfg.vocab;
            int32_t tok[60];
            for (int i = 0; i < n; i++) tok[i] = (int32_t)(pq_test_u64() % (uint64_t)V);
            compare_engines(cases[k].what, gpu, cpu, tok, n, V, tols[k]);
            compare_nll(cases[k].what, gpu, cpu, tok, n, k == 0 ? 1e-1 : 2e-2);
        }
        pq_engine_free(gpu);
        pq_engine_free(cpu);
        pq_model_free(m);
    }
}

// The fixture quantized by pq_quantize into a temporary directory, on both
// engines: prefills of 60 tokens (dequantized panels + cuBLAS) and 13 tokens
// (GEMV passes), decode one token at a time (the fused GEMV).
static void check_packed_fixture(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "GPU engine on the quantized fixture (w4a16 g32, fp8)");
    char dir[256];
    snprintf(dir, sizeof dir, "%s/pq-cuda-test.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        PQ_CHECK(0, "mkdtemp %s", dir);
        return;
    }
    struct { const char *scheme; int group; } cases[] = {{"w4a16", 32}, {"fp8", PQ_GROUP_DEFAULT}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char out[512], what[64];
        snprintf(out, sizeof out, "%s/%s", dir, cases[k].scheme);
        snprintf(what, sizeof what, "fixture %s%s", cases[k].scheme, cases[k].group == 32 ? " g32" : "");
        pq_quantize_request qp = pq_quantize_default_request();
        qp.model = pq_test_path("fixtures/stories260K"), qp.out = out, qp.scheme.name = cases[k].scheme;
        qp.scheme.group = cases[k].group, qp.nthreads = 2;
        pq_quantize_result r;
        pq_model *m = NULL;
        pq_engine *gpu = NULL, *cpu = NULL;
        pq_status s = pq_quantize(&qp, NULL, NULL, &r);
        if (s == PQ_OK) s = pq_model_open(out, &m);
        pq_engine_params p = pq_engine_default_params();
        p.device = PQ_DEVICE_CUDA;
        if (s == PQ_OK) s = pq_engine_create(m, &p, &gpu);
        p.device = PQ_DEVICE_CPU;
        if (s == PQ_OK) s = pq_engine_create(m, &p, &cpu);
        PQ_CHECK(s == PQ_OK && m->quant.quantized, "%s: quantized, opened, engines built (%s)", what,
                 s == PQ_OK ? pq_engine_describe(gpu) : pq_last_error());
        if (s == PQ_OK) {
            int32_t tok[60];
            tok[0] = 1;
            for (int i = 1; i < 60; i++) tok[i] = (int32_t)(pq_test_u64() % (uint64_t)m->cfg.vocab);
            compare_engines(what, gpu, cpu, tok, 60, m->cfg.vocab, ENGINE_TOL_PACKED);
            compare_engines(what, gpu, cpu, PROMPT1, 13, m->cfg.vocab, ENGINE_TOL_PACKED);
        }
        pq_engine_free(gpu);
        pq_engine_free(cpu);
        pq_model_free(m);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("# could not remove %s\n", dir);
}

// --device auto with a model the CUDA backend refuses (head_dim 512 > its
// attention kernel's 256) runs on the CPU and says why.
static void check_auto_fallback(void) {
    PQ_SKIP_UNLESS_GPU(have_gpu, "--device auto falls back to the CPU for a model the GPU cannot run");
    pq_config c = {.arch = PQ_ARCH_LLAMA, .arch_name = "LlamaForCausalLM", .hidden = 512, .intermediate = 256,
                   .n_layers = 1, .n_heads = 1, .n_kv_heads = 1, .head_dim = 512, .vocab = 100, .max_pos = 64,
                   .rms_eps = 1e-5f, .rope_theta = 10000.0f, .tie_embeddings = 1, .bos_id = -1, .eos_id = -1};
    pq_model *m = NULL;
    pq_engine *e = NULL;
    pq_status s = pq_model_random(&c, PQ_DENSE_F16, pq_test_u64(), &m);
    pq_engine_params p = pq_engine_default_params();
    if (s == PQ_OK) s = pq_engine_create(m, &p, &e);
    PQ_CHECK(s == PQ_OK && pq_engine_device(e) == PQ_DEVICE_CPU && strstr(pq_engine_describe(e), "GPU not used: ") &&
                 strstr(pq_engine_describe(e), "head_dim 512"),
             "head_dim 512 with --device auto: %s (%s)", s == PQ_OK ? pq_engine_describe(e) : "", pq_last_error());
    pq_engine_free(e);
    p.device = PQ_DEVICE_CUDA;
    s = m ? pq_engine_create(m, &p, &e) : PQ_ERR_ARG;
    PQ_CHECK(s == PQ_ERR_FORMAT && e == NULL, "head_dim 512 with --device cuda fails (%s)", pq_last_error());
    pq_model_free(m);
}

int main(void) {
    pq_test_seed();
    int n = pq_cuda_device_count();
    have_gpu = n > 0;
    PQ_CHECK(n >= 0, "pq_cuda_device_count() = %d", n);
    check_no_device();
    check_embed();
    check_rmsnorm();
    check_rope();
    check_swiglu_add_convert();
    check_kv_store();
    check_nll();
    check_attention();
    check_linear();
    check_fixture();
    check_graphs_and_nll();
    check_random_models();
    check_packed_fixture();
    check_auto_fallback();
    return pq_test_done();
}
