// tests/test_ggml_dequant.c — kernels/ggml_dequant: the ggml block types to f32.
//
// Default run: the type table, and every block type on fresh random codes
// and scales packed by this file's own packer (written from the quantizer
// side of ggml's layouts: quantize_row_*_ref's packing loops), dequantized
// and compared bit for bit with the layout formula evaluated on the codes.
//
// --oracle MANIFEST (tests/cli/test_gguf_dequant_oracle.sh): blocks written
// by tests/gguf_dequant_oracle.py with the gguf package's dequantized values;
// every value must equal pq's bit for bit. Both compute the same f32
// products and sums in the same order, so there is no tolerance, with one
// exception: where a NaN comes out (a NaN or Inf scale) only NaN-ness is
// compared, because which operand's payload and sign a NaN carries through
// a product is the hardware's choice (x86 keeps the first operand's), and
// numpy may order the operands of a commutative product either way.
#include <stdint.h>

#include "common/half.h"
#include "kernels/ggml_dequant.h"
#include "tests/test.h"

static int rnd(int n) { return (int)(pq_test_u64() % (uint64_t)n); }

static uint16_t rand_half(float scale) { return pq_f32_to_fp16(scale * pq_test_normal()); }

static void put16(uint8_t *p, uint16_t h) { p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8); }

static int same_bits(const float *got, const float *want, int64_t n, int64_t *bad) {
    for (int64_t i = 0; i < n; i++) {
        if (isnan(got[i]) && isnan(want[i])) continue;
        if (pq_f32_bits(got[i]) != pq_f32_bits(want[i])) {
            *bad = i;
            return 0;
        }
    }
    return 1;
}

#define NB 8 // blocks per random check

// Packs NB blocks of `t` from random codes and fills want with the layout's
// formula; returns the block size in bytes.
static void pack_32(pq_ggml_type t, uint8_t *buf, float *want) {
    for (int b = 0; b < NB; b++) {
        int q[32];
        uint16_t hd = rand_half(0.02f), hm = rand_half(0.1f);
        float d = pq_fp16_to_f32(hd), m = pq_fp16_to_f32(hm);
        float *y = want + 32 * b;
        if (t == PQ_GGML_Q8_0) {
            uint8_t *blk = buf + b * 34;
            put16(blk, hd);
            for (int j = 0; j < 32; j++) q[j] = rnd(256) - 128, blk[2 + j] = (uint8_t)(int8_t)q[j], y[j] = (float)q[j] * d;
            continue;
        }
        int bits = t == PQ_GGML_Q4_0 || t == PQ_GGML_Q4_1 ? 4 : 5, with_m = t == PQ_GGML_Q4_1 || t == PQ_GGML_Q5_1;
        int size = pq_ggml_type_get(t)->bytes, off = 2 + 2 * with_m;
        uint8_t *blk = buf + b * size;
        memset(blk, 0, (size_t)size);
        put16(blk, hd);
        if (with_m) put16(blk + 2, hm);
        for (int j = 0; j < 32; j++) q[j] = rnd(1 << bits);
        uint8_t *qs = blk + off + (bits == 5 ? 4 : 0);
        for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
        for (int j = 0; bits == 5 && j < 32; j++) blk[off + j / 8] |= (uint8_t)((q[j] >> 4) << (j % 8));
        for (int j = 0; j < 32; j++)
            y[j] = with_m ? (float)q[j] * d + m : (float)(q[j] - (1 << (bits - 1))) * d;
    }
}

// Q2_K / Q3_K 2-bit planes: element j + l + 32k of each 128 in byte j/4 + l at bits 2k
static void pack_2bit(uint8_t *qs, const int *L) {
    for (int j = 0; j < 256; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
}

static void pack_q2_k(uint8_t *blk, float *y) {
    int L[256], sc[16], mn[16];
    uint16_t hd = rand_half(0.01f), hm = rand_half(0.01f);
    float d = pq_fp16_to_f32(hd), dmin = pq_fp16_to_f32(hm);
    for (int g = 0; g < 16; g++) sc[g] = rnd(16), mn[g] = rnd(16), blk[g] = (uint8_t)(sc[g] | mn[g] << 4);
    for (int j = 0; j < 256; j++) L[j] = rnd(4);
    pack_2bit(blk + 16, L);
    put16(blk + 80, hd);
    put16(blk + 82, hm);
    for (int j = 0; j < 256; j++) y[j] = d * (float)sc[j / 16] * (float)L[j] - dmin * (float)mn[j / 16];
}

static void pack_q3_k(uint8_t *blk, float *y) {
    int L[256], s[16], l[256];
    uint16_t hd = rand_half(0.01f);
    float d = pq_fp16_to_f32(hd);
    memset(blk, 0, 110);
    for (int j = 0; j < 16; j++) {
        s[j] = rnd(64);
        if (j < 8) blk[96 + j] = (uint8_t)(s[j] & 15);
        else blk[96 + j - 8] |= (uint8_t)((s[j] & 15) << 4);
        blk[96 + 8 + j % 4] |= (uint8_t)((s[j] >> 4) << (2 * (j / 4)));
    }
    for (int j = 0; j < 256; j++) {
        l[j] = rnd(8) - 4;
        L[j] = l[j] + 4;
        if (L[j] > 3) blk[j % 32] |= (uint8_t)(1 << (j / 32)), L[j] -= 4;
    }
    pack_2bit(blk + 32, L);
    put16(blk + 108, hd);
    for (int j = 0; j < 256; j++) y[j] = d * (float)(s[j / 16] - 32) * (float)l[j];
}

// the 12-byte 6-bit scales and mins of Q4_K / Q5_K
static void pack_k4_scales(uint8_t *s12, const int *ls, const int *lm) {
    memset(s12, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            s12[j] = (uint8_t)ls[j];
            s12[j + 4] = (uint8_t)lm[j];
        } else {
            s12[j + 4] = (uint8_t)((ls[j] & 15) | (lm[j] & 15) << 4);
            s12[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            s12[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

static void pack_q45_k(int bits, uint8_t *blk, float *y) {
    int L[256], ls[8], lm[8];
    uint16_t hd = rand_half(0.01f), hm = rand_half(0.01f);
    float d = pq_fp16_to_f32(hd), dmin = pq_fp16_to_f32(hm);
    memset(blk, 0, bits == 4 ? 144 : 176);
    put16(blk, hd);
    put16(blk + 2, hm);
    for (int j = 0; j < 8; j++) ls[j] = rnd(64), lm[j] = rnd(64);
    pack_k4_scales(blk + 4, ls, lm);
    for (int j = 0; j < 256; j++) L[j] = rnd(1 << bits);
    uint8_t *qh = blk + 16, *ql = blk + (bits == 4 ? 16 : 48);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < 256; n += 64, ql += 32, m1 <<= 2, m2 <<= 2)
        for (int j = 0; j < 32; j++) {
            int l1 = L[n + j], l2 = L[n + j + 32];
            if (l1 > 15) l1 -= 16, qh[j] |= m1;
            if (l2 > 15) l2 -= 16, qh[j] |= m2;
            ql[j] = (uint8_t)(l1 | l2 << 4);
        }
    for (int j = 0; j < 256; j++) y[j] = d * (float)ls[j / 32] * (float)L[j] - dmin * (float)lm[j / 32];
}

static void pack_q6_k(uint8_t *blk, float *y) {
    int L[256], sc[16];
    uint16_t hd = rand_half(0.01f);
    float d = pq_fp16_to_f32(hd);
    for (int j = 0; j < 256; j++) L[j] = rnd(64);
    for (int g = 0; g < 16; g++) sc[g] = rnd(256) - 128, blk[192 + g] = (uint8_t)(int8_t)sc[g];
    uint8_t *ql = blk, *qh = blk + 128;
    for (int j = 0; j < 256; j += 128, ql += 64, qh += 32)
        for (int l = 0; l < 32; l++) {
            ql[l] = (uint8_t)((L[j + l] & 15) | (L[j + l + 64] & 15) << 4);
            ql[l + 32] = (uint8_t)((L[j + l + 32] & 15) | (L[j + l + 96] & 15) << 4);
            qh[l] = (uint8_t)(L[j + l] >> 4 | (L[j + l + 32] >> 4) << 2 | (L[j + l + 64] >> 4) << 4 |
                              (L[j + l + 96] >> 4) << 6);
        }
    put16(blk + 208, hd);
    for (int j = 0; j < 256; j++) y[j] = d * (float)sc[j / 16] * (float)(L[j] - 32);
}

static void check_packed(pq_ggml_type t) {
    const pq_ggml_type_info *ti = pq_ggml_type_get(t);
    uint8_t buf[NB * 210];
    float want[NB * 256], got[NB * 256];
    int64_t n = (int64_t)NB * ti->block;
    for (int b = 0; b < NB && ti->block == 256; b++) {
        uint8_t *blk = buf + b * ti->bytes;
        float *y = want + 256 * b;
        if (t == PQ_GGML_Q2_K) pack_q2_k(blk, y);
        else if (t == PQ_GGML_Q3_K) pack_q3_k(blk, y);
        else if (t == PQ_GGML_Q4_K) pack_q45_k(4, blk, y);
        else if (t == PQ_GGML_Q5_K) pack_q45_k(5, blk, y);
        else pack_q6_k(blk, y);
    }
    if (ti->block == 32) pack_32(t, buf, want);
    pq_test_poison(got, (size_t)n);
    pq_ggml_dequant_ref(t, buf, got, n);
    int64_t bad = -1;
    int ok = same_bits(got, want, n, &bad);
    PQ_CHECK(ok, "%s: %d random blocks packed as ggml's quantizer lays them out dequantize to the layout's formula",
             ti->name, NB);
    if (!ok) printf("    element %lld: got %.9g want %.9g\n", (long long)bad, got[bad], want[bad]);
}

static void check_table(void) {
    static const struct { pq_ggml_type t; size_t size; int block; } blocks[] = {
        {PQ_GGML_Q4_0, sizeof(pq_block_q4_0), 32}, {PQ_GGML_Q4_1, sizeof(pq_block_q4_1), 32},
        {PQ_GGML_Q5_0, sizeof(pq_block_q5_0), 32}, {PQ_GGML_Q5_1, sizeof(pq_block_q5_1), 32},
        {PQ_GGML_Q8_0, sizeof(pq_block_q8_0), 32}, {PQ_GGML_Q2_K, sizeof(pq_block_q2_k), 256},
        {PQ_GGML_Q3_K, sizeof(pq_block_q3_k), 256}, {PQ_GGML_Q4_K, sizeof(pq_block_q4_k), 256},
        {PQ_GGML_Q5_K, sizeof(pq_block_q5_k), 256}, {PQ_GGML_Q6_K, sizeof(pq_block_q6_k), 256},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) {
        const pq_ggml_type_info *ti = pq_ggml_type_get(blocks[i].t);
        ok &= ti && (size_t)ti->bytes == blocks[i].size && ti->block == blocks[i].block && pq_ggml_can_dequant(blocks[i].t);
    }
    PQ_CHECK(ok, "the type table's block sizes and bytes equal the block structs'");
    const uint32_t unknown[] = {4, 5, 31, 32, 33, 36, 37, 38, 40, 1000, 0xffffffffu};
    ok = 1;
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) ok &= pq_ggml_type_get(unknown[i]) == NULL;
    PQ_CHECK(ok, "ids ggml removed or never had are unknown");
    PQ_CHECK(pq_ggml_type_get(PQ_GGML_IQ2_XXS) && !pq_ggml_can_dequant(PQ_GGML_IQ2_XXS) &&
                 !pq_ggml_can_dequant(PQ_GGML_Q8_K) && pq_ggml_can_dequant(PQ_GGML_BF16),
             "known types without a dequantizer (IQ2_XXS, Q8_K) are known but not dequantized");
}

// Reads a whole file; NULL if absent.
static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(n > 0 ? (size_t)n : 1);
    *len = p ? fread(p, 1, (size_t)n, f) : 0;
    fclose(f);
    return p;
}

static int oracle(const char *manifest) {
    FILE *f = fopen(manifest, "r");
    if (!f) {
        PQ_CHECK(0, "oracle manifest %s can be read", manifest);
        return pq_test_done();
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", manifest);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    unsigned id;
    char name[32], stem[64];
    long nblocks;
    int n_types = 0;
    while (fscanf(f, "%u\t%31s\t%ld\t%63s\n", &id, name, &nblocks, stem) == 4) {
        char bin[1200], f32[1200];
        snprintf(bin, sizeof bin, "%s/%s.bin", dir, stem);
        snprintf(f32, sizeof f32, "%s/%s.f32", dir, stem);
        size_t nb = 0, nw = 0;
        uint8_t *src = slurp(bin, &nb);
        float *want = (float *)slurp(f32, &nw);
        const pq_ggml_type_info *ti = pq_ggml_type_get(id);
        int64_t n = ti ? (int64_t)nblocks * ti->block : 0;
        int shaped = src && want && ti && nb == (size_t)nblocks * (size_t)ti->bytes && nw == (size_t)n * 4;
        PQ_CHECK(shaped, "%s: oracle files have %ld blocks and their values", name, nblocks);
        if (shaped) {
            float *got = malloc((size_t)n * sizeof *got);
            pq_test_poison(got, (size_t)n);
            pq_ggml_dequant_ref((pq_ggml_type)id, src, got, n);
            int64_t bad = -1;
            int ok = same_bits(got, want, n, &bad);
            PQ_CHECK(ok, "%s: %lld values bit-identical to the gguf package's dequantize (NaN = NaN)", name, (long long)n);
            if (!ok)
                printf("    element %lld (block %lld): got %.9g (0x%08x) want %.9g (0x%08x)\n", (long long)bad,
                       (long long)(bad / ti->block), got[bad], pq_f32_bits(got[bad]), want[bad],
                       pq_f32_bits(want[bad]));
            free(got);
            n_types++;
        }
        free(src);
        free(want);
    }
    fclose(f);
    PQ_CHECK(n_types == 13, "the oracle covered all 13 types (%d)", n_types);
    return pq_test_done();
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--oracle") == 0) return oracle(argv[2]);
    pq_test_seed();
    check_table();
    const pq_ggml_type types[] = {PQ_GGML_Q4_0, PQ_GGML_Q4_1, PQ_GGML_Q5_0, PQ_GGML_Q5_1, PQ_GGML_Q8_0,
                                  PQ_GGML_Q2_K, PQ_GGML_Q3_K, PQ_GGML_Q4_K, PQ_GGML_Q5_K, PQ_GGML_Q6_K};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) check_packed(types[i]);
    uint16_t h[4] = {0x3c00, 0x0001, 0xfc00, 0x7bff};
    float got[4];
    pq_ggml_dequant_ref(PQ_GGML_F16, h, got, 4);
    PQ_CHECK(got[0] == 1.0f && got[1] == 5.9604644775390625e-8f && isinf(got[2]) && got[2] < 0 && got[3] == 65504.0f,
             "F16: one, the smallest subnormal, -inf and the largest normal widen exactly");
    uint16_t b[2] = {0x3f80, 0xc040};
    pq_ggml_dequant_ref(PQ_GGML_BF16, b, got, 2);
    PQ_CHECK(got[0] == 1.0f && got[1] == -3.0f, "BF16: 1 and -3 widen exactly");
    return pq_test_done();
}
