// Uploading linear layers to the GPU (kernels/linear_cuda.h): dense weights
// converted to the activation type on the device, quantized codes
// rearranged into the tiled layout on the device (act-order g_idx applied as
// a column permutation), scales and zero points arranged on the host (they
// are small).
#include "kernels/cuda_act.cuh"

#include <algorithm>
#include <vector>

extern "C" {
#include "common/half.h"
#include "kernels/w8a8.h"
}
#include "kernels/linear_cuda.h"
#include "kernels/quant_cuda.h"

// Source bytes per staging chunk of an upload (dense conversion, tiling).
#define STAGING_BYTES ((size_t)64 << 20)

static size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

// ---- dense weights: converted on the device ----------------------------------------------------

template <class S> __device__ __forceinline__ float src_f32(const S *p, size_t i);
template <> __device__ __forceinline__ float src_f32<float>(const float *p, size_t i) { return p[i]; }
template <> __device__ __forceinline__ float src_f32<__half>(const __half *p, size_t i) { return __half2float(p[i]); }
template <> __device__ __forceinline__ float src_f32<__nv_bfloat16>(const __nv_bfloat16 *p, size_t i) {
    return __bfloat162float(p[i]);
}

// out[i] = A(src[i]); a finite value that becomes Inf lowers *bad to its
// index (base + i): the first one is reported.
template <class S, class A>
__global__ void convert(const S *src, size_t n, size_t base, A *out, unsigned long long *bad) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float f = src_f32<S>(src, i);
        const A v = Act<A>::from_f(f);
        if (isinf(Act<A>::to_f(v)) && isfinite(f)) atomicMin(bad, (unsigned long long)(base + i));
        out[i] = v;
    }
}

static size_t dense_size(pq_dense_type dt) { return dt == PQ_DENSE_F32 ? 4 : 2; }

static float host_value(pq_dense_type dt, const void *w, size_t i) {
    switch (dt) {
    case PQ_DENSE_F32: return ((const float *)w)[i];
    case PQ_DENSE_F16: return pq_fp16_to_f32(((const uint16_t *)w)[i]);
    case PQ_DENSE_BF16: return pq_bf16_to_f32(((const uint16_t *)w)[i]);
    }
    return NAN;
}

template <class A> static void launch_convert(pq_dense_type src, const void *d_src, size_t n, size_t base, A *out,
                                             unsigned long long *bad) {
    const unsigned blocks = pq_cuda_blocks(n);
    if (src == PQ_DENSE_F32) convert<float, A><<<blocks, PQ_CUDA_THREADS>>>((const float *)d_src, n, base, out, bad);
    else if (src == PQ_DENSE_F16) convert<__half, A><<<blocks, PQ_CUDA_THREADS>>>((const __half *)d_src, n, base, out, bad);
    else convert<__nv_bfloat16, A><<<blocks, PQ_CUDA_THREADS>>>((const __nv_bfloat16 *)d_src, n, base, out, bad);
}

// The same type is one copy; another goes through a device staging buffer
// in chunks and the convert kernel (synchronous: the legacy stream).
static pq_status copy_converted(pq_dense_type src, const void *w, size_t n, pq_act_dtype dt, const char *what,
                                uint16_t *d) {
    if ((src == PQ_DENSE_F16 && dt == PQ_ACT_F16) || (src == PQ_DENSE_BF16 && dt == PQ_ACT_BF16)) {
        PQ_CUDA_TRY(cudaMemcpy(d, w, n * sizeof(uint16_t), cudaMemcpyHostToDevice));
        return PQ_OK;
    }
    const size_t es = dense_size(src), chunk = std::min(n, STAGING_BYTES / es);
    void *stage = NULL;
    unsigned long long *d_bad = NULL, bad = ~0ull;
    pq_status s = pq_cuda_malloc_named(&stage, chunk * es, what);
    if (s == PQ_OK) s = pq_cuda_copy_named((void **)&d_bad, &bad, sizeof bad, what);
    for (size_t i0 = 0; s == PQ_OK && i0 < n; i0 += chunk) {
        const size_t m = std::min(chunk, n - i0);
        cudaError_t e = cudaMemcpy(stage, (const char *)w + i0 * es, m * es, cudaMemcpyHostToDevice);
        if (e == cudaSuccess) {
            PQ_ACT_DISPATCH(dt, launch_convert<A>(src, stage, m, i0, (A *)d + i0, d_bad));
            e = cudaGetLastError();
        }
        if (e == cudaSuccess) e = cudaDeviceSynchronize(); // the staging buffer is reused
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            s = PQ_FAIL(PQ_ERR_CUDA, "%s: converting %zu elements on the device: %s", what, m, cudaGetErrorString(e));
        }
    }
    if (s == PQ_OK) {
        cudaError_t e = cudaMemcpy(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            s = PQ_FAIL(PQ_ERR_CUDA, "%s: cudaMemcpy: %s", what, cudaGetErrorString(e));
        } else if (bad != ~0ull) {
            s = PQ_FAIL(PQ_ERR_NUMERIC,
                        "%s: weight %g at element %llu does not fit FP16 (the CUDA backend stores this model's "
                        "weights as FP16)", what, (double)host_value(src, w, (size_t)bad), bad);
        }
    }
    cudaFree(stage);
    cudaFree(d_bad);
    return s;
}

pq_status pq_cuda_upload_act(pq_dense_type src, const void *w, size_t n, pq_act_dtype dt, const char *what,
                             uint16_t **d_out) {
    *d_out = NULL;
    PQ_FAIL_IF(n == 0, PQ_ERR_ARG, "%s: empty weight", what);
    void *d = NULL;
    PQ_TRY(pq_cuda_malloc_named(&d, n * sizeof(uint16_t), what));
    pq_status s = copy_converted(src, w, n, dt, what, (uint16_t *)d);
    if (s != PQ_OK) {
        cudaFree(d);
        return s;
    }
    *d_out = (uint16_t *)d;
    return PQ_OK;
}

// ---- the rows layouts -------------------------------------------------------------------------

// A zeroed device matrix of h_alloc rows of `dpitch` bytes, its first
// h_copy rows holding the host rows of `width` bytes (spitch apart): row
// padding without expanding the data.
static pq_status dev_rows(void **d, size_t h_alloc, size_t dpitch, const void *host, size_t spitch, size_t width,
                          size_t h_copy, const char *what) {
    PQ_TRY(pq_cuda_malloc_named(d, h_alloc * dpitch, what));
    PQ_CUDA_TRY(cudaMemset(*d, 0, h_alloc * dpitch));
    PQ_CUDA_TRY(cudaMemcpy2D(*d, dpitch, host, spitch, width, h_copy, cudaMemcpyHostToDevice));
    return PQ_OK;
}

// ---- the tiled layout ---------------------------------------------------------------------------

// Uploads the codes of rows [rows][cols] (bits 4 or 8, src_stride bytes per
// row on the host) as tiles, nst stages per row, columns through d_perm:
// chunks of whole tiles go through a device staging buffer and pq_qtile_cuda.
static pq_status upload_tiled(const void *src, size_t src_stride, int rows, int cols, int bits, const int32_t *d_perm,
                              int nst, const char *what, uint32_t **d_out) {
    *d_out = NULL;
    const size_t tiles = (size_t)(rows + PQ_TILE_ROWS - 1) / PQ_TILE_ROWS;
    size_t chunk_rows = STAGING_BYTES / src_stride / PQ_TILE_ROWS * PQ_TILE_ROWS;
    if (chunk_rows < PQ_TILE_ROWS) chunk_rows = PQ_TILE_ROWS;
    if (chunk_rows > tiles * PQ_TILE_ROWS) chunk_rows = tiles * PQ_TILE_ROWS;
    void *out = NULL, *stage = NULL;
    pq_status s = pq_cuda_malloc_named(&out, tiles * nst * PQ_TILE_WORDS * 4, what);
    if (s == PQ_OK) s = pq_cuda_malloc_named(&stage, chunk_rows * src_stride, what);
    for (int r0 = 0; s == PQ_OK && r0 < rows; r0 += (int)chunk_rows) {
        const int n = rows - r0 < (int)chunk_rows ? rows - r0 : (int)chunk_rows;
        cudaError_t e = cudaMemcpy(stage, (const uint8_t *)src + (size_t)r0 * src_stride, (size_t)n * src_stride,
                                   cudaMemcpyHostToDevice);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            s = PQ_FAIL(PQ_ERR_CUDA, "%s: cudaMemcpy: %s", what, cudaGetErrorString(e));
            break;
        }
        s = pq_qtile_cuda((const uint8_t *)stage, src_stride, r0, n, cols, bits, d_perm, nst, (uint32_t *)out, NULL);
        if (s == PQ_OK && (e = cudaDeviceSynchronize()) != cudaSuccess) { // the staging buffer is reused
            (void)cudaGetLastError();
            s = PQ_FAIL(PQ_ERR_CUDA, "%s: tiling on the device: %s", what, cudaGetErrorString(e));
        }
    }
    cudaFree(stage);
    if (s != PQ_OK) {
        cudaFree(out);
        return s;
    }
    *d_out = (uint32_t *)out;
    return PQ_OK;
}

// Whether the tiled kernels take a group of `group` codes (group >= cols:
// one per row): a multiple of the group block (32 codes at 4 bits, 16 at 8)
// that divides a stage or is a multiple of one.
static int tiled_group_ok(int bits, int group, int cols) {
    if (group >= cols) return 1;
    const int block = 4 * (32 / bits), sc = PQ_TILE_STAGE_WORDS * (32 / bits);
    return group % block == 0 && (sc % group == 0 || group % sc == 0);
}

// The column order that makes an act-order g_idx whole consecutive groups:
// columns stably sorted by group, which must then be exactly `group`
// columns each (the last one ragged), as GPTQ writes them. 0 when g_idx is
// not such a permutation.
static int gidx_perm(const int32_t *g_idx, int cols, int group, int ng, std::vector<int32_t> &perm) {
    perm.resize((size_t)cols);
    for (int c = 0; c < cols; c++) perm[(size_t)c] = c;
    std::stable_sort(perm.begin(), perm.end(), [&](int32_t a, int32_t b) { return g_idx[a] < g_idx[b]; });
    for (int j = 0; j < cols; j++)
        if (g_idx[perm[(size_t)j]] != j / group || j / group >= ng) return 0;
    return 1;
}

// Scales (and zero points) of a tiled QPACK weight: [tiles][ng][16], rows
// past `rows` 0. FP16 when every scale is exactly an FP16 value.
static pq_status upload_tiled_scales(const pq_qpack *q, int ng, const char *what, pq_qpack_dev *d) {
    const size_t tiles = (size_t)(q->rows + PQ_TILE_ROWS - 1) / PQ_TILE_ROWS, n = tiles * ng * PQ_TILE_ROWS;
    std::vector<float> s32(n, 0.0f);
    std::vector<uint16_t> s16(n, 0);
    std::vector<uint8_t> z(q->zeros ? n : 0, 0);
    d->scales_f16 = 1;
    for (int r = 0; r < q->rows; r++)
        for (int g = 0; g < ng; g++) {
            const size_t i = ((size_t)(r / PQ_TILE_ROWS) * ng + g) * PQ_TILE_ROWS + r % PQ_TILE_ROWS;
            s32[i] = q->scales[(size_t)r * ng + g];
            s16[i] = pq_f32_to_fp16(s32[i]);
            d->scales_f16 &= pq_fp16_to_f32(s16[i]) == s32[i];
            if (q->zeros) z[i] = q->zeros[(size_t)r * ng + g];
        }
    void *p = NULL;
    pq_status s = d->scales_f16 ? pq_cuda_copy_named(&p, s16.data(), n * 2, what)
                                : pq_cuda_copy_named(&p, s32.data(), n * 4, what);
    d->scales = p;
    PQ_TRY(s);
    if (q->zeros) {
        p = NULL;
        s = pq_cuda_copy_named(&p, z.data(), n, what);
        d->zeros = (const uint8_t *)p;
    }
    return s;
}

// Scales of the rows layout: [rows][ng], FP16 when exact.
static pq_status upload_rows_scales(const pq_qpack *q, int ng, const char *what, pq_qpack_dev *d) {
    const size_t nsc = (size_t)q->rows * ng;
    std::vector<uint16_t> s16(nsc);
    d->scales_f16 = 1;
    for (size_t i = 0; i < nsc && d->scales_f16; i++) {
        s16[i] = pq_f32_to_fp16(q->scales[i]);
        d->scales_f16 = pq_fp16_to_f32(s16[i]) == q->scales[i];
    }
    void *p = NULL;
    pq_status s = d->scales_f16 ? pq_cuda_copy_named(&p, s16.data(), nsc * 2, what)
                                : pq_cuda_copy_named(&p, q->scales, nsc * 4, what);
    d->scales = p;
    PQ_TRY(s);
    if (q->zeros) {
        p = NULL;
        s = pq_cuda_copy_named(&p, q->zeros, nsc, what);
        d->zeros = (const uint8_t *)p;
    }
    return s;
}

static pq_status upload_qpack(const pq_qpack *q, const char *what, pq_linear_cuda *L) {
    PQ_FAIL_IF(q->bits < 2 || q->bits > 8 || q->group < 1, PQ_ERR_FORMAT, "%s: packed weight of %d bits, group %d",
               what, q->bits, q->group);
    const int wpr = pq_qpack_words_per_row(q->cols, q->bits), ng = pq_qpack_ngroups(q->cols, q->group);
    const size_t nsc = (size_t)q->rows * ng;
    pq_qpack_dev *d = &L->qp;
    d->bits = q->bits, d->group = q->group, d->ngroups = ng;
    // the kernels build constants from z assuming a b-bit code (a packed
    // file cannot hold more)
    for (size_t i = 0; q->zeros && i < nsc; i++)
        PQ_FAIL_IF(q->zeros[i] >> q->bits, PQ_ERR_FORMAT, "%s: zero point %d of a %d-bit weight (row %zu)", what,
                   q->zeros[i], q->bits, i / ng);
    for (int c = 0; q->g_idx && c < q->cols; c++)
        PQ_FAIL_IF(q->g_idx[c] < 0 || q->g_idx[c] >= ng, PQ_ERR_FORMAT, "%s: g_idx[%d] = %d outside [0, %d)", what, c,
                   q->g_idx[c], ng);
    std::vector<int32_t> perm;
    const int tiled = (q->bits == 4 || q->bits == 8) && tiled_group_ok(q->bits, q->group, q->cols) &&
                      (!q->g_idx || gidx_perm(q->g_idx, q->cols, q->group, ng, perm));
    if (tiled) {
        d->tiled = 1;
        d->nst = pq_tile_stages(q->cols, q->bits);
        int identity = 1;
        for (int c = 0; c < (int)perm.size() && identity; c++) identity = perm[(size_t)c] == c;
        if (q->g_idx && !identity) {
            void *p = NULL;
            PQ_TRY(pq_cuda_copy_named(&p, perm.data(), (size_t)q->cols * 4, what));
            d->perm = (const int32_t *)p;
        }
        uint32_t *w = NULL;
        PQ_TRY(upload_tiled(q->packed, (size_t)wpr * 4, q->rows, q->cols, q->bits, d->perm, d->nst, what, &w));
        d->packed = w;
        return upload_tiled_scales(q, ng, what, d);
    }
    void *p = NULL;
    d->ldw = (int)round_up((size_t)wpr, 16);
    PQ_TRY(dev_rows(&p, (size_t)q->rows, (size_t)d->ldw * 4, q->packed, (size_t)wpr * 4, (size_t)wpr * 4,
                    (size_t)q->rows, what));
    d->packed = (const uint32_t *)p;
    if (q->g_idx) {
        p = NULL;
        PQ_TRY(pq_cuda_copy_named(&p, q->g_idx, (size_t)q->cols * 4, what));
        d->gidx = (const int32_t *)p;
    }
    return upload_rows_scales(q, ng, what, d);
}

// INT8 / FP8 codes: W8A8 rows padded to ldq bytes and to a multiple of 32
// rows (cuBLASLt); weight-only, tiled.
static pq_status upload_bytes(const void *q, const float *scales, int nscales, int w8a8, const char *what,
                              pq_linear_cuda *L) {
    pq_bytes_dev *d = &L->qb;
    void *p = NULL;
    if (w8a8) {
        d->ldq = (int)round_up((size_t)L->cols, 64);
        PQ_TRY(dev_rows(&p, round_up((size_t)L->rows, 32), (size_t)d->ldq, q, (size_t)L->cols, (size_t)L->cols,
                        (size_t)L->rows, what));
        d->q = (const uint8_t *)p;
    } else {
        uint32_t *w = NULL;
        d->tiled = 1;
        d->nst = pq_tile_stages(L->cols, 8);
        PQ_TRY(upload_tiled(q, (size_t)L->cols, L->rows, L->cols, 8, NULL, d->nst, what, &w));
        d->q = (const uint8_t *)w;
    }
    p = NULL;
    pq_status s = pq_cuda_copy_named(&p, scales, (size_t)nscales * 4, what);
    d->scales = (const float *)p;
    return s;
}

static pq_status check_act(const pq_linear *W, const char *what) {
    const pq_actq *a = &W->act;
    if (a->type == PQ_ACTQ_NONE) return PQ_OK;
    PQ_FAIL_IF(!(a->type == PQ_ACTQ_INT8 && W->fmt == PQ_W_INT8) && !(a->type == PQ_ACTQ_FP8 && W->fmt == PQ_W_FP8),
               PQ_ERR_FORMAT, "%s: activation quantization %d with weight format %d", what, (int)a->type, (int)W->fmt);
    PQ_FAIL_IF(!(a->static_scale >= 0.0f) || std::isinf(a->static_scale), PQ_ERR_FORMAT,
               "%s: static activation scale %g", what, (double)a->static_scale);
    PQ_FAIL_IF(W->cols > PQ_W8A8_MAX_COLS, PQ_ERR_FORMAT, "%s: W8A8 with %d input columns (at most %d)", what,
               W->cols, PQ_W8A8_MAX_COLS);
    if (a->type == PQ_ACTQ_FP8) {
        int dev = 0, major = 0, minor = 0;
        PQ_CUDA_TRY(cudaGetDevice(&dev));
        PQ_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
        PQ_CUDA_TRY(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
        PQ_FAIL_IF(major * 10 + minor < 89, PQ_ERR_FORMAT,
                   "%s: FP8 x FP8 (fp8-dynamic) needs compute capability 8.9 or newer; this GPU has %d.%d", what,
                   major, minor);
    }
    return PQ_OK;
}

static pq_status upload_weight(const pq_linear *W, const char *what, pq_linear_cuda *L) {
    PQ_TRY(check_act(W, what));
    L->act = W->act;
    const int w8a8 = W->act.type != PQ_ACTQ_NONE;
    switch (W->fmt) {
    case PQ_W_DENSE:
        return pq_cuda_upload_act(W->dense_type, W->w, (size_t)W->rows * W->cols, L->act_dtype, what, &L->d_w);
    case PQ_W_QPACK:
        PQ_FAIL_IF(W->q.rows != W->rows || W->q.cols != W->cols, PQ_ERR_ARG, "%s: packed shape disagrees", what);
        return upload_qpack(&W->q, what, L);
    case PQ_W_INT8:
        L->qb.per_channel = 1;
        return upload_bytes(W->i8.q, W->i8.scales, W->rows, w8a8, what, L);
    case PQ_W_FP8:
        L->qb.per_channel = W->f8.per_channel;
        return upload_bytes(W->f8.q, W->f8.scales, W->f8.per_channel ? W->rows : 1, w8a8, what, L);
    }
    return PQ_FAIL(PQ_ERR_FORMAT, "%s: weight format %d", what, (int)W->fmt);
}

pq_status pq_linear_cuda_upload(const pq_linear *W, const char *what, pq_act_dtype dt, pq_linear_cuda *out) {
    memset(out, 0, sizeof *out);
    PQ_FAIL_IF(W->rows < 1 || W->cols < 1, PQ_ERR_ARG, "%s: shape [%d, %d]", what, W->rows, W->cols);
    pq_linear_cuda L;
    memset(&L, 0, sizeof L);
    L.fmt = W->fmt;
    L.rows = W->rows;
    L.cols = W->cols;
    L.act_dtype = dt;
    pq_status s = upload_weight(W, what, &L);
    if (s == PQ_OK && W->bias)
        s = pq_cuda_copy_named((void **)&L.d_bias, W->bias, (size_t)W->rows * sizeof(float), what);
    if (s != PQ_OK) {
        pq_linear_cuda_free(&L);
        return s;
    }
    *out = L;
    return PQ_OK;
}

pq_linear_cuda pq_linear_cuda_alias(const pq_linear_cuda *src) {
    pq_linear_cuda L = *src;
    L.d_bias = NULL;
    L.borrowed_w = 1;
    return L;
}

void pq_linear_cuda_free(pq_linear_cuda *L) {
    if (!L) return;
    if (!L->borrowed_w) {
        cudaFree(L->d_w);
        cudaFree((void *)L->qp.packed);
        cudaFree((void *)L->qp.scales);
        cudaFree((void *)L->qp.zeros);
        cudaFree((void *)L->qp.gidx);
        cudaFree((void *)L->qp.perm);
        cudaFree((void *)L->qb.q);
        cudaFree((void *)L->qb.scales);
    }
    cudaFree(L->d_bias);
    memset(L, 0, sizeof *L);
}
