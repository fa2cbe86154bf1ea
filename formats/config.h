// formats/config.h — the model's config.json: which architecture and its sizes.
//
// Supported: LlamaForCausalLM (Llama 2/3, TinyLlama, SmolLM), MistralForCausalLM,
// Qwen2ForCausalLM (q/k/v bias). Anything else is refused by name. Every
// field is type-checked and range-checked; sizes must be consistent
// (hidden = heads x head_dim unless head_dim is given, heads divisible by
// kv heads). The sizes are required; other fields absent from the file take
// the defaults of transformers' config class for the architecture; a field
// pq cannot honour (a RoPE type, partial_rotary_factor, mlp_bias) is refused
// by name rather than ignored. RoPE is read from "rope_theta" +
// "rope_scaling" (transformers 4) or "rope_parameters" (transformers 5).
#ifndef PQ_CONFIG_H
#define PQ_CONFIG_H

#include <stddef.h>

#include "common/status.h"

typedef enum { PQ_ARCH_LLAMA, PQ_ARCH_MISTRAL, PQ_ARCH_QWEN2 } pq_arch;

typedef struct {
    pq_arch arch;
    char arch_name[64];      // "LlamaForCausalLM", ...
    int hidden;              // hidden_size
    int intermediate;        // intermediate_size
    int n_layers;            // num_hidden_layers
    int n_heads;             // num_attention_heads
    int n_kv_heads;          // num_key_value_heads (= n_heads if absent)
    int head_dim;            // head_dim (= hidden / n_heads if absent)
    int vocab;               // vocab_size
    int max_pos;             // max_position_embeddings
    float rms_eps;           // rms_norm_eps
    float rope_theta;        // rope_theta (10000 if absent)
    int tie_embeddings;      // tie_word_embeddings
    int qkv_bias;            // Qwen2 always; Llama "attention_bias"
    int o_bias;              // Llama "attention_bias" (o_proj has a bias too; Qwen2's has none)
    int sliding_window;      // Mistral/Qwen2 window (0 = none or disabled)
    int window_from_layer;   // the window applies to layers >= this (Qwen2's max_window_layers; 0 otherwise)
    int bos_id, eos_id;      // -1 if absent
    // rope_scaling {"rope_type": "llama3", ...}; rope_llama3 == 0 means none
    int rope_llama3;
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_orig_max_pos;
    char torch_dtype[16];    // "float16", "bfloat16", "float32" or ""
} pq_config;

// Parses config.json text. `name` (usually the path) prefixes error messages.
pq_status pq_config_parse(const char *json, size_t len, const char *name, pq_config *out);
// Reads and parses a config.json file.
pq_status pq_config_load(const char *path, pq_config *out);

// The sliding window of decoder layer `layer` (0: full causal attention).
static inline int pq_config_window(const pq_config *c, int layer) {
    return layer >= c->window_from_layer ? c->sliding_window : 0;
}

// Parameter count of the model the config describes (embeddings and head
// counted once when tied).
long long pq_config_param_count(const pq_config *c);

#endif
