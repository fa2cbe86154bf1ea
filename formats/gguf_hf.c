// formats/gguf_hf.c — the tensors of a GGUF file under Hugging Face names
// (formats/gguf_hf.h): names mapped, shapes reversed, llama's Q/K rows
// un-permuted, block types dequantized to F32.
#include "formats/gguf_hf.h"

#include <stdlib.h>
#include <string.h>

#include "common/sys.h"
#include "formats/config.h"
#include "kernels/ggml_dequant.h"

struct pq_gguf_hf {
    pq_gguf *gguf;
    char *files[PQ_GGUF_HF_NFILES]; // texts, in pq_gguf_hf_file_names order
    pq_st *st;
    void **owned; // tensor data the view made (dequantized or un-permuted)
    int n_owned;
};

const char *const pq_gguf_hf_file_names[PQ_GGUF_HF_NFILES] = {"config.json", "generation_config.json", "tokenizer.json",
                                                              "tokenizer_config.json"};

static const struct {
    const char *gguf, *hf;
} GLOBAL_NAMES[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

// per layer: "blk.N.<gguf>" -> "model.layers.N.<hf>"; permute: 1 for Q, 2 for K
static const struct {
    const char *gguf, *hf;
    int permute;
} LAYER_NAMES[] = {
    {"attn_norm.weight", "input_layernorm.weight", 0},
    {"ffn_norm.weight", "post_attention_layernorm.weight", 0},
    {"attn_q.weight", "self_attn.q_proj.weight", 1},
    {"attn_k.weight", "self_attn.k_proj.weight", 2},
    {"attn_v.weight", "self_attn.v_proj.weight", 0},
    {"attn_output.weight", "self_attn.o_proj.weight", 0},
    {"attn_q.bias", "self_attn.q_proj.bias", 1},
    {"attn_k.bias", "self_attn.k_proj.bias", 2},
    {"attn_v.bias", "self_attn.v_proj.bias", 0},
    {"ffn_gate.weight", "mlp.gate_proj.weight", 0},
    {"ffn_up.weight", "mlp.up_proj.weight", 0},
    {"ffn_down.weight", "mlp.down_proj.weight", 0},
};

// The Hugging Face name of a GGUF tensor into out; *permute as LAYER_NAMES.
static pq_status hf_name(const char *file, const char *name, int n_layers, char *out, size_t cap, int *permute) {
    *permute = 0;
    for (size_t i = 0; i < sizeof GLOBAL_NAMES / sizeof GLOBAL_NAMES[0]; i++)
        if (strcmp(name, GLOBAL_NAMES[i].gguf) == 0) {
            snprintf(out, cap, "%s", GLOBAL_NAMES[i].hf);
            return PQ_OK;
        }
    int layer = -1, n = 0;
    if (sscanf(name, "blk.%d.%n", &layer, &n) == 1 && n > 0 && layer >= 0 && layer < n_layers)
        for (size_t i = 0; i < sizeof LAYER_NAMES / sizeof LAYER_NAMES[0]; i++)
            if (strcmp(name + n, LAYER_NAMES[i].gguf) == 0) {
                snprintf(out, cap, "model.layers.%d.%s", layer, LAYER_NAMES[i].hf);
                *permute = LAYER_NAMES[i].permute;
                return PQ_OK;
            }
    return PQ_FAIL(PQ_ERR_FORMAT, "%s: tensor '%.200s' is not one pq knows for this architecture", file, name);
}

pq_status pq_gguf_name_from_hf(const char *hf, int n_layers, char *out, size_t cap, int *permute) {
    *permute = 0;
    for (size_t i = 0; i < sizeof GLOBAL_NAMES / sizeof GLOBAL_NAMES[0]; i++)
        if (strcmp(hf, GLOBAL_NAMES[i].hf) == 0) {
            snprintf(out, cap, "%s", GLOBAL_NAMES[i].gguf);
            return PQ_OK;
        }
    int layer = -1, n = 0;
    if (sscanf(hf, "model.layers.%d.%n", &layer, &n) == 1 && n > 0 && layer >= 0 && layer < n_layers)
        for (size_t i = 0; i < sizeof LAYER_NAMES / sizeof LAYER_NAMES[0]; i++)
            if (strcmp(hf + n, LAYER_NAMES[i].hf) == 0) {
                snprintf(out, cap, "blk.%d.%s", layer, LAYER_NAMES[i].gguf);
                *permute = LAYER_NAMES[i].permute;
                return PQ_OK;
            }
    return PQ_FAIL(PQ_ERR_FORMAT, "tensor '%.200s' has no GGUF name (pq writes the llama and qwen2 tensors)", hf);
}

static pq_status own(pq_gguf_hf *hf, size_t bytes, void **out) {
    void **p = realloc(hf->owned, (size_t)(hf->n_owned + 1) * sizeof *p);
    PQ_FAIL_IF(!p, PQ_ERR_NOMEM, "out of memory");
    hf->owned = p;
    void *d = pq_alloc(bytes ? bytes : 1);
    PQ_FAIL_IF(!d, PQ_ERR_NOMEM, "%s: out of memory for %zu bytes of tensor data", pq_gguf_path(hf->gguf), bytes);
    hf->owned[hf->n_owned++] = d;
    *out = d;
    return PQ_OK;
}

// Row k of a head of hd rows in the GGUF tensor is row hf_row(k) of that
// head in the Hugging Face one: GGUF row 2i + j holds Hugging Face row
// j * hd/2 + i.
static int64_t hf_row(int64_t k, int64_t hd) { return (k % 2) * (hd / 2) + k / 2; }

static int stored_dtype(uint32_t type) {
    return type == PQ_GGML_F16 ? PQ_DT_F16 : type == PQ_GGML_BF16 ? PQ_DT_BF16 : type == PQ_GGML_F32 ? PQ_DT_F32 : -1;
}

pq_dtype pq_gguf_matrix_dtype(const pq_gguf *g) {
    int f16 = 0, bf16 = 0, other = 0;
    for (int i = 0; i < pq_gguf_tensor_count(g); i++) {
        const pq_gguf_tensor *t = pq_gguf_tensor_at(g, i);
        if (t->n_dims < 2) continue;
        f16 += t->type == PQ_GGML_F16;
        bf16 += t->type == PQ_GGML_BF16;
        other += t->type != PQ_GGML_F16 && t->type != PQ_GGML_BF16;
    }
    return other || (f16 && bf16) ? PQ_DT_F32 : bf16 ? PQ_DT_BF16 : PQ_DT_F16;
}

// One tensor of the view: its Hugging Face name, shape, dtype and data.
static pq_status map_tensor(pq_gguf_hf *hf, const pq_config *cfg, pq_dtype matrix_dt, const pq_gguf_tensor *gt,
                            pq_tensor *t, char *name_buf, size_t cap) {
    const char *file = pq_gguf_path(hf->gguf);
    int permute;
    PQ_TRY(hf_name(file, gt->name, cfg->n_layers, name_buf, cap, &permute));
    if (cfg->arch == PQ_ARCH_QWEN2) permute = 0; // llama.cpp runs qwen2 with NEOX rope: stored as Hugging Face
    const pq_ggml_type_info *ti = pq_ggml_type_get(gt->type);
    PQ_FAIL_IF(!pq_ggml_can_dequant(gt->type), PQ_ERR_FORMAT, "%s: tensor '%.200s' has type %s, which pq cannot read",
               file, gt->name, ti->name);
    *t = (pq_tensor){.name = name_buf, .ndim = gt->n_dims, .numel = gt->numel};
    for (int d = 0; d < gt->n_dims; d++) t->shape[d] = gt->ne[gt->n_dims - 1 - d];
    int stored = stored_dtype(gt->type);
    t->dtype = gt->n_dims >= 2 ? matrix_dt : stored >= 0 ? (pq_dtype)stored : PQ_DT_F32;
    t->nbytes = (size_t)gt->numel * pq_dtype_size(t->dtype);
    int as_stored = (int)t->dtype == stored;
    if (as_stored && !permute) {
        t->data = gt->data;
        return PQ_OK;
    }
    int64_t rows = t->shape[0], hd = cfg->head_dim, heads = permute == 1 ? cfg->n_heads : cfg->n_kv_heads;
    PQ_FAIL_IF(permute && (gt->n_dims > 2 || rows != heads * hd), PQ_ERR_FORMAT,
               "%s: tensor '%.200s' has %lld rows, not %lld heads x %lld", file, gt->name, (long long)rows,
               (long long)heads, (long long)hd);
    void *out = NULL, *tmp = NULL;
    PQ_TRY(own(hf, t->nbytes, &out));
    if (as_stored) memcpy(out, gt->data, t->nbytes);
    else pq_ggml_dequant_ref((pq_ggml_type)gt->type, gt->data, out, gt->numel); // exact; rows are whole blocks
    size_t row_bytes = t->nbytes / (size_t)rows;
    if (permute) {
        tmp = malloc((size_t)hd * row_bytes);
        PQ_FAIL_IF(!tmp, PQ_ERR_NOMEM, "%s: out of memory", file);
    }
    for (int64_t h = 0; permute && h < heads; h++) { // head h's rows, gathered then put back in their places
        uint8_t *head = (uint8_t *)out + (size_t)(h * hd) * row_bytes;
        memcpy(tmp, head, (size_t)hd * row_bytes);
        for (int64_t r = 0; r < hd; r++)
            memcpy(head + (size_t)hf_row(r, hd) * row_bytes, (uint8_t *)tmp + (size_t)r * row_bytes, row_bytes);
    }
    free(tmp);
    t->data = out;
    return PQ_OK;
}

static pq_status build(pq_gguf_hf *hf) {
    const pq_gguf *g = hf->gguf;
    const char *file = pq_gguf_path(g);
    PQ_TRY(pq_gguf_config_json(g, &hf->files[0], &hf->files[1]));
    PQ_TRY(pq_gguf_tokenizer_json(g, &hf->files[2], &hf->files[3]));
    pq_config cfg;
    PQ_TRY(pq_config_parse(hf->files[0], strlen(hf->files[0]), file, &cfg));
    int n = pq_gguf_tensor_count(g);
    pq_tensor *t = calloc((size_t)n + 1, sizeof *t);
    char(*names)[256] = calloc((size_t)n + 1, sizeof *names);
    pq_status s = PQ_OK;
    PQ_CHECK_GOTO(!t || !names, s, PQ_ERR_NOMEM, "%s: out of memory", file);
    pq_dtype mdt = pq_gguf_matrix_dtype(g);
    for (int i = 0; i < n; i++)
        PQ_TRY_GOTO(s, map_tensor(hf, &cfg, mdt, pq_gguf_tensor_at(g, i), &t[i], names[i], sizeof names[i]));
    s = pq_st_open_view(file, pq_gguf_file_bytes(g), t, n, &hf->st);
done:
    free(t);
    free(names);
    return s;
}

pq_status pq_gguf_hf_from(pq_gguf *g, pq_gguf_hf **out) {
    *out = NULL;
    pq_gguf_hf *hf = calloc(1, sizeof *hf);
    if (!hf) {
        pq_gguf_close(g);
        return PQ_FAIL(PQ_ERR_NOMEM, "%s: out of memory", pq_gguf_path(g));
    }
    hf->gguf = g;
    pq_status s = build(hf);
    if (s != PQ_OK) {
        pq_gguf_hf_free(hf);
        return s;
    }
    *out = hf;
    return PQ_OK;
}

pq_status pq_gguf_hf_open(const char *path, pq_gguf_hf **out) {
    *out = NULL;
    pq_gguf *g;
    PQ_TRY(pq_gguf_open(path, &g));
    return pq_gguf_hf_from(g, out);
}

void pq_gguf_hf_free(pq_gguf_hf *hf) {
    if (!hf) return;
    pq_st_close(hf->st);
    for (int i = 0; i < hf->n_owned; i++) pq_free(hf->owned[i]);
    free(hf->owned);
    for (int i = 0; i < PQ_GGUF_HF_NFILES; i++) free(hf->files[i]);
    pq_gguf_close(hf->gguf);
    free(hf);
}

pq_st *pq_gguf_hf_st(const pq_gguf_hf *hf) { return hf->st; }
const pq_gguf *pq_gguf_hf_gguf(const pq_gguf_hf *hf) { return hf->gguf; }

const char *pq_gguf_hf_file(const pq_gguf_hf *hf, const char *name) {
    for (int i = 0; i < PQ_GGUF_HF_NFILES; i++)
        if (strcmp(name, pq_gguf_hf_file_names[i]) == 0) return hf->files[i];
    return NULL;
}
