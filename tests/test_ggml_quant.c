// tests/test_ggml_quant.c — kernels/ggml_quant: f32 to ggml's block types.
//
// Default run (fresh random rows every run; the seed is printed):
//   - quantized rows dequantize (kernels/ggml_dequant.h) close to the input,
//     within each type's RTN error bound per block;
//   - the grid API: every value's code dequantizes, through
//     pq_ggml_grid_value, to exactly what the dequantizer makes of the
//     block, and grid + codes is pq_ggml_quant_ref byte for byte;
//   - codes off the grid are clamped to its ends; all-zero, constant and
//     one-outlier blocks give finite values.
// The bytes themselves are checked against ggml: --oracle MANIFEST compares
// with the gguf package's quantizers (tests/cli/test_gguf_quant_oracle.sh:
// Q4_0, Q4_1, Q5_0, Q8_0) and tests/oracles/ with ggml's own library (every
// type, importance weights too).
#include <stdint.h>

#include "common/half.h"
#include "common/sys.h"
#include "kernels/ggml_dequant.h"
#include "kernels/ggml_quant.h"
#include "tests/test.h"

static const pq_ggml_type TYPES[] = {PQ_GGML_Q4_0, PQ_GGML_Q4_1, PQ_GGML_Q5_0, PQ_GGML_Q8_0, PQ_GGML_Q4_K, PQ_GGML_Q6_K};
#define NTYPES (int)(sizeof TYPES / sizeof TYPES[0])
#define N 4096 // values per random row

// A row of n values of distribution k: 0 normal, 1 uniform, 2 normal with
// outliers, 3 all positive, 4 small (fp16 subnormal scales).
static void fill(float *x, int n, int k) {
    for (int i = 0; i < n; i++) {
        float v = k == 1 ? pq_test_uniform() : pq_test_normal();
        if (k == 2 && pq_test_u64() % 97 == 0) v *= 12;
        if (k == 3) v = fabsf(v) + 0.01f;
        if (k == 4) v *= 1e-3f;
        x[i] = 0.05f * v;
    }
}

// Per block: the largest |x - x'| must stay below the grid step the block
// ended up with (a half step for round-to-nearest, taken as a whole one for
// the K types, whose 6-bit sub-block scales are rounded under the largest)
// plus the fp16 rounding of the scales over the code range: relative 2^-11
// for normal fp16 values, absolute 2^-25 per unit of code for subnormal ones.
static int within_bound(pq_ggml_type t, const float *x, const float *y, int n, int *bad_block) {
    const pq_ggml_type_info *ti = pq_ggml_type_get(t);
    for (int b = 0; b < n / ti->block; b++) {
        const float *xb = x + b * ti->block, *yb = y + b * ti->block;
        float lo = xb[0], hi = xb[0], amax = 0, err = 0;
        for (int i = 0; i < ti->block; i++) {
            lo = fminf(lo, xb[i]), hi = fmaxf(hi, xb[i]), amax = fmaxf(amax, fabsf(xb[i]));
            err = fmaxf(err, fabsf(xb[i] - yb[i]));
        }
        double step, codes;
        switch (t) {
        case PQ_GGML_Q4_0: step = amax / 8.0, codes = 8; break;
        case PQ_GGML_Q5_0: step = amax / 16.0, codes = 16; break;
        case PQ_GGML_Q8_0: step = amax / 127.0, codes = 128; break;
        case PQ_GGML_Q4_1: step = (hi - lo) / 15.0, codes = 16; break;
        case PQ_GGML_Q4_K: step = (hi - fminf(lo, 0)) / 15.0 * 1.6, codes = 16 * 64; break;
        default: step = 2 * amax / 63.0 * 1.6, codes = 32 * 128; break; // Q6_K
        }
        if (!(err <= step * 1.01 + amax * 2e-3 + codes * 0x1p-25)) {
            *bad_block = b;
            return 0;
        }
    }
    return 1;
}

static void check_rtn_error(void) {
    float *x = pq_alloc(N * sizeof(float)), *y = pq_alloc(N * sizeof(float));
    uint8_t *q = pq_alloc(N * 2);
    for (int ti = 0; ti < NTYPES; ti++) {
        pq_ggml_type t = TYPES[ti];
        int ok = 1, bad = -1, dist = -1;
        for (int k = 0; k < 5 && ok; k++) {
            fill(x, N, k);
            pq_test_poison(y, N);
            pq_ggml_quant_ref(t, x, q, N, NULL);
            pq_ggml_dequant_ref(t, q, y, N);
            ok = within_bound(t, x, y, N, &bad);
            if (!ok) dist = k;
        }
        PQ_CHECK(ok, "%s: quantized rows of 5 distributions dequantize within the RTN bound of each block%s",
                 pq_ggml_type_get(t)->name, ok ? "" : " (see block)");
        if (!ok) printf("    distribution %d, block %d\n", dist, bad);
    }
    pq_free(x), pq_free(y), pq_free(q);
}

// grid + codes == pq_ggml_quant_ref, and grid_value == the dequantizer.
static void check_grid(void) {
    float *x = pq_alloc(N * sizeof(float)), *y = pq_alloc(N * sizeof(float)), *w = pq_alloc(N * sizeof(float));
    uint8_t *q = pq_alloc(N * 2), *r = pq_alloc(N * 2);
    for (int ti = 0; ti < NTYPES; ti++) {
        pq_ggml_type t = TYPES[ti];
        const pq_ggml_type_info *info = pq_ggml_type_get(t);
        int kq = t == PQ_GGML_Q4_K || t == PQ_GGML_Q6_K;
        for (int weighted = 0; weighted <= kq; weighted++) {
            fill(x, N, (int)(pq_test_u64() % 4));
            for (int i = 0; i < N; i++) w[i] = 0.1f + fabsf(pq_test_normal());
            const float *imx = weighted ? w : NULL;
            pq_ggml_quant_ref(t, x, q, N, imx);
            pq_ggml_dequant_ref(t, q, y, N);
            int same_bytes = 1, same_values = 1;
            for (int b = 0; b < N / info->block; b++) {
                pq_ggml_grid g;
                uint8_t *blk = r + (size_t)b * info->bytes;
                pq_ggml_grid_make(t, x + b * info->block, imx ? imx + b * info->block : NULL, blk, &g);
                for (int i = 0; i < info->block; i++) {
                    int code = pq_ggml_grid_code(&g, i, x[b * info->block + i]);
                    pq_ggml_block_set_code(t, blk, i, code);
                    float v = pq_ggml_grid_value(&g, i, code);
                    same_values &= pq_f32_bits(v) == pq_f32_bits(y[b * info->block + i]);
                }
            }
            same_bytes = memcmp(q, r, (size_t)(N / info->block) * info->bytes) == 0;
            PQ_CHECK(same_bytes && same_values,
                     "%s%s: grid + codes = pq_ggml_quant_ref byte for byte (%d), each code's grid value = the "
                     "dequantized value bit for bit (%d)",
                     info->name, weighted ? " with importance weights" : "", same_bytes, same_values);
        }
    }
    pq_free(x), pq_free(y), pq_free(w), pq_free(q), pq_free(r);
}

// Off-grid values clamp to the ends; degenerate blocks stay finite.
static void check_edges(void) {
    float x[PQ_QK_K], y[PQ_QK_K];
    uint8_t blk[256];
    for (int ti = 0; ti < NTYPES; ti++) {
        pq_ggml_type t = TYPES[ti];
        const pq_ggml_type_info *info = pq_ggml_type_get(t);
        int n = info->block, lo_code = t == PQ_GGML_Q8_0 ? -128 : 0;
        int hi_code = t == PQ_GGML_Q8_0 ? 127 : t == PQ_GGML_Q5_0 ? 31 : t == PQ_GGML_Q6_K ? 63 : 15;
        fill(x, n, 0);
        pq_ggml_grid g;
        pq_ggml_grid_make(t, x, NULL, blk, &g);
        int c_hi = pq_ggml_grid_code(&g, 1, 1e6f), c_lo = pq_ggml_grid_code(&g, 1, -1e6f);
        // Q4_0 / Q5_0 have a negative d when the largest magnitude is positive: the ends swap
        int ok = (c_hi == hi_code && c_lo == lo_code) || (c_hi == lo_code && c_lo == hi_code);
        PQ_CHECK(ok, "%s: codes of +-1e6 are the grid's ends (%d, %d)", info->name, c_hi, c_lo);
        const char *what[] = {"all-zero", "constant", "one-outlier"};
        for (int k = 0; k < 3; k++) {
            for (int i = 0; i < n; i++) x[i] = k == 0 ? 0.0f : k == 1 ? 0.25f : (i == 7 ? 3.0f : 1e-4f * (i % 5));
            pq_ggml_quant_ref(t, x, blk, n, NULL);
            pq_ggml_dequant_ref(t, blk, y, n);
            int finite = 1;
            double err = 0;
            for (int i = 0; i < n; i++) finite &= isfinite(y[i]), err = fmax(err, fabs(x[i] - y[i]));
            PQ_CHECK(finite && (k == 2 || err <= 0.25 * 0.002), "%s: a %s block dequantizes finite (max error %g)",
                     info->name, what[k], err);
        }
    }
}

// --oracle MANIFEST: lines "TYPE input.f32 expected.bin" written by
// tests/gguf_quant_oracle.py (the gguf package's quantizers).
static int run_oracle(const char *manifest) {
    FILE *f = fopen(manifest, "r");
    if (!f) {
        printf("FAIL - cannot open %s\n", manifest);
        return 1;
    }
    char tname[32], in[1024], want[1024];
    while (fscanf(f, "%31s %1023s %1023s", tname, in, want) == 3) {
        pq_ggml_type t = PQ_GGML_TYPE_END;
        for (int i = 0; i < NTYPES; i++)
            if (strcmp(pq_ggml_type_get(TYPES[i])->name, tname) == 0) t = TYPES[i];
        size_t nx, nw;
        char *xb = NULL, *wb = NULL;
        FILE *a = fopen(in, "rb"), *b = fopen(want, "rb");
        if (t == PQ_GGML_TYPE_END || !a || !b) {
            printf("FAIL - %s: unknown type or missing file\n", tname);
            pq_test_failures++;
            if (a) fclose(a);
            if (b) fclose(b);
            continue;
        }
        fseek(a, 0, SEEK_END), nx = (size_t)ftell(a), rewind(a);
        fseek(b, 0, SEEK_END), nw = (size_t)ftell(b), rewind(b);
        xb = malloc(nx), wb = malloc(nw);
        int rd = fread(xb, 1, nx, a) == nx && fread(wb, 1, nw, b) == nw;
        fclose(a), fclose(b);
        const pq_ggml_type_info *ti = pq_ggml_type_get(t);
        int64_t n = (int64_t)(nx / 4);
        uint8_t *got = malloc(nw + 1);
        int same = rd && n % ti->block == 0 && (size_t)(n / ti->block * ti->bytes) == nw;
        if (same) pq_ggml_quant_ref(t, (const float *)xb, got, n, NULL);
        int64_t bad = -1;
        for (size_t i = 0; same && i < nw; i++)
            if (got[i] != (uint8_t)wb[i]) bad = (int64_t)i, same = 0;
        PQ_CHECK(same, "%s: %lld values quantized byte-identical with gguf.quants.quantize (%s)", tname, (long long)n,
                 in);
        if (bad >= 0) printf("    first difference in block %lld (byte %lld)\n", (long long)(bad / ti->bytes),
                             (long long)(bad % ti->bytes));
        free(xb), free(wb), free(got);
    }
    fclose(f);
    return pq_test_failures ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--oracle") == 0) return run_oracle(argv[2]);
    pq_test_seed();
    PQ_CHECK(pq_ggml_can_quant(PQ_GGML_Q4_K) && pq_ggml_can_quant(PQ_GGML_Q8_0) && !pq_ggml_can_quant(PQ_GGML_Q5_K) &&
                 !pq_ggml_can_quant(PQ_GGML_F16),
             "pq_ggml_can_quant: Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q6_K and no others");
    check_rtn_error();
    check_grid();
    check_edges();
    return pq_test_failures ? 1 : 0;
}
