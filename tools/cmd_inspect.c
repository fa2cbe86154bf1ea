// pq inspect — what is in a model directory or safetensors file (formats/inspect.h).
#include <stdio.h>

#include "formats/inspect.h"
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

int main_inspect(int argc, char **argv) {
    int list = 1;
    const char *pos[1];
    const cli_flag flags[] = {
        {.name = "--summary", .kind = FLAG_BOOL, .dst = &list, .help = "print totals only, not every tensor"},
    };
    cli_command cmd = {"inspect", "MODEL_OR_FILE [options]",
                       "Architecture, parameter count, tensors with dtypes and shapes, bytes.", flags,
                       sizeof flags / sizeof flags[0], 1, pos, NULL};
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != 0) return rc > 0 ? 0 : 2;
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
