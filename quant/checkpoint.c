// quant/checkpoint.c — the packed checkpoint of a pq quantize run (see
// checkpoint.h).
#include "quant/checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/half.h"
#include "common/sys.h"
#include "common/version.h"
#include "formats/fileio.h"
#include "formats/gguf_hf.h"
#include "eval/gguf_out.h"
#include "formats/packed.h"
#include "quant/fold.h"

#define PATH_CAP 4096

const char *const PQ_CKPT_SIDE_FILES[PQ_CKPT_NSIDE_FILES] = {
    "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json",
    "added_tokens.json", "vocab.json", "merges.txt", "generation_config.json", "chat_template.jinja",
    "chat_template.json",
};

struct pq_ckpt {
    pq_ckpt_params p;
    char dir[PATH_CAP];
    pq_st_writer *w;
    json_t *layers;            // pq.json "layers": one entry per quantized linear, in order
    double err_sum, err_max, out_sum, out_max;
    int n_quantized, n_ragged, n_out;
    pq_st *tmp_st;             // resume: model.safetensors.tmp read back
    pq_packed_info tmp_info;
    pq_packed_info plan;       // with mix: its config groups and ignore list (quantization_config, resume)
    pq_gguf_out *gguf;         // a GGUF scheme: the .gguf file instead of the directory's files
    char gguf_path[PATH_CAP];
};

// ---- a GGUF scheme's output: one .gguf file (eval/gguf_out.h) -----------------------

static pq_status gguf_begin(pq_ckpt *c, const char *dir, int resume) {
    const pq_ckpt_params *p = &c->p;
    const char *base = strrchr(p->q->out, '/');
    PQ_TRY(pq_path_join(c->gguf_path, sizeof c->gguf_path, dir, base ? base + 1 : p->q->out));
    char desc[64], calib[96];
    pq_scheme_describe(p->scheme, desc, sizeof desc);
    const char *meta[16] = {"pq.version", PQ_VERSION, "pq.method", p->method, "pq.scheme", desc, "pq.source",
                            p->q->model, "pq.source_sha256", p->source_sha256};
    int n = 5;
    if (p->calib) {
        pq_calib_describe(p->calib->n, p->calib->len, p->q->calib.seed, p->q->calib.mode, p->bf16, calib,
                          sizeof calib);
        meta[2 * n] = "pq.calibration_sha256", meta[2 * n + 1] = p->calib->sha256, n++;
        meta[2 * n] = "pq.calibration", meta[2 * n + 1] = calib, n++;
    }
    pq_gguf_out_params gp = {.m = p->m, .source = p->q->model, .path = c->gguf_path,
                             .target = (pq_ggml_type)pq_scheme_ggml_type(p->scheme),
                             .fallback = p->scheme->gguf_fallback, .defer_vectors = p->folds, .resume = resume,
                             .meta = meta, .n_meta = n};
    return pq_gguf_out_begin(&gp, &c->gguf);
}

// The per-layer norms and biases of a method that folds: the folded ones
// from b, the others as the source has them.
static pq_status gguf_put_vectors(pq_ckpt *c, int layer, const pq_block_out *b) {
    const pq_layer *L = &c->p.m->layers[layer];
    char name[320], target[320];
    const float *src[2 + PQ_NLINEAR] = {L->attn_norm, L->mlp_norm};
    for (int s = 0; s < PQ_NLINEAR; s++) src[2 + s] = L->bias[s];
    for (int i = 0; i < 2 + PQ_NLINEAR; i++) {
        if (!src[i]) continue;
        if (i < 2) snprintf(name, sizeof name, "model.layers.%d.%s.weight", layer,
                            i ? "post_attention_layernorm" : "input_layernorm");
        else snprintf(name, sizeof name, "model.layers.%d.%s.bias", layer, pq_linear_slot_name((pq_linear_slot)(i - 2)));
        const float *v = src[i];
        int n = i < 2 ? c->p.m->cfg.hidden : L->lin[i - 2].rows;
        for (int g = 0; g < PQ_NGROUPS; g++) {
            if (!b->folded[g]) continue;
            pq_fold_target(layer, g, target, sizeof target);
            if (strcmp(target, name) == 0) v = b->folded[g];
        }
        PQ_TRY(pq_gguf_out_put_vector(c->gguf, name, v, n));
    }
    return PQ_OK;
}

static pq_status gguf_put_block(pq_ckpt *c, int layer, const pq_block_out *b) {
    for (int k = 0; k < PQ_NLINEAR; k++) {
        const pq_qtensor *q = b->q[k];
        PQ_FAIL_IF(!q->is_ggml || q->ggml != (int)pq_gguf_out_linear_type(c->gguf, layer, (pq_linear_slot)k, NULL),
                   PQ_ERR_ARG, "model.layers.%d.%s: not the GGUF type the file plans for it", layer,
                   pq_linear_slot_name((pq_linear_slot)k));
        PQ_TRY(pq_gguf_out_put_linear(c->gguf, layer, (pq_linear_slot)k, q->blocks));
    }
    return c->p.folds ? gguf_put_vectors(c, layer, b) : PQ_OK;
}

// Resume: a finished block's linears read back from the temporary file, exact.
static pq_status gguf_load_block(pq_ckpt *c, int layer, int folded, pq_layer *L, pq_ckpt_loaded *own) {
    PQ_FAIL_IF(folded, PQ_ERR_ARG, "a GGUF output does not read folded vectors back");
    for (int s = 0; s < PQ_NLINEAR; s++) {
        pq_linear *lin = &L->lin[s];
        float *w = pq_alloc((size_t)lin->rows * lin->cols * sizeof(float));
        PQ_FAIL_IF(!w, PQ_ERR_NOMEM, "out of memory");
        own->lin[s].p[0] = w;
        PQ_TRY(pq_gguf_out_read_linear(c->gguf, layer, (pq_linear_slot)s, w));
        *lin = (pq_linear){.fmt = PQ_W_DENSE, .rows = lin->rows, .cols = lin->cols, .dense_type = PQ_DENSE_F32,
                           .w = w, .bias = lin->bias};
    }
    return PQ_OK;
}

static pq_status gguf_commit(pq_ckpt *c, pq_quantize_result *res) {
    pq_gguf_out_stats st;
    PQ_TRY(pq_gguf_out_commit(c->gguf, &st));
    res->out_bytes = st.file_bytes;
    res->quant_bytes = (long long)st.linear_bytes;
    res->n_weights = st.linear_weights;
    res->n_gguf_fallback = st.n_fallback;
    res->bits_per_weight = st.linear_weights ? 8.0 * (double)st.linear_bytes / (double)st.linear_weights : 0;
    return PQ_OK;
}

// ---- which tensors are what -------------------------------------------------

// The source linear of a module whose bits pq.json counts, or NULL:
// "model.layers.L.<slot>" always, "lm_head" with quantize_head. *scheme:
// its scheme, NULL when a plan keeps it unquantized.
static const pq_linear *counted_linear(const pq_ckpt *c, const char *module, const pq_scheme **scheme) {
    const pq_model *m = c->p.m;
    *scheme = c->p.scheme;
    if (strcmp(module, "lm_head") == 0) return c->p.q->quantize_head ? &m->lm_head : NULL;
    int l, n = 0;
    if (sscanf(module, "model.layers.%d.%n", &l, &n) != 1 || n == 0 || l < 0 || l >= m->cfg.n_layers) return NULL;
    for (int s = 0; s < PQ_NLINEAR; s++)
        if (strcmp(module + n, pq_linear_slot_name((pq_linear_slot)s)) == 0) {
            const pq_mix_option *o = c->p.mix ? c->p.mix->linear[(size_t)l * PQ_NLINEAR + s] : NULL;
            if (o) *scheme = o->dense ? NULL : &o->scheme;
            return pq_model_linear(m, l, (pq_linear_slot)s);
        }
    return NULL;
}

// The source linear of a module and its scheme, or NULL if it is not quantized.
static const pq_linear *quantized_linear(const pq_ckpt *c, const char *module, const pq_scheme **scheme) {
    const pq_linear *L = counted_linear(c, module, scheme);
    return *scheme ? L : NULL;
}

// The module a tensor name belongs to ("a.b.weight_scale" -> "a.b") in out.
static void module_of(const char *name, char *out, size_t cap) {
    const char *dot = strrchr(name, '.');
    snprintf(out, cap, "%.*s", dot ? (int)(dot - name) : 0, name);
}

// Whether tensor `name` is the weight of a quantized linear.
static int is_quantized_weight(const pq_ckpt *c, const char *name) {
    char module[512];
    const pq_scheme *s;
    module_of(name, module, sizeof module);
    return quantized_linear(c, module, &s) && strcmp(name + strlen(module), ".weight") == 0;
}

// Whether tensor `name` is rewritten by the method (a norm or bias a scale
// folds into), not copied.
static int is_rewritten(const pq_ckpt *c, const char *name) {
    int l, n = 0;
    if (!c->p.folds || sscanf(name, "model.layers.%d.%n", &l, &n) != 1 || n == 0) return 0;
    char target[320];
    for (int g = 0; g < PQ_NGROUPS; g++) {
        if (!pq_fold_usable(&c->p.m->cfg, g)) continue;
        pq_fold_target(l, g, target, sizeof target);
        if (strcmp(name, target) == 0) return 1;
    }
    return 0;
}

// ---- the header --------------------------------------------------------------

// Every source tensor: the quantized linears' weights become their packed
// tensors, everything else is declared as it is.
static pq_status declare_all(pq_ckpt *c) {
    const pq_st *st = c->p.m->st;
    char module[512];
    for (int i = 0; i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        const pq_scheme *s;
        module_of(t->name, module, sizeof module);
        const pq_linear *L = quantized_linear(c, module, &s);
        if (L && strcmp(t->name + strlen(module), ".weight") == 0)
            PQ_TRY(pq_packed_declare(c->w, module, s, L->rows, L->cols, pq_linear_dtype(L)));
        else
            PQ_TRY(pq_st_writer_declare(c->w, t->name, t->dtype, t->ndim, t->shape));
    }
    return PQ_OK;
}

// "w4a16 g128 sym", or a plan's "mixed: w4g32 x 12, w8 x 3, fp16 x 5" (linears per item).
static void describe(const pq_ckpt *c, char *buf, size_t cap) {
    if (!c->p.mix) return pq_scheme_describe(c->p.scheme, buf, cap);
    const pq_mix_plan *pl = c->p.mix;
    int total = pl->n_layers * PQ_NLINEAR;
    size_t n = (size_t)snprintf(buf, cap, "mixed:");
    for (int i = 0; i < total && n < cap; i++) {
        int first = 1, count = 0;
        for (int j = 0; j < total; j++) {
            if (strcmp(pl->linear[j]->name, pl->linear[i]->name)) continue;
            first &= j >= i;
            count++;
        }
        if (first) n += (size_t)snprintf(buf + n, cap - n, "%s %s x %d", n > 6 ? "," : "", pl->linear[i]->name, count);
    }
}

static pq_status set_metadata(pq_ckpt *c) {
    const pq_ckpt_params *p = &c->p;
    char desc[256];
    describe(c, desc, sizeof desc);
    PQ_TRY(pq_st_writer_set_metadata(c->w, "format", "pt")); // transformers refuses a file without it
    PQ_TRY(pq_st_writer_set_metadata(c->w, "pq.version", PQ_VERSION));
    PQ_TRY(pq_st_writer_set_metadata(c->w, "pq.method", p->method));
    PQ_TRY(pq_st_writer_set_metadata(c->w, "pq.scheme", desc));
    PQ_TRY(pq_st_writer_set_metadata(c->w, "pq.source", p->q->model));
    if (p->calib) {
        char n[96];
        PQ_TRY(pq_st_writer_set_metadata(c->w, "pq.calibration_sha256", p->calib->sha256));
        pq_calib_describe(p->calib->n, p->calib->len, p->q->calib.seed, p->q->calib.mode, p->bf16, n,
                          sizeof n);
        PQ_TRY(pq_st_writer_set_metadata(c->w, "pq.calibration", n));
    }
    if (p->scales) { // what the inline run writes: the same file
        const char *keys[] = {"pq.calibration_sha256", "pq.calibration"};
        for (int i = 0; i < 2; i++) {
            const char *v = pq_scales_meta_get(p->scales, keys[i]);
            PQ_FAIL_IF(!v, PQ_ERR_FORMAT, "%s: __metadata__ lacks %s", p->q->scales, keys[i]);
            PQ_TRY(pq_st_writer_set_metadata(c->w, keys[i], v));
        }
    }
    return pq_st_writer_set_metadata(c->w, "pq.source_sha256", p->source_sha256);
}

// The first NaN or Inf element of a float tensor (by its exponent bits:
// all ones), or -1; *nan says which. Integer tensors have none.
static long long first_nonfinite(const pq_tensor *t, int *nan) {
    size_t n = t->nbytes / pq_dtype_size(t->dtype);
    const uint8_t *d = t->data;
    for (size_t i = 0; i < n; i++) {
        uint32_t u, exp, man;
        switch (t->dtype) {
        case PQ_DT_F32: memcpy(&u, d + 4 * i, 4), exp = 0x7f800000u, man = 0x007fffffu; break;
        case PQ_DT_F16: u = (uint32_t)d[2 * i] | (uint32_t)d[2 * i + 1] << 8, exp = 0x7c00, man = 0x03ff; break;
        case PQ_DT_BF16: u = (uint32_t)d[2 * i] | (uint32_t)d[2 * i + 1] << 8, exp = 0x7f80, man = 0x007f; break;
        default: return -1;
        }
        if ((u & exp) == exp) {
            *nan = (u & man) != 0;
            return (long long)i;
        }
    }
    return -1;
}

// Copies every tensor that is neither quantized nor rewritten (embeddings,
// norms, biases, an unquantized lm_head) as it is; a NaN or Inf in one is
// refused by name, as in a quantized weight, so a checkpoint never carries one.
static pq_status put_passthrough(pq_ckpt *c) {
    const pq_st *st = c->p.m->st;
    for (int i = 0; i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        if (is_quantized_weight(c, t->name) || is_rewritten(c, t->name)) continue;
        int nan = 0;
        long long bad = first_nonfinite(t, &nan);
        PQ_FAIL_IF(bad >= 0, PQ_ERR_NUMERIC, "%s/%s: element %lld is %s (copied tensors must be finite too)",
                   c->p.q->model, t->name, bad, nan ? "NaN" : "Inf");
        PQ_TRY(pq_st_writer_put(c->w, t->name, t->data, t->nbytes));
    }
    return PQ_OK;
}

// Appends a copy of str to list (*n entries); 0 when out of memory.
static int push(char ***list, int *n, const char *str) {
    char **l = realloc(*list, (size_t)(*n + 1) * sizeof *l), *d = strdup(str);
    if (l) *list = l;
    if (!l || !d) return free(d), 0;
    l[(*n)++] = d;
    return 1;
}

// A plan's config groups (one per item it uses, in order of first use, its
// linears named; with quantize_head one more for lm_head) and ignore list
// (lm_head unless quantized, the linears kept unquantized) into c->plan.
static pq_status build_plan(pq_ckpt *c) {
    const pq_mix_plan *pl = c->p.mix;
    pq_packed_info *info = &c->plan;
    int total = pl->n_layers * PQ_NLINEAR, ok = 1;
    char module[256];
    info->groups = calloc((size_t)total + 1, sizeof *info->groups);
    PQ_FAIL_IF(!info->groups, PQ_ERR_NOMEM, "out of memory");
    info->quantized = 1;
    if (!c->p.q->quantize_head) ok &= push(&info->ignore, &info->n_ignore, "lm_head");
    for (int i = 0; i < total && ok; i++) {
        const pq_mix_option *o = pl->linear[i];
        pq_method_module(module, sizeof module, i / PQ_NLINEAR, (pq_linear_slot)(i % PQ_NLINEAR));
        if (o->dense) {
            ok &= push(&info->ignore, &info->n_ignore, module);
            continue;
        }
        int g = 0;
        while (g < info->n_groups && memcmp(&info->groups[g].scheme, &o->scheme, sizeof o->scheme)) g++;
        if (g == info->n_groups) {
            info->groups[g].scheme = o->scheme;
            snprintf(info->groups[g].format, sizeof info->groups[g].format, "%s", pq_scheme_format(&o->scheme));
            info->n_groups++;
        }
        ok &= push(&info->groups[g].targets, &info->groups[g].n_targets, module);
    }
    if (ok && c->p.q->quantize_head) {
        pq_packed_group *g = &info->groups[info->n_groups++];
        g->scheme = *c->p.scheme;
        snprintf(g->format, sizeof g->format, "%s", pq_scheme_format(c->p.scheme));
        ok &= push(&g->targets, &g->n_targets, "lm_head");
    }
    PQ_FAIL_IF(!ok, PQ_ERR_NOMEM, "out of memory");
    return PQ_OK;
}

pq_status pq_ckpt_begin(const pq_ckpt_params *p, const char *dir, int resume, pq_ckpt **out) {
    *out = NULL;
    pq_ckpt *c = calloc(1, sizeof *c);
    PQ_FAIL_IF(!c, PQ_ERR_NOMEM, "out of memory");
    c->p = *p;
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    char path[PATH_CAP];
    pq_status s = PQ_OK;
    c->layers = json_array();
    PQ_CHECK_GOTO(!c->layers, s, PQ_ERR_NOMEM, "out of memory");
    if (p->mix) PQ_TRY_GOTO(s, build_plan(c));
    if (pq_scheme_ggml_type(p->scheme) >= 0) {
        PQ_TRY_GOTO(s, gguf_begin(c, dir, resume));
        *out = c;
        return PQ_OK;
    }
    PQ_TRY_GOTO(s, pq_path_join(path, sizeof path, dir, "model.safetensors"));
    PQ_TRY_GOTO(s, pq_st_writer_create(path, &c->w));
    PQ_TRY_GOTO(s, set_metadata(c));
    PQ_TRY_GOTO(s, declare_all(c));
    PQ_TRY_GOTO(s, resume ? pq_st_writer_resume(c->w) : pq_st_writer_begin(c->w));
    PQ_TRY_GOTO(s, put_passthrough(c));
    *out = c;
    return PQ_OK;
done:
    pq_ckpt_free(c, resume);
    return s;
}

pq_status pq_ckpt_sync(pq_ckpt *c) { return c->gguf ? pq_gguf_out_sync(c->gguf) : pq_st_writer_sync(c->w); }

// ---- blocks -------------------------------------------------------------------

// Records a linear's entry (every decoder linear has one, in order); one a
// plan keeps unquantized (s NULL) counts in none of the totals.
static pq_status record(pq_ckpt *c, const pq_linear *L, const pq_scheme *s, json_t *entry) {
    PQ_FAIL_IF(!entry || json_array_append(c->layers, entry) != 0, PQ_ERR_NOMEM, "out of memory");
    if (!s) return PQ_OK;
    double e = json_real_value(json_object_get(entry, PQ_JSON_REL_ERR));
    c->err_sum += e;
    c->err_max = e > c->err_max ? e : c->err_max;
    json_t *o = json_object_get(entry, PQ_JSON_OUT_ERR);
    if (o) {
        double v = json_real_value(o);
        c->out_sum += v;
        c->out_max = v > c->out_max ? v : c->out_max;
        c->n_out++;
    }
    c->n_quantized++;
    c->n_ragged += !c->gguf && s->group > 0 && L->cols % s->group != 0;
    return PQ_OK;
}

// A folded vector v [n] (exact in the tensor's dtype) written in the dtype
// of the source tensor `name`.
static pq_status put_vector(pq_ckpt *c, const char *name, const float *v, int n) {
    const pq_tensor *t = pq_st_find(c->p.m->st, name);
    PQ_FAIL_IF(!t, PQ_ERR_FORMAT, "%s: tensor '%s' is missing", c->p.q->model, name);
    size_t es = pq_dtype_size(t->dtype);
    char *bytes = pq_alloc((size_t)n * es);
    PQ_FAIL_IF(!bytes, PQ_ERR_NOMEM, "%s: out of memory", name);
    for (int i = 0; i < n; i++) {
        uint16_t h = t->dtype == PQ_DT_F16 ? pq_f32_to_fp16(v[i]) : pq_f32_to_bf16(v[i]);
        if (t->dtype == PQ_DT_F32) memcpy(bytes + 4 * (size_t)i, &v[i], 4);
        else memcpy(bytes + 2 * (size_t)i, &h, 2);
    }
    pq_status s = pq_st_writer_put(c->w, name, bytes, (size_t)n * es);
    pq_free(bytes);
    return s;
}

pq_status pq_ckpt_put_block(pq_ckpt *c, int layer, const pq_block_out *b) {
    char module[256], name[320];
    if (c->gguf) {
        PQ_TRY(gguf_put_block(c, layer, b));
        return pq_ckpt_record_block(c, layer, b->entry);
    }
    for (int k = 0; k < PQ_NLINEAR; k++) {
        pq_method_module(module, sizeof module, layer, (pq_linear_slot)k);
        if (b->q[k]) PQ_TRY(pq_packed_put(c->w, module, b->q[k])); // else copied with the passthrough tensors
    }
    for (int g = 0; g < PQ_NGROUPS; g++) {
        if (!b->folded[g]) continue;
        pq_fold_target(layer, g, name, sizeof name);
        PQ_TRY(put_vector(c, name, b->folded[g], pq_fold_target_len(&c->p.m->cfg, &c->p.m->layers[layer], g)));
    }
    return pq_ckpt_record_block(c, layer, b->entry);
}

pq_status pq_ckpt_record_block(pq_ckpt *c, int layer, json_t *const *entries) {
    char module[256];
    for (int k = 0; k < PQ_NLINEAR; k++) {
        const pq_scheme *s;
        pq_method_module(module, sizeof module, layer, (pq_linear_slot)k);
        const pq_linear *L = counted_linear(c, module, &s);
        PQ_TRY(record(c, L, s, entries[k]));
    }
    return PQ_OK;
}

pq_status pq_ckpt_put_linear(pq_ckpt *c, const char *module, const pq_linear *src, const pq_qtensor *q,
                             json_t *entry) {
    PQ_TRY(pq_packed_put(c->w, module, q));
    return record(c, src, c->p.scheme, entry);
}

void pq_ckpt_block_errors(const pq_ckpt *c, int layer, double *rel, double *out) {
    double e = 0, o = 0;
    int measured = 1;
    for (int k = 0; k < PQ_NLINEAR; k++) {
        json_t *entry = json_array_get(c->layers, (size_t)layer * PQ_NLINEAR + k);
        json_t *v = json_object_get(entry, PQ_JSON_OUT_ERR);
        e += json_real_value(json_object_get(entry, PQ_JSON_REL_ERR));
        if (v) o += json_real_value(v);
        else measured = 0;
    }
    *rel = e / PQ_NLINEAR;
    *out = measured ? o / PQ_NLINEAR : -1;
}

json_t *pq_ckpt_entries(const pq_ckpt *c) { return c->layers; }

// ---- resume: finished blocks read back ------------------------------------------

void pq_ckpt_loaded_free(pq_ckpt_loaded *own) {
    for (int k = 0; k < PQ_NLINEAR; k++)
        for (int i = 0; i < PQ_PACKED_MAX_OWNED; i++) pq_free(own->lin[k].p[i]);
    for (int g = 0; g < PQ_NGROUPS; g++) pq_free(own->vec[g]);
    memset(own, 0, sizeof *own);
}

// The size of .tmp is its final size (unwritten tensors read as zeros), so
// that the reader validates it; then the finished blocks' tensors are read.
static pq_status open_tmp(pq_ckpt *c) {
    const char *path = pq_st_writer_tmp_path(c->w);
    PQ_FAIL_IF(truncate(path, (off_t)pq_st_writer_total_bytes(c->w)) != 0, PQ_ERR_IO, "%s: cannot extend: %s",
               path, strerror(errno));
    c->tmp_info = (pq_packed_info){.quantized = 1, .scheme = *c->p.scheme, .groups = c->plan.groups,
                                   .n_groups = c->plan.n_groups}; // the plan's groups, borrowed
    snprintf(c->tmp_info.format, sizeof c->tmp_info.format, "%s", pq_scheme_format(c->p.scheme));
    return pq_st_open(path, &c->tmp_st);
}

// A folded vector of a finished block, read back from the temporary file.
static pq_status read_vector(pq_ckpt *c, const char *name, int n, float **out) {
    const pq_tensor *t = pq_st_find(c->tmp_st, name);
    PQ_FAIL_IF(!t || t->numel != n, PQ_ERR_FORMAT, "%s: tensor '%s' is missing or has another size",
               pq_st_writer_tmp_path(c->w), name);
    pq_dense_type dt = t->dtype == PQ_DT_F16 ? PQ_DENSE_F16 : t->dtype == PQ_DT_BF16 ? PQ_DENSE_BF16 : PQ_DENSE_F32;
    *out = pq_alloc((size_t)n * sizeof(float));
    PQ_FAIL_IF(!*out, PQ_ERR_NOMEM, "%s: out of memory", name);
    pq_dense_rows_ref(dt, t->data, n, 0, 1, *out);
    return PQ_OK;
}

pq_status pq_ckpt_load_block(pq_ckpt *c, int layer, int folded, pq_layer *L, pq_ckpt_loaded *own) {
    if (c->gguf) return gguf_load_block(c, layer, folded, L, own);
    if (!c->tmp_st) PQ_TRY(open_tmp(c));
    char module[256], name[320];
    for (int s = 0; s < PQ_NLINEAR; s++) {
        const float *bias = L->lin[s].bias;
        const pq_scheme *sc;
        pq_method_module(module, sizeof module, layer, (pq_linear_slot)s);
        if (!quantized_linear(c, module, &sc)) continue; // a plan keeps it unquantized: the source's
        PQ_TRY(pq_packed_load(c->tmp_st, &c->tmp_info, module, L->lin[s].rows, L->lin[s].cols, &L->lin[s],
                              &own->lin[s]));
        L->lin[s].bias = bias;
    }
    for (int g = 0; g < PQ_NGROUPS && folded; g++) {
        pq_fold_target(layer, g, name, sizeof name);
        if (!pq_fold_usable(&c->p.m->cfg, g) || !pq_st_find(c->p.m->st, name)) continue; // no producer bias
        PQ_TRY(read_vector(c, name, pq_fold_target_len(&c->p.m->cfg, L, g), &own->vec[g]));
        pq_fold_install(L, g, own->vec[g]);
    }
    return PQ_OK;
}

// ---- the end ------------------------------------------------------------------

// A .gguf source: its Hugging Face view's side files (formats/gguf_hf.h).
static pq_status write_gguf_side_files(pq_ckpt *c) {
    char dst[PATH_CAP];
    for (int i = 1; i < PQ_GGUF_HF_NFILES; i++) { // config.json (0) is written by write_side_files
        const char *name = pq_gguf_hf_file_names[i], *text = pq_gguf_hf_file(c->p.disk->gguf, name);
        if (!text) continue;
        PQ_TRY(pq_path_join(dst, sizeof dst, c->dir, name));
        PQ_TRY(pq_file_write_atomic(dst, text, strlen(text)));
    }
    return PQ_OK;
}

// config.json, the tokenizer and other side files into the directory.
static pq_status write_side_files(pq_ckpt *c) {
    char src[PATH_CAP], dst[PATH_CAP], *text = NULL, *cfg = NULL;
    size_t len;
    const pq_quantize_request *q = c->p.q;
    const char *view = c->p.m->config_json ? c->p.m->config_json // a rotated model's
                       : c->p.m->gguf      ? pq_gguf_hf_file(c->p.m->gguf, "config.json")
                                           : NULL;
    PQ_TRY(pq_path_join(dst, sizeof dst, c->dir, "config.json"));
    if (view) {
        snprintf(src, sizeof src, "%s", q->model);
        text = strdup(view);
        len = strlen(view);
        PQ_FAIL_IF(!text, PQ_ERR_NOMEM, "out of memory");
    } else {
        PQ_TRY(pq_path_join(src, sizeof src, q->model, "config.json"));
        PQ_TRY(pq_file_read(src, (size_t)64 << 20, &text, &len));
    }
    pq_status s = c->p.mix ? pq_packed_config_json_groups(text, len, src, c->plan.groups, c->plan.n_groups,
                                                          c->plan.ignore, c->plan.n_ignore, &cfg)
                           : pq_packed_config_json(text, len, src, c->p.scheme, q->quantize_head, &cfg);
    free(text);
    PQ_TRY(s);
    s = pq_file_write_atomic(dst, cfg, strlen(cfg));
    free(cfg);
    PQ_TRY(s);
    if (c->p.disk->gguf) return write_gguf_side_files(c);
    for (int i = 0; i < PQ_CKPT_NSIDE_FILES; i++) {
        PQ_TRY(pq_path_join(src, sizeof src, q->model, PQ_CKPT_SIDE_FILES[i]));
        if (!pq_path_exists(src)) continue; // present but not a regular file: the copy refuses it by name
        PQ_TRY(pq_path_join(dst, sizeof dst, c->dir, PQ_CKPT_SIDE_FILES[i]));
        PQ_TRY(pq_file_copy_atomic(src, dst));
    }
    return PQ_OK;
}

static unsigned long long file_bytes(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (unsigned long long)sb.st_size : 0;
}

// Measures the output: bytes of the quantized linears' tensors, file sizes.
static pq_status measure(pq_ckpt *c, pq_quantize_result *res) {
    char path[PATH_CAP], module[512];
    const pq_model *m = c->p.m;
    PQ_TRY(pq_path_join(path, sizeof path, c->dir, "model.safetensors"));
    res->out_bytes = file_bytes(path);
    pq_st *st;
    PQ_TRY(pq_st_open(path, &st));
    res->quant_bytes = 0;
    for (int i = 0; i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        const pq_scheme *s;
        module_of(t->name, module, sizeof module);
        // weight, weight_packed, weight_scale, ... (not a q/k/v bias); a linear a plan keeps dense too
        if (counted_linear(c, module, &s) && strncmp(t->name + strlen(module), ".weight", 7) == 0)
            res->quant_bytes += (long long)t->nbytes;
    }
    pq_st_close(st);
    res->n_weights = 0;
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int s = 0; s < PQ_NLINEAR; s++) {
            const pq_linear *L = pq_model_linear(m, l, (pq_linear_slot)s);
            res->n_weights += (long long)L->rows * L->cols;
        }
    if (c->p.q->quantize_head) res->n_weights += (long long)m->lm_head.rows * m->lm_head.cols;
    res->bits_per_weight = res->n_weights ? 8.0 * (double)res->quant_bytes / (double)res->n_weights : 0;
    if (c->p.q->zstd_level > 0) {
        PQ_TRY(pq_path_join(path, sizeof path, c->dir, "model.safetensors.zst"));
        res->zst_bytes = file_bytes(path);
    }
    return PQ_OK;
}

pq_status pq_ckpt_commit(pq_ckpt *c, pq_quantize_result *res) {
    if (!c->gguf) {
        PQ_TRY(pq_st_writer_commit(c->w, c->p.q->zstd_level));
        PQ_TRY(write_side_files(c));
    }
    describe(c, res->scheme, sizeof res->scheme);
    snprintf(res->method, sizeof res->method, "%s", c->p.method);
    snprintf(res->format, sizeof res->format, "%s", pq_scheme_format(c->p.scheme));
    snprintf(res->source_sha256, sizeof res->source_sha256, "%s", c->p.source_sha256);
    res->n_quantized = c->n_quantized;
    res->n_ragged = c->n_ragged;
    res->mean_rel_err = c->n_quantized ? c->err_sum / c->n_quantized : 0;
    res->max_rel_err = c->err_max;
    res->mean_out_err = c->n_out ? c->out_sum / c->n_out : 0;
    res->max_out_err = c->out_max;
    return c->gguf ? gguf_commit(c, res) : measure(c, res);
}

// pq.json's "scales" object of a --scales run (a new reference).
static json_t *scales_provenance(const pq_ckpt *c) {
    pq_scales_file *f = c->p.scales;
    return json_pack("{s:s, s:s?, s:s?, s:s?, s:o}", "file", c->p.q->scales, "calibration_sha256",
                     pq_scales_meta_get(f, "pq.calibration_sha256"), "calibration",
                     pq_scales_meta_get(f, "pq.calibration"), "params", pq_scales_meta_get(f, "pq.params"),
                     "pq_version", json_string(pq_scales_meta_get(f, "pq.version")));
}

// Writes doc (not stolen) as indented JSON to `name` in the directory.
static pq_status write_json(const pq_ckpt *c, const char *name, const json_t *doc) {
    char *text = json_dumps(doc, JSON_INDENT(2));
    PQ_FAIL_IF(!text, PQ_ERR_NOMEM, "out of memory");
    char path[PATH_CAP];
    pq_status st = pq_path_join(path, sizeof path, c->dir, name);
    if (st == PQ_OK) st = pq_file_write_atomic(path, text, strlen(text));
    free(text);
    return st;
}

pq_status pq_ckpt_provenance(pq_ckpt *c, const pq_quantize_result *res, json_t *record, json_t *extra) {
    const pq_scheme *s = c->p.scheme;
    if (c->gguf) { // one .gguf file: its pq.* metadata holds the provenance known up front; the rest is the result
        json_decref(record);
        json_decref(extra);
        return PQ_OK;
    }
    static const char *const ACT[] = {"none (weight only)", "int8 dynamic per token", "fp8 e4m3 dynamic per token",
                                      "int8 static per tensor", "fp8 e4m3 static per tensor"};
    json_t *group = c->p.mix       ? json_null()
                    : s->group > 0 ? json_integer(s->group)
                                   : json_string(s->group ? "tensor" : "channel");
    json_t *doc = json_pack(
        "{s:s, s:s, s:s, s:o, s:o, s:s, s:s, s:s, s:b, s:{s:s, s:s, s:i}, s:f, s:I, s:I, s:i, s:i, s:{s:f, s:f}, "
        "s:{s:I, s:I}, s:O}",
        "pq_version", PQ_VERSION, "method", c->p.method, "scheme", c->p.mix ? "mixed" : pq_scheme_name(s->id),
        "group", group, "symmetric", c->p.mix ? json_null() : json_boolean(s->sym), "activations", ACT[s->act], "format", res->format, "scale_dtype",
        pq_dtype_name(pq_model_dtype(c->p.m)), "quantize_head", c->p.q->quantize_head, "source", "path",
        c->p.q->model, "sha256", c->p.source_sha256, "files", pq_st_file_count(c->p.disk->st), "bits_per_weight",
        res->bits_per_weight, "quantized_weights", (json_int_t)res->n_weights, "quantized_bytes",
        (json_int_t)res->quant_bytes, "quantized_linears", res->n_quantized, "ragged_linears", res->n_ragged,
        PQ_JSON_REL_ERR, "mean", res->mean_rel_err, "max", res->max_rel_err, "output_bytes", "model.safetensors",
        (json_int_t)res->out_bytes, "model.safetensors.zst", (json_int_t)res->zst_bytes, "layers", c->layers);
    int bad = !doc || !record || (c->p.scales && json_object_set_new(doc, "scales", scales_provenance(c)) != 0) ||
              (extra && json_object_update(doc, extra) != 0);
    json_decref(extra);
    pq_status st = bad ? PQ_FAIL(PQ_ERR_NOMEM, "out of memory") : write_json(c, "pq.json", doc);
    if (st == PQ_OK) st = write_json(c, "pq-run.json", record);
    json_decref(doc);
    json_decref(record);
    return st;
}

const char *pq_ckpt_tmp_path(const pq_ckpt *c) {
    return c->gguf ? pq_gguf_out_tmp_path(c->gguf) : pq_st_writer_tmp_path(c->w);
}

void pq_ckpt_free(pq_ckpt *c, int keep) {
    if (!c) return;
    pq_packed_info_free(&c->plan);
    if (keep) pq_st_writer_keep_tmp(c->w);
    pq_st_writer_free(c->w);
    pq_gguf_out_free(c->gguf, keep);
    pq_st_close(c->tmp_st);
    json_decref(c->layers);
    free(c);
}
