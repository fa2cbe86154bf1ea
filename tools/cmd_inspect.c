// pq inspect — what is in a model directory, a safetensors file (formats/inspect.h)
// or a GGUF file (formats/gguf_hf.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf_hf.h"
#include "formats/inspect.h"
#include "kernels/ggml_blocks.h"
#include "tools/cli.h"
#include "tools/commands.h"

static void print_shape(const pq_tensor *t, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->ndim && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

static void print_config(const pq_inspect_report *r) {
    const pq_config *c = &r->cfg;
    printf("architecture: %s\n", c->arch_name);
    printf("parameters:   %lld\n", r->params);
    printf("shape:        hidden %d, intermediate %d, layers %d, heads %d (kv %d, head_dim %d), vocab %d, "
           "context %d\n", c->hidden, c->intermediate, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, c->vocab,
           c->max_pos);
    if (!r->quant.quantized) return;
    static const char *const ACT[] = {"weight only", "int8 activations dynamic per token",
                                      "fp8 activations dynamic per token", "int8 activations static per tensor",
                                      "fp8 activations static per tensor"};
    char desc[64];
    pq_scheme_describe(&r->quant.scheme, desc, sizeof desc);
    printf("quantization: %s, compressed-tensors %s, %s, ignore [", desc, r->quant.format, ACT[r->quant.scheme.act]);
    for (int i = 0; i < r->quant.n_ignore; i++) printf("%s%s", i ? ", " : "", r->quant.ignore[i]);
    printf("]\n");
}

// A .gguf file: its metadata, the model pq reads from it, its tensors with
// their ggml types (nothing is dequantized).
static int inspect_gguf(const char *path, int list) {
    pq_gguf *g;
    pq_status s = pq_gguf_open(path, &g);
    if (s != PQ_OK) return cli_fail("inspect", s);
    pq_gguf_str arch = {"?", 1}, name = {"", 0}, tok = {"?", 1}, pre = {"default", 7};
    if (pq_gguf_find(g, "general.architecture")) pq_gguf_get_str(g, "general.architecture", &arch);
    if (pq_gguf_find(g, "general.name")) pq_gguf_get_str(g, "general.name", &name);
    if (pq_gguf_find(g, "tokenizer.ggml.model")) pq_gguf_get_str(g, "tokenizer.ggml.model", &tok);
    if (pq_gguf_find(g, "tokenizer.ggml.pre")) pq_gguf_get_str(g, "tokenizer.ggml.pre", &pre);
    printf("gguf:         version %u, %d metadata keys, %d tensors, alignment %u\n", pq_gguf_version(g),
           pq_gguf_kv_count(g), pq_gguf_tensor_count(g), pq_gguf_alignment(g));
    printf("name:         %.*s\n", (int)name.len, name.p);
    const pq_gguf_kv *tokens = pq_gguf_find(g, "tokenizer.ggml.tokens");
    printf("tokenizer:    %.*s, pre-tokenizer %.*s, %llu tokens\n", (int)tok.len, tok.p, (int)pre.len, pre.p,
           tokens ? (unsigned long long)tokens->n : 0ull);
    char *cfg_text = NULL, *gen = NULL;
    pq_config cfg;
    s = pq_gguf_config_json(g, &cfg_text, &gen);
    if (s == PQ_OK) s = pq_config_parse(cfg_text, strlen(cfg_text), path, &cfg);
    if (s == PQ_OK) {
        printf("architecture: %.*s -> %s\n", (int)arch.len, arch.p, cfg.arch_name);
        printf("parameters:   %lld\n", pq_config_param_count(&cfg));
        printf("shape:        hidden %d, intermediate %d, layers %d, heads %d (kv %d, head_dim %d), vocab %d, "
               "context %d\n", cfg.hidden, cfg.intermediate, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim,
               cfg.vocab, cfg.max_pos);
    } else {
        printf("architecture: %.*s (pq cannot run it: %s)\n", (int)arch.len, arch.p, pq_last_error());
    }
    free(cfg_text);
    free(gen);
    unsigned long long per_type[PQ_GGML_TYPE_END] = {0}, total = 0, elems = 0;
    for (int i = 0; i < pq_gguf_tensor_count(g); i++) {
        const pq_gguf_tensor *t = pq_gguf_tensor_at(g, i);
        per_type[t->type] += t->nbytes;
        total += t->nbytes;
        elems += (unsigned long long)t->numel;
        if (!list) continue;
        char shape[128];
        size_t n = (size_t)snprintf(shape, sizeof shape, "[");
        for (int d = 0; d < t->n_dims; d++) n += (size_t)snprintf(shape + n, sizeof shape - n, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
        snprintf(shape + n, sizeof shape - n, "]");
        printf("  %-40s %-8s %-20s %zu\n", t->name, pq_ggml_type_get(t->type)->name, shape, t->nbytes);
    }
    printf("tensors:      %d, %llu elements, %llu bytes (shapes as ggml's ne: the row length first)\n",
           pq_gguf_tensor_count(g), elems, total);
    for (int t = 0; t < PQ_GGML_TYPE_END; t++)
        if (per_type[t]) printf("  %-8s %llu bytes\n", pq_ggml_type_get((uint32_t)t)->name, per_type[t]);
    printf("file:         %s, %llu bytes on disk\n", path, (unsigned long long)pq_gguf_file_bytes(g));
    pq_gguf_close(g);
    return 0;
}

int main_inspect(int argc, char **argv) {
    int list = 1;
    const char *pos[1];
    const cli_flag flags[] = {
        {.name = "--summary", .kind = FLAG_BOOL, .dst = &list, .help = "print totals only, not every tensor"},
    };
    cli_command cmd = {"inspect", "MODEL_OR_FILE [options]",
                       "Architecture, parameter count, tensors with dtypes (GGUF: ggml types) and shapes, bytes.", flags,
                       sizeof flags / sizeof flags[0], 1, pos, NULL};
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (pq_gguf_is_file(pos[0])) return inspect_gguf(pos[0], list);
    pq_inspect_report r;
    pq_status s = pq_inspect(pos[0], &r);
    if (s != PQ_OK) return cli_fail("inspect", s);
    if (r.has_config) print_config(&r);
    int n = pq_st_count(r.st);
    for (int i = 0; i < n && list; i++) {
        const pq_tensor *t = pq_st_at(r.st, r.order[i]);
        char shape[128];
        print_shape(t, shape, sizeof shape);
        printf("  %-60s %-8s %-20s %zu\n", t->name, pq_dtype_name(t->dtype), shape, t->nbytes);
    }
    printf("tensors:      %d, %lld elements, %lld bytes\n", n, r.total_elems, r.total_bytes);
    for (int d = 0; d < PQ_DT_COUNT; d++)
        if (r.dtype_bytes[d]) printf("  %-8s %lld bytes\n", pq_dtype_name((pq_dtype)d), r.dtype_bytes[d]);
    for (int f = 0; f < pq_st_file_count(r.st); f++) {
        const pq_inspect_file *o = &r.files[f];
        printf("file:         %s, %llu bytes on disk", o->path, o->disk);
        if (o->disk != o->raw) printf(" (%llu uncompressed, ratio %.3f)", o->raw, o->disk ? (double)o->raw / o->disk : 0.0);
        printf("\n");
        if (o->zst) printf("file:         %s.zst, %llu bytes on disk (ratio %.3f)\n", o->path, o->zst,
                           (double)o->raw / (double)o->zst);
    }
    pq_inspect_free(&r);
    return 0;
}
