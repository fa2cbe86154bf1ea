// tests/oracles/ggml_quant_oracle.c — pq's ggml quantizers
// (kernels/ggml_quant.c) against ggml's own, byte for byte: linked with
// llama.cpp's libggml-base (tests/oracles/test_ggml_quant_llamacpp.sh builds
// it), rows of five distributions and edge-case blocks are quantized by
// ggml_quantize_chunk and by pq_ggml_quant_ref, without and (Q4_K, Q6_K)
// with an importance matrix. Usage: ggml_quant_oracle SEED
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sys.h"
#include "kernels/ggml_quant.h"
#include "tests/test.h"

// ggml.h's declaration (enum ggml_type passed as its int id, ABI-equal)
size_t ggml_quantize_chunk(int type, const float *src, void *dst, int64_t start, int64_t nrows, int64_t n_per_row,
                           const float *imatrix);

#define ROWS 64
#define COLS 2048

static void fill(float *x, int k) {
    for (int i = 0; i < ROWS * COLS; i++) {
        float v = k == 1 ? pq_test_uniform() : pq_test_normal();
        if (k == 2 && pq_test_u64() % 97 == 0) v *= 15;
        if (k == 3) v = fabsf(v) + 0.01f;
        if (k == 4) v *= 1e-4f;
        x[i] = 0.05f * v;
    }
    if (k == 5) { // blocks of edge cases, one per 32 values
        for (int b = 0; b < ROWS * COLS / 32; b++) {
            float *xb = x + 32 * b;
            switch (b % 6) {
            case 0: memset(xb, 0, 32 * sizeof(float)); break;
            case 1: for (int i = 0; i < 32; i++) xb[i] = 0.125f; break;
            case 2: memset(xb, 0, 32 * sizeof(float)), xb[b % 32] = -2.5f; break;
            case 3: for (int i = 0; i < 32; i++) xb[i] = (float)(i % 17 - 8); break;
            case 4: for (int i = 0; i < 32; i++) xb[i] = (float)(i % 33 - 16) * 0.5f; break;
            default: break; // keeps its random values
            }
        }
    }
}

int main(int argc, char **argv) {
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : 1;
    pq_test_rng_state = seed | 1;
    printf("# seed %llu\n", (unsigned long long)seed);
    static const pq_ggml_type T[] = {PQ_GGML_Q4_0, PQ_GGML_Q4_1, PQ_GGML_Q5_0, PQ_GGML_Q8_0, PQ_GGML_Q4_K, PQ_GGML_Q6_K};
    float *x = pq_alloc((size_t)ROWS * COLS * sizeof(float)), *imx = pq_alloc(COLS * sizeof(float));
    uint8_t *a = pq_alloc((size_t)ROWS * COLS * 2), *b = pq_alloc((size_t)ROWS * COLS * 2);
    for (size_t ti = 0; ti < sizeof T / sizeof T[0]; ti++) {
        const pq_ggml_type_info *info = pq_ggml_type_get(T[ti]);
        int kq = T[ti] == PQ_GGML_Q4_K || T[ti] == PQ_GGML_Q6_K;
        for (int weighted = 0; weighted <= kq; weighted++) {
            int same = 1, bad_dist = -1;
            long long bad_byte = -1;
            for (int k = 0; k < 6 && same; k++) {
                fill(x, k);
                for (int i = 0; i < COLS; i++) imx[i] = fabsf(pq_test_normal()) * (pq_test_u64() % 11 == 0 ? 30 : 1);
                size_t bytes = (size_t)ROWS * (COLS / info->block) * info->bytes;
                memset(a, 0xAA, bytes), memset(b, 0x55, bytes);
                ggml_quantize_chunk((int)T[ti], x, a, 0, ROWS, COLS, weighted ? imx : NULL);
                for (int r = 0; r < ROWS; r++)
                    pq_ggml_quant_ref(T[ti], x + (size_t)r * COLS, b + (size_t)r * (COLS / info->block) * info->bytes,
                                      COLS, weighted ? imx : NULL);
                for (size_t i = 0; i < bytes && same; i++)
                    if (a[i] != b[i]) same = 0, bad_byte = (long long)i, bad_dist = k;
            }
            PQ_CHECK(same, "%s%s: %d rows x %d of 6 distributions byte-identical with ggml_quantize_chunk", info->name,
                     weighted ? " with an importance matrix" : "", ROWS * 6, COLS);
            if (!same) printf("    distribution %d, block %lld, byte %lld\n", bad_dist, bad_byte / info->bytes,
                              bad_byte % info->bytes);
        }
    }
    return pq_test_failures ? 1 : 0;
}
