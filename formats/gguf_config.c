// formats/gguf_config.c — config.json and generation_config.json from a GGUF
// file's {arch}.* metadata (formats/gguf_hf.h lists the keys).
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf_hf.h"

#define KEY_CAP 160

typedef struct {
    const char *gguf, *hf_arch, *model_type;
} arch_entry;

static const arch_entry ARCHS[] = {
    {"llama", "LlamaForCausalLM", "llama"},
    {"qwen2", "Qwen2ForCausalLM", "qwen2"},
};

// "{arch}.{suffix}"
static const char *akey(char *buf, const char *arch, const char *suffix) {
    snprintf(buf, KEY_CAP, "%s.%s", arch, suffix);
    return buf;
}

// An integer key of the architecture; absent: dflt, or an error when dflt < 0.
static pq_status arch_int(const pq_gguf *g, const char *arch, const char *suffix, int64_t dflt, int64_t lo, int64_t hi,
                          int64_t *out) {
    char k[KEY_CAP];
    akey(k, arch, suffix);
    if (!pq_gguf_find(g, k)) {
        PQ_FAIL_IF(dflt < 0, PQ_ERR_FORMAT, "%s: metadata key '%s' is missing", pq_gguf_path(g), k);
        *out = dflt;
        return PQ_OK;
    }
    return pq_gguf_get_int(g, k, lo, hi, out);
}

// The shortest decimal that reads back as the same f32: GGUF stores
// rms_norm_eps and rope_theta as f32, transformers reads doubles; 1e-05 is
// what the original config.json said, not 9.99999975e-06.
static double shortest_f32(float f) {
    char buf[32];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)f);
        double d = strtod(buf, NULL);
        if ((float)d == f) return d;
    }
    return f;
}

static pq_status arch_float(const pq_gguf *g, const char *arch, const char *suffix, double dflt, double *out) {
    char k[KEY_CAP];
    akey(k, arch, suffix);
    if (!pq_gguf_find(g, k)) {
        PQ_FAIL_IF(dflt < 0, PQ_ERR_FORMAT, "%s: metadata key '%s' is missing", pq_gguf_path(g), k);
        *out = dflt;
        return PQ_OK;
    }
    PQ_TRY(pq_gguf_get_float(g, k, out));
    PQ_FAIL_IF(!(*out > 0 && *out < 1e12), PQ_ERR_FORMAT, "%s: metadata key '%s' = %g is out of range", pq_gguf_path(g),
               k, *out);
    *out = shortest_f32((float)*out);
    return PQ_OK;
}

// What pq's engine cannot run, refused by name before anything else.
static pq_status refuse_unsupported(const pq_gguf *g, const char *arch) {
    char k[KEY_CAP];
    const char *file = pq_gguf_path(g);
    int64_t experts = 0;
    if (pq_gguf_find(g, akey(k, arch, "expert_count"))) PQ_TRY(pq_gguf_get_int(g, k, 0, 1 << 20, &experts));
    PQ_FAIL_IF(experts > 0, PQ_ERR_FORMAT, "%s: a mixture of %lld experts is not supported", file, (long long)experts);
    pq_gguf_str st;
    if (pq_gguf_find(g, akey(k, arch, "rope.scaling.type"))) {
        PQ_TRY(pq_gguf_get_str(g, k, &st));
        PQ_FAIL_IF(!(st.len == 4 && memcmp(st.p, "none", 4) == 0), PQ_ERR_FORMAT,
                   "%s: rope scaling '%.*s' (%s) is not supported", file, (int)(st.len > 40 ? 40 : st.len), st.p, k);
    }
    const char *per_layer[] = {"feed_forward_length", "attention.head_count", "attention.head_count_kv"};
    for (int i = 0; i < 3; i++) {
        const pq_gguf_kv *kv = pq_gguf_find(g, akey(k, arch, per_layer[i]));
        PQ_FAIL_IF(kv && kv->type == PQ_GGUF_ARRAY, PQ_ERR_FORMAT, "%s: per-layer sizes in '%s' are not supported", file,
                   k);
    }
    return PQ_OK;
}

static pq_status token_id(const pq_gguf *g, const char *key, int64_t vocab, json_int_t *out) {
    *out = -1;
    if (!pq_gguf_find(g, key)) return PQ_OK;
    int64_t v;
    PQ_TRY(pq_gguf_get_int(g, key, 0, vocab - 1, &v));
    *out = v;
    return PQ_OK;
}

static pq_status build(const pq_gguf *g, const arch_entry *a, json_t *cfg, json_t *gen) {
    const char *file = pq_gguf_path(g), *arch = a->gguf;
    int64_t layers, ctx, hidden, ffn, heads, kv_heads, key_len, val_len, rope_dim;
    double eps, theta;
    PQ_TRY(refuse_unsupported(g, arch));
    PQ_TRY(arch_int(g, arch, "block_count", -1, 1, 4096, &layers));
    PQ_TRY(arch_int(g, arch, "context_length", -1, 1, 1 << 24, &ctx));
    PQ_TRY(arch_int(g, arch, "embedding_length", -1, 1, 1 << 20, &hidden));
    PQ_TRY(arch_int(g, arch, "feed_forward_length", -1, 1, 1 << 22, &ffn));
    PQ_TRY(arch_int(g, arch, "attention.head_count", -1, 1, 4096, &heads));
    PQ_TRY(arch_int(g, arch, "attention.head_count_kv", heads, 1, 4096, &kv_heads));
    PQ_FAIL_IF(hidden % heads, PQ_ERR_FORMAT, "%s: embedding_length %lld is not a multiple of head_count %lld", file,
               (long long)hidden, (long long)heads);
    PQ_TRY(arch_int(g, arch, "attention.key_length", hidden / heads, 2, 4096, &key_len));
    PQ_TRY(arch_int(g, arch, "attention.value_length", key_len, 2, 4096, &val_len));
    PQ_FAIL_IF(val_len != key_len, PQ_ERR_FORMAT, "%s: attention.value_length %lld differs from key_length %lld", file,
               (long long)val_len, (long long)key_len);
    PQ_TRY(arch_int(g, arch, "rope.dimension_count", key_len, 1, 4096, &rope_dim));
    PQ_FAIL_IF(rope_dim != key_len, PQ_ERR_FORMAT,
               "%s: rope.dimension_count %lld differs from the head size %lld (partial rotary is not supported)", file,
               (long long)rope_dim, (long long)key_len);
    PQ_TRY(arch_float(g, arch, "attention.layer_norm_rms_epsilon", -1, &eps));
    PQ_TRY(arch_float(g, arch, "rope.freq_base", 10000, &theta));

    const pq_gguf_tensor *emb = pq_gguf_tensor_find(g, "token_embd.weight");
    PQ_FAIL_IF(!emb, PQ_ERR_FORMAT, "%s: tensor 'token_embd.weight' is missing", file);
    PQ_FAIL_IF(emb->n_dims != 2 || emb->ne[0] != hidden, PQ_ERR_FORMAT,
               "%s: tensor 'token_embd.weight' is not a [vocab, %lld] matrix", file, (long long)hidden);
    int64_t vocab = emb->ne[1], declared;
    PQ_TRY(arch_int(g, arch, "vocab_size", vocab, 1, 1 << 24, &declared));
    PQ_FAIL_IF(declared != vocab, PQ_ERR_FORMAT, "%s: %s.vocab_size %lld differs from token_embd.weight's %lld rows",
               file, arch, (long long)declared, (long long)vocab);
    json_int_t bos, eos;
    PQ_TRY(token_id(g, "tokenizer.ggml.bos_token_id", vocab, &bos));
    PQ_TRY(token_id(g, "tokenizer.ggml.eos_token_id", vocab, &eos));
    int tied = !pq_gguf_tensor_find(g, "output.weight"), bias = pq_gguf_tensor_find(g, "blk.0.attn_q.bias") != NULL;

    json_t *archs = json_array();
    json_array_append_new(archs, json_string(a->hf_arch));
    json_object_set_new(cfg, "architectures", archs);
    json_object_set_new(cfg, "model_type", json_string(a->model_type));
    json_object_set_new(cfg, "hidden_size", json_integer(hidden));
    json_object_set_new(cfg, "intermediate_size", json_integer(ffn));
    json_object_set_new(cfg, "num_hidden_layers", json_integer(layers));
    json_object_set_new(cfg, "num_attention_heads", json_integer(heads));
    json_object_set_new(cfg, "num_key_value_heads", json_integer(kv_heads));
    json_object_set_new(cfg, "head_dim", json_integer(key_len));
    json_object_set_new(cfg, "vocab_size", json_integer(vocab));
    json_object_set_new(cfg, "max_position_embeddings", json_integer(ctx));
    json_object_set_new(cfg, "rms_norm_eps", json_real(eps));
    json_object_set_new(cfg, "rope_theta", json_real(theta));
    json_object_set_new(cfg, "rope_scaling", json_null());
    json_object_set_new(cfg, "tie_word_embeddings", json_boolean(tied));
    if (strcmp(arch, "llama") == 0) json_object_set_new(cfg, "attention_bias", json_boolean(bias));
    else json_object_set_new(cfg, "use_sliding_window", json_false());
    json_object_set_new(cfg, "mlp_bias", json_false());
    json_object_set_new(cfg, "hidden_act", json_string("silu"));
    pq_dtype mdt = pq_gguf_matrix_dtype(g);
    json_object_set_new(cfg, "torch_dtype", json_string(mdt == PQ_DT_F16 ? "float16" : mdt == PQ_DT_BF16 ? "bfloat16" : "float32"));
    json_object_set_new(cfg, "use_cache", json_true());
    if (bos >= 0) json_object_set_new(cfg, "bos_token_id", json_integer(bos)), json_object_set_new(gen, "bos_token_id", json_integer(bos));
    if (eos >= 0) json_object_set_new(cfg, "eos_token_id", json_integer(eos)), json_object_set_new(gen, "eos_token_id", json_integer(eos));
    return PQ_OK;
}

pq_status pq_gguf_config_json(const pq_gguf *g, char **config, char **generation) {
    *config = *generation = NULL;
    const char *file = pq_gguf_path(g);
    pq_gguf_str arch;
    PQ_TRY(pq_gguf_get_str(g, "general.architecture", &arch));
    const arch_entry *a = NULL;
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++)
        if (arch.len == strlen(ARCHS[i].gguf) && memcmp(arch.p, ARCHS[i].gguf, arch.len) == 0) a = &ARCHS[i];
    PQ_FAIL_IF(!a, PQ_ERR_FORMAT, "%s: architecture '%.*s' is not supported (pq reads llama and qwen2)", file,
               (int)(arch.len > 60 ? 60 : arch.len), arch.p);
    json_t *cfg = json_object(), *gen = json_object();
    pq_status s = cfg && gen ? build(g, a, cfg, gen) : PQ_FAIL(PQ_ERR_NOMEM, "%s: out of memory", file);
    if (s == PQ_OK) {
        const size_t flags = JSON_INDENT(2) | JSON_REAL_PRECISION(9);
        *config = json_dumps(cfg, flags);
        *generation = json_object_size(gen) ? json_dumps(gen, flags) : NULL;
        if (!*config || (json_object_size(gen) && !*generation)) {
            free(*config), free(*generation);
            *config = *generation = NULL;
            s = PQ_FAIL(PQ_ERR_NOMEM, "%s: out of memory writing config.json", file);
        }
    }
    json_decref(cfg);
    json_decref(gen);
    return s;
}
