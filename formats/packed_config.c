// formats/packed_config.c — config.json's "quantization_config" of a
// compressed-tensors checkpoint: written for a pq_scheme, parsed back into one.
#include "formats/packed.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "formats/regex.h"

// "version": the compressed-tensors release pq's output was last verified to
// load in, bit for bit (tests/compat/run.sh).
#define PQ_CT_VERSION "0.20.1"

static const char *const FORMATS[] = {"pack-quantized", "int-quantized", "float-quantized", "naive-quantized"};

// ---- writing -----------------------------------------------------------

// QuantizationArgs / QuantizationConfig with every field compressed-tensors
// serializes; the file is written with sorted keys, as transformers does.
static json_t *quant_config_json(const pq_scheme *s, int quantize_head) {
    const char *strategy = s->group > 0 ? "group" : s->group == PQ_GROUP_TENSOR ? "tensor" : "channel";
    static const char *const ACTORDER[] = {NULL, "group", "weight"};
    json_t *w = json_pack("{s:o, s:o, s:b, s:o, s:i, s:s, s:{}, s:s, s:b, s:s}",
                          "actorder", s->actorder ? json_string(ACTORDER[s->actorder]) : json_null(),
                          "block_structure", json_null(), "dynamic", 0,
                          "group_size", s->group > 0 ? json_integer(s->group) : json_null(),
                          "num_bits", s->bits, "observer", "minmax", "observer_kwargs",
                          "strategy", strategy, "symmetric", s->sym, "type", s->is_float ? "float" : "int");
    // input activations: dynamic per token (no observer), or static per tensor
    // (an M.input_scale per linear, calibrated by a min-max observer)
    int stat = pq_scheme_act_static(s), fp8 = s->act == PQ_ACT_FP8_TOKEN || s->act == PQ_ACT_FP8_TENSOR;
    json_t *in = s->act == PQ_ACT_NONE
                     ? json_null()
                     : json_pack("{s:o, s:o, s:b, s:o, s:i, s:o, s:{}, s:s, s:b, s:s}",
                                 "actorder", json_null(), "block_structure", json_null(), "dynamic", !stat,
                                 "group_size", json_null(), "num_bits", 8,
                                 "observer", stat ? json_string("minmax") : json_null(), "observer_kwargs",
                                 "strategy", stat ? "tensor" : "token", "symmetric", 1, "type", fp8 ? "float" : "int");
    json_t *ignore = quantize_head ? json_array() : json_pack("[s]", "lm_head");
    return json_pack("{s:{s:{s:o, s:o, s:[s], s:o}}, s:s, s:o, s:o, s:o, s:s, s:s, s:{}, s:{}, s:s}",
                     "config_groups", "group_0", "input_activations", in, "output_activations", json_null(),
                     "targets", "Linear", "weights", w,
                     "format", pq_scheme_format(s), "global_compression_ratio", json_null(),
                     "ignore", ignore, "kv_cache_scheme", json_null(),
                     "quant_method", "compressed-tensors", "quantization_status", "compressed",
                     "sparsity_config", "transform_config", "version", PQ_CT_VERSION);
}

pq_status pq_packed_config_json(const char *src_json, size_t len, const char *name, const pq_scheme *s,
                                int quantize_head, char **out) {
    *out = NULL;
    json_error_t err;
    json_t *root = json_loadb(src_json, len, 0, &err);
    PQ_FAIL_IF(!root, PQ_ERR_FORMAT, "%s: invalid JSON at line %d: %s", name, err.line, err.text);
    pq_status st = PQ_OK;
    PQ_CHECK_GOTO(!json_is_object(root), st, PQ_ERR_FORMAT, "%s: not a JSON object", name);
    json_t *qc = quant_config_json(s, quantize_head);
    PQ_CHECK_GOTO(!qc || json_object_set_new(root, "quantization_config", qc) != 0, st, PQ_ERR_NOMEM,
                  "%s: out of memory", name);
    *out = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
    PQ_CHECK_GOTO(!*out, st, PQ_ERR_NOMEM, "%s: out of memory", name);
done:
    json_decref(root);
    return st;
}

// ---- reading -----------------------------------------------------------

#define QC "quantization_config"
#define MAX_IGNORE_PROGRAM 32768 // all "re:" patterns together (real lists: a few hundred)

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
    PQ_FAIL_IF(!json_is_object(groups) || json_object_size(groups) != 1, PQ_ERR_FORMAT,
               "%s: " QC ".config_groups must hold exactly one group", name);
    const char *grp = json_object_iter_key(json_object_iter(groups));
    json_t *g = json_object_get(groups, grp), *targets = json_object_get(g, "targets");
    PQ_FAIL_IF(!json_is_object(g), PQ_ERR_FORMAT, "%s: " QC ".config_groups.%s must be an object", name, grp);
    PQ_FAIL_IF(!json_is_array(targets) || json_array_size(targets) != 1 ||
                   !json_is_string(json_array_get(targets, 0)) ||
                   strcmp(json_string_value(json_array_get(targets, 0)), "Linear"),
               PQ_ERR_FORMAT, "%s: " QC ".config_groups.%s.targets: only [\"Linear\"] is supported", name, grp);
    PQ_FAIL_IF(!is_null(json_object_get(g, "output_activations")), PQ_ERR_FORMAT,
               "%s: " QC ".config_groups.%s.output_activations is not supported", name, grp);
    // a scheme's own format (compressed-tensors >= 0.10) must be the one the
    // tensors are read as
    json_t *gfmt = json_object_get(g, "format");
    PQ_FAIL_IF(!is_null(gfmt) && (!json_is_string(gfmt) || strcmp(json_string_value(gfmt), format)), PQ_ERR_FORMAT,
               "%s: " QC ".config_groups.%s.format differs from " QC ".format \"%s\"", name, grp, format);
    PQ_TRY(parse_weights(json_object_get(g, "weights"), name, grp, &out->scheme));
    PQ_TRY(parse_inputs(json_object_get(g, "input_activations"), name, grp, &out->scheme.act));
    PQ_TRY(classify(name, format, &out->scheme));
    snprintf(out->format, sizeof out->format, "%s", format);
    PQ_TRY(parse_ignore(json_object_get(qc, "ignore"), name, out));
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
        pq_regex_free(info->ignore_re[i]);
    }
    free(info->ignore);
    free(info->ignore_re);
    memset(info, 0, sizeof *info);
}

int pq_packed_ignored(const pq_packed_info *info, const char *module) {
    for (int i = 0; i < info->n_ignore; i++) {
        if (info->ignore_re[i] ? pq_regex_match(info->ignore_re[i], module, strlen(module))
                               : strcmp(info->ignore[i], module) == 0)
            return 1;
    }
    return 0;
}
