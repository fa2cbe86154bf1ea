// pq_amx_tiles (kernels/amx.h): the calling thread's tile configuration,
// loaded only when it changes.
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
