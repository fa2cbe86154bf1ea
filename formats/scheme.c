#include "formats/scheme.h"

#include <stdio.h>
#include <string.h>

#include "formats/gguf_export.h"

// One row per scheme: what it is, its defaults and what it allows.
typedef struct {
    const char *name;
    int bits, is_float;
    pq_act_quant act;
    int default_group, default_sym;
    int groups_ok;   // accepts --group 32|64|128
    int tensor_ok;   // accepts a per-tensor scale
    int asym_ok;     // accepts --asym
    const char *format;
} scheme_row;

static const scheme_row SCHEMES[PQ_SCHEME_COUNT] = {
    [PQ_SCHEME_W4A16] = {"w4a16", 4, 0, PQ_ACT_NONE, 128, 1, 1, 0, 1, "pack-quantized"},
    [PQ_SCHEME_W8A16] = {"w8a16", 8, 0, PQ_ACT_NONE, PQ_GROUP_CHANNEL, 1, 1, 0, 0, "pack-quantized"},
    [PQ_SCHEME_W8A8] = {"w8a8", 8, 0, PQ_ACT_INT8_TOKEN, PQ_GROUP_CHANNEL, 1, 0, 0, 0, "int-quantized"},
    [PQ_SCHEME_FP8] = {"fp8", 8, 1, PQ_ACT_NONE, PQ_GROUP_CHANNEL, 1, 0, 1, 0, "naive-quantized"},
    [PQ_SCHEME_FP8_DYNAMIC] = {"fp8-dynamic", 8, 1, PQ_ACT_FP8_TOKEN, PQ_GROUP_CHANNEL, 1, 0, 1, 0, "float-quantized"},
    [PQ_SCHEME_FP8_STATIC] = {"fp8-static", 8, 1, PQ_ACT_FP8_TENSOR, PQ_GROUP_CHANNEL, 1, 0, 1, 0, "float-quantized"},
    [PQ_SCHEME_GGUF_Q4_0] = {"gguf-q4_0", 4, 0, PQ_ACT_NONE, 32, 1, 0, 0, 0, "gguf"},
    [PQ_SCHEME_GGUF_Q4_1] = {"gguf-q4_1", 4, 0, PQ_ACT_NONE, 32, 0, 0, 0, 0, "gguf"},
    [PQ_SCHEME_GGUF_Q8_0] = {"gguf-q8_0", 8, 0, PQ_ACT_NONE, 32, 1, 0, 0, 0, "gguf"},
    [PQ_SCHEME_GGUF_Q4_K] = {"gguf-q4_k", 4, 0, PQ_ACT_NONE, 256, 0, 0, 0, 0, "gguf"},
};

static const pq_ggml_type GGML_OF[PQ_SCHEME_COUNT] = {
    [PQ_SCHEME_GGUF_Q4_0] = PQ_GGML_Q4_0, [PQ_SCHEME_GGUF_Q4_1] = PQ_GGML_Q4_1,
    [PQ_SCHEME_GGUF_Q8_0] = PQ_GGML_Q8_0, [PQ_SCHEME_GGUF_Q4_K] = PQ_GGML_Q4_K,
};

int pq_scheme_ggml_type(const pq_scheme *s) {
    return (unsigned)s->id < PQ_SCHEME_COUNT && strcmp(SCHEMES[s->id].format, "gguf") == 0 ? (int)GGML_OF[s->id] : -1;
}

int pq_scheme_ggml_type_for(const pq_scheme *s, int cols) {
    int t = pq_scheme_ggml_type(s);
    pq_ggml_type out;
    int fell;
    if (t < 0 || pq_gguf_tensor_type((pq_ggml_type)t, PQ_GGUF_ROLE_LINEAR, 0, cols, 1, "", &out, &fell) != PQ_OK)
        return -1;
    return (int)out;
}

static const int GROUP_SIZES[] = {32, 64, 128};

const char *pq_scheme_name(pq_scheme_id id) {
    return (unsigned)id < PQ_SCHEME_COUNT ? SCHEMES[id].name : "?";
}

const char *pq_scheme_format(const pq_scheme *s) {
    return (unsigned)s->id < PQ_SCHEME_COUNT ? SCHEMES[s->id].format : "?";
}

static int group_size_ok(int g) {
    for (size_t i = 0; i < sizeof GROUP_SIZES / sizeof GROUP_SIZES[0]; i++)
        if (GROUP_SIZES[i] == g) return 1;
    return 0;
}

pq_status pq_scheme_make(const char *name, int group, int sym, pq_scheme *out) {
    int id = -1;
    for (int i = 0; i < PQ_SCHEME_COUNT && name; i++)
        if (strcmp(name, SCHEMES[i].name) == 0) id = i;
    PQ_FAIL_IF(id < 0, PQ_ERR_ARG, "--scheme %s: not a scheme (w4a16, w8a16, w8a8, fp8, fp8-dynamic, fp8-static, "
               "gguf-q4_0, gguf-q4_1, gguf-q8_0, gguf-q4_k)", name ? name : "(none)");
    const scheme_row *r = &SCHEMES[id];
    int gguf = strcmp(r->format, "gguf") == 0;
    PQ_FAIL_IF(gguf && (group != PQ_GROUP_DEFAULT || sym != PQ_SYM_DEFAULT), PQ_ERR_ARG,
               "--scheme %s: the GGUF type fixes the blocks and their symmetry (no --group, --sym, --asym, "
               "--fp8-scale)", r->name);
    if (gguf) {
        *out = (pq_scheme){(pq_scheme_id)id, r->bits, 0, r->default_group, r->default_sym, PQ_ACT_NONE,
                           PQ_ACTORDER_NONE, PQ_OBSERVER_MINMAX, 0};
        return PQ_OK;
    }
    if (group == PQ_GROUP_DEFAULT) group = r->default_group;
    if (sym == PQ_SYM_DEFAULT) sym = r->default_sym;
    PQ_FAIL_IF(group > 0 && !r->groups_ok, PQ_ERR_ARG,
               "--scheme %s --group %d: %s has one scale per output channel%s", r->name, group, r->name,
               r->tensor_ok ? " or per tensor (--fp8-scale)" : "");
    PQ_FAIL_IF(group > 0 && !group_size_ok(group), PQ_ERR_ARG,
               "--scheme %s --group %d: group sizes are 32, 64, 128 or channel", r->name, group);
    PQ_FAIL_IF(group == PQ_GROUP_TENSOR && !r->tensor_ok, PQ_ERR_ARG,
               "--scheme %s: a per-tensor scale is only available for fp8, fp8-dynamic and fp8-static", r->name);
    PQ_FAIL_IF(group < PQ_GROUP_TENSOR, PQ_ERR_ARG, "--scheme %s: bad group %d", r->name, group);
    PQ_FAIL_IF(!sym && !r->asym_ok, PQ_ERR_ARG, "--scheme %s --asym: %s weights are symmetric only", r->name,
               r->name);
    *out = (pq_scheme){(pq_scheme_id)id, r->bits, r->is_float, group, sym ? 1 : 0, r->act, PQ_ACTORDER_NONE,
                       PQ_OBSERVER_MINMAX, 0};
    return PQ_OK;
}

pq_status pq_scheme_static_act(pq_scheme *s) {
    if (s->act == PQ_ACT_INT8_TOKEN) s->act = PQ_ACT_INT8_TENSOR;
    PQ_FAIL_IF(!pq_scheme_act_static(s), PQ_ERR_ARG, "--act-scale static: only for w8a8 and fp8-static (%s %s)",
               pq_scheme_name(s->id), s->act == PQ_ACT_NONE ? "quantizes no activations" : "is dynamic by name");
    return PQ_OK;
}

int pq_scheme_act_static(const pq_scheme *s) { return s->act == PQ_ACT_INT8_TENSOR || s->act == PQ_ACT_FP8_TENSOR; }

pq_wformat pq_scheme_wformat(const pq_scheme *s) {
    return s->is_float ? PQ_W_FP8 : s->act == PQ_ACT_INT8_TOKEN || s->act == PQ_ACT_INT8_TENSOR ? PQ_W_INT8 : PQ_W_QPACK;
}

void pq_scheme_describe(const pq_scheme *s, char *buf, size_t cap) {
    char g[32];
    if (s->group > 0) snprintf(g, sizeof g, "g%d", s->group);
    else snprintf(g, sizeof g, "%s", s->group == PQ_GROUP_TENSOR ? "tensor" : "channel");
    int bits_default = (unsigned)s->id < PQ_SCHEME_COUNT ? SCHEMES[s->id].bits : s->bits;
    char bits[16] = "";
    if (s->bits != bits_default) snprintf(bits, sizeof bits, " %d-bit", s->bits);
    int extra_static = s->act == PQ_ACT_INT8_TENSOR; // fp8-static says so by name
    if (pq_scheme_ggml_type(s) >= 0) {
        snprintf(buf, cap, "%s%s", pq_scheme_name(s->id), s->gguf_fallback ? " fallback" : "");
        return;
    }
    snprintf(buf, cap, "%s %s %s%s%s%s", pq_scheme_name(s->id), g, s->sym ? "sym" : "asym", bits,
             extra_static ? " static" : "", s->observer == PQ_OBSERVER_MSE ? " mse" : "");
}

long long pq_scheme_matrix_bytes(const pq_scheme *s, int rows, int cols, int scale_bytes) {
    long long r = rows, c = cols;
    if (pq_scheme_ggml_type(s) >= 0) { // the blocks of the type the matrix gets
        const pq_ggml_type_info *ti = pq_ggml_type_get((uint32_t)pq_scheme_ggml_type_for(s, cols));
        return r * (c / ti->block) * ti->bytes;
    }
    if (pq_scheme_wformat(s) != PQ_W_QPACK) // one byte per code, no packing
        return r * c + (s->group == PQ_GROUP_TENSOR ? 1 : r) * scale_bytes;
    long long words = (c * s->bits + 31) / 32; // a dense bit stream per row (formats/packed.c)
    long long ngroups = s->group > 0 && s->group < cols ? (c + s->group - 1) / s->group : 1;
    long long bytes = r * words * 4 + r * ngroups * scale_bytes + 2 * 8; // + weight_shape I64[2]
    if (!s->sym) bytes += (r * s->bits + 31) / 32 * ngroups * 4;          // zero points packed along rows
    return bytes;
}

double pq_scheme_bits_per_weight(const pq_scheme *s, int rows, int cols, int scale_bytes) {
    return 8.0 * (double)pq_scheme_matrix_bytes(s, rows, cols, scale_bytes) / ((double)rows * cols);
}
