// tests/gguf_writer.h — a tiny GGUF writer for tests and the fuzz corpus
// (formats/gguf.h describes the format). Values are appended as given, so a
// test can also write what a valid file never holds.
#ifndef PQ_TEST_GGUF_WRITER_H
#define PQ_TEST_GGUF_WRITER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *p;
    size_t n, cap;
} gw_buf;

static void gw_put(gw_buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void gw_u8(gw_buf *b, uint8_t v) { gw_put(b, &v, 1); }
static void gw_u32(gw_buf *b, uint32_t v) { gw_put(b, &v, 4); }
static void gw_u64(gw_buf *b, uint64_t v) { gw_put(b, &v, 8); }
static void gw_strn(gw_buf *b, const char *s, size_t n) { gw_u64(b, n), gw_put(b, s, n); }
static void gw_str(gw_buf *b, const char *s) { gw_strn(b, s, strlen(s)); }

typedef struct {
    gw_buf kv, info, data;
    uint64_t n_kv, n_t;
    uint32_t align;
} gw;

enum { GW_U8, GW_I8, GW_U16, GW_I16, GW_U32, GW_I32, GW_F32, GW_BOOL, GW_STR, GW_ARR, GW_U64, GW_I64, GW_F64 };

static void gw_key(gw *w, const char *k, uint32_t type) { gw_str(&w->kv, k), gw_u32(&w->kv, type), w->n_kv++; }
static void gw_kv_u32(gw *w, const char *k, uint32_t v) { gw_key(w, k, GW_U32), gw_u32(&w->kv, v); }
static void gw_kv_f32(gw *w, const char *k, float v) { gw_key(w, k, GW_F32), gw_put(&w->kv, &v, 4); }
static void gw_kv_bool(gw *w, const char *k, int v) { gw_key(w, k, GW_BOOL), gw_u8(&w->kv, (uint8_t)v); }
static void gw_kv_str(gw *w, const char *k, const char *v) { gw_key(w, k, GW_STR), gw_str(&w->kv, v); }
static void gw_arr(gw *w, const char *k, uint32_t elem, uint64_t n) {
    gw_key(w, k, GW_ARR), gw_u32(&w->kv, elem), gw_u64(&w->kv, n);
}

// A tensor with ne[0..nd), its data appended at the next multiple of the
// alignment (32 unless w->align says otherwise).
static void gw_tensor(gw *w, const char *name, int nd, const uint64_t *ne, uint32_t type, const void *d, size_t n) {
    uint32_t al = w->align ? w->align : 32;
    while (w->data.n % al) gw_u8(&w->data, 0);
    gw_str(&w->info, name);
    gw_u32(&w->info, (uint32_t)nd);
    for (int i = 0; i < nd; i++) gw_u64(&w->info, ne[i]);
    gw_u32(&w->info, type);
    gw_u64(&w->info, w->data.n);
    gw_put(&w->data, d, n);
    w->n_t++;
}

// The whole file: header, metadata, tensor infos, padding, data.
static gw_buf gw_finish(const gw *w) {
    gw_buf f = {0};
    uint32_t al = w->align ? w->align : 32;
    gw_put(&f, "GGUF", 4);
    gw_u32(&f, 3);
    gw_u64(&f, w->n_t);
    gw_u64(&f, w->n_kv);
    gw_put(&f, w->kv.p, w->kv.n);
    gw_put(&f, w->info.p, w->info.n);
    while (f.n % al) gw_u8(&f, 0);
    gw_put(&f, w->data.p, w->data.n);
    return f;
}

static void gw_free(gw *w) { free(w->kv.p), free(w->info.p), free(w->data.p); }

static int gw_save(const gw_buf *f, const char *path) {
    FILE *o = fopen(path, "wb");
    if (!o) return -1;
    int ok = fwrite(f->p, 1, f->n, o) == f->n;
    return fclose(o) == 0 && ok ? 0 : -1;
}

#endif
