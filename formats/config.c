#include "config.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

#include "formats/fileio.h"

typedef struct {
    const char *name;
    pq_arch arch;
    int qkv_bias;  // the architecture always has q/k/v bias
} arch_entry;

static const arch_entry ARCHS[] = {
    {"LlamaForCausalLM", PQ_ARCH_LLAMA, 0},
    {"MistralForCausalLM", PQ_ARCH_MISTRAL, 0},
    {"Qwen2ForCausalLM", PQ_ARCH_QWEN2, 1},
};

// Reads an integer field; absent -> dflt (or an error when dflt < -1 marks it required).
#define REQUIRED (-2)
static pq_status get_int(json_t *root, const char *name, const char *key, long long dflt,
                         long long lo, long long hi, int *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        PQ_FAIL_IF(dflt == REQUIRED, PQ_ERR_FORMAT, "%s: missing \"%s\"", name, key);
        *out = (int)dflt;
        return PQ_OK;
    }
    long long x;
    if (json_is_integer(v)) x = json_integer_value(v);
    else if (json_is_real(v) && fabs(json_real_value(v)) < 9e15 && json_real_value(v) == floor(json_real_value(v)))
        x = (long long)json_real_value(v); // 2048.0 is accepted as 2048
    else return PQ_FAIL(PQ_ERR_FORMAT, "%s: \"%s\" must be an integer", name, key);
    PQ_FAIL_IF(x < lo || x > hi, PQ_ERR_FORMAT, "%s: \"%s\" = %lld out of range [%lld, %lld]",
               name, key, x, lo, hi);
    *out = (int)x;
    return PQ_OK;
}

static pq_status get_float(json_t *root, const char *name, const char *key, double dflt,
                           double lo, double hi, float *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) { *out = (float)dflt; return PQ_OK; }
    PQ_FAIL_IF(!json_is_number(v), PQ_ERR_FORMAT, "%s: \"%s\" must be a number", name, key);
    double x = json_number_value(v);
    PQ_FAIL_IF(!(x >= lo && x <= hi), PQ_ERR_FORMAT, "%s: \"%s\" = %g out of range [%g, %g]",
               name, key, x, lo, hi);
    *out = (float)x;
    return PQ_OK;
}

static pq_status get_bool(json_t *root, const char *name, const char *key, int dflt, int *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) { *out = dflt; return PQ_OK; }
    PQ_FAIL_IF(!json_is_boolean(v), PQ_ERR_FORMAT, "%s: \"%s\" must be true or false", name, key);
    *out = json_is_true(v);
    return PQ_OK;
}

// The sliding window, as transformers reads it: Mistral's "sliding_window"
// applies to every layer (null: none); Qwen2's only with
// "use_sliding_window" (default false) and to layers >= "max_window_layers"
// (default 28), or to the layers "layer_types" marks "sliding_attention"
// (pq runs the layout full..., sliding...; another is refused by name).
static pq_status parse_window(json_t *root, const char *name, pq_config *c) {
    int use_sw = c->arch != PQ_ARCH_QWEN2;
    if (c->arch == PQ_ARCH_QWEN2) PQ_TRY(get_bool(root, name, "use_sliding_window", 0, &use_sw));
    PQ_TRY(get_int(root, name, "sliding_window", 0, 0, 1 << 24, &c->sliding_window));
    c->window_from_layer = 0;
    if (!use_sw || c->sliding_window == 0) {
        c->sliding_window = 0;
        return PQ_OK;
    }
    if (c->arch != PQ_ARCH_QWEN2) return PQ_OK;
    PQ_TRY(get_int(root, name, "max_window_layers", 28, 0, 1 << 20, &c->window_from_layer));
    json_t *types = json_object_get(root, "layer_types");
    if (!types || json_is_null(types)) return PQ_OK;
    PQ_FAIL_IF(!json_is_array(types) || (int)json_array_size(types) != c->n_layers, PQ_ERR_FORMAT,
               "%s: \"layer_types\" must be an array of num_hidden_layers (%d) strings", name, c->n_layers);
    int first = c->n_layers;
    for (int l = 0; l < c->n_layers; l++) {
        const char *t = json_string_value(json_array_get(types, (size_t)l));
        int sliding = t && !strcmp(t, "sliding_attention");
        PQ_FAIL_IF(!t || (!sliding && strcmp(t, "full_attention")), PQ_ERR_FORMAT,
                   "%s: \"layer_types\"[%d] must be \"full_attention\" or \"sliding_attention\"", name, l);
        PQ_FAIL_IF(!sliding && first < l, PQ_ERR_FORMAT,
                   "%s: \"layer_types\": full attention in layer %d after sliding layers is not supported", name, l);
        if (sliding && first > l) first = l;
    }
    c->window_from_layer = first;
    return PQ_OK;
}

// bos/eos_token_id may be an integer, null, or a list (Llama 3 instruct): take the first.
static pq_status get_token_id(json_t *root, const char *name, const char *key, int *out) {
    json_t *v = json_object_get(root, key);
    if (json_is_array(v)) v = json_array_size(v) ? json_array_get(v, 0) : NULL;
    *out = -1;
    if (!v || json_is_null(v)) return PQ_OK;
    PQ_FAIL_IF(!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (1 << 30),
               PQ_ERR_FORMAT, "%s: \"%s\" must be a token id", name, key);
    *out = (int)json_integer_value(v);
    return PQ_OK;
}

static pq_status parse_arch(json_t *root, const char *name, pq_config *c) {
    json_t *archs = json_object_get(root, "architectures");
    PQ_FAIL_IF(!json_is_array(archs) || json_array_size(archs) == 0, PQ_ERR_FORMAT,
               "%s: missing \"architectures\" list", name);
    json_t *a = json_array_get(archs, 0);
    PQ_FAIL_IF(!json_is_string(a), PQ_ERR_FORMAT, "%s: \"architectures\"[0] must be a string", name);
    const char *s = json_string_value(a);
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++) {
        if (strcmp(s, ARCHS[i].name) == 0) {
            c->arch = ARCHS[i].arch;
            snprintf(c->arch_name, sizeof c->arch_name, "%s", s);
            c->qkv_bias = ARCHS[i].qkv_bias;
            return PQ_OK;
        }
    }
    return PQ_FAIL(PQ_ERR_FORMAT,
                   "%s: unsupported architecture \"%.60s\" (pq supports LlamaForCausalLM, "
                   "MistralForCausalLM, Qwen2ForCausalLM)", name, s);
}

static pq_status parse_rope_scaling(json_t *root, const char *name, pq_config *c) {
    json_t *rs = json_object_get(root, "rope_scaling");
    if (!rs || json_is_null(rs)) return PQ_OK;
    PQ_FAIL_IF(!json_is_object(rs), PQ_ERR_FORMAT, "%s: \"rope_scaling\" must be an object or null", name);
    json_t *type = json_object_get(rs, "rope_type");
    if (!type) type = json_object_get(rs, "type");
    PQ_FAIL_IF(!json_is_string(type), PQ_ERR_FORMAT, "%s: rope_scaling has no \"rope_type\"", name);
    const char *t = json_string_value(type);
    if (strcmp(t, "default") == 0) return PQ_OK;
    PQ_FAIL_IF(strcmp(t, "llama3") != 0, PQ_ERR_FORMAT,
               "%s: unsupported rope_scaling type \"%.40s\" (pq supports llama3)", name, t);
    c->rope_llama3 = 1;
    PQ_TRY(get_float(rs, name, "factor", REQUIRED, 1, 1e6, &c->rope_factor));
    PQ_TRY(get_float(rs, name, "low_freq_factor", 1, 1e-6, 1e6, &c->rope_low_freq_factor));
    PQ_TRY(get_float(rs, name, "high_freq_factor", 4, 1e-6, 1e6, &c->rope_high_freq_factor));
    PQ_FAIL_IF(c->rope_high_freq_factor <= c->rope_low_freq_factor, PQ_ERR_FORMAT,
               "%s: rope_scaling high_freq_factor must exceed low_freq_factor", name);
    PQ_TRY(get_int(rs, name, "original_max_position_embeddings", 8192, 1, 1 << 24, &c->rope_orig_max_pos));
    return PQ_OK;
}

static pq_status parse_root(json_t *root, const char *name, pq_config *c) {
    PQ_FAIL_IF(!json_is_object(root), PQ_ERR_FORMAT, "%s: top level must be a JSON object", name);
    PQ_TRY(parse_arch(root, name, c));
    PQ_TRY(get_int(root, name, "hidden_size", REQUIRED, 1, 1 << 20, &c->hidden));
    PQ_TRY(get_int(root, name, "intermediate_size", REQUIRED, 1, 1 << 22, &c->intermediate));
    PQ_TRY(get_int(root, name, "num_hidden_layers", REQUIRED, 1, 4096, &c->n_layers));
    PQ_TRY(get_int(root, name, "num_attention_heads", REQUIRED, 1, 4096, &c->n_heads));
    PQ_TRY(get_int(root, name, "num_key_value_heads", c->n_heads, 1, 4096, &c->n_kv_heads));
    PQ_TRY(get_int(root, name, "head_dim", 0, 1, 4096, &c->head_dim));
    PQ_TRY(get_int(root, name, "vocab_size", REQUIRED, 1, 1 << 24, &c->vocab));
    PQ_TRY(get_int(root, name, "max_position_embeddings", 2048, 1, 1 << 24, &c->max_pos));
    PQ_TRY(get_float(root, name, "rms_norm_eps", 1e-6, 0, 1, &c->rms_eps));
    PQ_TRY(get_float(root, name, "rope_theta", 10000, 1, 1e12, &c->rope_theta));
    PQ_TRY(get_bool(root, name, "tie_word_embeddings", 0, &c->tie_embeddings));
    int attention_bias;
    PQ_TRY(get_bool(root, name, "attention_bias", 0, &attention_bias));
    c->qkv_bias |= attention_bias;
    PQ_TRY(parse_window(root, name, c));
    PQ_TRY(get_token_id(root, name, "bos_token_id", &c->bos_id));
    PQ_TRY(get_token_id(root, name, "eos_token_id", &c->eos_id));
    PQ_TRY(parse_rope_scaling(root, name, c));

    json_t *act = json_object_get(root, "hidden_act");
    if (act && !json_is_null(act)) {
        PQ_FAIL_IF(!json_is_string(act), PQ_ERR_FORMAT, "%s: \"hidden_act\" must be a string", name);
        PQ_FAIL_IF(strcmp(json_string_value(act), "silu") != 0, PQ_ERR_FORMAT,
                   "%s: unsupported hidden_act \"%.40s\" (pq supports silu)", name, json_string_value(act));
    }
    json_t *mlp_bias = json_object_get(root, "mlp_bias");
    PQ_FAIL_IF(json_is_true(mlp_bias), PQ_ERR_FORMAT, "%s: mlp_bias=true is not supported", name);
    json_t *dt = json_object_get(root, "torch_dtype");
    if (!dt) dt = json_object_get(root, "dtype");
    if (json_is_string(dt)) snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", json_string_value(dt));

    if (c->head_dim == 0) {
        PQ_FAIL_IF(c->hidden % c->n_heads != 0, PQ_ERR_FORMAT,
                   "%s: hidden_size %d is not divisible by num_attention_heads %d", name, c->hidden, c->n_heads);
        c->head_dim = c->hidden / c->n_heads;
    }
    PQ_FAIL_IF(c->head_dim % 2 != 0, PQ_ERR_FORMAT, "%s: head_dim %d must be even for RoPE", name, c->head_dim);
    PQ_FAIL_IF(c->n_heads % c->n_kv_heads != 0, PQ_ERR_FORMAT,
               "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", name,
               c->n_heads, c->n_kv_heads);
    PQ_FAIL_IF((long long)c->n_heads * c->head_dim > (1 << 20), PQ_ERR_FORMAT,
               "%s: num_attention_heads x head_dim too large", name);
    return PQ_OK;
}

pq_status pq_config_parse(const char *json, size_t len, const char *name, pq_config *out) {
    memset(out, 0, sizeof *out);
    json_error_t err;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
    PQ_FAIL_IF(!root, PQ_ERR_FORMAT, "%s: invalid JSON at line %d column %d: %s", name, err.line,
               err.column, err.text);
    pq_status s = parse_root(root, name, out);
    json_decref(root);
    if (s != PQ_OK) memset(out, 0, sizeof *out);
    return s;
}

pq_status pq_config_load(const char *path, pq_config *out) {
    char *text = NULL;
    size_t len = 0;
    PQ_TRY(pq_file_read(path, 16u << 20, &text, &len));
    pq_status s = pq_config_parse(text, len, path, out);
    free(text);
    return s;
}

long long pq_config_param_count(const pq_config *c) {
    long long h = c->hidden, q = (long long)c->n_heads * c->head_dim, kv = (long long)c->n_kv_heads * c->head_dim;
    long long attn = h * q + 2 * h * kv + q * h + (c->qkv_bias ? q + 2 * kv : 0);
    long long mlp = 3 * h * c->intermediate;
    long long layer = attn + mlp + 2 * h;
    long long emb = (long long)c->vocab * h;
    return emb * (c->tie_embeddings ? 1 : 2) + c->n_layers * layer + h;
}
