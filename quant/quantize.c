// quant/quantize.c — the `pq quantize` stage: source checkpoint in, packed
// compressed-tensors checkpoint out (see quantize.h).
#include "quant/quantize.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/sys.h"
#include "common/threads.h"
#include "common/version.h"
#include "eval/model.h"
#include "formats/fileio.h"
#include "formats/outdir.h"
#include "formats/packed.h"
#include "formats/sha256.h"
#include "quant/rtn.h"
#include "quant/scheme.h"

#define PATH_CAP 4096

// Methods by name; those whose issue has not landed yet are refused, not stubbed.
static const struct { const char *name; int available; } METHODS[] = {
    {"rtn", 1}, {"gptq", 0}, {"awq", 0}, {"smoothquant", 0},
};

// Files copied from the source directory when present.
static const char *const SIDE_FILES[] = {
    "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json",
    "added_tokens.json", "vocab.json", "merges.txt", "generation_config.json", "chat_template.jinja",
    "chat_template.json",
};

pq_quantize_params pq_quantize_default_params(void) {
    return (pq_quantize_params){.scheme = "w4a16", .method = "rtn", .group = PQ_GROUP_DEFAULT,
                                .sym = PQ_SYM_DEFAULT};
}

pq_status pq_quantize_parse_group(const char *s, int *group) {
    if (strcmp(s, "auto") == 0) return *group = PQ_GROUP_DEFAULT, PQ_OK;
    if (strcmp(s, "channel") == 0) return *group = PQ_GROUP_CHANNEL, PQ_OK;
    char *end;
    long g = strtol(s, &end, 10);
    PQ_FAIL_IF(*s == '\0' || *end || g <= 0 || g > (1 << 20), PQ_ERR_ARG,
               "--group %s: expected a group size (32, 64, 128), channel or auto", s);
    *group = (int)g;
    return PQ_OK;
}

// The method and scheme the parameters ask for.
static pq_status resolve(const pq_quantize_params *p, pq_scheme *s) {
    int m = -1;
    for (size_t i = 0; i < sizeof METHODS / sizeof METHODS[0] && p->method; i++)
        if (strcmp(p->method, METHODS[i].name) == 0) m = (int)i;
    PQ_FAIL_IF(m < 0, PQ_ERR_ARG, "--method %s: not a method (rtn, gptq, awq, smoothquant)",
               p->method ? p->method : "(none)");
    PQ_FAIL_IF(!METHODS[m].available, PQ_ERR_ARG, "--method %s: not available yet in pq %s (use --method rtn)",
               p->method, PQ_VERSION);
    PQ_FAIL_IF(p->fp8_tensor && p->group != PQ_GROUP_DEFAULT, PQ_ERR_ARG,
               "--fp8-scale tensor and --group exclude each other");
    PQ_TRY(pq_scheme_make(p->scheme, p->fp8_tensor ? PQ_GROUP_TENSOR : p->group, p->sym, s));
    PQ_FAIL_IF(p->zstd_level < 0 || p->zstd_level > 22, PQ_ERR_ARG, "zstd level %d not in 1..22", p->zstd_level);
    PQ_FAIL_IF(!p->model || !p->out, PQ_ERR_ARG, "a model and an output directory are required");
    return PQ_OK;
}

pq_status pq_quantize_describe(const pq_quantize_params *p, char *buf, size_t cap) {
    pq_scheme s;
    PQ_TRY(resolve(p, &s));
    char desc[64];
    pq_scheme_describe(&s, desc, sizeof desc);
    snprintf(buf, cap, "%s -> %s: %s %s (%s)%s%s%s", p->model, p->out, p->method, desc, pq_scheme_format(&s),
             p->quantize_head ? ", lm_head too" : "", p->zstd_level > 0 ? ", + zstd" : "",
             p->force ? ", --force" : "");
    return PQ_OK;
}

// ---- the run -------------------------------------------------------------

typedef struct {
    const pq_quantize_params *p;
    pq_scheme scheme;
    pq_model *m;
    pq_pool *pool;
    pq_outdir dir;
    pq_st_writer *w;
    float *buf;             // one widened weight matrix
    json_t *layers;         // pq.json "layers": [{name, rel_error}]
    double err_sum, err_max;
    int n_quantized, n_ragged;
    char sha[65];
    double t_hash, t_quant;
} run;

static pq_dtype scale_dtype_of(const pq_linear *L) {
    return L->dense_type == PQ_DENSE_F16 ? PQ_DT_F16 : L->dense_type == PQ_DENSE_BF16 ? PQ_DT_BF16 : PQ_DT_F32;
}

// The source linear of a module, or NULL if it is not quantized:
// "model.layers.L.<slot>" always, "lm_head" with quantize_head.
static const pq_linear *quantized_linear(const run *r, const char *module) {
    if (strcmp(module, "lm_head") == 0) return r->p->quantize_head ? &r->m->lm_head : NULL;
    int l, n = 0;
    if (sscanf(module, "model.layers.%d.%n", &l, &n) != 1 || n == 0 || l < 0 || l >= r->m->cfg.n_layers) return NULL;
    for (int s = 0; s < PQ_NLINEAR; s++)
        if (strcmp(module + n, pq_linear_slot_name((pq_linear_slot)s)) == 0) return &r->m->layers[l].lin[s];
    return NULL;
}

// The module a tensor name belongs to ("a.b.weight_scale" -> "a.b") in out.
static void module_of(const char *name, char *out, size_t cap) {
    const char *dot = strrchr(name, '.');
    snprintf(out, cap, "%.*s", dot ? (int)(dot - name) : 0, name);
}

// Every source tensor: the quantized linears' weights become their packed
// tensors, everything else is declared as it is.
static pq_status declare_all(run *r) {
    const pq_st *st = r->m->st;
    char module[512];
    for (int i = 0; i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        module_of(t->name, module, sizeof module);
        const pq_linear *L = quantized_linear(r, module);
        if (L && strcmp(t->name + strlen(module), ".weight") == 0)
            PQ_TRY(pq_packed_declare(r->w, module, &r->scheme, L->rows, L->cols, scale_dtype_of(L)));
        else
            PQ_TRY(pq_st_writer_declare(r->w, t->name, t->dtype, t->ndim, t->shape));
    }
    return PQ_OK;
}

static pq_status put_passthrough(run *r) {
    const pq_st *st = r->m->st;
    char module[512];
    for (int i = 0; i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        module_of(t->name, module, sizeof module);
        if (quantized_linear(r, module) && strcmp(t->name + strlen(module), ".weight") == 0) continue;
        PQ_TRY(pq_st_writer_put(r->w, t->name, t->data, t->nbytes));
    }
    return PQ_OK;
}

// Widens, quantizes and writes one linear; returns its relative error.
static pq_status quantize_one(run *r, const char *module, const pq_linear *L, double *rel_err) {
    PQ_FAIL_IF(L->fmt != PQ_W_DENSE, PQ_ERR_FORMAT, "%s: %s is not a dense weight", r->p->model, module);
    double t0 = pq_now();
    pq_linear_rows(L, 0, L->rows, r->buf);
    char name[600];
    snprintf(name, sizeof name, "%s/%s.weight", r->p->model, module);
    pq_qtensor q;
    PQ_TRY(pq_rtn_quantize(r->buf, L->rows, L->cols, &r->scheme, scale_dtype_of(L), name, r->pool, &q, rel_err));
    r->t_quant += pq_now() - t0;
    pq_status s = pq_packed_put(r->w, module, &q);
    pq_qtensor_free(&q);
    PQ_TRY(s);
    json_t *e = json_pack("{s:s, s:f}", "name", module, "rel_error", *rel_err);
    PQ_FAIL_IF(!e || json_array_append_new(r->layers, e) != 0, PQ_ERR_NOMEM, "out of memory");
    r->err_sum += *rel_err;
    r->err_max = *rel_err > r->err_max ? *rel_err : r->err_max;
    r->n_quantized++;
    r->n_ragged += r->scheme.group > 0 && L->cols % r->scheme.group != 0;
    return PQ_OK;
}

static pq_status quantize_all(run *r, pq_quantize_progress progress, void *ud) {
    const pq_config *c = &r->m->cfg;
    char module[256];
    double e;
    for (int l = 0; l < c->n_layers; l++) {
        double sum = 0;
        for (int s = 0; s < PQ_NLINEAR; s++) {
            snprintf(module, sizeof module, "model.layers.%d.%s", l, pq_linear_slot_name((pq_linear_slot)s));
            PQ_TRY(quantize_one(r, module, &r->m->layers[l].lin[s], &e));
            sum += e;
        }
        if (progress) progress(ud, l + 1, c->n_layers, sum / PQ_NLINEAR);
    }
    if (r->p->quantize_head) PQ_TRY(quantize_one(r, "lm_head", &r->m->lm_head, &e));
    return PQ_OK;
}

// SHA-256 over the source safetensors files, in order.
static pq_status hash_source(run *r) {
    double t0 = pq_now();
    pq_sha256 h;
    pq_sha256_init(&h);
    for (int f = 0; f < pq_st_file_count(r->m->st); f++) PQ_TRY(pq_sha256_file(&h, pq_st_file_path(r->m->st, f)));
    pq_sha256_hex(&h, r->sha);
    r->t_hash = pq_now() - t0;
    return PQ_OK;
}

static pq_status set_metadata(run *r) {
    char desc[64];
    pq_scheme_describe(&r->scheme, desc, sizeof desc);
    PQ_TRY(pq_st_writer_set_metadata(r->w, "format", "pt")); // transformers refuses a file without it
    PQ_TRY(pq_st_writer_set_metadata(r->w, "pq.version", PQ_VERSION));
    PQ_TRY(pq_st_writer_set_metadata(r->w, "pq.method", r->p->method));
    PQ_TRY(pq_st_writer_set_metadata(r->w, "pq.scheme", desc));
    PQ_TRY(pq_st_writer_set_metadata(r->w, "pq.source", r->p->model));
    return pq_st_writer_set_metadata(r->w, "pq.source_sha256", r->sha);
}

// config.json, the tokenizer and other side files into the new directory.
static pq_status write_side_files(run *r) {
    char src[PATH_CAP], dst[PATH_CAP], *text = NULL, *cfg = NULL;
    size_t len;
    PQ_TRY(pq_path_join(src, sizeof src, r->p->model, "config.json"));
    PQ_TRY(pq_outdir_path(&r->dir, "config.json", dst, sizeof dst));
    PQ_TRY(pq_file_read(src, (size_t)64 << 20, &text, &len));
    pq_status s = pq_packed_config_json(text, len, src, &r->scheme, r->p->quantize_head, &cfg);
    free(text);
    PQ_TRY(s);
    s = pq_file_write_atomic(dst, cfg, strlen(cfg));
    free(cfg);
    PQ_TRY(s);
    for (size_t i = 0; i < sizeof SIDE_FILES / sizeof SIDE_FILES[0]; i++) {
        PQ_TRY(pq_path_join(src, sizeof src, r->p->model, SIDE_FILES[i]));
        if (!pq_file_exists(src)) continue;
        PQ_TRY(pq_outdir_path(&r->dir, SIDE_FILES[i], dst, sizeof dst));
        PQ_TRY(pq_file_copy_atomic(src, dst));
    }
    return PQ_OK;
}

static unsigned long long file_bytes(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (unsigned long long)sb.st_size : 0;
}

// Measures the output: bytes of the quantized linears' tensors, file sizes.
static pq_status measure(run *r, pq_quantize_result *res) {
    char path[PATH_CAP], module[512];
    PQ_TRY(pq_outdir_path(&r->dir, "model.safetensors", path, sizeof path));
    res->out_bytes = file_bytes(path);
    pq_st *st;
    PQ_TRY(pq_st_open(path, &st));
    for (int i = 0; i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        module_of(t->name, module, sizeof module);
        // weight, weight_packed, weight_scale, ... (not a q/k/v bias)
        if (quantized_linear(r, module) && strncmp(t->name + strlen(module), ".weight", 7) == 0)
            res->quant_bytes += (long long)t->nbytes;
    }
    pq_st_close(st);
    res->n_weights = 0;
    for (int l = 0; l < r->m->cfg.n_layers; l++)
        for (int s = 0; s < PQ_NLINEAR; s++)
            res->n_weights += (long long)r->m->layers[l].lin[s].rows * r->m->layers[l].lin[s].cols;
    if (r->p->quantize_head) res->n_weights += (long long)r->m->lm_head.rows * r->m->lm_head.cols;
    res->bits_per_weight = res->n_weights ? 8.0 * (double)res->quant_bytes / (double)res->n_weights : 0;
    if (r->p->zstd_level > 0) {
        PQ_TRY(pq_outdir_path(&r->dir, "model.safetensors.zst", path, sizeof path));
        res->zst_bytes = file_bytes(path);
    }
    return PQ_OK;
}

static pq_status write_provenance(run *r, const pq_quantize_result *res) {
    const pq_scheme *s = &r->scheme;
    static const char *const ACT[] = {"none (weight only)", "int8 dynamic per token", "fp8 e4m3 dynamic per token"};
    json_t *group = s->group > 0 ? json_integer(s->group) : json_string(s->group ? "tensor" : "channel");
    json_t *doc = json_pack(
        "{s:s, s:s, s:s, s:o, s:b, s:s, s:s, s:s, s:b, s:{s:s, s:s, s:i}, s:f, s:I, s:I, s:i, s:i, s:{s:f, s:f}, "
        "s:{s:I, s:I}, s:O, s:{s:f, s:f, s:f}, s:i}",
        "pq_version", PQ_VERSION, "method", r->p->method, "scheme", pq_scheme_name(s->id), "group", group,
        "symmetric", s->sym, "activations", ACT[s->act], "format", res->format, "scale_dtype",
        pq_dtype_name(scale_dtype_of(&r->m->layers[0].lin[0])), "quantize_head", r->p->quantize_head,
        "source", "path", r->p->model, "sha256", r->sha, "files", pq_st_file_count(r->m->st),
        "bits_per_weight", res->bits_per_weight, "quantized_weights", (json_int_t)res->n_weights,
        "quantized_bytes", (json_int_t)res->quant_bytes, "quantized_linears", res->n_quantized,
        "ragged_linears", res->n_ragged,
        "rel_error", "mean", res->mean_rel_err, "max", res->max_rel_err,
        "output_bytes", "model.safetensors", (json_int_t)res->out_bytes, "model.safetensors.zst",
        (json_int_t)res->zst_bytes, "layers", r->layers,
        "seconds", "hash", r->t_hash, "quantize", r->t_quant, "total", res->seconds,
        "threads", pq_pool_size(r->pool));
    PQ_FAIL_IF(!doc, PQ_ERR_NOMEM, "out of memory");
    char *text = json_dumps(doc, JSON_INDENT(2));
    json_decref(doc);
    PQ_FAIL_IF(!text, PQ_ERR_NOMEM, "out of memory");
    char path[PATH_CAP];
    pq_status st = pq_outdir_path(&r->dir, "pq.json", path, sizeof path);
    if (st == PQ_OK) st = pq_file_write_atomic(path, text, strlen(text));
    free(text);
    return st;
}

// The source: an unquantized checkpoint whose head can be quantized if asked.
static pq_status open_source(run *r) {
    PQ_TRY(pq_model_open(r->p->model, &r->m));
    PQ_FAIL_IF(r->m->quant.quantized, PQ_ERR_FORMAT, "%s: already quantized (compressed-tensors %s); quantize an "
               "FP16/BF16/F32 checkpoint", r->p->model, r->m->quant.format);
    PQ_FAIL_IF(r->p->quantize_head && r->m->cfg.tie_embeddings, PQ_ERR_ARG,
               "--quantize-head: %s ties lm_head to the embeddings (tie_word_embeddings), which stay FP16",
               r->p->model);
    size_t most = 0;
    for (int l = 0; l < r->m->cfg.n_layers; l++)
        for (int s = 0; s < PQ_NLINEAR; s++) {
            const pq_linear *L = &r->m->layers[l].lin[s];
            most = (size_t)L->rows * L->cols > most ? (size_t)L->rows * L->cols : most;
        }
    if (r->p->quantize_head) {
        size_t n = (size_t)r->m->lm_head.rows * r->m->lm_head.cols;
        most = n > most ? n : most;
    }
    r->buf = pq_alloc(most * sizeof(float));
    PQ_FAIL_IF(!r->buf, PQ_ERR_NOMEM, "out of memory for a %zu-weight matrix", most);
    return PQ_OK;
}

pq_status pq_quantize(const pq_quantize_params *p, pq_quantize_progress progress, void *ud,
                      pq_quantize_result *out) {
    memset(out, 0, sizeof *out);
    double t0 = pq_now();
    run r = {.p = p};
    char path[PATH_CAP];
    pq_status s;
    PQ_TRY(resolve(p, &r.scheme));
    r.layers = json_array();
    PQ_CHECK_GOTO(!r.layers, s, PQ_ERR_NOMEM, "out of memory");
    PQ_TRY_GOTO(s, open_source(&r));
    PQ_TRY_GOTO(s, pq_outdir_begin(&r.dir, p->out, p->force));
    PQ_TRY_GOTO(s, pq_pool_create(p->nthreads, &r.pool));
    PQ_TRY_GOTO(s, hash_source(&r));
    PQ_TRY_GOTO(s, pq_outdir_path(&r.dir, "model.safetensors", path, sizeof path));
    PQ_TRY_GOTO(s, pq_st_writer_create(path, &r.w));
    PQ_TRY_GOTO(s, set_metadata(&r));
    PQ_TRY_GOTO(s, declare_all(&r));
    PQ_TRY_GOTO(s, pq_st_writer_begin(r.w));
    PQ_TRY_GOTO(s, put_passthrough(&r));
    PQ_TRY_GOTO(s, quantize_all(&r, progress, ud));
    PQ_TRY_GOTO(s, pq_st_writer_commit(r.w, p->zstd_level));
    PQ_TRY_GOTO(s, write_side_files(&r));
    pq_scheme_describe(&r.scheme, out->scheme, sizeof out->scheme);
    snprintf(out->format, sizeof out->format, "%s", pq_scheme_format(&r.scheme));
    snprintf(out->source_sha256, sizeof out->source_sha256, "%s", r.sha);
    out->n_quantized = r.n_quantized;
    out->n_ragged = r.n_ragged;
    out->mean_rel_err = r.n_quantized ? r.err_sum / r.n_quantized : 0;
    out->max_rel_err = r.err_max;
    PQ_TRY_GOTO(s, measure(&r, out));
    out->seconds = pq_now() - t0;
    PQ_TRY_GOTO(s, write_provenance(&r, out));
    PQ_TRY_GOTO(s, pq_outdir_commit(&r.dir));
done:
    pq_st_writer_free(r.w);
    pq_outdir_abort(&r.dir);
    pq_pool_free(r.pool);
    pq_free(r.buf);
    json_decref(r.layers);
    pq_model_free(r.m);
    if (s != PQ_OK) {
        pq_quantize_result zero = {0};
        *out = zero;
    }
    return s;
}
