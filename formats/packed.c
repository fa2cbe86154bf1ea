// formats/packed.c — the tensors of one quantized linear in a
// compressed-tensors checkpoint: declared and written from a pq_qtensor,
// read back (validated) into a pq_linear.
#include "formats/packed.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/half.h"
#include "common/sys.h"
#include "kernels/w8a8.h"

#define NAME_CAP 512

static pq_status tensor_name(char *out, const char *module, const char *suffix) {
    int n = snprintf(out, NAME_CAP, "%s.%s", module, suffix);
    PQ_FAIL_IF(n < 0 || n >= NAME_CAP, PQ_ERR_ARG, "module name too long: %.100s", module);
    return PQ_OK;
}

// The file packs codes as compressed-tensors does (helpers.py pack_to_int32):
// a dense bit stream, value i at bits [i*bits, (i+1)*bits) of the row's
// words, which may straddle two words; ceil(n * bits / 32) words for n
// values. The kernels' layout (kernels/qpack.h) keeps 32/bits values per
// word instead. For 2, 4 and 8 bits the two are the same bytes (the mapping
// is used in place); for 3, 5, 6, 7 bits rows are repacked on the way in
// and out.
static int dense_words(int n, int bits) { return (int)(((long long)n * bits + 31) / 32); }
static int same_layout(int bits) { return 32 % bits == 0; }

static uint32_t stream_get(const uint32_t *words, long long bit, int bits) {
    uint64_t w = words[bit / 32];
    if (bit % 32 + bits > 32) w |= (uint64_t)words[bit / 32 + 1] << 32;
    return (uint32_t)(w >> (bit % 32)) & ((1u << bits) - 1);
}

static void stream_put(uint32_t *words, long long bit, int bits, uint32_t v) {
    words[bit / 32] |= v << (bit % 32);
    if (bit % 32 + bits > 32) words[bit / 32 + 1] |= v >> (32 - bit % 32);
}

// Rows of packed zero points: ceil(rows * bits / 32).
static int zp_rows(int rows, int bits) { return dense_words(rows, bits); }

// ---- writing -----------------------------------------------------------

pq_status pq_packed_declare(pq_st_writer *w, const char *module, const pq_scheme *s, int rows, int cols,
                            pq_dtype scale_dtype) {
    char name[NAME_CAP];
    int64_t r = rows, c = cols;
    if (pq_scheme_wformat(s) == PQ_W_QPACK) {
        int64_t ng = s->group > 0 && s->group < cols ? (c + s->group - 1) / s->group : 1;
        int64_t packed[2] = {r, dense_words(cols, s->bits)}, scale[2] = {r, ng}, two = 2;
        int64_t zp[2] = {zp_rows(rows, s->bits), ng};
        PQ_TRY(tensor_name(name, module, "weight_packed"));
        PQ_TRY(pq_st_writer_declare(w, name, PQ_DT_I32, 2, packed));
        PQ_TRY(tensor_name(name, module, "weight_shape"));
        PQ_TRY(pq_st_writer_declare(w, name, PQ_DT_I64, 1, &two));
        PQ_TRY(tensor_name(name, module, "weight_scale"));
        PQ_TRY(pq_st_writer_declare(w, name, scale_dtype, 2, scale));
        if (!s->sym) {
            PQ_TRY(tensor_name(name, module, "weight_zero_point"));
            PQ_TRY(pq_st_writer_declare(w, name, PQ_DT_I32, 2, zp));
        }
        if (s->actorder == PQ_ACTORDER_GROUP && ng > 1) {
            PQ_TRY(tensor_name(name, module, "weight_g_idx"));
            PQ_TRY(pq_st_writer_declare(w, name, PQ_DT_I32, 1, &c));
        }
        return PQ_OK;
    }
    int per_tensor = s->group == PQ_GROUP_TENSOR;
    int64_t shape[2] = {r, c}, scale[2] = {per_tensor ? 1 : r, 1}, one = 1;
    PQ_TRY(tensor_name(name, module, "weight"));
    PQ_TRY(pq_st_writer_declare(w, name, s->is_float ? PQ_DT_F8_E4M3 : PQ_DT_I8, 2, shape));
    PQ_TRY(tensor_name(name, module, "weight_scale"));
    PQ_TRY(pq_st_writer_declare(w, name, scale_dtype, per_tensor ? 1 : 2, scale));
    if (!pq_scheme_act_static(s)) return PQ_OK;
    PQ_TRY(tensor_name(name, module, "input_scale"));
    return pq_st_writer_declare(w, name, scale_dtype, 1, &one);
}

// One f32 (exact in dt) as dt's bytes.
static size_t scalar_bytes(float v, pq_dtype dt, void *out) {
    uint16_t h = dt == PQ_DT_F16 ? pq_f32_to_fp16(v) : pq_f32_to_bf16(v);
    if (dt == PQ_DT_F32) memcpy(out, &v, 4);
    else memcpy(out, &h, 2);
    return pq_dtype_size(dt);
}

// The scales as stored (exact: they are representable in the dtype).
static void *stored_scales(const pq_qtensor *q) {
    size_t n = (size_t)q->nscales, es = pq_dtype_size(q->scale_dtype);
    uint16_t *h = pq_alloc(n * es);
    if (!h) return NULL;
    if (q->scale_dtype == PQ_DT_F32) memcpy(h, q->scales, n * 4);
    else
        for (size_t i = 0; i < n; i++)
            h[i] = q->scale_dtype == PQ_DT_F16 ? pq_f32_to_fp16(q->scales[i]) : pq_f32_to_bf16(q->scales[i]);
    return h;
}

// zeros[rows][ng] packed along dim 0: column g of the [zp_rows][ng] words is
// the bit stream of rows 0..rows-1.
static uint32_t *packed_zeros(const pq_qtensor *q) {
    int ng = pq_qtensor_ngroups(q), zr = zp_rows(q->rows, q->bits);
    uint32_t *zp = pq_calloc((size_t)zr * ng * sizeof(uint32_t)), *col = pq_calloc((size_t)zr * sizeof(uint32_t));
    if (!zp || !col) { pq_free(zp); pq_free(col); return NULL; }
    for (int g = 0; g < ng; g++) {
        memset(col, 0, (size_t)zr * sizeof(uint32_t));
        for (int r = 0; r < q->rows; r++) stream_put(col, (long long)r * q->bits, q->bits, q->zeros[(size_t)r * ng + g]);
        for (int i = 0; i < zr; i++) zp[(size_t)i * ng + g] = col[i];
    }
    pq_free(col);
    return zp;
}

// The codes in the file's layout: the kernel layout itself when they agree,
// else a repacked copy (*copy, to free).
static const uint32_t *file_codes(const pq_qtensor *q, uint32_t **copy) {
    *copy = NULL;
    if (same_layout(q->bits)) return q->packed;
    int wpr = dense_words(q->cols, q->bits);
    *copy = pq_calloc((size_t)q->rows * wpr * sizeof(uint32_t));
    if (!*copy) return NULL;
    pq_qpack view = {q->rows, q->cols, q->bits, q->cols, q->packed, NULL, NULL, NULL};
    for (int r = 0; r < q->rows; r++)
        for (int c = 0; c < q->cols; c++)
            stream_put(*copy + (size_t)r * wpr, (long long)c * q->bits, q->bits, (uint32_t)pq_qpack_code(&view, r, c));
    return *copy;
}

pq_status pq_packed_put(pq_st_writer *w, const char *module, const pq_qtensor *q) {
    char name[NAME_CAP];
    size_t n = (size_t)q->rows * q->cols;
    pq_status s = PQ_OK;
    void *scales = stored_scales(q);
    uint32_t *zp = q->zeros ? packed_zeros(q) : NULL, *codes_copy = NULL;
    const uint32_t *codes = q->fmt == PQ_W_QPACK ? file_codes(q, &codes_copy) : NULL;
    PQ_CHECK_GOTO(!scales || (q->zeros && !zp) || (q->fmt == PQ_W_QPACK && !codes), s, PQ_ERR_NOMEM,
                  "%s: out of memory", module);
    PQ_TRY_GOTO(s, tensor_name(name, module, "weight_scale"));
    PQ_TRY_GOTO(s, pq_st_writer_put(w, name, scales, (size_t)q->nscales * pq_dtype_size(q->scale_dtype)));
    if (q->fmt == PQ_W_QPACK) {
        int64_t shape[2] = {q->rows, q->cols};
        PQ_TRY_GOTO(s, tensor_name(name, module, "weight_packed"));
        PQ_TRY_GOTO(s, pq_st_writer_put(w, name, codes, (size_t)q->rows * dense_words(q->cols, q->bits) * 4));
        PQ_TRY_GOTO(s, tensor_name(name, module, "weight_shape"));
        PQ_TRY_GOTO(s, pq_st_writer_put(w, name, shape, sizeof shape));
        if (zp) {
            PQ_TRY_GOTO(s, tensor_name(name, module, "weight_zero_point"));
            PQ_TRY_GOTO(s, pq_st_writer_put(w, name, zp,
                                            (size_t)zp_rows(q->rows, q->bits) * pq_qtensor_ngroups(q) * 4));
        }
        if (q->g_idx) {
            PQ_TRY_GOTO(s, tensor_name(name, module, "weight_g_idx"));
            PQ_TRY_GOTO(s, pq_st_writer_put(w, name, q->g_idx, (size_t)q->cols * sizeof(int32_t)));
        }
    } else {
        PQ_TRY_GOTO(s, tensor_name(name, module, "weight"));
        PQ_TRY_GOTO(s, pq_st_writer_put(w, name, q->fmt == PQ_W_INT8 ? (const void *)q->i8 : q->f8, n));
        if (q->input_scale > 0) {
            char v[4];
            PQ_TRY_GOTO(s, tensor_name(name, module, "input_scale"));
            PQ_TRY_GOTO(s, pq_st_writer_put(w, name, v, scalar_bytes(q->input_scale, q->scale_dtype, v)));
        }
    }
done:
    pq_free(scales);
    pq_free(zp);
    pq_free(codes_copy);
    return s;
}

// ---- reading -----------------------------------------------------------

static const char *file_of(const pq_st *st, const pq_tensor *t) { return pq_st_file_path(st, t->file); }

static void note_used(pq_packed_owned *own, const pq_tensor *t) {
    PQ_ASSERT(own->n_used < PQ_PACKED_MAX_USED);
    own->used[own->n_used++] = t;
}

// The scale tensor M.<suffix> of module (any float dtype), shape [n0, n1]
// or, when vec_ok (n1 == 1), also [n0] or a scalar holding n0 elements; as f32.
static pq_status load_scales(const pq_st *st, const char *module, const char *suffix, int64_t n0, int64_t n1,
                             int vec_ok, float **out, pq_packed_owned *own) {
    char name[NAME_CAP];
    PQ_TRY(tensor_name(name, module, suffix));
    const pq_tensor *t = pq_st_find(st, name);
    PQ_FAIL_IF(!t, PQ_ERR_FORMAT, "%s: tensor '%s' is missing", pq_st_file_path(st, 0), name);
    PQ_FAIL_IF(t->dtype != PQ_DT_F16 && t->dtype != PQ_DT_BF16 && t->dtype != PQ_DT_F32, PQ_ERR_FORMAT,
               "%s: tensor '%s' has dtype %s; expected F16, BF16 or F32", file_of(st, t), name,
               pq_dtype_name(t->dtype));
    int64_t shape[2] = {n0, n1};
    if (!(vec_ok && t->ndim <= 1 && t->numel == n0)) PQ_TRY(pq_st_expect(st, name, t->dtype, 2, shape, &t));
    float *s = pq_alloc((size_t)t->numel * sizeof(float));
    PQ_FAIL_IF(!s, PQ_ERR_NOMEM, "%s: out of memory", name);
    for (int64_t i = 0; i < t->numel; i++) {
        const uint8_t *p = (const uint8_t *)t->data + i * (int64_t)pq_dtype_size(t->dtype);
        uint16_t h;
        uint32_t u;
        if (t->dtype == PQ_DT_F32) memcpy(&u, p, 4), s[i] = pq_f32_from_bits(u);
        else memcpy(&h, p, 2), s[i] = t->dtype == PQ_DT_F16 ? pq_fp16_to_f32(h) : pq_bf16_to_f32(h);
        if (!isfinite(s[i])) {
            pq_free(s);
            return PQ_FAIL(PQ_ERR_FORMAT, "%s: tensor '%s' element %lld is not finite", file_of(st, t), name,
                           (long long)i);
        }
    }
    *out = s;
    note_used(own, t);
    return PQ_OK;
}

// The file's bit-stream codes (tensor t) repacked into the kernel layout
// (*copy owns them).
static const uint32_t *kernel_codes(const pq_tensor *t, int rows, int cols, int bits, void **copy) {
    int wpr = dense_words(cols, bits), per = 32 / bits, kwpr = pq_qpack_words_per_row(cols, bits);
    uint32_t *k = pq_calloc((size_t)rows * kwpr * sizeof(uint32_t)), *row = pq_alloc((size_t)wpr * sizeof(uint32_t));
    *copy = k;
    if (!k || !row) { pq_free(row); return NULL; }
    for (int r = 0; r < rows; r++) {
        memcpy(row, (const char *)t->data + (size_t)r * wpr * 4, (size_t)wpr * 4);
        for (int c = 0; c < cols; c++)
            k[(size_t)r * kwpr + c / per] |= stream_get(row, (long long)c * bits, bits) << ((c % per) * bits);
    }
    pq_free(row);
    return k;
}

// weight_shape: I64 (what compressed-tensors writes) or I32 [2] = [rows, cols].
static pq_status check_shape_tensor(const pq_st *st, const char *module, int rows, int cols, pq_packed_owned *own) {
    char name[NAME_CAP];
    PQ_TRY(tensor_name(name, module, "weight_shape"));
    const pq_tensor *t = pq_st_find(st, name);
    int64_t two = 2, v[2] = {0, 0};
    PQ_FAIL_IF(!t, PQ_ERR_FORMAT, "%s: tensor '%s' is missing", pq_st_file_path(st, 0), name);
    PQ_TRY(pq_st_expect(st, name, t->dtype == PQ_DT_I32 ? PQ_DT_I32 : PQ_DT_I64, 1, &two, &t));
    for (int i = 0; i < 2; i++) {
        int32_t x;
        if (t->dtype == PQ_DT_I64) memcpy(&v[i], (const char *)t->data + 8 * i, 8);
        else memcpy(&x, (const char *)t->data + 4 * i, 4), v[i] = x;
    }
    PQ_FAIL_IF(v[0] != rows || v[1] != cols, PQ_ERR_FORMAT,
               "%s: tensor '%s' is [%lld, %lld], config.json implies [%d, %d]", file_of(st, t), name,
               (long long)v[0], (long long)v[1], rows, cols);
    note_used(own, t);
    return PQ_OK;
}

static pq_status load_qpack(const pq_st *st, const pq_packed_info *info, const char *module, pq_linear *L,
                            pq_packed_owned *own) {
    const pq_scheme *s = &info->scheme;
    char name[NAME_CAP];
    int rows = L->rows, cols = L->cols, bits = s->bits;
    int group = s->group > 0 && s->group < cols ? s->group : cols, ng = pq_qpack_ngroups(cols, group);
    const pq_tensor *t;
    int64_t packed[2] = {rows, dense_words(cols, bits)}, zshape[2] = {zp_rows(rows, bits), ng};
    PQ_TRY(tensor_name(name, module, "weight_packed"));
    PQ_TRY(pq_st_expect(st, name, PQ_DT_I32, 2, packed, &t));
    note_used(own, t);
    // pq_st aligns every tensor to its dtype: the 2/4/8-bit codes are used in place
    const uint32_t *codes = same_layout(bits) ? t->data : kernel_codes(t, rows, cols, bits, &own->p[0]);
    PQ_FAIL_IF(!codes, PQ_ERR_NOMEM, "%s: out of memory", name);
    PQ_TRY(check_shape_tensor(st, module, rows, cols, own));
    float *scales;
    PQ_TRY(load_scales(st, module, "weight_scale", rows, ng, 0, &scales, own));
    own->p[1] = scales;
    uint8_t *zeros = NULL;
    PQ_TRY(tensor_name(name, module, "weight_zero_point"));
    t = pq_st_find(st, name);
    PQ_FAIL_IF(s->sym && t, PQ_ERR_FORMAT, "%s: tensor '%s' is present, but quantization_config says symmetric: true "
               "(a symmetric checkpoint has no zero points; which one is wrong?)", file_of(st, t), name);
    if (!s->sym) {
        PQ_TRY(pq_st_expect(st, name, PQ_DT_I32, 2, zshape, &t));
        note_used(own, t);
        zeros = own->p[2] = pq_alloc((size_t)rows * ng);
        PQ_FAIL_IF(!zeros, PQ_ERR_NOMEM, "%s: out of memory", name);
        uint32_t *col = pq_alloc((size_t)zshape[0] * sizeof(uint32_t));
        PQ_FAIL_IF(!col, PQ_ERR_NOMEM, "%s: out of memory", name);
        for (int g = 0; g < ng; g++) {
            for (int i = 0; i < zshape[0]; i++) memcpy(&col[i], (const char *)t->data + ((size_t)i * ng + g) * 4, 4);
            for (int r = 0; r < rows; r++) zeros[(size_t)r * ng + g] = (uint8_t)stream_get(col, (long long)r * bits, bits);
        }
        pq_free(col);
    }
    // act-order: compressed-tensors stores weight_g_idx exactly for actorder "group"
    const int32_t *g_idx = NULL;
    PQ_TRY(tensor_name(name, module, "weight_g_idx"));
    t = pq_st_find(st, name);
    PQ_FAIL_IF(t && s->actorder != PQ_ACTORDER_GROUP, PQ_ERR_FORMAT, "%s: tensor '%s' is present, but "
               "quantization_config's actorder is %s, not \"group\"", file_of(st, t), name,
               s->actorder == PQ_ACTORDER_WEIGHT ? "\"weight\"" : "null");
    PQ_FAIL_IF(!t && s->actorder == PQ_ACTORDER_GROUP && ng > 1, PQ_ERR_FORMAT, "%s: quantization_config says "
               "actorder \"group\" but tensor '%s' is missing", pq_st_file_path(st, 0), name);
    if (t) {
        int64_t n = cols;
        PQ_TRY(pq_st_expect(st, name, PQ_DT_I32, 1, &n, &t));
        note_used(own, t);
        g_idx = t->data;
        for (int c = 0; c < cols; c++)
            PQ_FAIL_IF(g_idx[c] < 0 || g_idx[c] >= ng, PQ_ERR_FORMAT, "%s: tensor '%s'[%d] = %d is not a group "
                       "in [0, %d)", file_of(st, t), name, c, g_idx[c], ng);
    }
    L->fmt = PQ_W_QPACK;
    L->q = (pq_qpack){rows, cols, bits, group, codes, scales, zeros, g_idx};
    return PQ_OK;
}

static pq_status load_bytes(const pq_st *st, const pq_packed_info *info, const char *module, pq_linear *L,
                            pq_packed_owned *own) {
    int fp8 = info->scheme.is_float, per_tensor = info->scheme.group == PQ_GROUP_TENSOR;
    char name[NAME_CAP];
    int64_t shape[2] = {L->rows, L->cols};
    const pq_tensor *t;
    PQ_TRY(tensor_name(name, module, "weight"));
    PQ_TRY(pq_st_expect(st, name, fp8 ? PQ_DT_F8_E4M3 : PQ_DT_I8, 2, shape, &t));
    note_used(own, t);
    float *scales;
    PQ_TRY(load_scales(st, module, "weight_scale", per_tensor ? 1 : L->rows, 1, 1, &scales, own));
    own->p[0] = scales;
    L->fmt = fp8 ? PQ_W_FP8 : PQ_W_INT8;
    if (fp8) L->f8 = (pq_fp8_weight){L->rows, L->cols, t->data, scales, !per_tensor};
    else L->i8 = (pq_int8_weight){L->rows, L->cols, t->data, scales};
    // input_activations: dynamic per token or static per tensor (the kernels of kernels/w8a8.h)
    pq_act_quant act = info->scheme.act;
    if (act == PQ_ACT_NONE) return PQ_OK;
    PQ_FAIL_IF(L->cols > PQ_W8A8_MAX_COLS, PQ_ERR_FORMAT, "%s: %d input features: W8A8 sums are exact in int32 for "
               "at most %d", module, L->cols, PQ_W8A8_MAX_COLS);
    L->act.type = act == PQ_ACT_INT8_TOKEN || act == PQ_ACT_INT8_TENSOR ? PQ_ACTQ_INT8 : PQ_ACTQ_FP8;
    if (!pq_scheme_act_static(&info->scheme)) return PQ_OK;
    float *in;
    PQ_TRY(load_scales(st, module, "input_scale", 1, 1, 1, &in, own));
    L->act.static_scale = in[0];
    pq_free(in);
    PQ_FAIL_IF(!(L->act.static_scale > 0), PQ_ERR_FORMAT, "%s: tensor '%s.input_scale' is %g; a static activation "
               "scale must be > 0", pq_st_file_path(st, 0), module, (double)L->act.static_scale);
    return PQ_OK;
}

pq_status pq_packed_load(const pq_st *st, const pq_packed_info *info, const char *module, int rows, int cols,
                         pq_linear *out, pq_packed_owned *own) {
    memset(own, 0, sizeof *own);
    pq_linear L = {.rows = rows, .cols = cols};
    pq_status s = pq_scheme_wformat(&info->scheme) == PQ_W_QPACK ? load_qpack(st, info, module, &L, own)
                                                                  : load_bytes(st, info, module, &L, own);
    if (s != PQ_OK) {
        for (int i = 0; i < PQ_PACKED_MAX_OWNED; i++) pq_free(own->p[i]);
        memset(own, 0, sizeof *own);
        return s;
    }
    *out = L;
    return PQ_OK;
}
