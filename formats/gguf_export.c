// formats/gguf_export.c — the tensor types and model metadata of a GGUF pq
// writes (see gguf_export.h); the tokenizer's part is
// formats/tokenizer/gguf_tok_write.c.
#include "formats/gguf_export.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    pq_ggml_type type;
    uint32_t ftype; // llama.cpp's LLAMA_FTYPE_MOSTLY_*
} TARGETS[] = {
    {"f16", PQ_GGML_F16, 1},   {"q8_0", PQ_GGML_Q8_0, 7}, {"q4_0", PQ_GGML_Q4_0, 2}, {"q4_1", PQ_GGML_Q4_1, 3},
    {"q5_0", PQ_GGML_Q5_0, 8}, {"q4_k", PQ_GGML_Q4_K, 14}, {"q6_k", PQ_GGML_Q6_K, 18},
};
#define NTARGETS (int)(sizeof TARGETS / sizeof TARGETS[0])

pq_status pq_gguf_parse_type(const char *name, pq_ggml_type *out) {
    for (int i = 0; name && i < NTARGETS; i++)
        if (strcmp(name, TARGETS[i].name) == 0) return *out = TARGETS[i].type, PQ_OK;
    return PQ_FAIL(PQ_ERR_ARG, "--type %s: not a GGUF type pq writes (f16, q8_0, q4_0, q4_1, q5_0, q4_k, q6_k)",
                   name ? name : "(none)");
}

const char *pq_gguf_type_name(pq_ggml_type t) {
    for (int i = 0; i < NTARGETS; i++)
        if (TARGETS[i].type == t) return TARGETS[i].name;
    return "?";
}

pq_gguf_role pq_gguf_role_of(const char *name, int n_dims) {
    if (n_dims < 2) return PQ_GGUF_ROLE_VECTOR;
    if (strcmp(name, "token_embd.weight") == 0) return PQ_GGUF_ROLE_EMBED;
    if (strcmp(name, "output.weight") == 0) return PQ_GGUF_ROLE_OUTPUT;
    return PQ_GGUF_ROLE_LINEAR;
}

static int block_of(pq_ggml_type t) { return pq_ggml_type_get(t)->block; }

// llama-quantize's tensor_type_fallback for a type whose block does not divide cols.
static pq_ggml_type llama_fallback(pq_ggml_type t, int64_t cols) {
    pq_ggml_type f = t == PQ_GGML_Q4_K ? PQ_GGML_Q5_0 : t == PQ_GGML_Q6_K ? PQ_GGML_Q8_0 : PQ_GGML_F16;
    return cols % block_of(f) == 0 ? f : PQ_GGML_F16;
}

pq_status pq_gguf_tensor_type(pq_ggml_type target, pq_gguf_role role, int tied, int64_t cols, int fallback,
                              const char *name, pq_ggml_type *type, int *fell_back) {
    *fell_back = 0;
    pq_ggml_type t = target;
    if (role == PQ_GGUF_ROLE_VECTOR) t = PQ_GGML_F32;
    else if (target == PQ_GGML_F16) t = PQ_GGML_F16;
    else if (role == PQ_GGUF_ROLE_OUTPUT || (role == PQ_GGUF_ROLE_EMBED && tied))
        t = target == PQ_GGML_Q8_0 || cols % block_of(target) ? PQ_GGML_Q8_0 : PQ_GGML_Q6_K;
    if (cols % block_of(t) == 0) {
        *type = t;
        return PQ_OK;
    }
    pq_ggml_type f = llama_fallback(t, cols);
    if (role != PQ_GGUF_ROLE_LINEAR) { // the embeddings and the head: llama.cpp's choice, fallback included
        *type = f;
        return PQ_OK;
    }
    PQ_FAIL_IF(!fallback, PQ_ERR_ARG,
               "%s: rows of %lld values are not whole %s blocks of %d, so llama.cpp cannot load it as %s; its "
               "llama-quantize stores such a tensor as %s (--fallback does the same)",
               name, (long long)cols, pq_ggml_type_get(t)->name, block_of(t), pq_ggml_type_get(t)->name,
               pq_ggml_type_get(f)->name);
    *type = f;
    *fell_back = 1;
    return PQ_OK;
}

int pq_gguf_permutes_qk(const pq_config *cfg) { return cfg->arch != PQ_ARCH_QWEN2; }

static uint32_t ftype_of(pq_ggml_type t) {
    for (int i = 0; i < NTARGETS; i++)
        if (TARGETS[i].type == t) return TARGETS[i].ftype;
    return 0;
}

pq_status pq_gguf_write_model_meta(pq_gguf_writer *w, const pq_config *cfg, const char *name, pq_ggml_type target) {
    PQ_FAIL_IF(cfg->rope_llama3, PQ_ERR_FORMAT,
               "%s: Llama 3 rope scaling (rope_scaling.rope_type llama3) is not written to GGUF by pq (llama.cpp "
               "needs a rope_freqs tensor for it)", name);
    PQ_FAIL_IF(cfg->sliding_window > 0, PQ_ERR_FORMAT,
               "%s: a sliding attention window (%d) has no llama.cpp equivalent for this architecture", name,
               cfg->sliding_window);
    const char *arch = cfg->arch == PQ_ARCH_QWEN2 ? "qwen2" : "llama";
    char k[96];
#define AK(s) (snprintf(k, sizeof k, "%s.%s", arch, s), k)
    PQ_TRY(pq_gguf_writer_kv_str(w, "general.architecture", arch, strlen(arch)));
    PQ_TRY(pq_gguf_writer_kv_str(w, "general.type", "model", 5));
    PQ_TRY(pq_gguf_writer_kv_str(w, "general.name", name, strlen(name)));
    PQ_TRY(pq_gguf_writer_kv_u32(w, "general.file_type", ftype_of(target)));
    PQ_TRY(pq_gguf_writer_kv_u32(w, "general.quantization_version", 2));
    PQ_TRY(pq_gguf_writer_kv_u32(w, AK("block_count"), (uint32_t)cfg->n_layers));
    PQ_TRY(pq_gguf_writer_kv_u32(w, AK("context_length"), (uint32_t)cfg->max_pos));
    PQ_TRY(pq_gguf_writer_kv_u32(w, AK("embedding_length"), (uint32_t)cfg->hidden));
    PQ_TRY(pq_gguf_writer_kv_u32(w, AK("feed_forward_length"), (uint32_t)cfg->intermediate));
    PQ_TRY(pq_gguf_writer_kv_u32(w, AK("attention.head_count"), (uint32_t)cfg->n_heads));
    PQ_TRY(pq_gguf_writer_kv_u32(w, AK("attention.head_count_kv"), (uint32_t)cfg->n_kv_heads));
    PQ_TRY(pq_gguf_writer_kv_u32(w, AK("attention.key_length"), (uint32_t)cfg->head_dim));
    PQ_TRY(pq_gguf_writer_kv_u32(w, AK("attention.value_length"), (uint32_t)cfg->head_dim));
    PQ_TRY(pq_gguf_writer_kv_f32(w, AK("attention.layer_norm_rms_epsilon"), cfg->rms_eps));
    PQ_TRY(pq_gguf_writer_kv_f32(w, AK("rope.freq_base"), cfg->rope_theta));
    PQ_TRY(pq_gguf_writer_kv_u32(w, AK("rope.dimension_count"), (uint32_t)cfg->head_dim));
    PQ_TRY(pq_gguf_writer_kv_u32(w, AK("vocab_size"), (uint32_t)cfg->vocab));
#undef AK
    return PQ_OK;
}
