#include "formats/qtensor.h"

#include <string.h>

#include "common/half.h"
#include "common/sys.h"
#include "kernels/ggml_blocks.h"

int pq_qtensor_ngroups(const pq_qtensor *q) {
    return q->fmt == PQ_W_QPACK ? pq_qpack_ngroups(q->cols, q->group) : 1;
}

size_t pq_qtensor_row_bytes(const pq_qtensor *q) {
    const pq_ggml_type_info *ti = pq_ggml_type_get((uint32_t)q->ggml);
    return (size_t)(q->cols / ti->block) * (size_t)ti->bytes;
}

pq_status pq_qtensor_alloc(pq_qtensor *q, int asym) {
    size_t n = (size_t)q->rows * q->cols;
    q->packed = NULL, q->zeros = NULL, q->i8 = NULL, q->f8 = NULL, q->scales = NULL, q->g_idx = NULL;
    q->blocks = NULL, q->dense = NULL;
    int ok = 1;
    if (q->is_ggml) {
        q->nscales = 0;
        q->blocks = pq_calloc((size_t)q->rows * pq_qtensor_row_bytes(q));
        q->dense = pq_calloc(n * sizeof(float));
        if (q->blocks && q->dense) return PQ_OK;
        pq_qtensor_free(q);
        return PQ_FAIL(PQ_ERR_NOMEM, "out of memory for a %d x %d GGUF matrix", q->rows, q->cols);
    }
    switch (q->fmt) {
    case PQ_W_QPACK: {
        size_t ng = (size_t)pq_qtensor_ngroups(q);
        q->nscales = (int)((size_t)q->rows * ng);
        q->packed = pq_calloc((size_t)q->rows * pq_qpack_words_per_row(q->cols, q->bits) * sizeof(uint32_t));
        if (asym) ok = (q->zeros = pq_calloc((size_t)q->nscales)) != NULL;
        ok = ok && q->packed;
        break;
    }
    case PQ_W_INT8:
        q->nscales = q->rows;
        ok = (q->i8 = pq_calloc(n)) != NULL;
        break;
    case PQ_W_FP8:
        q->nscales = q->per_tensor ? 1 : q->rows;
        ok = (q->f8 = pq_calloc(n)) != NULL;
        break;
    case PQ_W_DENSE: PQ_ASSERT(!"a pq_qtensor is never dense");
    }
    ok = ok && (q->scales = pq_calloc((size_t)q->nscales * sizeof(float))) != NULL;
    if (!ok) {
        pq_qtensor_free(q);
        return PQ_FAIL(PQ_ERR_NOMEM, "out of memory for a %d x %d quantized matrix", q->rows, q->cols);
    }
    return PQ_OK;
}

pq_status pq_qtensor_init(pq_qtensor *q, const pq_scheme *s, int rows, int cols, pq_dtype scale_dtype) {
    *q = (pq_qtensor){.fmt = pq_scheme_wformat(s), .rows = rows, .cols = cols, .bits = s->bits,
                      .group = s->group > 0 && s->group < cols ? s->group : cols,
                      .per_tensor = s->group == PQ_GROUP_TENSOR, .scale_dtype = scale_dtype};
    PQ_FAIL_IF(rows <= 0 || cols <= 0, PQ_ERR_ARG, "a quantized matrix of shape [%d, %d]", rows, cols);
    if (pq_scheme_ggml_type(s) >= 0) {
        q->fmt = PQ_W_DENSE;
        q->is_ggml = 1;
        q->ggml = pq_scheme_ggml_type_for(s, cols);
    }
    return pq_qtensor_alloc(q, q->fmt == PQ_W_QPACK && !s->sym);
}

void pq_qtensor_free(pq_qtensor *q) {
    if (!q) return;
    pq_free(q->packed);
    pq_free(q->zeros);
    pq_free(q->i8);
    pq_free(q->f8);
    pq_free(q->scales);
    pq_free(q->g_idx);
    pq_free(q->blocks);
    pq_free(q->dense);
    q->packed = NULL, q->zeros = NULL, q->i8 = NULL, q->f8 = NULL, q->scales = NULL, q->g_idx = NULL;
    q->blocks = NULL, q->dense = NULL;
}

void pq_qtensor_set_codes(pq_qtensor *q, int r, int c0, int n, const float *codes) {
    if (q->fmt == PQ_W_INT8) {
        for (int i = 0; i < n; i++) q->i8[(size_t)r * q->cols + c0 + i] = (int8_t)codes[i];
        return;
    }
    int per = pq_qpack_per_word(q->bits), bias = 1 << (q->bits - 1);
    uint32_t *word = q->packed + (size_t)r * pq_qpack_words_per_row(q->cols, q->bits) + c0 / per;
    int slot = c0 % per;
    for (int i = 0; i < n; i++) {
        *word |= (uint32_t)((int)codes[i] + bias) << (slot * q->bits);
        if (++slot == per) slot = 0, word++;
    }
}

void pq_qtensor_set_column(pq_qtensor *q, int r0, int n, int c, const float *codes) {
    if (q->fmt == PQ_W_INT8) {
        for (int i = 0; i < n; i++) q->i8[(size_t)(r0 + i) * q->cols + c] = (int8_t)codes[i];
        return;
    }
    int per = pq_qpack_per_word(q->bits), bias = 1 << (q->bits - 1), shift = c % per * q->bits;
    size_t wpr = (size_t)pq_qpack_words_per_row(q->cols, q->bits);
    uint32_t *word = q->packed + (size_t)r0 * wpr + c / per;
    for (int i = 0; i < n; i++, word += wpr) *word |= (uint32_t)((int)codes[i] + bias) << shift;
}

void pq_qtensor_set_code(pq_qtensor *q, int r, int c, int code) {
    float f = (float)code;
    pq_qtensor_set_codes(q, r, c, 1, &f);
}

pq_linear pq_qtensor_linear(const pq_qtensor *q) {
    pq_linear L = {.fmt = q->fmt, .rows = q->rows, .cols = q->cols};
    switch (q->fmt) {
    case PQ_W_QPACK:
        L.q = (pq_qpack){q->rows, q->cols, q->bits, q->group, q->packed, q->scales, q->zeros, q->g_idx};
        break;
    case PQ_W_INT8: L.i8 = (pq_int8_weight){q->rows, q->cols, q->i8, q->scales}; break;
    case PQ_W_FP8: L.f8 = (pq_fp8_weight){q->rows, q->cols, q->f8, q->scales, !q->per_tensor}; break;
    case PQ_W_DENSE: // a ggml matrix: its exact values
        L.dense_type = PQ_DENSE_F32;
        L.w = q->dense;
        break;
    }
    return L;
}

float pq_round_to_dtype(float x, pq_dtype dt) {
    switch (dt) {
    case PQ_DT_F16: return pq_fp16_to_f32(pq_f32_to_fp16(x));
    case PQ_DT_BF16: return pq_bf16_to_f32(pq_f32_to_bf16(x));
    default: return x;
    }
}
