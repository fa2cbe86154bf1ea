#include "model.h"

#include <string.h>

#include "common/half.h"
#include "common/sys.h"
#include "formats/fileio.h"
#include "formats/gguf_hf.h"

static const char *SLOT_NAMES[PQ_NLINEAR] = {
    "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj",
};

const char *pq_linear_slot_name(pq_linear_slot s) { return SLOT_NAMES[s]; }

static pq_status dense_type_of(const pq_tensor *t, const char *file, pq_dense_type *out) {
    switch (t->dtype) {
    case PQ_DT_F32: *out = PQ_DENSE_F32; return PQ_OK;
    case PQ_DT_F16: *out = PQ_DENSE_F16; return PQ_OK;
    case PQ_DT_BF16: *out = PQ_DENSE_BF16; return PQ_OK;
    default: break;
    }
    return PQ_FAIL(PQ_ERR_FORMAT, "%s: tensor '%s' has dtype %s; expected F16, BF16 or F32", file, t->name,
                   pq_dtype_name(t->dtype));
}

// Records that t is part of the model (pq_model_open refuses the rest).
static void mark_used(pq_model *m, const pq_tensor *t) {
    int i = pq_st_index(m->st, t);
    if (i >= 0) m->used[i] = 1;
}

// Checks a float tensor's shape (ndim 1 or 2) against the config's.
static pq_status check_float(const pq_model *m, const pq_tensor *t, int ndim, int64_t d0, int64_t d1,
                             pq_dense_type *dt) {
    const char *file = pq_st_file_path(m->st, t->file);
    PQ_TRY(dense_type_of(t, file, dt));
    const int64_t want[2] = {d0, d1};
    int ok = t->ndim == ndim && t->shape[0] == d0 && (ndim == 1 || t->shape[1] == d1);
    char a[200], b[64];
    PQ_FAIL_IF(!ok, PQ_ERR_FORMAT, "%s: tensor '%s' has shape %s, config.json implies %s", file, t->name,
               pq_shape_str(a, sizeof a, t->ndim, t->shape, ", "), pq_shape_str(b, sizeof b, ndim, want, ", "));
    return PQ_OK;
}

// Finds a float tensor with the given shape (ndim 1 or 2).
static pq_status find_float(pq_model *m, const char *name, int ndim, int64_t d0, int64_t d1, const pq_tensor **out,
                            pq_dense_type *dt) {
    const pq_tensor *t = pq_st_find(m->st, name);
    PQ_FAIL_IF(!t, PQ_ERR_FORMAT, "%s: tensor '%s' is missing", m->dir, name);
    PQ_TRY(check_float(m, t, ndim, d0, d1, dt));
    mark_used(m, t);
    *out = t;
    return PQ_OK;
}

// A 1-D float tensor widened into an owned f32 array.
static pq_status load_vector(pq_model *m, const char *name, int64_t n, float **out) {
    const pq_tensor *t;
    pq_dense_type dt;
    PQ_TRY(find_float(m, name, 1, n, 0, &t, &dt));
    float *v = pq_alloc((size_t)n * sizeof(float));
    PQ_FAIL_IF(!v, PQ_ERR_NOMEM, "%s: out of memory", name);
    pq_dense_rows_ref(dt, t->data, (int)n, 0, 1, v);
    *out = v;
    return PQ_OK;
}

// A quantized linear of a packed checkpoint; its owned arrays go on m->owned.
static pq_status load_packed(pq_model *m, const char *module, int rows, int cols, pq_linear *lin) {
    if (m->n_owned + PQ_PACKED_MAX_OWNED > m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 64;
        void **p = realloc(m->owned, (size_t)cap * sizeof *p);
        PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "%s: out of memory", m->dir);
        m->owned = p;
        m->cap_owned = cap;
    }
    pq_packed_owned own;
    PQ_TRY(pq_packed_load(m->st, &m->quant, module, rows, cols, lin, &own));
    for (int i = 0; i < PQ_PACKED_MAX_OWNED; i++)
        if (own.p[i]) m->owned[m->n_owned++] = own.p[i];
    for (int i = 0; i < own.n_used; i++) mark_used(m, own.used[i]);
    return PQ_OK;
}

// The linear `module` ("lm_head", "model.layers.3.mlp.up_proj"): quantized
// when the checkpoint is packed and does not ignore it, else dense.
static pq_status load_linear(pq_model *m, const char *module, int rows, int cols, pq_linear *lin) {
    if (m->quant.quantized && !pq_packed_ignored(&m->quant, module) && pq_packed_scheme_of(&m->quant, module))
        return load_packed(m, module, rows, cols, lin);
    char name[256];
    snprintf(name, sizeof name, "%s.weight", module);
    const pq_tensor *t;
    pq_dense_type dt;
    PQ_TRY(find_float(m, name, 2, rows, cols, &t, &dt));
    *lin = (pq_linear){.fmt = PQ_W_DENSE, .rows = rows, .cols = cols, .dense_type = dt, .w = t->data};
    return PQ_OK;
}

static pq_status load_layer(pq_model *m, int l, pq_layer *L) {
    const pq_config *c = &m->cfg;
    int q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    const int rows[PQ_NLINEAR] = {q, kv, kv, c->hidden, c->intermediate, c->intermediate, c->hidden};
    const int cols[PQ_NLINEAR] = {c->hidden, c->hidden, c->hidden, q, c->hidden, c->hidden, c->intermediate};
    char name[256];
    for (int s = 0; s < PQ_NLINEAR; s++) {
        snprintf(name, sizeof name, "model.layers.%d.%s", l, SLOT_NAMES[s]);
        PQ_TRY(load_linear(m, name, rows[s], cols[s], &L->lin[s]));
        if ((c->qkv_bias && s <= PQ_V) || (c->o_bias && s == PQ_O)) {
            snprintf(name, sizeof name, "model.layers.%d.%s.bias", l, SLOT_NAMES[s]);
            PQ_TRY(load_vector(m, name, rows[s], &L->bias[s]));
            L->lin[s].bias = L->bias[s];
        }
    }
    snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
    PQ_TRY(load_vector(m, name, c->hidden, &L->attn_norm));
    snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", l);
    PQ_TRY(load_vector(m, name, c->hidden, &L->mlp_norm));
    return PQ_OK;
}

static pq_status load_all(pq_model *m) {
    const pq_config *c = &m->cfg;
    const pq_tensor *t;
    pq_dense_type dt; // the embedding is never quantized (compressed-tensors targets Linear)
    PQ_TRY(find_float(m, "model.embed_tokens.weight", 2, c->vocab, c->hidden, &t, &dt));
    m->embed = (pq_linear){.fmt = PQ_W_DENSE, .rows = c->vocab, .cols = c->hidden, .dense_type = dt, .w = t->data};
    if (c->tie_embeddings) {
        m->lm_head = m->embed;
    } else {
        PQ_TRY(load_linear(m, "lm_head", c->vocab, c->hidden, &m->lm_head));
    }
    PQ_TRY(load_vector(m, "model.norm.weight", c->hidden, &m->final_norm));
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    PQ_FAIL_IF(!m->layers, PQ_ERR_NOMEM, "%s: out of memory", m->dir);
    for (int l = 0; l < c->n_layers; l++) PQ_TRY(load_layer(m, l, &m->layers[l]));
    for (int i = 0; i < pq_st_count(m->st); i++) m->weight_bytes += pq_st_at(m->st, i)->nbytes;
    return PQ_OK;
}

// The layer number of "model.layers.<N>.<rest>" (and *rest), or -1.
static long long layer_of(const char *name, const char **rest) {
    static const char prefix[] = "model.layers.";
    if (strncmp(name, prefix, sizeof prefix - 1) != 0) return -1;
    const char *p = name + sizeof prefix - 1;
    long long n = 0;
    if (*p < '0' || *p > '9') return -1;
    while (*p >= '0' && *p <= '9' && n < (1LL << 40)) n = n * 10 + (*p++ - '0');
    if (*p != '.') return -1;
    *rest = p + 1;
    return n;
}

// Every tensor of the files is part of the model, or one transformers
// ignores too (checked by shape): the rotary inv_freq buffers older
// checkpoints saved, lm_head.weight beside tied embeddings.
static pq_status check_accounted(pq_model *m) {
    const pq_config *c = &m->cfg;
    for (int i = 0; i < pq_st_count(m->st); i++) {
        const pq_tensor *t = pq_st_at(m->st, i);
        if (m->used[i]) continue;
        const char *file = pq_st_file_path(m->st, t->file), *rest = NULL;
        long long layer = layer_of(t->name, &rest);
        PQ_FAIL_IF(layer >= c->n_layers, PQ_ERR_FORMAT, "%s: tensor '%s' belongs to layer %lld, but config.json has "
                   "num_hidden_layers = %d", file, t->name, layer, c->n_layers);
        pq_dense_type dt;
        if ((layer >= 0 && strcmp(rest, "self_attn.rotary_emb.inv_freq") == 0) ||
            strcmp(t->name, "model.rotary_emb.inv_freq") == 0) {
            PQ_TRY(check_float(m, t, 1, c->head_dim / 2, 0, &dt));
            continue;
        }
        if (c->tie_embeddings && strcmp(t->name, "lm_head.weight") == 0) {
            PQ_TRY(check_float(m, t, 2, c->vocab, c->hidden, &dt));
            continue;
        }
        return PQ_FAIL(PQ_ERR_FORMAT, "%s: tensor '%s' is not part of the %s that config.json%s describes: pq would "
                       "ignore it", file, t->name, c->arch_name, m->quant.quantized ? " (and its quantization_config)" : "");
    }
    return PQ_OK;
}

static int is_float_dtype(pq_dtype d) {
    return d == PQ_DT_F32 || d == PQ_DT_F16 || d == PQ_DT_BF16 || d == PQ_DT_F64 || d == PQ_DT_F8_E4M3 ||
           d == PQ_DT_F8_E5M2;
}

// Index of the first NaN or Inf element of a float tensor (exponent all
// ones; E4M3 has only NaN, S.1111.111), or -1.
static long long first_nonfinite(const pq_tensor *t) {
    const uint8_t *d = t->data;
    size_t es = pq_dtype_size(t->dtype), n = t->nbytes / es;
    for (size_t i = 0; i < n; i++) {
        uint64_t u = 0;
        memcpy(&u, d + i * es, es); // little endian: the value's bits
        int bad = t->dtype == PQ_DT_F32    ? (u & 0x7f800000u) == 0x7f800000u
                  : t->dtype == PQ_DT_F16  ? (u & 0x7c00u) == 0x7c00u
                  : t->dtype == PQ_DT_BF16 ? (u & 0x7f80u) == 0x7f80u
                  : t->dtype == PQ_DT_F64  ? (u & 0x7ff0000000000000ull) == 0x7ff0000000000000ull
                  : t->dtype == PQ_DT_F8_E4M3 ? (u & 0x7fu) == 0x7fu
                                              : (u & 0x7cu) == 0x7cu;
        if (bad) return (long long)i;
    }
    return -1;
}

pq_status pq_model_check_finite(const pq_model *m) {
    for (int i = 0; m->st && i < pq_st_count(m->st); i++) {
        const pq_tensor *t = pq_st_at(m->st, i);
        if (!is_float_dtype(t->dtype)) continue;
        long long bad = first_nonfinite(t);
        PQ_FAIL_IF(bad >= 0, PQ_ERR_NUMERIC, "%s: tensor '%s' element %lld is NaN or Inf", pq_st_file_path(m->st, t->file),
                   t->name, bad);
    }
    return PQ_OK;
}

// Every tensor of m->st loaded into the model, then checked to be accounted
// for (name: the model's path, for the message).
static pq_status load_weights(pq_model *m, const char *name) {
    m->used = calloc((size_t)pq_st_count(m->st) + 1, 1);
    PQ_FAIL_IF(!m->used, PQ_ERR_NOMEM, "%s: out of memory", name);
    PQ_TRY(load_all(m));
    return check_accounted(m);
}

// config.json's quantization_config, if any.
static pq_status load_quant_info(const char *config_path, pq_packed_info *out) {
    char *text;
    size_t len;
    PQ_TRY(pq_file_read(config_path, (size_t)64 << 20, &text, &len));
    pq_status s = pq_packed_info_parse(text, len, config_path, out);
    free(text);
    return s;
}

// A .gguf file: its Hugging Face view (formats/gguf_hf.h) stands for the directory.
static pq_status open_gguf(pq_model *m, const char *path) {
    PQ_TRY(pq_gguf_hf_open(path, &m->gguf));
    const char *cfg = pq_gguf_hf_file(m->gguf, "config.json");
    PQ_TRY(pq_config_parse(cfg, strlen(cfg), path, &m->cfg));
    m->st = pq_gguf_hf_st(m->gguf);
    return load_weights(m, path);
}

pq_status pq_model_open(const char *dir, pq_model **out) {
    *out = NULL;
    int gguf = pq_gguf_is_file(dir);
    PQ_FAIL_IF(!gguf && !pq_dir_exists(dir), PQ_ERR_IO, "%s: no such model directory or GGUF file", dir);
    pq_model *m = calloc(1, sizeof *m);
    PQ_FAIL_IF(!m, PQ_ERR_NOMEM, "out of memory");
    char path[sizeof m->dir + 16];
    pq_status s;
    PQ_CHECK_GOTO(strlen(dir) >= sizeof m->dir, s, PQ_ERR_IO, "%s: path longer than %zu bytes", dir, sizeof m->dir - 1);
    snprintf(m->dir, sizeof m->dir, "%s", dir);
    if (gguf) {
        PQ_TRY_GOTO(s, open_gguf(m, dir));
        *out = m;
        return PQ_OK;
    }
    PQ_TRY_GOTO(s, pq_path_join(path, sizeof path, dir, "config.json"));
    PQ_CHECK_GOTO(!pq_path_exists(path), s, PQ_ERR_IO, "%s: no config.json", dir);
    PQ_TRY_GOTO(s, pq_config_load(path, &m->cfg));
    PQ_TRY_GOTO(s, load_quant_info(path, &m->quant));
    PQ_TRY_GOTO(s, pq_st_open(dir, &m->st));
    PQ_TRY_GOTO(s, load_weights(m, dir));
    *out = m;
    return PQ_OK;
done:
    pq_model_free(m);
    return s;
}

pq_status pq_model_open_view(const char *name, char *config_json, pq_st *st, void *weights, pq_model **out) {
    *out = NULL;
    pq_model *m = calloc(1, sizeof *m);
    if (!m) {
        free(config_json);
        pq_st_close(st);
        pq_free(weights);
        return PQ_FAIL(PQ_ERR_NOMEM, "out of memory");
    }
    m->config_json = config_json, m->st = st, m->owned_weights = weights;
    snprintf(m->dir, sizeof m->dir, "%s", name);
    pq_status s;
    size_t len = strlen(config_json);
    PQ_TRY_GOTO(s, pq_config_parse(config_json, len, name, &m->cfg));
    PQ_TRY_GOTO(s, pq_packed_info_parse(config_json, len, name, &m->quant));
    PQ_TRY_GOTO(s, load_weights(m, name));
    *out = m;
    return PQ_OK;
done:
    pq_model_free(m);
    return s;
}

void pq_model_free(pq_model *m) {
    if (!m) return;
    if (m->layers) {
        for (int l = 0; l < m->cfg.n_layers; l++) {
            pq_free(m->layers[l].attn_norm);
            pq_free(m->layers[l].mlp_norm);
            for (int s = 0; s < PQ_NLINEAR; s++) pq_free(m->layers[l].bias[s]);
        }
        free(m->layers);
    }
    pq_free(m->owned_weights);
    free(m->config_json);
    for (int i = 0; i < m->n_owned; i++) pq_free(m->owned[i]);
    free(m->owned);
    pq_packed_info_free(&m->quant);
    free(m->used);
    pq_free(m->final_norm);
    if (m->gguf) pq_gguf_hf_free(m->gguf); // owns m->st
    else pq_st_close(m->st);
    free(m);
}
