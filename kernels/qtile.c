// The host-side C of kernels/linear_cuda.h, built with or without nvcc: the
// tiled layout of 4- and 8-bit codes on the GPU (pq_qtile_ref, the
// specification of pq_qtile_cuda) and the activation type's name.
#include <string.h>

#include "kernels/linear_cuda.h"

void pq_qtile_ref(const uint8_t *src, size_t src_stride, int rows, int cols, int bits, const int32_t *perm, int nst,
                  uint32_t *out) {
    const int per = 32 / bits, tiles = (rows + PQ_TILE_ROWS - 1) / PQ_TILE_ROWS;
    memset(out, 0, (size_t)tiles * nst * PQ_TILE_WORDS * sizeof(uint32_t));
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            const int sc = perm ? perm[c] : c;
            const uint8_t b = src[(size_t)r * src_stride + (bits == 8 ? (size_t)sc : (size_t)sc / 2)];
            const uint32_t code = bits == 8 ? b : (uint32_t)(b >> (4 * (sc & 1))) & 0xfu;
            out[pq_tile_word(r, c / per, nst)] |= code << (pq_tile_code_pos(bits, c % per) * bits);
        }
}

const char *pq_act_dtype_name(pq_act_dtype dt) { return dt == PQ_ACT_BF16 ? "bf16" : "fp16"; }
