// tests/lib/tiled_emul.h — the tiled GEMV kernel (kernels/qgemv_cuda.cu)
// emulated on the CPU, lane by lane, so that its index algebra can be
// tested without a GPU: for every warp tile, stage, chunk, k step and lane
// it reads the words the lane reads from the tiled array (kernels/
// linear_cuda.h), extracts the code pairs with the device's bit operations,
// takes x at the columns the lane reads from its staged row, places both in
// the registers the kernel passes to mma.sync, and applies m16n8k16 by its
// fragment layout (PTX ISA: a0/a1 rows g/g+8 k 2q..2q+1, a2/a3 k 2q+8..;
// b0 k 2q..2q+1, b1 k 2q+8.., column g; d0/d1 row g columns 2q, 2q+1,
// d2/d3 row g+8). Group scales are looked up where the kernel looks them
// up. The result must equal W x: if a lane's A and B slots did not carry
// the same columns, or a group block's scale were the wrong one, it would
// not. Arithmetic in double (the device's products are exact too).
#ifndef PQ_TEST_TILED_EMUL_H
#define PQ_TEST_TILED_EMUL_H

#include <stdint.h>

// y [T][rows] for a QPACK weight of 4 or 8 bits tiled into `tiled` (nst
// stages per row), scales f32 and zero points (or NULL: symmetric) in the
// tiled order [tiles][ngroups][16], `group` codes per group (>= cols: one),
// x [T][cols] in the stored column order, T <= 32.
void pq_emul_tiled_gemv(const uint32_t *tiled, int rows, int cols, int bits, int nst, int group, int ngroups,
                        const float *scales, const uint8_t *zeros, const float *x, int T, double *y);

#endif
