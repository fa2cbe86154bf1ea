// formats/inspect.c — the report of pq inspect (see inspect.h).
#include "formats/inspect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/fileio.h"

#define PATH_CAP 4096

static int is_digit(char c) { return c >= '0' && c <= '9'; }

int pq_natural_cmp(const char *a, const char *b) {
    const char *x = a, *y = b;
    while (*x && *y) {
        if (is_digit(*x) && is_digit(*y)) {
            while (*x == '0') x++;
            while (*y == '0') y++;
            size_t nx = 0, ny = 0;
            while (is_digit(x[nx])) nx++;
            while (is_digit(y[ny])) ny++;
            if (nx != ny) return nx < ny ? -1 : 1;
            int c = memcmp(x, y, nx);
            if (c) return c;
            x += nx, y += ny;
            continue;
        }
        if (*x != *y) return (unsigned char)*x < (unsigned char)*y ? -1 : 1;
        x++, y++;
    }
    if (*x || *y) return *x ? 1 : -1;
    return strcmp(a, b);
}

static int by_name(const void *a, const void *b, void *st) {
    return pq_natural_cmp(pq_st_at(st, *(const int *)a)->name, pq_st_at(st, *(const int *)b)->name);
}

static pq_status read_config(const char *dir, pq_inspect_report *r) {
    char path[PATH_CAP], *text;
    size_t len;
    PQ_TRY(pq_path_join(path, sizeof path, dir, "config.json"));
    if (!pq_path_exists(path)) return PQ_OK; // present but not a regular file: the load refuses it
    PQ_TRY(pq_config_load(path, &r->cfg));
    r->has_config = 1;
    r->params = pq_config_param_count(&r->cfg);
    PQ_TRY(pq_file_read(path, (size_t)64 << 20, &text, &len));
    pq_status s = pq_packed_info_parse(text, len, path, &r->quant);
    free(text);
    return s;
}

static unsigned long long zst_sibling(const char *file) {
    char zst[PATH_CAP + 8];
    struct stat sb;
    snprintf(zst, sizeof zst, "%s.zst", file);
    return stat(zst, &sb) == 0 && S_ISREG(sb.st_mode) ? (unsigned long long)sb.st_size : 0;
}

pq_status pq_inspect(const char *path, pq_inspect_report *r) {
    memset(r, 0, sizeof *r);
    pq_status s = PQ_OK;
    if (pq_dir_exists(path)) PQ_TRY_GOTO(s, read_config(path, r));
    PQ_TRY_GOTO(s, pq_st_open(path, &r->st));
    int n = pq_st_count(r->st), nf = pq_st_file_count(r->st);
    r->order = malloc((size_t)(n ? n : 1) * sizeof(int));
    r->files = calloc((size_t)(nf ? nf : 1), sizeof *r->files);
    PQ_CHECK_GOTO(!r->order || !r->files, s, PQ_ERR_NOMEM, "out of memory for %d tensors", n);
    for (int i = 0; i < n; i++) {
        const pq_tensor *t = pq_st_at(r->st, i);
        r->order[i] = i;
        r->total_bytes += (long long)t->nbytes;
        r->total_elems += t->numel;
        r->dtype_bytes[t->dtype] += (long long)t->nbytes;
    }
    qsort_r(r->order, (size_t)n, sizeof(int), by_name, r->st);
    for (int f = 0; f < nf; f++) {
        pq_inspect_file *o = &r->files[f];
        o->path = pq_st_file_path(r->st, f);
        o->disk = pq_st_file_disk_bytes(r->st, f);
        o->raw = pq_st_file_raw_bytes(r->st, f);
        o->zst = o->disk == o->raw ? zst_sibling(o->path) : 0;
    }
    return PQ_OK;
done:
    pq_inspect_free(r);
    return s;
}

void pq_inspect_free(pq_inspect_report *r) {
    if (!r) return;
    pq_packed_info_free(&r->quant);
    pq_st_close(r->st);
    free(r->order);
    free(r->files);
    memset(r, 0, sizeof *r);
}
