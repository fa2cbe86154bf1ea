// The CPU engine on what the fixture lacks, against a plain double-precision
// forward pass written here from the Hugging Face modeling code (not from
// pq's kernels): small random checkpoints written to disk and opened with
// pq_model_open, one per architecture feature:
//   Qwen2    BF16, q/k/v bias, GQA, untied head, sliding window from layer 1
//            (use_sliding_window + max_window_layers)
//   Mistral  F32, sliding window in every layer, GQA
//   Llama 3  F16, llama3 rope_scaling, attention_bias (q/k/v and o_proj bias), explicit head_dim
//            (q dim 2 x hidden), one kv head, tied embeddings
// Prefill and incremental decode (through the KV cache and the window) must
// match the reference's logits: relative L2 < 1e-4 per token (fp32 sums of
// at most a few hundred terms against double: ~1e-6 expected).
#include <jansson.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "common/half.h"
#include "common/sys.h"
#include "eval/engine.h"
#include "formats/safetensors.h"
#include "tests/test.h"

#define T_TOKENS 40
#define T_PREFILL 25

typedef struct {
    const char *what, *arch, *extra; // extra: more config.json keys
    pq_dtype dt;
    int hidden, inter, layers, heads, kv, head_dim, vocab, tied;
    int bias;                        // 1: q/k/v bias (Qwen2), 2: q/k/v/o bias (Llama attention_bias)
    double theta;
    int window, window_from;         // HF semantics, for the reference
    int llama3;                      // rope_scaling factor 8, low 1, high 4, original 8192
} arch_case;

static const arch_case CASES[] = {
    {"Qwen2 (BF16, bias, GQA, untied, window 8 from layer 1)", "Qwen2ForCausalLM",
     "\"use_sliding_window\": true, \"sliding_window\": 8, \"max_window_layers\": 1,", PQ_DT_BF16, 64, 100, 3, 4, 2,
     16, 300, 0, 1, 1000000.0, 8, 1, 0},
    {"Mistral (F32, window 8 in every layer, GQA, untied)", "MistralForCausalLM", "\"sliding_window\": 8,", PQ_DT_F32,
     64, 100, 2, 4, 1, 16, 300, 0, 0, 10000.0, 8, 0, 0},
    {"Llama 3 (F16, llama3 rope scaling, attention_bias, head_dim 64 x 2 heads, MQA, tied)", "LlamaForCausalLM",
     "\"attention_bias\": true, \"head_dim\": 64, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
     "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192},",
     PQ_DT_F16, 64, 100, 2, 2, 1, 64, 300, 1, 2, 500000.0, 0, 0, 1},
};

// The reference model: every weight as the f32 value of what was stored.
typedef struct {
    const arch_case *c;
    float *embed, *head, *final_norm;
    float *w[8][7], *b[8][4], *attn_norm[8], *mlp_norm[8];
} ref_model;

static float *randn(size_t n, float scale) {
    float *x = malloc(n * sizeof *x);
    pq_test_fill(x, n, scale);
    return x;
}

// Rounds x to dt in place (the reference then reads what the file holds) and
// returns the stored bytes (malloc'd).
static void *stored(float *x, size_t n, pq_dtype dt, size_t *nbytes) {
    *nbytes = n * pq_dtype_size(dt);
    uint8_t *b = malloc(*nbytes);
    for (size_t i = 0; i < n; i++) {
        if (dt == PQ_DT_F32) memcpy(b + 4 * i, &x[i], 4);
        else {
            uint16_t h = dt == PQ_DT_F16 ? pq_f32_to_fp16(x[i]) : pq_f32_to_bf16(x[i]);
            x[i] = dt == PQ_DT_F16 ? pq_fp16_to_f32(h) : pq_bf16_to_f32(h);
            memcpy(b + 2 * i, &h, 2);
        }
    }
    return b;
}

typedef struct {
    const char *name;
    float *x;
    int rows, cols; // cols 0: a vector
} tensor_def;

// Writes dir/config.json and dir/model.safetensors for case c, filling r.
static int write_checkpoint(const char *dir, const arch_case *c, ref_model *r) {
    memset(r, 0, sizeof *r);
    r->c = c;
    int q = c->heads * c->head_dim, kv = c->kv * c->head_dim;
    const int rows[7] = {q, kv, kv, c->hidden, c->inter, c->inter, c->hidden};
    const int cols[7] = {c->hidden, c->hidden, c->hidden, q, c->hidden, c->hidden, c->inter};
    static const char *slots[7] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                   "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    tensor_def defs[128];
    char names[128][96];
    int n = 0;
#define DEF(x_, r_, c_, ...) (snprintf(names[n], sizeof names[n], __VA_ARGS__), \
                              defs[n] = (tensor_def){names[n], (x_), (r_), (c_)}, n++)
    r->embed = randn((size_t)c->vocab * c->hidden, 1.0f);
    DEF(r->embed, c->vocab, c->hidden, "model.embed_tokens.weight");
    for (int l = 0; l < c->layers; l++) {
        for (int s = 0; s < 7; s++) {
            r->w[l][s] = randn((size_t)rows[s] * cols[s], 1.0f / sqrtf((float)cols[s]));
            DEF(r->w[l][s], rows[s], cols[s], "model.layers.%d.%s.weight", l, slots[s]);
            if (c->bias && s < (c->bias == 2 ? 4 : 3)) {
                r->b[l][s] = randn((size_t)rows[s], 0.5f);
                DEF(r->b[l][s], rows[s], 0, "model.layers.%d.%s.bias", l, slots[s]);
            }
        }
        r->attn_norm[l] = randn((size_t)c->hidden, 0.3f);
        r->mlp_norm[l] = randn((size_t)c->hidden, 0.3f);
        for (int i = 0; i < c->hidden; i++) r->attn_norm[l][i] += 1, r->mlp_norm[l][i] += 1;
        DEF(r->attn_norm[l], c->hidden, 0, "model.layers.%d.input_layernorm.weight", l);
        DEF(r->mlp_norm[l], c->hidden, 0, "model.layers.%d.post_attention_layernorm.weight", l);
    }
    r->final_norm = randn((size_t)c->hidden, 0.3f);
    for (int i = 0; i < c->hidden; i++) r->final_norm[i] += 1;
    DEF(r->final_norm, c->hidden, 0, "model.norm.weight");
    r->head = r->embed;
    if (!c->tied) {
        r->head = randn((size_t)c->vocab * c->hidden, 1.0f / sqrtf((float)c->hidden));
        DEF(r->head, c->vocab, c->hidden, "lm_head.weight");
    }
#undef DEF
    char path[1200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    fprintf(f, "{\"architectures\": [\"%s\"], %s \"hidden_size\": %d, \"intermediate_size\": %d, "
               "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, "
               "\"vocab_size\": %d, \"max_position_embeddings\": 128, \"rms_norm_eps\": 1e-6, \"rope_theta\": %g, "
               "\"tie_word_embeddings\": %s, \"hidden_act\": \"silu\"}\n",
            c->arch, c->extra, c->hidden, c->inter, c->layers, c->heads, c->kv, c->vocab, c->theta,
            c->tied ? "true" : "false");
    fclose(f);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    pq_st_writer *w;
    pq_status s = pq_st_writer_create(path, &w);
    for (int i = 0; s == PQ_OK && i < n; i++) {
        int64_t shape[2] = {defs[i].rows, defs[i].cols};
        s = pq_st_writer_declare(w, defs[i].name, c->dt, defs[i].cols ? 2 : 1, shape);
    }
    if (s == PQ_OK) s = pq_st_writer_begin(w);
    for (int i = 0; s == PQ_OK && i < n; i++) {
        size_t nb;
        void *b = stored(defs[i].x, (size_t)defs[i].rows * (defs[i].cols ? defs[i].cols : 1), c->dt, &nb);
        s = pq_st_writer_put(w, defs[i].name, b, nb);
        free(b);
    }
    if (s == PQ_OK) s = pq_st_writer_commit(w, 0);
    pq_st_writer_free(w);
    if (s != PQ_OK) printf("# writing %s: %s\n", path, pq_last_error());
    return s == PQ_OK;
}

static void free_ref(ref_model *r) {
    free(r->embed);
    if (r->head != r->embed) free(r->head);
    free(r->final_norm);
    for (int l = 0; l < r->c->layers; l++) {
        for (int s = 0; s < 7; s++) free(r->w[l][s]);
        for (int s = 0; s < 4; s++) free(r->b[l][s]);
        free(r->attn_norm[l]), free(r->mlp_norm[l]);
    }
}

// ---- the reference forward (transformers' LlamaModel / MistralModel / Qwen2Model) --

static void rmsnorm(const double *x, const float *w, int n, double *y) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / n + 1e-6);
    for (int i = 0; i < n; i++) y[i] = x[i] * r * w[i];
}

// y[rows] = W x (+ b)
static void matvec(const float *W, const float *b, const double *x, int rows, int cols, double *y) {
    for (int r = 0; r < rows; r++) {
        double acc = b ? b[r] : 0;
        for (int k = 0; k < cols; k++) acc += (double)W[(size_t)r * cols + k] * x[k];
        y[r] = acc;
    }
}

// _compute_default_rope_parameters / _compute_llama3_parameters
static double inv_freq(const arch_case *c, int i) {
    double f = pow(c->theta, -2.0 * i / c->head_dim);
    if (!c->llama3) return f;
    double wavelen = 2 * M_PI / f, low_wavelen = 8192 / 1.0, high_wavelen = 8192 / 4.0;
    if (wavelen < high_wavelen) return f;
    if (wavelen > low_wavelen) return f / 8;
    double s = (8192 / wavelen - 1) / (4 - 1);
    return (1 - s) * f / 8 + s * f;
}

// rotate_half: (x_i, x_{i+d/2}) -> (x_i cos - x_{i+d/2} sin, x_{i+d/2} cos + x_i sin)
static void rope(const arch_case *c, double *x, int nheads, int pos) {
    int d = c->head_dim;
    for (int h = 0; h < nheads; h++)
        for (int i = 0; i < d / 2; i++) {
            double a = pos * inv_freq(c, i), *v = x + (size_t)h * d;
            double x0 = v[i], x1 = v[i + d / 2];
            v[i] = x0 * cos(a) - x1 * sin(a);
            v[i + d / 2] = x1 * cos(a) + x0 * sin(a);
        }
}

// logits [T][vocab] of tokens at positions 0..T-1
static void ref_forward(const ref_model *r, const int32_t *tok, int T, float *logits) {
    const arch_case *c = r->c;
    int H = c->hidden, d = c->head_dim, q = c->heads * d, kv = c->kv * d, I = c->inter;
    double *x = calloc((size_t)T * H, sizeof *x), *h = malloc(sizeof(double) * (size_t)(H > q ? H : q));
    double *Q = malloc(sizeof *Q * (size_t)T * q), *K = malloc(sizeof *K * (size_t)T * kv);
    double *V = malloc(sizeof *V * (size_t)T * kv), *att = malloc(sizeof *att * (size_t)q);
    double *o = malloc(sizeof *o * (size_t)H), *g = malloc(sizeof *g * (size_t)I), *u = malloc(sizeof *u * (size_t)I);
    double *p = malloc(sizeof *p * (size_t)T);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < H; i++) x[(size_t)t * H + i] = r->embed[(size_t)tok[t] * H + i];
    for (int l = 0; l < c->layers; l++) {
        int window = l >= c->window_from ? c->window : 0;
        for (int t = 0; t < T; t++) {
            rmsnorm(x + (size_t)t * H, r->attn_norm[l], H, h);
            matvec(r->w[l][0], r->b[l][0], h, q, H, Q + (size_t)t * q);
            matvec(r->w[l][1], r->b[l][1], h, kv, H, K + (size_t)t * kv);
            matvec(r->w[l][2], r->b[l][2], h, kv, H, V + (size_t)t * kv);
            rope(c, Q + (size_t)t * q, c->heads, t);
            rope(c, K + (size_t)t * kv, c->kv, t);
        }
        for (int t = 0; t < T; t++) {
            for (int hq = 0; hq < c->heads; hq++) {
                int hk = hq / (c->heads / c->kv);
                double m = -INFINITY, z = 0;
                for (int j = 0; j <= t; j++) { // causal; a window keeps kv_idx > q_idx - window
                    p[j] = -INFINITY;
                    if (window && j <= t - window) continue;
                    double s = 0;
                    for (int i = 0; i < d; i++) s += Q[(size_t)t * q + hq * d + i] * K[(size_t)j * kv + hk * d + i];
                    p[j] = s / sqrt((double)d);
                    m = fmax(m, p[j]);
                }
                for (int j = 0; j <= t; j++) z += p[j] == -INFINITY ? 0 : exp(p[j] - m);
                for (int i = 0; i < d; i++) {
                    double acc = 0;
                    for (int j = 0; j <= t; j++)
                        if (p[j] != -INFINITY) acc += exp(p[j] - m) / z * V[(size_t)j * kv + hk * d + i];
                    att[hq * d + i] = acc;
                }
            }
            matvec(r->w[l][3], r->b[l][3], att, H, q, o);
            for (int i = 0; i < H; i++) x[(size_t)t * H + i] += o[i];
        }
        for (int t = 0; t < T; t++) {
            rmsnorm(x + (size_t)t * H, r->mlp_norm[l], H, h);
            matvec(r->w[l][4], NULL, h, I, H, g);
            matvec(r->w[l][5], NULL, h, I, H, u);
            for (int i = 0; i < I; i++) g[i] = g[i] / (1 + exp(-g[i])) * u[i];
            matvec(r->w[l][6], NULL, g, H, I, o);
            for (int i = 0; i < H; i++) x[(size_t)t * H + i] += o[i];
        }
    }
    double *lg = malloc(sizeof *lg * (size_t)c->vocab);
    for (int t = 0; t < T; t++) {
        rmsnorm(x + (size_t)t * H, r->final_norm, H, h);
        matvec(r->head, NULL, h, c->vocab, H, lg);
        for (int v = 0; v < c->vocab; v++) logits[(size_t)t * c->vocab + v] = (float)lg[v];
    }
    free(x), free(h), free(Q), free(K), free(V), free(att), free(o), free(g), free(u), free(p), free(lg);
}

static void check_case(const arch_case *c, const char *root, int k) {
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/case%d", root, k);
    mkdir(dir, 0755);
    ref_model r;
    if (!write_checkpoint(dir, c, &r)) {
        PQ_CHECK(0, "%s: checkpoint written", c->what);
        return;
    }
    int32_t tok[T_TOKENS];
    for (int t = 0; t < T_TOKENS; t++) tok[t] = (int32_t)(pq_test_u64() % (uint64_t)c->vocab);
    size_t nl = (size_t)T_TOKENS * c->vocab;
    float *want = malloc(nl * 4), *got = malloc(nl * 4);
    ref_forward(&r, tok, T_TOKENS, want);

    pq_model *m = NULL;
    pq_engine *e = NULL;
    pq_status s = pq_model_open(dir, &m);
    pq_engine_params p = pq_engine_default_params();
    p.device = PQ_DEVICE_CPU, p.max_ctx = 64;
    if (s == PQ_OK) s = pq_engine_create(m, &p, &e);
    PQ_CHECK(s == PQ_OK && m->cfg.window_from_layer == c->window_from &&
                 (c->window == 0 || m->cfg.sliding_window == c->window) && m->cfg.qkv_bias == (c->bias > 0) &&
                 m->cfg.o_bias == (c->bias == 2),
             "%s: opens, config as written (%s)", c->what, s ? pq_last_error() : "ok");
    if (s == PQ_OK) {
        pq_test_poison(got, nl);
        s = pq_engine_forward(e, tok, T_TOKENS, 0);
        if (s == PQ_OK) s = pq_engine_logits(e, 0, T_TOKENS, got);
        double worst = 0;
        for (int t = 0; t < T_TOKENS; t++)
            worst = fmax(worst, pq_rel_l2(got + (size_t)t * c->vocab, want + (size_t)t * c->vocab, c->vocab));
        PQ_CHECK(s == PQ_OK && worst < 1e-4, "%s: prefill of %d tokens vs the double reference: worst rel L2 %.2e",
                 c->what, T_TOKENS, worst);
        // prefill a prefix, then one token at a time through the KV cache
        pq_test_poison(got, nl);
        s = pq_engine_forward(e, tok, T_PREFILL, 0);
        if (s == PQ_OK) s = pq_engine_logits(e, 0, T_PREFILL, got);
        for (int t = T_PREFILL; s == PQ_OK && t < T_TOKENS; t++) {
            s = pq_engine_forward(e, tok + t, 1, t);
            if (s == PQ_OK) s = pq_engine_logits(e, 0, 1, got + (size_t)t * c->vocab);
        }
        worst = 0;
        for (int t = 0; t < T_TOKENS; t++)
            worst = fmax(worst, pq_rel_l2(got + (size_t)t * c->vocab, want + (size_t)t * c->vocab, c->vocab));
        PQ_CHECK(s == PQ_OK && worst < 1e-4,
                 "%s: prefill %d + decode %d one at a time vs the reference: worst rel L2 %.2e", c->what, T_PREFILL,
                 T_TOKENS - T_PREFILL, worst);
    }
    pq_engine_free(e);
    pq_model_free(m);
    free(want), free(got);
    free_ref(&r);
}

int main(void) {
    pq_test_seed();
    char root[256];
    snprintf(root, sizeof root, "%s/pq-archs.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(root)) {
        PQ_CHECK(0, "mkdtemp %s", root);
        return pq_test_done();
    }
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) check_case(&CASES[k], root, (int)k);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) printf("# could not remove %s\n", root);
    return pq_test_done();
}
