// tests/test_mixed.c — --target-bpw: the menu, the knapsack against brute
// force, several config groups written and read back, and a mixed run of
// the fixture (the plan followed, vLLM's fused-layer rule kept, the
// checkpoint loads, the budget held).
#include "tests/test.h"

#include <jansson.h>
#include <unistd.h>

#include "common/sys.h"
#include "formats/fileio.h"
#include "formats/packed.h"
#include "quant/mixed.h"
#include "quant/quantize.h"

static void test_menu(void) {
    pq_mix_option o[PQ_MIX_MAX_MENU];
    int n = 0;
    pq_status s = pq_mix_menu_parse("w4g128,w4g32a,w8,w3g64,fp16", o, &n);
    PQ_CHECK(s == PQ_OK && n == 5 && o[0].scheme.bits == 4 && o[0].scheme.group == 128 && o[0].scheme.sym &&
                 !o[1].scheme.sym && o[1].scheme.group == 32 && o[2].scheme.id == PQ_SCHEME_W8A16 &&
                 o[2].scheme.group == PQ_GROUP_CHANNEL && o[3].scheme.bits == 3 && o[4].dense,
             "menu w4g128,w4g32a,w8,w3g64,fp16 parsed (%s)", s == PQ_OK ? "" : pq_last_error());
    const char *bad[] = {"w4g100", "w9", "x4", "w4g32,w4g32", "w4g32b", "", "w4,,w8", "fp32"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s = pq_mix_menu_parse(bad[i], o, &n);
        PQ_CHECK(s == PQ_ERR_ARG && strstr(pq_last_error(), "--menu"), "menu '%s' refused: %s", bad[i],
                 pq_last_error());
    }
}

// The least loss over every assignment within budget (brute force), or INFINITY.
static double brute(const pq_mix_table *t, double budget) {
    int U = t->n_units, K = t->n_opts, c[8] = {0};
    double best = INFINITY;
    for (;;) {
        double b = 0, l = 0;
        for (int u = 0; u < U; u++) b += t->bits[u * K + c[u]], l += t->loss[u * K + c[u]];
        if (b <= budget && l < best) best = l;
        int u = 0;
        while (u < U && ++c[u] == K) c[u++] = 0;
        if (u == U) return best;
    }
}

static void test_knapsack(void) {
    pq_mix_option o[PQ_MIX_MAX_MENU];
    int n;
    PQ_ASSERT(pq_mix_menu_parse("w4g128,w4g32,w8,fp16", o, &n) == PQ_OK);
    int worst_ok = 1, bounds_ok = 1;
    for (int trial = 0; trial < 200; trial++) {
        pq_mix_table t;
        int U = 6;
        PQ_ASSERT(pq_mix_table_init(&t, U, o, n) == PQ_OK);
        double W = 0;
        for (int u = 0; u < U; u++) {
            t.weights[u] = 1000 + (long long)(pq_test_u64() % 5000);
            W += (double)t.weights[u];
            double sens = exp(3 * pq_test_uniform());
            const double bits[] = {4.25, 4.5, 8.1, 16}, loss[] = {1, 0.7, 0.01, 0};
            for (int k = 0; k < n; k++) {
                t.bits[u * n + k] = bits[k] * (double)t.weights[u];
                t.loss[u * n + k] = sens * loss[k] * (1 + 0.2 * pq_test_uniform());
            }
        }
        // budgets from the cheapest plan's (4.25) up, some just above it
        double target = 4.25 + (trial % 4 ? 5 * (pq_test_uniform() + 1) / 2 : 1e-3 * (pq_test_uniform() + 1)), bpw,
               loss;
        int choice[8];
        if (pq_mix_choose(&t, target, choice, &bpw, &loss) != PQ_OK) {
            printf("    target %g: %s\n", target, pq_last_error());
            worst_ok = 0;
            pq_mix_table_free(&t);
            continue;
        }
        double least = 0, b = 0;
        for (int u = 0; u < U; u++) least += t.bits[u * n]; // item 0 (w4g128) is every unit's cheapest
        double step = (target * W - least) / PQ_MIX_STEPS;
        for (int u = 0; u < U; u++) b += t.bits[u * n + choice[u]];
        // feasible; no worse than the best plan with one step per unit less budget (the rounding)
        int good = b <= target * W * (1 + 1e-12) && fabs(b / W - bpw) < 1e-9 &&
                   loss >= brute(&t, target * W) - 1e-12 && loss <= brute(&t, target * W - U * step) + 1e-12;
        if (!good) printf("    target %g: bpw %g loss %g, brute %g / %g\n", target, bpw, loss, brute(&t, target * W),
                          brute(&t, target * W - U * step));
        bounds_ok &= good;
        pq_mix_table_free(&t);
    }
    PQ_CHECK(worst_ok && bounds_ok, "knapsack (200 random 6-unit tables): within budget, optimal up to its step");
    pq_mix_table t;
    PQ_ASSERT(pq_mix_table_init(&t, 2, o, n) == PQ_OK);
    for (int i = 0; i < 2 * n; i++) t.bits[i] = 4.25 * 10, t.weights[i / n] = 10;
    int choice[2];
    double bpw, loss;
    pq_status s = pq_mix_choose(&t, 4.0, choice, &bpw, &loss);
    PQ_CHECK(s == PQ_ERR_ARG && strstr(pq_last_error(), "4.2500 bits per weight"), "a budget under the cheapest "
             "items is refused: %s", pq_last_error());
    pq_mix_table_free(&t);
}

static void test_groups(void) {
    pq_scheme a, b;
    PQ_ASSERT(pq_scheme_make("w4a16", 32, 0, &a) == PQ_OK && pq_scheme_make("w8a16", PQ_GROUP_DEFAULT, 1, &b) == PQ_OK);
    char *ta[] = {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj"};
    char *tb[] = {"re:model\\.layers\\.1\\..*", "Linear"};
    pq_packed_group g[2] = {{.scheme = a, .format = "pack-quantized", .targets = ta, .n_targets = 2},
                            {.scheme = b, .format = "pack-quantized", .targets = tb, .n_targets = 2}};
    char *ign[] = {"lm_head", "model.layers.0.mlp.down_proj"}, *cfg = NULL;
    const char *src = "{\"architectures\": [\"LlamaForCausalLM\"]}";
    pq_status s = pq_packed_config_json_groups(src, strlen(src), "t", g, 2, ign, 2, &cfg);
    pq_packed_info info;
    if (s == PQ_OK) s = pq_packed_info_parse(cfg, strlen(cfg), "t", &info);
    PQ_CHECK(s == PQ_OK && info.n_groups == 2 && !strcmp(info.format, "pack-quantized"),
             "two config groups written and read back (%s)", s == PQ_OK ? "" : pq_last_error());
    if (s == PQ_OK) {
        const pq_scheme *q = pq_packed_scheme_of(&info, "model.layers.0.self_attn.q_proj"),
                        *l1 = pq_packed_scheme_of(&info, "model.layers.1.mlp.up_proj"),
                        *o = pq_packed_scheme_of(&info, "model.layers.2.self_attn.o_proj");
        PQ_CHECK(q && q->bits == 4 && q->group == 32 && !q->sym && l1 && l1->bits == 8 && o && o->bits == 8 &&
                     pq_packed_ignored(&info, "model.layers.0.mlp.down_proj") && !pq_packed_ignored(&info, "x"),
                 "a module's scheme: its name first, a pattern, then Linear; the ignore list");
        pq_packed_info_free(&info);
    }
    free(cfg);
    // groups of different formats need their own "format"
    const char *mp = "{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": "
                     "\"mixed-precision\", \"config_groups\": {\"g\": {\"targets\": [\"Linear\"], \"weights\": "
                     "{\"num_bits\": 4, \"type\": \"int\", \"symmetric\": true, \"strategy\": \"channel\"}}}}}";
    s = pq_packed_info_parse(mp, strlen(mp), "t", &info);
    PQ_CHECK(s == PQ_ERR_FORMAT && strstr(pq_last_error(), "no \"format\""), "mixed-precision without a group "
             "format is refused: %s", pq_last_error());
    const char *cls = "{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": "
                      "\"pack-quantized\", \"config_groups\": {\"g\": {\"targets\": [\"LlamaMLP\"], \"weights\": "
                      "{\"num_bits\": 4, \"type\": \"int\", \"symmetric\": true, \"strategy\": \"channel\"}}}}}";
    s = pq_packed_info_parse(cls, strlen(cls), "t", &info);
    PQ_CHECK(s == PQ_ERR_FORMAT && strstr(pq_last_error(), "targets[0]"), "a class name other than Linear is "
             "refused: %s", pq_last_error());
}

// A mixed run of the fixture, small calibration.
static void test_fixture_run(void) {
    char dir[] = "/tmp/pq-test-mixed.XXXXXX";
    PQ_ASSERT(mkdtemp(dir));
    char out[256], report[256];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(report, sizeof report, "%s/r.svg", dir);
    pq_quantize_request q = pq_quantize_default_request();
    q.model = pq_test_path("fixtures/stories260K"), q.out = out, q.method = "gptq", q.nthreads = 2;
    q.calib.path = pq_test_path("data/c4_validation_2k.txt"), q.calib.nsamples = 6, q.calib.seqlen = 128;
    q.target_bpw = 4.6, q.menu = "w4g128,w4g32a,w8,fp16", q.kl_windows = 2, q.report = report;
    q.given = PQ_ARG_CALIB | PQ_ARG_NSAMPLES | PQ_ARG_SEQLEN;
    q.device = PQ_DEVICE_CPU;
    pq_quantize_result r;
    pq_status s = pq_quantize(&q, NULL, NULL, &r);
    PQ_CHECK(s == PQ_OK && r.bits_per_weight <= 4.6 && r.bits_per_weight > 4.2 && !strncmp(r.scheme, "mixed:", 6),
             "mixed gptq run: %s at %.4f bits per weight (%s)", r.scheme, r.bits_per_weight,
             s == PQ_OK ? "" : pq_last_error());
    if (s != PQ_OK) return;
    pq_model *m;
    s = pq_model_open(out, &m);
    PQ_CHECK(s == PQ_OK, "the mixed checkpoint loads (%s)", s == PQ_OK ? "" : pq_last_error());
    if (s == PQ_OK) {
        int fused = 1, kinds = 0;
        unsigned seen = 0;
        for (int l = 0; l < m->cfg.n_layers; l++) {
            const pq_layer *L = &m->layers[l];
            for (int k = 0; k < PQ_NLINEAR; k++) {
                const pq_linear *x = &L->lin[k];
                unsigned key = x->fmt == PQ_W_DENSE ? 1u : 1u << (x->q.bits + (x->q.zeros ? 8 : 0) + (x->q.group < x->cols ? 16 : 0));
                kinds += !(seen & key), seen |= key;
            }
            // q/k/v and gate/up as vLLM fuses them: one scheme each
            fused &= L->lin[PQ_Q].fmt == L->lin[PQ_K].fmt && L->lin[PQ_K].fmt == L->lin[PQ_V].fmt &&
                     L->lin[PQ_GATE].fmt == L->lin[PQ_UP].fmt;
            if (L->lin[PQ_Q].fmt == PQ_W_QPACK)
                fused &= L->lin[PQ_Q].q.bits == L->lin[PQ_V].q.bits && !L->lin[PQ_Q].q.zeros == !L->lin[PQ_K].q.zeros;
        }
        PQ_CHECK(fused && kinds >= 2, "the plan uses %d kinds of linears; q/k/v and gate/up share one", kinds);
        pq_model_free(m);
    }
    char path[300], *text;
    size_t len;
    snprintf(path, sizeof path, "%s/pq.json", out);
    json_t *doc = NULL;
    if (pq_file_read(path, 1 << 24, &text, &len) == PQ_OK) {
        doc = json_loadb(text, len, 0, NULL);
        free(text);
    }
    json_t *mix = json_object_get(doc, "mixed"), *units = json_object_get(mix, "units");
    PQ_CHECK(json_array_size(units) == 20 && json_array_size(json_object_get(mix, "measured")) == 5 &&
                 !strcmp(json_string_value(json_object_get(doc, "scheme")), "mixed"),
             "pq.json records the table (20 units), the choice and the measured points");
    json_decref(doc);
    PQ_CHECK(pq_file_read(report, 1 << 24, &text, &len) == PQ_OK && strstr(text, "<svg") && strstr(text, "mixed"),
             "--report r.svg written");
    free(text);
    unlink(report);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    PQ_ASSERT(system(cmd) == 0);
}

int main(void) {
    pq_test_seed();
    test_menu();
    test_knapsack();
    test_groups();
    test_fixture_run();
    return pq_test_done();
}
