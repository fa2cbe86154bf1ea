#include "config.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

#include "formats/fileio.h"

typedef struct {
    const char *name;
    pq_arch arch;
    int qkv_bias;       // the architecture always has q/k/v bias
    int max_pos;        // max_position_embeddings when absent
    int sliding_window; // sliding_window when absent
} arch_entry;

// max_position_embeddings and sliding_window when config.json leaves them
// out: the defaults of transformers' LlamaConfig, MistralConfig and
// Qwen2Config (Qwen2's window applies only with use_sliding_window).
static const arch_entry ARCHS[] = {
    {"LlamaForCausalLM", PQ_ARCH_LLAMA, 0, 2048, 0},
    {"MistralForCausalLM", PQ_ARCH_MISTRAL, 0, 131072, 4096},
    {"Qwen2ForCausalLM", PQ_ARCH_QWEN2, 1, 32768, 0},
};

typedef enum { OPTIONAL, REQUIRED } need;

// The field `key` of object o ("where" names the object in messages: "" for
// the top level, "rope_scaling." inside it); NULL when absent or null, a
// PQ_ERR_FORMAT naming it when absent and required.
static pq_status field(json_t *o, const char *name, const char *where, const char *key, need nd, json_t **out) {
    json_t *v = json_object_get(o, key);
    *out = v && !json_is_null(v) ? v : NULL;
    PQ_FAIL_IF(!*out && nd == REQUIRED, PQ_ERR_FORMAT, "%s: missing \"%s%s\"", name, where, key);
    return PQ_OK;
}

// An integer field (2048.0 is accepted as 2048) in [lo, hi]; dflt when absent.
static pq_status get_int(json_t *o, const char *name, const char *where, const char *key, need nd, long long dflt,
                         long long lo, long long hi, int *out) {
    json_t *v;
    PQ_TRY(field(o, name, where, key, nd, &v));
    if (!v) {
        *out = (int)dflt;
        return PQ_OK;
    }
    long long x;
    double r = json_is_real(v) ? json_real_value(v) : 0.5;
    if (json_is_integer(v)) x = json_integer_value(v);
    else if (json_is_real(v) && fabs(r) < 9e15 && r == floor(r)) x = (long long)r;
    else return PQ_FAIL(PQ_ERR_FORMAT, "%s: \"%s%s\" must be an integer", name, where, key);
    PQ_FAIL_IF(x < lo || x > hi, PQ_ERR_FORMAT, "%s: \"%s%s\" = %lld out of range [%lld, %lld]", name, where, key, x,
               lo, hi);
    *out = (int)x;
    return PQ_OK;
}

// A number field in [lo, hi]; dflt when absent.
static pq_status get_float(json_t *o, const char *name, const char *where, const char *key, need nd, double dflt,
                           double lo, double hi, float *out) {
    json_t *v;
    PQ_TRY(field(o, name, where, key, nd, &v));
    if (!v) {
        *out = (float)dflt;
        return PQ_OK;
    }
    PQ_FAIL_IF(!json_is_number(v), PQ_ERR_FORMAT, "%s: \"%s%s\" must be a number", name, where, key);
    double x = json_number_value(v);
    PQ_FAIL_IF(!(x >= lo && x <= hi), PQ_ERR_FORMAT, "%s: \"%s%s\" = %g out of range [%g, %g]", name, where, key, x,
               lo, hi);
    *out = (float)x;
    return PQ_OK;
}

static pq_status get_bool(json_t *o, const char *name, const char *key, int dflt, int *out) {
    json_t *v;
    PQ_TRY(field(o, name, "", key, OPTIONAL, &v));
    *out = dflt;
    if (!v) return PQ_OK;
    PQ_FAIL_IF(!json_is_boolean(v), PQ_ERR_FORMAT, "%s: \"%s\" must be true or false", name, key);
    *out = json_is_true(v);
    return PQ_OK;
}

// A string field or NULL when absent.
static pq_status get_str(json_t *o, const char *name, const char *key, const char **out) {
    json_t *v;
    PQ_TRY(field(o, name, "", key, OPTIONAL, &v));
    PQ_FAIL_IF(v && !json_is_string(v), PQ_ERR_FORMAT, "%s: \"%s\" must be a string", name, key);
    *out = v ? json_string_value(v) : NULL;
    return PQ_OK;
}

// The sliding window, as transformers reads it: Mistral's "sliding_window"
// applies to every layer (null: none; absent: 4096); Qwen2's only with
// "use_sliding_window" (default false) and to layers >= "max_window_layers"
// (default 28), or to the layers "layer_types" marks "sliding_attention"
// (pq runs the layout full..., sliding...; another is refused by name).
static pq_status parse_window(json_t *root, const char *name, const arch_entry *a, pq_config *c) {
    int use_sw = c->arch != PQ_ARCH_QWEN2;
    if (c->arch == PQ_ARCH_QWEN2) PQ_TRY(get_bool(root, name, "use_sliding_window", 0, &use_sw));
    int absent = !json_object_get(root, "sliding_window");
    PQ_TRY(get_int(root, name, "", "sliding_window", OPTIONAL, absent ? a->sliding_window : 0, 0, 1 << 24,
                   &c->sliding_window));
    c->window_from_layer = 0;
    if (!use_sw || c->sliding_window == 0) {
        c->sliding_window = 0;
        return PQ_OK;
    }
    if (c->arch != PQ_ARCH_QWEN2) return PQ_OK;
    PQ_TRY(get_int(root, name, "", "max_window_layers", OPTIONAL, 28, 0, 1 << 20, &c->window_from_layer));
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

// bos/eos_token_id may be an integer, null, or a list of them (Llama 3
// instruct): the first is kept.
static pq_status get_token_id(json_t *root, const char *name, const char *key, int *out) {
    json_t *v = json_object_get(root, key);
    *out = -1;
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        if (!e || json_is_null(e)) continue;
        PQ_FAIL_IF(!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > (1 << 30),
                   PQ_ERR_FORMAT, "%s: \"%s\" must be a token id or a list of them", name, key);
        if (*out < 0) *out = (int)json_integer_value(e);
    }
    return PQ_OK;
}

static pq_status parse_arch(json_t *root, const char *name, pq_config *c, const arch_entry **entry) {
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
            *entry = &ARCHS[i];
            return PQ_OK;
        }
    }
    return PQ_FAIL(PQ_ERR_FORMAT,
                   "%s: unsupported architecture \"%.60s\" (pq supports LlamaForCausalLM, "
                   "MistralForCausalLM, Qwen2ForCausalLM)", name, s);
}

// partial_rotary_factor (top level or in the RoPE parameters): transformers
// rotates only that share of head_dim; pq rotates all of it.
static pq_status check_partial_rotary(json_t *o, const char *name, const char *where) {
    float f;
    PQ_TRY(get_float(o, name, where, "partial_rotary_factor", OPTIONAL, 1, 0, 1, &f));
    PQ_FAIL_IF(f != 1.0f, PQ_ERR_FORMAT, "%s: \"%spartial_rotary_factor\" = %g is not supported (pq rotates the "
               "whole head_dim)", name, where, (double)f);
    return PQ_OK;
}

// RoPE: "rope_theta" and "rope_scaling" (transformers 4), or both inside
// "rope_parameters" (transformers 5); rope_scaling wins over
// rope_parameters and a theta inside them over the top-level one, as in
// transformers' convert_rope_params_to_dict. Types: default, or llama3 with
// all four of its numbers (transformers raises KeyError without one);
// others are refused by name.
static pq_status parse_rope(json_t *root, const char *name, pq_config *c) {
    PQ_TRY(check_partial_rotary(root, name, ""));
    PQ_TRY(get_float(root, name, "", "rope_theta", OPTIONAL, 10000, 1, 1e12, &c->rope_theta));
    json_t *rs = json_object_get(root, "rope_scaling");
    const char *where = "rope_scaling.";
    if (!rs || json_is_null(rs) || (json_is_object(rs) && json_object_size(rs) == 0)) {
        rs = json_object_get(root, "rope_parameters");
        where = "rope_parameters.";
    }
    if (!rs || json_is_null(rs)) return PQ_OK;
    PQ_FAIL_IF(!json_is_object(rs), PQ_ERR_FORMAT, "%s: \"%.*s\" must be an object or null", name,
               (int)strlen(where) - 1, where);
    static const char *const LAYER_TYPES[] = {"full_attention", "sliding_attention"};
    for (int i = 0; i < 2; i++)
        PQ_FAIL_IF(json_object_get(rs, LAYER_TYPES[i]), PQ_ERR_FORMAT, "%s: \"%s%s\": RoPE parameters per layer "
                   "type are not supported", name, where, LAYER_TYPES[i]);
    PQ_TRY(check_partial_rotary(rs, name, where));
    PQ_TRY(get_float(rs, name, where, "rope_theta", OPTIONAL, c->rope_theta, 1, 1e12, &c->rope_theta));
    json_t *type = json_object_get(rs, "rope_type");
    if (!type) type = json_object_get(rs, "type");
    size_t others = json_object_size(rs) - (json_object_get(rs, "rope_theta") != NULL);
    if (!type && others == 0) return PQ_OK; // only a theta: the default rotation
    PQ_FAIL_IF(!json_is_string(type), PQ_ERR_FORMAT, "%s: %.*s has no \"rope_type\"", name, (int)strlen(where) - 1,
               where);
    const char *t = json_string_value(type);
    if (strcmp(t, "default") == 0) return PQ_OK;
    PQ_FAIL_IF(strcmp(t, "llama3") != 0, PQ_ERR_FORMAT,
               "%s: %.*s: rope type \"%.40s\" is not supported (pq supports default and llama3)", name,
               (int)strlen(where) - 1, where, t);
    c->rope_llama3 = 1;
    PQ_TRY(get_float(rs, name, where, "factor", REQUIRED, 0, 1, 1e6, &c->rope_factor));
    PQ_TRY(get_float(rs, name, where, "low_freq_factor", REQUIRED, 0, 1e-6, 1e6, &c->rope_low_freq_factor));
    PQ_TRY(get_float(rs, name, where, "high_freq_factor", REQUIRED, 0, 1e-6, 1e6, &c->rope_high_freq_factor));
    PQ_FAIL_IF(c->rope_high_freq_factor <= c->rope_low_freq_factor, PQ_ERR_FORMAT,
               "%s: %shigh_freq_factor must exceed low_freq_factor", name, where);
    PQ_TRY(get_int(rs, name, where, "original_max_position_embeddings", REQUIRED, 0, 1, 1 << 24,
                   &c->rope_orig_max_pos));
    return PQ_OK;
}

static pq_status parse_root(json_t *root, const char *name, pq_config *c) {
    PQ_FAIL_IF(!json_is_object(root), PQ_ERR_FORMAT, "%s: top level must be a JSON object", name);
    const arch_entry *a = NULL;
    PQ_TRY(parse_arch(root, name, c, &a));
    // the sizes pq requires (transformers would default them to a 7B model's,
    // which no tensor shape check could then tell from a typo)
    PQ_TRY(get_int(root, name, "", "hidden_size", REQUIRED, 0, 1, 1 << 20, &c->hidden));
    PQ_TRY(get_int(root, name, "", "intermediate_size", REQUIRED, 0, 1, 1 << 22, &c->intermediate));
    PQ_TRY(get_int(root, name, "", "num_hidden_layers", REQUIRED, 0, 1, 4096, &c->n_layers));
    PQ_TRY(get_int(root, name, "", "num_attention_heads", REQUIRED, 0, 1, 4096, &c->n_heads));
    PQ_TRY(get_int(root, name, "", "vocab_size", REQUIRED, 0, 1, 1 << 24, &c->vocab));
    PQ_TRY(get_int(root, name, "", "num_key_value_heads", OPTIONAL, c->n_heads, 1, 4096, &c->n_kv_heads));
    PQ_TRY(get_int(root, name, "", "head_dim", OPTIONAL, 0, 1, 4096, &c->head_dim));
    PQ_TRY(get_int(root, name, "", "max_position_embeddings", OPTIONAL, a->max_pos, 1, 1 << 24, &c->max_pos));
    PQ_TRY(get_float(root, name, "", "rms_norm_eps", OPTIONAL, 1e-6, 0, 1, &c->rms_eps));
    PQ_TRY(get_bool(root, name, "tie_word_embeddings", 0, &c->tie_embeddings));
    int attention_bias, mlp_bias;
    PQ_TRY(get_bool(root, name, "attention_bias", 0, &attention_bias));
    // Llama's attention_bias gives q, k, v and o_proj a bias; Qwen2 always has
    // q/k/v bias, Mistral none (both ignore the key)
    if (c->arch == PQ_ARCH_LLAMA) c->qkv_bias = c->o_bias = attention_bias;
    PQ_TRY(get_bool(root, name, "mlp_bias", 0, &mlp_bias));
    PQ_FAIL_IF(mlp_bias, PQ_ERR_FORMAT, "%s: mlp_bias=true is not supported", name);
    PQ_TRY(parse_window(root, name, a, c));
    PQ_TRY(get_token_id(root, name, "bos_token_id", &c->bos_id));
    PQ_TRY(get_token_id(root, name, "eos_token_id", &c->eos_id));
    PQ_TRY(parse_rope(root, name, c));
    const char *act, *dt, *dt5;
    PQ_TRY(get_str(root, name, "hidden_act", &act));
    PQ_FAIL_IF(act && strcmp(act, "silu") != 0, PQ_ERR_FORMAT, "%s: unsupported hidden_act \"%.40s\" (pq supports silu)",
               name, act);
    PQ_TRY(get_str(root, name, "torch_dtype", &dt));
    PQ_TRY(get_str(root, name, "dtype", &dt5)); // transformers 5's name
    snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", dt ? dt : dt5 ? dt5 : "");

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
