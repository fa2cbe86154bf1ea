// pq inspect — what is in a model directory or safetensors file.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/config.h"
#include "formats/fileio.h"
#include "formats/packed.h"
#include "formats/safetensors.h"
#include "tools/cli.h"
#include "tools/commands.h"

static void print_shape(const pq_tensor *t, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->ndim && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

// The quantization_config of a packed checkpoint, one line.
static pq_status print_quantization(const char *cfg_path) {
    char *text;
    size_t len;
    PQ_TRY(pq_file_read(cfg_path, (size_t)64 << 20, &text, &len));
    pq_packed_info info;
    pq_status s = pq_packed_info_parse(text, len, cfg_path, &info);
    free(text);
    PQ_TRY(s);
    if (info.quantized) {
        static const char *const ACT[] = {"weight only", "int8 activations dynamic per token",
                                          "fp8 activations dynamic per token", "int8 activations static per tensor",
                                          "fp8 activations static per tensor"};
        char desc[64];
        pq_scheme_describe(&info.scheme, desc, sizeof desc);
        printf("quantization: %s, compressed-tensors %s, %s, ignore [", desc, info.format, ACT[info.scheme.act]);
        for (int i = 0; i < info.n_ignore; i++) printf("%s%s", i ? ", " : "", info.ignore[i]);
        printf("]\n");
    }
    pq_packed_info_free(&info);
    return PQ_OK;
}

// A "<file>.zst" next to an uncompressed file (pq quantize --zstd writes both).
static void print_zst_sibling(const char *file, unsigned long long raw) {
    char zst[4200];
    struct stat sb;
    snprintf(zst, sizeof zst, "%s.zst", file);
    if (stat(zst, &sb) == 0 && sb.st_size > 0)
        printf("file:         %s, %lld bytes on disk (ratio %.3f)\n", zst, (long long)sb.st_size,
               (double)raw / (double)sb.st_size);
}

int main_inspect(int argc, char **argv) {
    int list = 1;
    const char *pos[1];
    const cli_flag flags[] = {
        {"--summary", FLAG_BOOL, &list, "print totals only, not every tensor", NULL, 0, NULL},
    };
    cli_command cmd = {"inspect", "MODEL_OR_FILE [options]",
                       "Architecture, parameter count, tensors with dtypes and shapes, bytes.", flags,
                       sizeof flags / sizeof flags[0], 1, pos};
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != 0) return rc > 0 ? 0 : 2;
    const char *path = pos[0];

    if (pq_dir_exists(path)) {
        char cfg_path[4096];
        pq_config cfg;
        if (pq_path_join(cfg_path, sizeof cfg_path, path, "config.json") != PQ_OK) return cli_fail("inspect", PQ_ERR_ARG);
        if (pq_path_exists(cfg_path)) {
            pq_status s = pq_config_load(cfg_path, &cfg);
            if (s != PQ_OK) return cli_fail("inspect", s);
            printf("architecture: %s\n", cfg.arch_name);
            printf("parameters:   %lld\n", pq_config_param_count(&cfg));
            printf("shape:        hidden %d, intermediate %d, layers %d, heads %d (kv %d, head_dim %d), vocab %d, "
                   "context %d\n", cfg.hidden, cfg.intermediate, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads,
                   cfg.head_dim, cfg.vocab, cfg.max_pos);
            s = print_quantization(cfg_path);
            if (s != PQ_OK) return cli_fail("inspect", s);
        }
    }
    pq_st *st;
    pq_status s = pq_st_open(path, &st);
    if (s != PQ_OK) return cli_fail("inspect", s);
    long long total_bytes = 0, total_elems = 0;
    long long per_dtype[PQ_DT_COUNT] = {0};
    for (int i = 0; i < pq_st_count(st); i++) {
        const pq_tensor *t = pq_st_at(st, i);
        total_bytes += (long long)t->nbytes;
        total_elems += t->numel;
        per_dtype[t->dtype] += (long long)t->nbytes;
        if (list) {
            char shape[128];
            print_shape(t, shape, sizeof shape);
            printf("  %-60s %-8s %-20s %zu\n", t->name, pq_dtype_name(t->dtype), shape, t->nbytes);
        }
    }
    printf("tensors:      %d, %lld elements, %lld bytes\n", pq_st_count(st), total_elems, total_bytes);
    for (int d = 0; d < PQ_DT_COUNT; d++)
        if (per_dtype[d]) printf("  %-8s %lld bytes\n", pq_dtype_name((pq_dtype)d), per_dtype[d]);
    for (int f = 0; f < pq_st_file_count(st); f++) {
        unsigned long long disk = pq_st_file_disk_bytes(st, f), raw = pq_st_file_raw_bytes(st, f);
        printf("file:         %s, %llu bytes on disk", pq_st_file_path(st, f), disk);
        if (disk != raw) printf(" (%llu uncompressed, ratio %.3f)", raw, disk ? (double)raw / disk : 0.0);
        printf("\n");
        if (disk == raw) print_zst_sibling(pq_st_file_path(st, f), raw);
    }
    pq_st_close(st);
    return 0;
}
