// kernels/amx.h — the tile configuration and the tile loop pq's AMX kernels
// share (kernels/tiles_amx.c). Only for code compiled with the AMX flags,
// called where pq_cpu_amx() (kernels/cpu.h) says the tiles are usable.
#ifndef PQ_AMX_H
#define PQ_AMX_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

// Configures the calling thread's tiles (a no-op when they already are so):
// tiles 0-1 and 4 hold `rows0` rows, tiles 2-3 and 5 `rows1` (1..16), tiles
// 6-7 16; every row 64 bytes. In every AMX kernel tiles 0-3 are sums, 4-5
// token tiles, 6-7 weight tiles.
void pq_amx_tiles(int rows0, int rows1);

// The BF16 pair layout of a packed weight (TDPBF16PS's weight tiles): rows
// in groups of 16, group g at p + g * ld * 16 values, the pair of columns
// (2j, 2j + 1) of the group's row i at values 32 j + 2 i. Puts v, 32 BF16
// values in column order (read as 16 int32: the pairs), at columns
// c..c+31 of row r.
static inline void pq_amx_put_pairs(uint16_t *p, int ld, int r, int c, __m512i v) {
    const __m512i pair_at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                               _mm512_set1_epi32(16));
    int *dst = (int *)(p + (size_t)(r / 16) * ld * 16) + r % 16;
    _mm512_i32scatter_epi32(dst + (size_t)c / 2 * 16, pair_at, v, 4);
}

// Where a block's sums go: 16 sums (int32 or f32, as the products) of token
// t for rows r..r+15, m the real rows.
typedef void (*pq_amx_sums_out)(const void *ctx, int t, int r, __mmask16 m, const void *sums);

// Tokens [T] of `steps` 64-byte steps (rows xld bytes apart) times the
// packed weight groups of 16 rows at p (group bytes apart, a step 1 KiB of
// a group; rows r0..r0+n, zero or ignored past n up to a multiple of 32):
// blocks of 32 tokens x 32 rows, four sum tiles, TDPBF16PS (bf16) or
// TDPBSSD; every block's sums go to out.
void pq_amx_tile_blocks(const uint8_t *x, size_t xld, int T, const uint8_t *p, size_t group, int r0, int n,
                        int steps, int bf16, pq_amx_sums_out out, const void *ctx);

#endif
