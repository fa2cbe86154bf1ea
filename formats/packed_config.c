// formats/packed_config.c — config.json's "quantization_config" of a
// compressed-tensors checkpoint: written for a pq_scheme, parsed back into one.
#include "formats/packed.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "formats/regex.h"

// "version": the compressed-tensors release whose llm-compressor output pq's
// equals, byte for byte, and which loads pq's output (make test-oracles:
// tests/oracles/test_llmcompressor_rtn.sh, tests/compat/run.sh).
#define PQ_CT_VERSION "0.19.0"

static const char *const FORMATS[] = {"pack-quantized", "int-quantized", "float-quantized", "naive-quantized"};

// ---- writing -----------------------------------------------------------

// QuantizationScheme {format, input_activations, output_activations,
// targets, weights} of scheme s (targets stolen), with every field
// compressed-tensors serializes, valued as llm-compressor's
// QuantizationModifier writes them for the same scheme (observer
// "memoryless_minmax" for weights; "scale_dtype" null: scales in the model's
// dtype; "zp_dtype" "torch.int8" for an asymmetric integer scheme, else
// null); the file is written with sorted keys, as transformers does.
static json_t *scheme_json(const pq_scheme *s, const char *format, json_t *targets) {
    const char *strategy = s->group > 0 ? "group" : s->group == PQ_GROUP_TENSOR ? "tensor" : "channel";
    static const char *const ACTORDER[] = {NULL, "group", "weight"};
    json_t *w = json_pack("{s:o, s:o, s:b, s:o, s:i, s:s, s:{}, s:n, s:s, s:b, s:s, s:o}",
                          "actorder", s->actorder ? json_string(ACTORDER[s->actorder]) : json_null(),
                          "block_structure", json_null(), "dynamic", 0,
                          "group_size", s->group > 0 ? json_integer(s->group) : json_null(),
                          "num_bits", s->bits, "observer",
                          s->observer == PQ_OBSERVER_MSE ? "memoryless_mse" : "memoryless_minmax", "observer_kwargs",
                          "scale_dtype",
                          "strategy", strategy, "symmetric", s->sym, "type", s->is_float ? "float" : "int",
                          "zp_dtype", s->sym ? json_null() : json_string("torch.int8"));
    // input activations: dynamic per token (no observer), or static per tensor
    // (an M.input_scale per linear: the largest |x| over all the calibration
    // tokens, llm-compressor's static_minmax observer)
    int stat = pq_scheme_act_static(s), fp8 = s->act == PQ_ACT_FP8_TOKEN || s->act == PQ_ACT_FP8_TENSOR;
    json_t *in = s->act == PQ_ACT_NONE
                     ? json_null()
                     : json_pack("{s:o, s:o, s:b, s:o, s:i, s:o, s:{}, s:n, s:s, s:b, s:s, s:n}",
                                 "actorder", json_null(), "block_structure", json_null(), "dynamic", !stat,
                                 "group_size", json_null(), "num_bits", 8,
                                 "observer", stat ? json_string("static_minmax") : json_null(), "observer_kwargs",
                                 "scale_dtype", "strategy", stat ? "tensor" : "token", "symmetric", 1, "type",
                                 fp8 ? "float" : "int", "zp_dtype");
    return json_pack("{s:s, s:o, s:o, s:o, s:o}", "format", format, "input_activations", in, "output_activations",
                     json_null(), "targets", targets, "weights", w);
}

// QuantizationConfig around its config groups (stolen).
static json_t *quant_config_json(json_t *groups, const char *format, json_t *ignore) {
    return json_pack("{s:o, s:s, s:o, s:o, s:o, s:s, s:s, s:{}, s:{}, s:s}",
                     "config_groups", groups, "format", format, "global_compression_ratio", json_null(),
                     "ignore", ignore, "kv_cache_scheme", json_null(),
                     "quant_method", "compressed-tensors", "quantization_status", "compressed",
                     "sparsity_config", "transform_config", "version", PQ_CT_VERSION);
}

// src_json with "quantization_config" set to qc (stolen) into *out.
static pq_status set_quant_config(const char *src_json, size_t len, const char *name, json_t *qc, char **out) {
    *out = NULL;
    json_error_t err;
    json_t *root = json_loadb(src_json, len, 0, &err);
    if (!root) json_decref(qc);
    PQ_FAIL_IF(!root, PQ_ERR_FORMAT, "%s: invalid JSON at line %d: %s", name, err.line, err.text);
    pq_status st = PQ_OK;
    if (!json_is_object(root)) json_decref(qc);
    PQ_CHECK_GOTO(!json_is_object(root), st, PQ_ERR_FORMAT, "%s: not a JSON object", name);
    PQ_CHECK_GOTO(!qc || json_object_set_new(root, "quantization_config", qc) != 0, st, PQ_ERR_NOMEM,
                  "%s: out of memory", name);
    *out = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
    PQ_CHECK_GOTO(!*out, st, PQ_ERR_NOMEM, "%s: out of memory", name);
done:
    json_decref(root);
    return st;
}

pq_status pq_packed_config_json(const char *src_json, size_t len, const char *name, const pq_scheme *s,
                                int quantize_head, char **out) {
    json_t *ignore = quantize_head ? json_array() : json_pack("[s]", "lm_head");
    json_t *qc = quant_config_json(json_pack("{s:o}", "group_0", scheme_json(s, pq_scheme_format(s), json_pack("[s]", "Linear"))),
                                   pq_scheme_format(s), ignore);
    return set_quant_config(src_json, len, name, qc, out);
}

pq_status pq_packed_config_json_groups(const char *src_json, size_t len, const char *name,
                                       const pq_packed_group *groups, int n_groups, char *const *ignore,
                                       int n_ignore, char **out) {
    int same = 1;
    for (int g = 1; g < n_groups; g++) same &= strcmp(groups[g].format, groups[0].format) == 0;
    json_t *obj = json_object(), *ign = json_array();
    for (int g = 0; obj && g < n_groups; g++) {
        json_t *targets = json_array();
        for (int i = 0; targets && i < groups[g].n_targets; i++)
            json_array_append_new(targets, json_string(groups[g].targets[i]));
        json_t *grp = scheme_json(&groups[g].scheme, groups[g].format, targets);
        char key[32];
        snprintf(key, sizeof key, "group_%d", g);
        json_object_set_new(obj, key, grp);
    }
    for (int i = 0; ign && i < n_ignore; i++) json_array_append_new(ign, json_string(ignore[i]));
    json_t *qc = obj && ign ? quant_config_json(obj, same && n_groups ? groups[0].format : "mixed-precision", ign)
                            : NULL;
    if (!qc) json_decref(obj), json_decref(ign);
    return set_quant_config(src_json, len, name, qc, out);
}

// ---- reading -----------------------------------------------------------

#define QC "quantization_config"
#define MAX_IGNORE_PROGRAM 32768 // the "re:" patterns of ignore, or of all targets, together (real lists: a few hundred)

static const char *get_str(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int is_null(json_t *v) { return !v || json_is_null(v); }

// An empty object, null or absent.
static int is_empty(json_t *v) { return is_null(v) || (json_is_object(v) && json_object_size(v) == 0); }

// The weights' QuantizationArgs into s (bits, is_float, sym, group).
static pq_status parse_weights(json_t *w, const char *name, const char *grp, pq_scheme *s) {
    PQ_FAIL_IF(!json_is_object(w), PQ_ERR_FORMAT, "%s: " QC ".config_groups.%s.weights must be an object "
               "(weight quantization)", name, grp);
    json_t *nb = json_object_get(w, "num_bits"), *sym = json_object_get(w, "symmetric"),
           *gs = json_object_get(w, "group_size");
    // absent fields take QuantizationArgs' defaults (num_bits 8, type "int",
    // symmetric true); present ones must have the right JSON type
    const char *type = is_null(json_object_get(w, "type")) ? "int" : get_str(w, "type"), *strategy = get_str(w, "strategy");
    PQ_FAIL_IF(!is_null(nb) && !json_is_integer(nb), PQ_ERR_FORMAT,
               "%s: " QC ".config_groups.%s.weights.num_bits must be an integer", name, grp);
    PQ_FAIL_IF(!type || (strcmp(type, "int") && strcmp(type, "float")), PQ_ERR_FORMAT,
               "%s: " QC ".config_groups.%s.weights.type must be \"int\" or \"float\"", name, grp);
    PQ_FAIL_IF(!strategy && !is_null(json_object_get(w, "strategy")), PQ_ERR_FORMAT,
               "%s: " QC ".config_groups.%s.weights.strategy must be a string or null", name, grp);
    PQ_FAIL_IF(!is_null(sym) && !json_is_boolean(sym), PQ_ERR_FORMAT,
               "%s: " QC ".config_groups.%s.weights.symmetric must be true or false", name, grp);
    PQ_FAIL_IF(!is_null(gs) && !json_is_integer(gs), PQ_ERR_FORMAT,
               "%s: " QC ".config_groups.%s.weights.group_size must be an integer or null", name, grp);
    long long bits = is_null(nb) ? 8 : json_integer_value(nb), group = is_null(gs) ? 0 : json_integer_value(gs);
    if (!strategy) strategy = is_null(gs) ? "tensor" : group == -1 ? "channel" : "group";
    s->is_float = strcmp(type, "float") == 0;
    s->sym = is_null(sym) || json_is_true(sym);
    PQ_FAIL_IF(s->is_float ? bits != 8 : bits < 2 || bits > 8, PQ_ERR_FORMAT,
               "%s: " QC ".config_groups.%s.weights: %lld-bit %s weights are not supported (int 2..8, float 8)", name,
               grp, bits, type);
    s->bits = (int)bits;
    if (strcmp(strategy, "group") == 0 && group > 0 && group <= (1 << 30)) s->group = (int)group;
    else if (strcmp(strategy, "channel") == 0) s->group = PQ_GROUP_CHANNEL;
    else if (strcmp(strategy, "tensor") == 0 && s->is_float) s->group = PQ_GROUP_TENSOR;
    else return PQ_FAIL(PQ_ERR_FORMAT, "%s: " QC ".config_groups.%s.weights: strategy \"%s\" (group_size %lld) "
                        "is not supported", name, grp, strategy, group);
    // actorder: null/false, "group" (alias "dynamic", true) or "weight" (alias "static")
    json_t *ao = json_object_get(w, "actorder");
    const char *aos = json_is_string(ao) ? json_string_value(ao) : NULL;
    if (json_is_true(ao) || (aos && (!strcmp(aos, "group") || !strcmp(aos, "dynamic")))) s->actorder = PQ_ACTORDER_GROUP;
    else if (aos && (!strcmp(aos, "weight") || !strcmp(aos, "static"))) s->actorder = PQ_ACTORDER_WEIGHT;
    else PQ_FAIL_IF(!is_null(ao) && !json_is_false(ao), PQ_ERR_FORMAT,
                    "%s: " QC ".config_groups.%s.weights.actorder must be null, \"group\" or \"weight\"", name, grp);
    json_t *dyn = json_object_get(w, "dynamic"), *block = json_object_get(w, "block_structure");
    PQ_FAIL_IF(!is_null(dyn) && !json_is_false(dyn), PQ_ERR_FORMAT,
               "%s: " QC ".config_groups.%s.weights.dynamic must be false", name, grp);
    PQ_FAIL_IF(!is_null(block), PQ_ERR_FORMAT, "%s: " QC ".config_groups.%s.weights.block_structure is not supported",
               name, grp);
    PQ_FAIL_IF(s->is_float && !s->sym, PQ_ERR_FORMAT, "%s: " QC ".config_groups.%s.weights: asymmetric float weights",
               name, grp);
    return PQ_OK;
}

// input_activations: null, or symmetric 8-bit (int or float), dynamic per
// token or static per tensor (M.input_scale).
static pq_status parse_inputs(json_t *a, const char *name, const char *grp, pq_act_quant *act) {
    *act = PQ_ACT_NONE;
    if (is_null(a)) return PQ_OK;
    const char *type = get_str(a, "type"), *strategy = get_str(a, "strategy");
    json_t *nb = json_object_get(a, "num_bits"), *dyn = json_object_get(a, "dynamic"),
           *sym = json_object_get(a, "symmetric");
    int token = strategy && strcmp(strategy, "token") == 0 && json_is_true(dyn);
    int tensor = strategy && strcmp(strategy, "tensor") == 0 && (is_null(dyn) || json_is_false(dyn));
    int ok = json_is_object(a) && type && (token || tensor) && json_is_integer(nb) && json_integer_value(nb) == 8 &&
             (is_null(sym) || json_is_true(sym));
    PQ_FAIL_IF(!ok, PQ_ERR_FORMAT, "%s: " QC ".config_groups.%s.input_activations: only symmetric 8-bit activations, "
               "dynamic per token or static per tensor, are supported", name, grp);
    if (strcmp(type, "int") == 0) *act = token ? PQ_ACT_INT8_TOKEN : PQ_ACT_INT8_TENSOR;
    else if (strcmp(type, "float") == 0) *act = token ? PQ_ACT_FP8_TOKEN : PQ_ACT_FP8_TENSOR;
    else return PQ_FAIL(PQ_ERR_FORMAT, "%s: " QC ".config_groups.%s.input_activations.type \"%s\"", name, grp, type);
    return PQ_OK;
}

// The scheme a (format, weights, activations) triple is, or PQ_ERR_FORMAT.
static pq_status classify(const char *name, const char *format, pq_scheme *s) {
    int fmt_i = -1;
    for (int i = 0; i < (int)(sizeof FORMATS / sizeof FORMATS[0]); i++)
        if (strcmp(format, FORMATS[i]) == 0) fmt_i = i;
    PQ_FAIL_IF(fmt_i < 0, PQ_ERR_FORMAT, "%s: " QC ".format \"%s\" is not supported (pack-quantized, "
               "int-quantized, float-quantized, naive-quantized)", name, format);
    int id = -1;
    if (fmt_i == 0 && !s->is_float && s->act == PQ_ACT_NONE) id = s->bits == 8 ? PQ_SCHEME_W8A16 : PQ_SCHEME_W4A16;
    if (fmt_i == 1 && !s->is_float && s->bits == 8 && s->sym && s->group == PQ_GROUP_CHANNEL &&
        (s->act == PQ_ACT_INT8_TOKEN || s->act == PQ_ACT_INT8_TENSOR))
        id = PQ_SCHEME_W8A8;
    if (fmt_i == 2 && s->is_float && s->act == PQ_ACT_FP8_TOKEN) id = PQ_SCHEME_FP8_DYNAMIC;
    if (fmt_i == 2 && s->is_float && s->act == PQ_ACT_FP8_TENSOR) id = PQ_SCHEME_FP8_STATIC;
    if (fmt_i == 3 && s->is_float && s->act == PQ_ACT_NONE) id = PQ_SCHEME_FP8;
    PQ_FAIL_IF(id < 0, PQ_ERR_FORMAT, "%s: " QC ": %s with %d-bit %s weights and %s activations is not a layout "
               "pq reads", name, format, s->bits, s->is_float ? "float" : "int",
               s->act == PQ_ACT_NONE ? "unquantized" : "quantized");
    s->id = (pq_scheme_id)id;
    return PQ_OK;
}

static pq_status parse_ignore(json_t *ign, const char *name, pq_packed_info *out) {
    if (is_null(ign)) return PQ_OK;
    PQ_FAIL_IF(!json_is_array(ign), PQ_ERR_FORMAT, "%s: " QC ".ignore must be a list of names", name);
    size_t n = json_array_size(ign);
    long total = 0; // instructions of all patterns: what matching one character of a name costs
    out->ignore = calloc(n ? n : 1, sizeof *out->ignore);
    out->ignore_re = calloc(n ? n : 1, sizeof *out->ignore_re);
    PQ_FAIL_IF(!out->ignore || !out->ignore_re, PQ_ERR_NOMEM, "%s: out of memory", name);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(ign, i);
        PQ_FAIL_IF(!json_is_string(v), PQ_ERR_FORMAT, "%s: " QC ".ignore[%zu] must be a string", name, i);
        const char *pat = json_string_value(v);
        size_t len = json_string_length(v);
        PQ_FAIL_IF(strlen(pat) != len, PQ_ERR_FORMAT, "%s: " QC ".ignore[%zu] holds a NUL character", name, i);
        out->ignore[i] = strdup(pat);
        PQ_FAIL_IF(!out->ignore[i], PQ_ERR_NOMEM, "%s: out of memory", name);
        out->n_ignore = (int)i + 1;
        if (strncmp(pat, "re:", 3) == 0) {
            pq_status st = pq_regex_compile(pat + 3, len - 3, &out->ignore_re[i]);
            if (st != PQ_OK) return pq_fail_context(st, "%s: " QC ".ignore[%zu]", name, i);
            total += pq_regex_size(out->ignore_re[i]);
            PQ_FAIL_IF(total > MAX_IGNORE_PROGRAM, PQ_ERR_FORMAT, "%s: " QC ".ignore: the patterns up to [%zu] compile "
                       "to more than %d instructions", name, i, MAX_IGNORE_PROGRAM);
        }
    }
    return PQ_OK;
}

// A group's targets: module names / "re:" patterns (compiled into
// g->targets_re, their instructions added to *total) / "Linear" into g.
static pq_status parse_targets(json_t *targets, const char *name, const char *grp, pq_packed_group *g,
                               long *total) {
    size_t n = json_array_size(targets);
    PQ_FAIL_IF(!json_is_array(targets) || n == 0, PQ_ERR_FORMAT,
               "%s: " QC ".config_groups.%s.targets must be a non-empty list", name, grp);
    g->targets = calloc(n, sizeof *g->targets);
    g->targets_re = calloc(n, sizeof *g->targets_re);
    PQ_FAIL_IF(!g->targets || !g->targets_re, PQ_ERR_NOMEM, "%s: out of memory", name);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(targets, i);
        const char *t = json_is_string(v) ? json_string_value(v) : NULL;
        int ok = t && strlen(t) == json_string_length(v) &&
                 (!strcmp(t, "Linear") || !strncmp(t, "re:", 3) || !strncmp(t, "model.", 6) || !strcmp(t, "lm_head"));
        PQ_FAIL_IF(!ok, PQ_ERR_FORMAT, "%s: " QC ".config_groups.%s.targets[%zu]: only \"Linear\", module names "
                   "(model.*, lm_head) and \"re:\" patterns are supported", name, grp, i);
        g->targets[i] = strdup(t);
        PQ_FAIL_IF(!g->targets[i], PQ_ERR_NOMEM, "%s: out of memory", name);
        g->n_targets = (int)i + 1;
        if (!strncmp(t, "re:", 3)) {
            pq_status st = pq_regex_compile(t + 3, strlen(t) - 3, &g->targets_re[i]);
            if (st != PQ_OK) return pq_fail_context(st, "%s: " QC ".config_groups.%s.targets[%zu]", name, grp, i);
            *total += pq_regex_size(g->targets_re[i]);
            PQ_FAIL_IF(*total > MAX_IGNORE_PROGRAM, PQ_ERR_FORMAT, "%s: " QC ".config_groups: the target patterns "
                       "up to %s.targets[%zu] compile to more than %d instructions", name, grp, i, MAX_IGNORE_PROGRAM);
        }
    }
    return PQ_OK;
}

// One config group: its targets, weights, activations and format.
// A group's own format (compressed-tensors >= 0.10) must be the
// checkpoint's, unless that is "mixed-precision" (then each group has one).
static pq_status parse_group(json_t *g, const char *name, const char *grp, const char *format, pq_packed_group *out,
                             long *total) {
    PQ_FAIL_IF(!json_is_object(g), PQ_ERR_FORMAT, "%s: " QC ".config_groups.%s must be an object", name, grp);
    PQ_TRY(parse_targets(json_object_get(g, "targets"), name, grp, out, total));
    PQ_FAIL_IF(!is_null(json_object_get(g, "output_activations")), PQ_ERR_FORMAT,
               "%s: " QC ".config_groups.%s.output_activations is not supported", name, grp);
    json_t *gfmt = json_object_get(g, "format");
    const char *own = get_str(g, "format");
    PQ_FAIL_IF(!is_null(gfmt) && !own, PQ_ERR_FORMAT, "%s: " QC ".config_groups.%s.format must be a string", name,
               grp);
    int mixed = !strcmp(format, "mixed-precision");
    PQ_FAIL_IF(mixed && !own, PQ_ERR_FORMAT,
               "%s: " QC ".format is \"mixed-precision\" but config_groups.%s has no \"format\"", name, grp);
    PQ_FAIL_IF(!mixed && own && strcmp(own, format), PQ_ERR_FORMAT,
               "%s: " QC ".config_groups.%s.format differs from " QC ".format \"%s\"", name, grp, format);
    if (own) format = own;
    PQ_TRY(parse_weights(json_object_get(g, "weights"), name, grp, &out->scheme));
    PQ_TRY(parse_inputs(json_object_get(g, "input_activations"), name, grp, &out->scheme.act));
    PQ_TRY(classify(name, format, &out->scheme));
    snprintf(out->format, sizeof out->format, "%s", format);
    return PQ_OK;
}

static pq_status parse_qc(json_t *qc, const char *name, pq_packed_info *out) {
    PQ_FAIL_IF(!json_is_object(qc), PQ_ERR_FORMAT, "%s: " QC " must be an object", name);
    const char *method = get_str(qc, "quant_method"), *format = get_str(qc, "format"),
               *status = get_str(qc, "quantization_status");
    PQ_FAIL_IF(!method || strcmp(method, "compressed-tensors"), PQ_ERR_FORMAT,
               "%s: " QC ".quant_method \"%s\" is not supported (compressed-tensors)", name,
               method ? method : "(missing)");
    PQ_FAIL_IF(!format, PQ_ERR_FORMAT, "%s: " QC ".format is missing or not a string", name);
    PQ_FAIL_IF(!status && !is_null(json_object_get(qc, "quantization_status")), PQ_ERR_FORMAT,
               "%s: " QC ".quantization_status must be a string", name);
    PQ_FAIL_IF(status && strcmp(status, "compressed"), PQ_ERR_FORMAT,
               "%s: " QC ".quantization_status \"%s\": the weights are not compressed", name, status);
    // transforms (Hadamard / SpinQuant rotations) change what the weights mean
    PQ_FAIL_IF(!is_empty(json_object_get(qc, "transform_config")), PQ_ERR_FORMAT,
               "%s: " QC ".transform_config is not supported (the weights are rotated)", name);
    PQ_FAIL_IF(!is_null(json_object_get(qc, "kv_cache_scheme")), PQ_ERR_FORMAT,
               "%s: " QC ".kv_cache_scheme is not supported", name);
    json_t *sp = json_object_get(qc, "sparsity_config");
    const char *sp_fmt = json_is_object(sp) ? get_str(sp, "format") : NULL;
    PQ_FAIL_IF(!is_empty(sp) && !(sp_fmt && strcmp(sp_fmt, "dense") == 0), PQ_ERR_FORMAT,
               "%s: " QC ".sparsity_config is not supported", name);
    json_t *groups = json_object_get(qc, "config_groups");
    size_t ng = json_object_size(groups);
    PQ_FAIL_IF(!json_is_object(groups) || ng == 0 || ng > 4096, PQ_ERR_FORMAT,
               "%s: " QC ".config_groups must hold 1 to 4096 groups", name);
    out->groups = calloc(ng, sizeof *out->groups);
    PQ_FAIL_IF(!out->groups, PQ_ERR_NOMEM, "%s: out of memory", name);
    const char *grp;
    json_t *g;
    long total = 0;
    json_object_foreach(groups, grp, g) {
        out->n_groups++; // counted first: pq_packed_info_free frees a partly parsed group
        PQ_TRY(parse_group(g, name, grp, format, &out->groups[out->n_groups - 1], &total));
    }
    out->scheme = out->groups[0].scheme;
    snprintf(out->format, sizeof out->format, "%s", format);
    PQ_TRY(parse_ignore(json_object_get(qc, "ignore"), name, out));
    pq_packed_group *g0 = &out->groups[0];
    if (out->n_groups == 1 && g0->n_targets == 1 && !strcmp(g0->targets[0], "Linear")) { // every linear, one scheme
        free(g0->targets[0]);
        free(g0->targets);
        free(g0->targets_re);
        free(out->groups);
        out->groups = NULL;
        out->n_groups = 0;
    }
    out->quantized = 1;
    return PQ_OK;
}

pq_status pq_packed_info_parse(const char *json, size_t len, const char *name, pq_packed_info *out) {
    memset(out, 0, sizeof *out);
    json_error_t err;
    json_t *root = json_loadb(json, len, 0, &err);
    PQ_FAIL_IF(!root, PQ_ERR_FORMAT, "%s: invalid JSON at line %d: %s", name, err.line, err.text);
    json_t *qc = json_object_get(root, QC);
    pq_status st = is_null(qc) ? PQ_OK : parse_qc(qc, name, out);
    json_decref(root);
    if (st != PQ_OK) pq_packed_info_free(out);
    return st;
}

void pq_packed_info_free(pq_packed_info *info) {
    if (!info) return;
    for (int i = 0; i < info->n_ignore; i++) {
        free(info->ignore[i]);
        if (info->ignore_re) pq_regex_free(info->ignore_re[i]);
    }
    free(info->ignore);
    for (int g = 0; g < info->n_groups; g++) {
        for (int i = 0; i < info->groups[g].n_targets; i++) {
            free(info->groups[g].targets[i]);
            if (info->groups[g].targets_re) pq_regex_free(info->groups[g].targets_re[i]);
        }
        free(info->groups[g].targets);
        free(info->groups[g].targets_re);
    }
    free(info->groups);
    free(info->ignore_re);
    memset(info, 0, sizeof *info);
}

// Whether module matches pattern pat: an exact name, or re (its compiled
// "re:" pattern) matching from its start.
static int name_matches(const char *pat, pq_regex *re, const char *module) {
    return re ? pq_regex_match(re, module, strlen(module)) : strcmp(pat, module) == 0;
}

int pq_packed_ignored(const pq_packed_info *info, const char *module) {
    for (int i = 0; i < info->n_ignore; i++)
        if (name_matches(info->ignore[i], info->ignore_re ? info->ignore_re[i] : NULL, module)) return 1;
    return 0;
}

const pq_scheme *pq_packed_scheme_of(const pq_packed_info *info, const char *module) {
    if (!info->groups) return &info->scheme;
    for (int g = 0; g < info->n_groups; g++)
        for (int i = 0; i < info->groups[g].n_targets; i++)
            if (strcmp(info->groups[g].targets[i], "Linear") &&
                name_matches(info->groups[g].targets[i], info->groups[g].targets_re ? info->groups[g].targets_re[i] : NULL,
                             module))
                return &info->groups[g].scheme;
    for (int g = 0; g < info->n_groups; g++)
        for (int i = 0; i < info->groups[g].n_targets; i++)
            if (!strcmp(info->groups[g].targets[i], "Linear")) return &info->groups[g].scheme;
    return NULL;
}
