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

// Finds a float tensor with the given shape (ndim 1 or 2).
static pq_status find_float(const pq_model *m, const char *name, int ndim, int64_t d0, int64_t d1,
                            const pq_tensor **out, pq_dense_type *dt) {
    const pq_tensor *t = pq_st_find(m->st, name);
    const char *file = m->dir;
    PQ_FAIL_IF(!t, PQ_ERR_FORMAT, "%s: tensor '%s' is missing", file, name);
    file = pq_st_file_path(m->st, t->file);
    PQ_TRY(dense_type_of(t, file, dt));
    int ok = t->ndim == ndim && t->shape[0] == d0 && (ndim == 1 || t->shape[1] == d1);
    PQ_FAIL_IF(!ok, PQ_ERR_FORMAT, "%s: tensor '%s' has shape [%lld%s%lld], config.json implies [%lld%s%lld]",
               file, name, (long long)t->shape[0], t->ndim > 1 ? ", " : "", t->ndim > 1 ? (long long)t->shape[1] : 0LL,
               (long long)d0, ndim > 1 ? ", " : "", ndim > 1 ? (long long)d1 : 0LL);
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
        if (c->qkv_bias && s <= PQ_V) {
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
    return load_all(m);
}

pq_status pq_model_open(const char *dir, pq_model **out) {
    *out = NULL;
    int gguf = pq_gguf_is_file(dir);
    PQ_FAIL_IF(!gguf && !pq_dir_exists(dir), PQ_ERR_IO, "%s: no such model directory or GGUF file", dir);
    pq_model *m = calloc(1, sizeof *m);
    PQ_FAIL_IF(!m, PQ_ERR_NOMEM, "out of memory");
    snprintf(m->dir, sizeof m->dir, "%s", dir);
    char path[1100];
    pq_status s;
    if (gguf) {
        PQ_TRY_GOTO(s, open_gguf(m, dir));
        *out = m;
        return PQ_OK;
    }
    PQ_TRY_GOTO(s, pq_path_join(path, sizeof path, dir, "config.json"));
    PQ_CHECK_GOTO(!pq_file_exists(path), s, PQ_ERR_IO, "%s: no config.json", dir);
    PQ_TRY_GOTO(s, pq_config_load(path, &m->cfg));
    PQ_TRY_GOTO(s, load_quant_info(path, &m->quant));
    PQ_TRY_GOTO(s, pq_st_open(dir, &m->st));
    PQ_TRY_GOTO(s, load_all(m));
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
    PQ_TRY_GOTO(s, load_all(m));
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
    pq_free(m->final_norm);
    if (m->gguf) pq_gguf_hf_free(m->gguf); // owns m->st
    else pq_st_close(m->st);
    free(m);
}
