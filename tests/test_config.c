// config.json parsing: the fixture, the three architectures, and refusals.
#include <string.h>

#include "formats/config.h"
#include "tests/test.h"

static pq_status parse(const char *json, pq_config *c) { return pq_config_parse(json, strlen(json), "cfg.json", c); }

static void check_fixture(void) {
    pq_config c;
    pq_status s = pq_config_load(pq_test_path("fixtures/stories260K/config.json"), &c);
    PQ_CHECK(s == PQ_OK, "fixture config.json loads (%s)", pq_last_error());
    PQ_CHECK(c.arch == PQ_ARCH_LLAMA && c.hidden == 64 && c.intermediate == 172 && c.n_layers == 5 &&
                 c.n_heads == 8 && c.n_kv_heads == 4 && c.head_dim == 8 && c.vocab == 512 && c.max_pos == 512,
             "fixture sizes");
    PQ_CHECK(c.tie_embeddings && !c.qkv_bias && c.rms_eps == 1e-5f && c.rope_theta == 10000.0f && !c.rope_llama3,
             "fixture flags");
    PQ_CHECK(pq_config_param_count(&c) == 260032, "fixture parameter count 260032 (got %lld)",
             pq_config_param_count(&c));
}

static void check_architectures(void) {
    pq_config c;
    const char *qwen = "{\"architectures\":[\"Qwen2ForCausalLM\"],\"hidden_size\":896,\"intermediate_size\":4864,"
                       "\"num_hidden_layers\":24,\"num_attention_heads\":14,\"num_key_value_heads\":2,"
                       "\"vocab_size\":151936,\"max_position_embeddings\":32768,\"rms_norm_eps\":1e-6,"
                       "\"rope_theta\":1000000.0,\"tie_word_embeddings\":true,\"sliding_window\":32768,"
                       "\"use_sliding_window\":false,\"hidden_act\":\"silu\"}";
    PQ_CHECK(parse(qwen, &c) == PQ_OK && c.arch == PQ_ARCH_QWEN2 && c.qkv_bias && c.head_dim == 64 &&
                 c.sliding_window == 0 && c.n_kv_heads == 2,
             "Qwen2: q/k/v bias, head_dim derived, sliding window disabled");
    const char *llama3 = "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":2048,\"intermediate_size\":8192,"
                         "\"num_hidden_layers\":16,\"num_attention_heads\":32,\"num_key_value_heads\":8,"
                         "\"head_dim\":64,\"vocab_size\":128256,\"max_position_embeddings\":131072,"
                         "\"rope_theta\":500000.0,\"bos_token_id\":128000,\"eos_token_id\":[128001,128008],"
                         "\"rope_scaling\":{\"factor\":32.0,\"high_freq_factor\":4.0,\"low_freq_factor\":1.0,"
                         "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"}}";
    PQ_CHECK(parse(llama3, &c) == PQ_OK && c.rope_llama3 && c.rope_factor == 32.0f &&
                 c.rope_orig_max_pos == 8192 && c.bos_id == 128000 && c.eos_id == 128001,
             "Llama 3.2: llama3 rope_scaling, eos list");
    const char *mistral = "{\"architectures\":[\"MistralForCausalLM\"],\"hidden_size\":4096,\"intermediate_size\":14336,"
                          "\"num_hidden_layers\":32,\"num_attention_heads\":32,\"num_key_value_heads\":8,"
                          "\"vocab_size\":32000,\"sliding_window\":4096}";
    PQ_CHECK(parse(mistral, &c) == PQ_OK && c.arch == PQ_ARCH_MISTRAL && c.sliding_window == 4096 &&
                 pq_config_window(&c, 0) == 4096 && pq_config_window(&c, 31) == 4096,
             "Mistral: sliding window in every layer");
    // Qwen2's window as transformers applies it: only with use_sliding_window
    // (default false), and to layers >= max_window_layers or as layer_types says
    static const struct { const char *extra; int window, from; const char *what; } qw[] = {
        {",\"sliding_window\":64", 0, 0, "no use_sliding_window: off (transformers' default)"},
        {",\"sliding_window\":64,\"use_sliding_window\":true", 64, 28, "use_sliding_window: layers >= max_window_layers (default 28)"},
        {",\"sliding_window\":64,\"use_sliding_window\":true,\"max_window_layers\":3", 64, 3, "use_sliding_window, max_window_layers 3"},
        {",\"sliding_window\":64,\"use_sliding_window\":true,\"layer_types\":[\"full_attention\",\"sliding_attention\",\"sliding_attention\","
         "\"sliding_attention\"]", 64, 1, "layer_types: sliding from layer 1"},
        {",\"use_sliding_window\":true,\"sliding_window\":null", 0, 0, "use_sliding_window, window null: off"},
    };
    for (size_t i = 0; i < sizeof qw / sizeof qw[0]; i++) {
        char json[1024];
        snprintf(json, sizeof json, "{\"architectures\":[\"Qwen2ForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":172,"
                 "\"num_hidden_layers\":4,\"num_attention_heads\":8,\"vocab_size\":512%s}",
                 qw[i].extra);
        pq_status s = parse(json, &c);
        int ok = s == PQ_OK && c.sliding_window == qw[i].window;
        for (int l = 0; ok && l < 4; l++) ok = pq_config_window(&c, l) == (l >= qw[i].from ? qw[i].window : 0);
        PQ_CHECK(ok, "Qwen2 %s: window %d from layer %d (%s)", qw[i].what, c.sliding_window, c.window_from_layer,
                 s ? pq_last_error() : "ok");
    }
    const char *mixed = "{\"architectures\":[\"Qwen2ForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":172,"
                        "\"num_hidden_layers\":2,\"num_attention_heads\":8,\"vocab_size\":512,\"sliding_window\":64,"
                        "\"use_sliding_window\":true,\"layer_types\":[\"sliding_attention\",\"full_attention\"]}";
    PQ_CHECK(parse(mixed, &c) == PQ_ERR_FORMAT && strstr(pq_last_error(), "full attention in layer 1 after sliding"),
             "Qwen2 layer_types with full attention after sliding layers refused: %s", pq_last_error());
}

static void check_refusals(void) {
    static const struct { const char *json, *needle, *what; } bad[] = {
        {"{\"architectures\":[\"GPT2LMHeadModel\"]}", "unsupported architecture \"GPT2LMHeadModel\"", "unknown architecture"},
        {"{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64", "invalid JSON", "truncated JSON"},
        {"[1,2]", "top level must be a JSON object", "not an object"},
        {"{\"hidden_size\":64}", "missing \"architectures\"", "no architectures"},
        {"{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":\"64\"}", "\"hidden_size\" must be an integer", "string size"},
        {"{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":172,\"num_hidden_layers\":5,"
         "\"num_attention_heads\":8,\"num_key_value_heads\":3,\"vocab_size\":512}", "not a multiple", "bad GQA"},
        {"{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":-4}", "out of range", "negative size"},
        {"{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":172,\"num_hidden_layers\":5,"
         "\"num_attention_heads\":8,\"vocab_size\":512,\"hidden_act\":\"gelu\"}", "unsupported hidden_act", "gelu"},
        {"{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":172,\"num_hidden_layers\":5,"
         "\"num_attention_heads\":8,\"vocab_size\":512,\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4}}",
         "rope type \"yarn\"", "yarn rope"},
        {"{\"architectures\":[\"LlamaForCausalLM\"],\"architectures\":[\"LlamaForCausalLM\"]}", "invalid JSON", "duplicate key"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pq_config c;
        pq_status s = parse(bad[i].json, &c);
        PQ_CHECK(s == PQ_ERR_FORMAT && strstr(pq_last_error(), "cfg.json") && strstr(pq_last_error(), bad[i].needle),
                 "refused: %s (%s)", bad[i].what, pq_last_error());
    }
    pq_config c;
    PQ_CHECK(pq_config_load("/nonexistent/config.json", &c) == PQ_ERR_IO &&
                 strstr(pq_last_error(), "/nonexistent/config.json"),
             "missing file names the path (%s)", pq_last_error());
}

// issue 10 item 4: a missing required field must not silently default.
// llama3 rope_scaling needs all four of its numbers (transformers raises
// KeyError); transformers 5 writes rope_theta and the scaling into
// "rope_parameters"; optional fields take transformers' per-architecture
// defaults; every field is type-checked.
#define BASE "\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":172," \
             "\"num_hidden_layers\":2,\"num_attention_heads\":8,\"vocab_size\":512"
static void check_required_fields(void) {
    static const char *const llama3_keys[] = {"factor", "low_freq_factor", "high_freq_factor",
                                              "original_max_position_embeddings"};
    static const char *const llama3_vals[] = {"8.0", "1.0", "4.0", "8192"};
    for (int drop = 0; drop < 4; drop++) {
        char json[1024], rs[512] = "\"rope_type\":\"llama3\"";
        for (int k = 0; k < 4; k++)
            if (k != drop)
                snprintf(rs + strlen(rs), sizeof rs - strlen(rs), ",\"%s\":%s", llama3_keys[k], llama3_vals[k]);
        snprintf(json, sizeof json, "{" BASE ",\"max_position_embeddings\":131072,\"rope_scaling\":{%s}}", rs);
        pq_config c;
        pq_status s = parse(json, &c);
        PQ_CHECK(s == PQ_ERR_FORMAT && strstr(pq_last_error(), llama3_keys[drop]) && strstr(pq_last_error(), "missing"),
                 "llama3 rope_scaling without %s refused (%s; factor %g)", llama3_keys[drop],
                 s ? pq_last_error() : "accepted", (double)c.rope_factor);
    }
    static const struct { const char *extra, *needle, *what; } bad[] = {
        {",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":\"8\",\"low_freq_factor\":1,\"high_freq_factor\":4,"
         "\"original_max_position_embeddings\":8192}", "factor\" must be a number", "llama3 factor as a string"},
        {",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8,\"low_freq_factor\":1,\"high_freq_factor\":4,"
         "\"original_max_position_embeddings\":8192.5}", "must be an integer", "llama3 original_max_position_embeddings 8192.5"},
        {",\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":2}", "rope type \"linear\"", "linear rope refused by name"},
        {",\"rope_scaling\":{\"rope_type\":\"dynamic\",\"factor\":2}", "rope type \"dynamic\"", "dynamic rope refused by name"},
        {",\"rope_scaling\":{\"factor\":2}", "no \"rope_type\"", "rope_scaling without a type"},
        {",\"rope_scaling\":[1]", "must be an object", "rope_scaling as a list"},
        {",\"rope_parameters\":{\"rope_type\":\"yarn\",\"factor\":4,\"original_max_position_embeddings\":4096}",
         "rope type \"yarn\"", "rope_parameters yarn refused by name"},
        {",\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"default\"},\"sliding_attention\":{\"rope_type\":\"default\"}}",
         "full_attention\": RoPE parameters per layer type", "per-layer-type rope_parameters refused"},
        {",\"partial_rotary_factor\":0.5", "partial_rotary_factor", "partial rotary factor (RoPE on half of head_dim)"},
        {",\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000,\"partial_rotary_factor\":0.5}",
         "partial_rotary_factor", "partial rotary factor inside rope_parameters"},
        {",\"mlp_bias\":\"true\"", "\"mlp_bias\" must be true or false", "mlp_bias as a string"},
        {",\"mlp_bias\":true", "mlp_bias", "mlp_bias true"},
        {",\"hidden_act\":5", "\"hidden_act\" must be a string", "hidden_act as a number"},
        {",\"torch_dtype\":16", "\"torch_dtype\" must be a string", "torch_dtype as a number"},
        {",\"bos_token_id\":\"1\"", "must be a token id", "bos_token_id as a string"},
        {",\"eos_token_id\":[2,\"x\"]", "must be a token id", "eos_token_id list with a string"},
        {",\"rope_theta\":0.5", "out of range", "rope_theta below 1"},
        {",\"rms_norm_eps\":-1e-6", "out of range", "negative rms_norm_eps"},
        {",\"num_key_value_heads\":16", "not a multiple", "more kv heads than heads"},
        {",\"head_dim\":7", "must be even", "odd head_dim"},
        {",\"tie_word_embeddings\":1", "must be true or false", "tie_word_embeddings as 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char json[1024];
        snprintf(json, sizeof json, "{" BASE "%s}", bad[i].extra);
        pq_config c;
        pq_status s = parse(json, &c);
        PQ_CHECK(s == PQ_ERR_FORMAT && strstr(pq_last_error(), bad[i].needle), "refused: %s (%s)", bad[i].what,
                 s ? pq_last_error() : "accepted");
    }
    // transformers 5 writes rope_theta and the llama3 scaling into rope_parameters
    pq_config c;
    const char *v5 = "{" BASE ",\"max_position_embeddings\":131072,\"rope_parameters\":{\"factor\":32.0,"
                     "\"high_freq_factor\":4.0,\"low_freq_factor\":1.0,\"original_max_position_embeddings\":8192,"
                     "\"rope_theta\":500000.0,\"rope_type\":\"llama3\"}}";
    pq_status s = parse(v5, &c);
    PQ_CHECK(s == PQ_OK && c.rope_theta == 500000.0f && c.rope_llama3 && c.rope_factor == 32.0f &&
                 c.rope_orig_max_pos == 8192,
             "transformers 5 rope_parameters: theta %g, llama3 factor %g (%s)", (double)c.rope_theta,
             (double)c.rope_factor, s ? pq_last_error() : "ok");
    const char *v5d = "{" BASE ",\"rope_parameters\":{\"rope_theta\":1000000.0,\"rope_type\":\"default\"}}";
    s = parse(v5d, &c);
    PQ_CHECK(s == PQ_OK && c.rope_theta == 1000000.0f && !c.rope_llama3, "transformers 5 default rope_parameters: theta %g",
             (double)c.rope_theta);
    // optional fields default as transformers' config classes do
    static const struct { const char *arch; int max_pos, window; } dflt[] = {
        {"LlamaForCausalLM", 2048, 0}, {"MistralForCausalLM", 131072, 4096}, {"Qwen2ForCausalLM", 32768, 0}};
    for (int i = 0; i < 3; i++) {
        char json[512];
        snprintf(json, sizeof json, "{\"architectures\":[\"%s\"],\"hidden_size\":64,\"intermediate_size\":172,"
                 "\"num_hidden_layers\":2,\"num_attention_heads\":8,\"vocab_size\":512}", dflt[i].arch);
        s = parse(json, &c);
        PQ_CHECK(s == PQ_OK && c.max_pos == dflt[i].max_pos && c.sliding_window == dflt[i].window &&
                     c.rope_theta == 10000.0f && c.rms_eps == 1e-6f,
                 "%s defaults: max_position_embeddings %d (want %d), sliding_window %d (want %d)", dflt[i].arch,
                 c.max_pos, dflt[i].max_pos, c.sliding_window, dflt[i].window);
    }
}

int main(void) {
    check_fixture();
    check_architectures();
    check_refusals();
    check_required_fields();
    return pq_test_done();
}
