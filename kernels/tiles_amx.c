// kernels/amx.h: the calling thread's tile configuration, loaded only when
// it changes, and the 2 x 2 tile loop every AMX GEMM runs.
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/amx.h"

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((packed)) tile_config;

// rows0 * 32 + rows1 of the loaded configuration; 0: none yet.
static _Thread_local int loaded;

void pq_amx_tiles(int rows0, int rows1) {
    int want = rows0 * 32 + rows1;
    if (loaded == want) return;
    tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) c.colsb[i] = 64;
    c.rows[0] = c.rows[1] = c.rows[4] = (uint8_t)rows0;
    c.rows[2] = c.rows[3] = c.rows[5] = (uint8_t)rows1;
    c.rows[6] = c.rows[7] = 16;
    // not _tile_loadconfig: GCC 12 does not see that its builtin reads c and
    // drops the stores above as dead
    __asm__ volatile("ldtilecfg %0" : : "m"(c));
    loaded = want;
}

// Sum tile c += token tile a times weight tile b (the tile numbers are
// immediates): BF16 pairs or signed bytes.
#define TILE_DP(bf16, c, a, b)                                                                                     \
    do {                                                                                                           \
        if (bf16) _tile_dpbf16ps(c, a, b);                                                                         \
        else _tile_dpbssd(c, a, b);                                                                                \
    } while (0)

void pq_amx_tile_blocks(const uint8_t *x, size_t xld, int T, const uint8_t *p, size_t group, int r0, int n,
                        int steps, int bf16, pq_amx_sums_out out, const void *ctx) {
    int32_t sums[32][32] __attribute__((aligned(64)));
    for (int t0 = 0; t0 < T; t0 += 32) {
        int nt = T - t0 < 32 ? T - t0 : 32, rows0 = nt < 16 ? nt : 16, rows1 = nt > 16 ? nt - 16 : 0;
        pq_amx_tiles(rows0, rows1 ? rows1 : 1);
        const uint8_t *x0 = x + (size_t)t0 * xld, *x1 = x0 + 16 * xld;
        for (int g = 0; g < (n + 31) / 32 * 2; g += 2) {
            const uint8_t *b0 = p + g * group, *b1 = b0 + group;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int s = 0; s < steps; s++) {
                _tile_loadd(4, x0 + (size_t)s * 64, xld);
                _tile_loadd(6, b0 + (size_t)s * 1024, 64);
                _tile_loadd(7, b1 + (size_t)s * 1024, 64);
                TILE_DP(bf16, 0, 4, 6);
                TILE_DP(bf16, 1, 4, 7);
                if (!rows1) continue;
                _tile_loadd(5, x1 + (size_t)s * 64, xld);
                TILE_DP(bf16, 2, 5, 6);
                TILE_DP(bf16, 3, 5, 7);
            }
            _tile_stored(0, &sums[0][0], sizeof sums[0]);
            _tile_stored(1, &sums[0][16], sizeof sums[0]);
            if (rows1) {
                _tile_stored(2, &sums[16][0], sizeof sums[0]);
                _tile_stored(3, &sums[16][16], sizeof sums[0]);
            }
            for (int h = 0; h < 2; h++) {
                int left = n - 16 * (g + h);
                if (left <= 0) break;
                __mmask16 m = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
                for (int t = 0; t < nt; t++) out(ctx, t0 + t, r0 + 16 * (g + h), m, &sums[t][16 * h]);
            }
        }
    }
}
