// kernels/amx.h — the tile configuration pq's AMX kernels share (kernels/
// tiles_amx.c). Only for code compiled with the AMX flags, called where
// pq_cpu_amx() (kernels/cpu.h) says the tiles are usable.
#ifndef PQ_AMX_H
#define PQ_AMX_H

// Configures the calling thread's tiles (a no-op when they already are so):
// tiles 0-1 and 4 hold `rows0` rows, tiles 2-3 and 5 `rows1` (1..16), tiles
// 6-7 16; every row 64 bytes. In every AMX kernel tiles 0-3 are sums, 4-5
// token tiles, 6-7 weight tiles.
void pq_amx_tiles(int rows0, int rows1);

#endif
