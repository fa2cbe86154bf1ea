// eval/gguf_out.c — a model written as a llama.cpp GGUF file (see
// gguf_out.h): the plan of its tensors, the metadata, and every tensor but
// the decoder-layer linears.
#include "eval/gguf_out.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "common/sys.h"
#include "formats/fileio.h"
#include "formats/gguf_write.h"
#include "kernels/ggml_dequant.h"
#include "kernels/ggml_quant.h"

#define CHUNK_ROWS 64

typedef enum { SRC_LINEAR, SRC_EMBED, SRC_HEAD, SRC_ATTN_NORM, SRC_MLP_NORM, SRC_BIAS, SRC_FINAL_NORM } src_kind;

typedef struct {
    char name[96];         // GGUF name
    char hf[160];          // Hugging Face name
    src_kind src;
    int layer, slot;       // SRC_LINEAR, SRC_BIAS, the norms: its layer (and slot)
    int n_dims;
    int64_t rows, cols;    // a vector: rows 1
    pq_ggml_type type;
    int permute;           // 1 q, 2 k (rows of a matrix, elements of a bias)
    int fell_back;
} ptensor;

struct pq_gguf_out {
    pq_gguf_out_params p;
    pq_gguf_writer *w;
    ptensor *t;
    int n;
    int tied;
};

// ---- the plan ------------------------------------------------------------------------

static pq_status add(pq_gguf_out *g, const char *hf, src_kind src, int layer, int slot, int64_t rows, int64_t cols,
                     int n_dims) {
    ptensor *e = &g->t[g->n];
    *e = (ptensor){.src = src, .layer = layer, .slot = slot, .n_dims = n_dims, .rows = rows, .cols = cols};
    snprintf(e->hf, sizeof e->hf, "%s", hf);
    PQ_TRY(pq_gguf_name_from_hf(hf, g->p.m->cfg.n_layers, e->name, sizeof e->name, &e->permute));
    if (!pq_gguf_permutes_qk(&g->p.m->cfg)) e->permute = 0;
    pq_gguf_role role = pq_gguf_role_of(e->name, n_dims);
    PQ_TRY(pq_gguf_tensor_type(g->p.target, role, g->tied, cols, g->p.fallback, e->name, &e->type, &e->fell_back));
    g->n++;
    return PQ_OK;
}

static pq_status plan(pq_gguf_out *g) {
    const pq_model *m = g->p.m;
    const pq_config *c = &m->cfg;
    g->tied = c->tie_embeddings;
    g->t = calloc((size_t)(3 + c->n_layers * (2 + 2 * PQ_NLINEAR)), sizeof *g->t);
    PQ_FAIL_IF(!g->t, PQ_ERR_NOMEM, "out of memory");
    char hf[160];
    PQ_TRY(add(g, "model.embed_tokens.weight", SRC_EMBED, -1, -1, c->vocab, c->hidden, 2));
    for (int l = 0; l < c->n_layers; l++) {
        snprintf(hf, sizeof hf, "model.layers.%d.input_layernorm.weight", l);
        PQ_TRY(add(g, hf, SRC_ATTN_NORM, l, -1, 1, c->hidden, 1));
        for (int s = 0; s < PQ_NLINEAR; s++) {
            const pq_linear *L = pq_model_linear(m, l, (pq_linear_slot)s);
            if (s == PQ_GATE) {
                snprintf(hf, sizeof hf, "model.layers.%d.post_attention_layernorm.weight", l);
                PQ_TRY(add(g, hf, SRC_MLP_NORM, l, -1, 1, c->hidden, 1));
            }
            snprintf(hf, sizeof hf, "model.layers.%d.%s.weight", l, pq_linear_slot_name((pq_linear_slot)s));
            PQ_TRY(add(g, hf, SRC_LINEAR, l, s, L->rows, L->cols, 2));
            if (m->layers[l].bias[s]) {
                snprintf(hf, sizeof hf, "model.layers.%d.%s.bias", l, pq_linear_slot_name((pq_linear_slot)s));
                PQ_TRY(add(g, hf, SRC_BIAS, l, s, 1, L->rows, 1));
            }
        }
    }
    PQ_TRY(add(g, "model.norm.weight", SRC_FINAL_NORM, -1, -1, 1, c->hidden, 1));
    if (!g->tied) PQ_TRY(add(g, "lm_head.weight", SRC_HEAD, -1, -1, m->lm_head.rows, m->lm_head.cols, 2));
    return PQ_OK;
}

static ptensor *find_linear(const pq_gguf_out *g, int layer, pq_linear_slot slot) {
    for (int i = 0; i < g->n; i++)
        if (g->t[i].src == SRC_LINEAR && g->t[i].layer == layer && g->t[i].slot == (int)slot) return &g->t[i];
    PQ_ASSERT(!"gguf_out: no such linear");
    return NULL;
}

static size_t row_bytes(const ptensor *e) {
    const pq_ggml_type_info *ti = pq_ggml_type_get(e->type);
    return (size_t)(e->cols / ti->block) * (size_t)ti->bytes;
}

// ---- metadata ------------------------------------------------------------------------

// A side file of the model (NULL if absent): from the GGUF view, or read
// from the directory into *owned.
static const char *side_file(const pq_model *m, const char *name, char **owned) {
    *owned = NULL;
    if (m->gguf) return pq_gguf_hf_file(m->gguf, name);
    char path[2048];
    size_t len;
    if (pq_path_join(path, sizeof path, m->dir, name) != PQ_OK || !pq_file_exists(path)) return NULL;
    return pq_file_read(path, (size_t)256 << 20, owned, &len) == PQ_OK ? *owned : NULL;
}

static pq_status write_meta(pq_gguf_out *g) {
    const pq_gguf_out_params *p = &g->p;
    const char *base = strrchr(p->source, '/');
    char name[256];
    snprintf(name, sizeof name, "%s", base && base[1] ? base + 1 : p->source);
    char *dot = strstr(name, ".gguf");
    if (dot && dot[5] == '\0') *dot = '\0';
    PQ_TRY(pq_gguf_write_model_meta(g->w, &p->m->cfg, name, p->target));
    for (int i = 0; i < p->n_meta; i++)
        PQ_TRY(pq_gguf_writer_kv_str(g->w, p->meta[2 * i], p->meta[2 * i + 1], strlen(p->meta[2 * i + 1])));
    char *tj_own, *cj_own, *ct_own;
    const char *tj = side_file(p->m, "tokenizer.json", &tj_own), *cj = side_file(p->m, "tokenizer_config.json", &cj_own),
               *ct = side_file(p->m, "chat_template.jinja", &ct_own);
    pq_status s = tj ? pq_gguf_write_tokenizer_meta(g->w, &p->m->cfg, tj, cj, ct, p->source)
                     : PQ_FAIL(PQ_ERR_FORMAT, "%s: no tokenizer.json (a GGUF file carries its tokenizer)", p->source);
    free(tj_own), free(cj_own), free(ct_own);
    return s;
}

// ---- tensors from the source -------------------------------------------------------------

// The source GGUF's tensor of the same name and type, to copy (NULL: none).
static const pq_gguf_tensor *gguf_source(const pq_gguf_out *g, const ptensor *e) {
    if (!g->p.m->gguf) return NULL;
    const pq_gguf_tensor *t = pq_gguf_tensor_find(pq_gguf_hf_gguf(g->p.m->gguf), e->name);
    return t && t->type == (uint32_t)e->type ? t : NULL;
}

typedef struct {
    const pq_linear *L;
    const ptensor *e;
    int64_t r0, nrows;
    uint8_t *out;          // [nrows][row_bytes]
    float *scratch;        // per thread: [CHUNK_ROWS][cols]
    int64_t *bad;          // [chunks] 1 + the first row with a value F16 cannot hold, or 0
} rows_job;

// Rows of an embedding or head as F16 or quantized with ggml's RTN.
static void rows_chunk(void *ctx, int ci, int tid) {
    rows_job *j = ctx;
    int64_t a = (int64_t)ci * CHUNK_ROWS, b = a + CHUNK_ROWS < j->nrows ? a + CHUNK_ROWS : j->nrows, cols = j->e->cols;
    float *x = j->scratch + (size_t)tid * CHUNK_ROWS * (size_t)cols;
    size_t rb = row_bytes(j->e);
    pq_linear_rows(j->L, (int)(j->r0 + a), (int)(b - a), x);
    for (int64_t r = a; r < b; r++) {
        const float *xr = x + (size_t)(r - a) * cols;
        uint8_t *o = j->out + (size_t)r * rb;
        if (j->e->type == PQ_GGML_F16) {
            for (int64_t c = 0; c < cols; c++) {
                uint16_t h = pq_f32_to_fp16(xr[c]);
                memcpy(o + 2 * c, &h, 2);
                if (!isfinite(pq_fp16_to_f32(h)) && !j->bad[ci]) j->bad[ci] = j->r0 + r + 1;
            }
        } else {
            for (int64_t c = 0; c < cols; c++)
                if (!isfinite(xr[c]) && !j->bad[ci]) j->bad[ci] = j->r0 + r + 1;
            pq_ggml_quant_ref(j->e->type, xr, o, cols, NULL);
        }
    }
}

// The embedding or head, CHUNK_ROWS x threads rows at a time.
static pq_status put_matrix(pq_gguf_out *g, const ptensor *e, const pq_linear *L) {
    const pq_gguf_tensor *src = gguf_source(g, e);
    if (src) return pq_gguf_writer_put(g->w, e->name, src->data, src->nbytes);
    int nt = pq_pool_size(g->p.pool);
    int64_t step = (int64_t)CHUNK_ROWS * nt * 4;
    size_t rb = row_bytes(e);
    uint8_t *out = pq_alloc((size_t)e->rows * rb);
    float *scratch = pq_alloc((size_t)nt * CHUNK_ROWS * (size_t)e->cols * sizeof(float));
    int64_t *bad = calloc((size_t)(step / CHUNK_ROWS), sizeof *bad);
    pq_status s = PQ_OK;
    PQ_CHECK_GOTO(!out || !scratch || !bad, s, PQ_ERR_NOMEM, "%s: out of memory for %s", g->p.source, e->name);
    for (int64_t r0 = 0; r0 < e->rows; r0 += step) {
        int64_t n = e->rows - r0 < step ? e->rows - r0 : step;
        rows_job j = {L, e, r0, n, out + (size_t)r0 * rb, scratch, bad};
        memset(bad, 0, (size_t)(step / CHUNK_ROWS) * sizeof *bad);
        pq_pool_for(g->p.pool, (int)((n + CHUNK_ROWS - 1) / CHUNK_ROWS), rows_chunk, &j);
        for (int64_t c = 0; c < step / CHUNK_ROWS; c++)
            PQ_CHECK_GOTO(bad[c], s, PQ_ERR_NUMERIC, "%s/%s: row %lld holds a value that is not finite%s", g->p.source,
                          e->hf, (long long)bad[c] - 1, e->type == PQ_GGML_F16 ? " in F16" : "");
    }
    s = pq_gguf_writer_put(g->w, e->name, out, (size_t)e->rows * rb);
done:
    pq_free(out), pq_free(scratch), free(bad);
    return s;
}

// A vector as F32, permuted like its rows for q/k biases.
static pq_status put_f32(pq_gguf_out *g, const ptensor *e, const float *v) {
    float *o = malloc((size_t)e->cols * sizeof *o);
    PQ_FAIL_IF(!o, PQ_ERR_NOMEM, "out of memory");
    int64_t hd = g->p.m->cfg.head_dim;
    for (int64_t i = 0; i < e->cols; i++) o[i] = e->permute ? v[(i / hd) * hd + pq_gguf_hf_row(i % hd, hd)] : v[i];
    for (int64_t i = 0; i < e->cols; i++)
        if (!isfinite(o[i])) {
            free(o);
            return PQ_FAIL(PQ_ERR_NUMERIC, "%s/%s: element %lld is not finite", g->p.source, e->hf, (long long)i);
        }
    pq_status s = pq_gguf_writer_put(g->w, e->name, o, (size_t)e->cols * sizeof *o);
    free(o);
    return s;
}

static pq_status put_sources(pq_gguf_out *g) {
    const pq_model *m = g->p.m;
    for (int i = 0; i < g->n; i++) {
        const ptensor *e = &g->t[i];
        int layer_vector = e->src == SRC_ATTN_NORM || e->src == SRC_MLP_NORM || e->src == SRC_BIAS;
        if (e->src == SRC_LINEAR || (layer_vector && g->p.defer_vectors)) continue;
        switch (e->src) {
        case SRC_EMBED: PQ_TRY(put_matrix(g, e, &m->embed)); break;
        case SRC_HEAD: PQ_TRY(put_matrix(g, e, &m->lm_head)); break;
        case SRC_ATTN_NORM: PQ_TRY(put_f32(g, e, m->layers[e->layer].attn_norm)); break;
        case SRC_MLP_NORM: PQ_TRY(put_f32(g, e, m->layers[e->layer].mlp_norm)); break;
        case SRC_BIAS: PQ_TRY(put_f32(g, e, m->layers[e->layer].bias[e->slot])); break;
        case SRC_FINAL_NORM: PQ_TRY(put_f32(g, e, m->final_norm)); break;
        default: break;
        }
    }
    return PQ_OK;
}

// ---- the interface ---------------------------------------------------------------------

pq_status pq_gguf_out_begin(const pq_gguf_out_params *p, pq_gguf_out **out) {
    *out = NULL;
    pq_gguf_out *g = calloc(1, sizeof *g);
    PQ_FAIL_IF(!g, PQ_ERR_NOMEM, "out of memory");
    g->p = *p;
    pq_status s = PQ_OK;
    PQ_TRY_GOTO(s, plan(g));
    PQ_TRY_GOTO(s, pq_gguf_writer_create(p->path, &g->w));
    PQ_TRY_GOTO(s, write_meta(g));
    for (int i = 0; i < g->n; i++) {
        int64_t ne[2] = {g->t[i].cols, g->t[i].rows};
        PQ_TRY_GOTO(s, pq_gguf_writer_declare(g->w, g->t[i].name, g->t[i].n_dims, ne, (uint32_t)g->t[i].type));
    }
    PQ_TRY_GOTO(s, p->resume ? pq_gguf_writer_resume(g->w) : pq_gguf_writer_begin(g->w));
    PQ_TRY_GOTO(s, put_sources(g));
    *out = g;
    return PQ_OK;
done:
    pq_gguf_out_free(g, p->resume);
    return s;
}

pq_ggml_type pq_gguf_out_linear_type(const pq_gguf_out *g, int layer, pq_linear_slot slot, int *fell_back) {
    const ptensor *e = find_linear(g, layer, slot);
    if (fell_back) *fell_back = e->fell_back;
    return e->type;
}

size_t pq_gguf_out_row_bytes(const pq_gguf_out *g, int layer, pq_linear_slot slot) {
    return row_bytes(find_linear(g, layer, slot));
}

pq_status pq_gguf_out_put_linear(pq_gguf_out *g, int layer, pq_linear_slot slot, const void *rows) {
    const ptensor *e = find_linear(g, layer, slot);
    size_t rb = row_bytes(e), n = (size_t)e->rows * rb;
    if (!e->permute) return pq_gguf_writer_put(g->w, e->name, rows, n);
    uint8_t *o = pq_alloc(n);
    PQ_FAIL_IF(!o, PQ_ERR_NOMEM, "out of memory for %s", e->name);
    int64_t hd = g->p.m->cfg.head_dim;
    for (int64_t r = 0; r < e->rows; r++)
        memcpy(o + (size_t)r * rb, (const uint8_t *)rows + (size_t)((r / hd) * hd + pq_gguf_hf_row(r % hd, hd)) * rb, rb);
    pq_status s = pq_gguf_writer_put(g->w, e->name, o, n);
    pq_free(o);
    return s;
}

pq_status pq_gguf_out_put_vector(pq_gguf_out *g, const char *hf_name, const float *v, int n) {
    for (int i = 0; i < g->n; i++)
        if (g->t[i].n_dims == 1 && strcmp(g->t[i].hf, hf_name) == 0) {
            PQ_FAIL_IF(g->t[i].cols != n, PQ_ERR_ARG, "%s: %d values for %lld", hf_name, n, (long long)g->t[i].cols);
            return put_f32(g, &g->t[i], v);
        }
    return PQ_FAIL(PQ_ERR_ARG, "%s: not a vector of the GGUF file", hf_name);
}

pq_status pq_gguf_out_read_linear(pq_gguf_out *g, int layer, pq_linear_slot slot, float *out) {
    const ptensor *e = find_linear(g, layer, slot);
    size_t rb = row_bytes(e), n = (size_t)e->rows * rb;
    uint8_t *b = pq_alloc(n);
    PQ_FAIL_IF(!b, PQ_ERR_NOMEM, "out of memory for %s", e->name);
    pq_status s = pq_gguf_writer_read(g->w, e->name, b, n);
    int64_t hd = g->p.m->cfg.head_dim;
    for (int64_t r = 0; s == PQ_OK && r < e->rows; r++) {
        int64_t hr = e->permute ? (r / hd) * hd + pq_gguf_hf_row(r % hd, hd) : r;
        pq_ggml_dequant_ref(e->type, b + (size_t)r * rb, out + (size_t)hr * e->cols, e->cols);
    }
    pq_free(b);
    return s;
}

pq_status pq_gguf_out_sync(pq_gguf_out *g) { return pq_gguf_writer_sync(g->w); }

pq_status pq_gguf_out_commit(pq_gguf_out *g, pq_gguf_out_stats *st) {
    PQ_TRY(pq_gguf_writer_commit(g->w));
    memset(st, 0, sizeof *st);
    st->n_tensors = g->n;
    st->file_bytes = pq_gguf_writer_total_bytes(g->w);
    for (int i = 0; i < g->n; i++) {
        const ptensor *e = &g->t[i];
        if (e->src != SRC_LINEAR) {
            st->n_copied += (e->src == SRC_EMBED || e->src == SRC_HEAD) && gguf_source(g, e) != NULL;
            continue;
        }
        st->n_fallback += e->fell_back;
        st->linear_weights += (long long)e->rows * e->cols;
        st->linear_bytes += (unsigned long long)e->rows * row_bytes(e);
    }
    return PQ_OK;
}

const char *pq_gguf_out_tmp_path(const pq_gguf_out *g) { return pq_gguf_writer_tmp_path(g->w); }

void pq_gguf_out_free(pq_gguf_out *g, int keep) {
    if (!g) return;
    if (keep) pq_gguf_writer_keep_tmp(g->w);
    pq_gguf_writer_free(g->w);
    free(g->t);
    free(g);
}
