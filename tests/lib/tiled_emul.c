// The tiled GEMV emulated lane by lane (tests/lib/tiled_emul.h). The names
// and loops follow kernels/qgemv_cuda.cu's gemv_tiled.
#include "tests/lib/tiled_emul.h"

#include <string.h>

#include "kernels/linear_cuda.h"

// A 32-bit register of two 16-bit values, held exactly.
typedef struct {
    double lo, hi;
} reg2;

// dequant: the code pairs of word w as the device extracts them, minus the
// zero point. 4 bits: nibble masks 0x000f000f at shifts 0, 4, 8, 12 (the
// FP16 path's lop3 + 1/16 trick selects the same nibbles); 8 bits: bytes
// (0, 1), (2, 3) as __byte_perm 0x5140 / 0x5342 place them.
static void dequant(int bits, uint32_t w, int z, reg2 h[4]) {
    if (bits == 4) {
        for (int i = 0; i < 4; i++) {
            uint32_t m = (w >> (4 * i)) & 0x000f000fu;
            h[i] = (reg2){(double)((int)(m & 0xffff) - z), (double)((int)(m >> 16) - z)};
        }
    } else {
        h[0] = (reg2){(double)((int)(w & 0xff) - z), (double)((int)((w >> 8) & 0xff) - z)};
        h[1] = (reg2){(double)((int)((w >> 16) & 0xff) - z), (double)((int)(w >> 24) - z)};
    }
}

// One mma.sync m16n8k16 over the warp: a[lane][4], b[lane][2] in, d[lane][4] += A B.
static void mma(double d[32][4], reg2 a[32][4], reg2 b[32][2]) {
    double A[16][16], B[16][8];
    for (int l = 0; l < 32; l++) {
        int g = l / 4, q = l % 4;
        A[g][2 * q] = a[l][0].lo, A[g][2 * q + 1] = a[l][0].hi;
        A[g + 8][2 * q] = a[l][1].lo, A[g + 8][2 * q + 1] = a[l][1].hi;
        A[g][2 * q + 8] = a[l][2].lo, A[g][2 * q + 9] = a[l][2].hi;
        A[g + 8][2 * q + 8] = a[l][3].lo, A[g + 8][2 * q + 9] = a[l][3].hi;
        B[2 * q][g] = b[l][0].lo, B[2 * q + 1][g] = b[l][0].hi;
        B[2 * q + 8][g] = b[l][1].lo, B[2 * q + 9][g] = b[l][1].hi;
    }
    for (int l = 0; l < 32; l++) {
        int g = l / 4, q = l % 4;
        for (int i = 0; i < 4; i++) {
            int row = i < 2 ? g : g + 8, col = 2 * q + (i & 1);
            for (int k = 0; k < 16; k++) d[l][i] += A[row][k] * B[k][col];
        }
    }
}

void pq_emul_tiled_gemv(const uint32_t *tiled, int rows, int cols, int bits, int nst, int group, int ngroups,
                        const float *scales, const uint8_t *zeros, const float *x, int T, double *y) {
    const int CODES = 32 / bits, SC = PQ_TILE_STAGE_WORDS * CODES, tiles = (rows + 15) / 16;
    const int grouped = ngroups > 1, NT = (T + 7) / 8;
    int gshift = 0;
    while ((1 << gshift) < group) gshift++;
    static double acc[4][32][4], tmp[4][32][4];
    static reg2 a[32][4], b[32][2];
    for (int rt = 0; rt < tiles; rt++) {
        memset(acc, 0, sizeof acc);
        for (int st = 0; st < nst; st++)
            for (int c = 0; c < 2; c++) {
                const uint32_t *sw = tiled + ((size_t)rt * nst + st) * PQ_TILE_WORDS;
                for (int k = 0; k < 4; k++) {
                    const int col = (c * 16 + 4 * k) * CODES; // the group block's first column in the stage
                    const int gi = grouped ? st * SC / group + (group < SC ? col >> gshift : 0) : 0;
                    reg2 ha[32][4], hb[32][4];
                    for (int l = 0; l < 32; l++) {
                        const int g = l / 4;
                        const size_t ia = ((size_t)rt * ngroups + gi) * 16 + g;
                        const int za = zeros ? zeros[ia] : 1 << (bits - 1), zb = zeros ? zeros[ia + 8] : 1 << (bits - 1);
                        dequant(bits, sw[((c * 2 + 0) * 32 + l) * 4 + k], za, ha[l]); // row g
                        dequant(bits, sw[((c * 2 + 1) * 32 + l) * 4 + k], zb, hb[l]); // row g + 8
                    }
                    memset(tmp, 0, sizeof tmp);
                    for (int part = 0; part < (bits == 4 ? 2 : 1); part++) {
                        for (int l = 0; l < 32; l++) {
                            a[l][0] = ha[l][2 * part], a[l][1] = hb[l][2 * part];
                            a[l][2] = ha[l][2 * part + 1], a[l][3] = hb[l][2 * part + 1];
                        }
                        for (int n = 0; n < NT; n++) {
                            for (int l = 0; l < 32; l++) {
                                const int g = l / 4, q = l % 4, tok = n * 8 + g;
                                double xv[8]; // the staged x row of token tok at the lane's columns
                                for (int i = 0; i < CODES; i++) {
                                    const int cc = st * SC + col + q * CODES + i;
                                    xv[i] = tok < T && cc < cols ? x[(size_t)tok * cols + cc] : 0.0;
                                }
                                b[l][0] = (reg2){xv[4 * part], xv[4 * part + 1]};
                                b[l][1] = (reg2){xv[4 * part + 2], xv[4 * part + 3]};
                            }
                            mma(tmp[n], a, b);
                        }
                    }
                    for (int l = 0; l < 32; l++) {
                        const int g = l / 4;
                        const size_t ia = ((size_t)rt * ngroups + gi) * 16 + g;
                        const double sa = grouped ? scales[ia] : 1.0, sb = grouped ? scales[ia + 8] : 1.0;
                        for (int n = 0; n < NT; n++) {
                            acc[n][l][0] += sa * tmp[n][l][0], acc[n][l][1] += sa * tmp[n][l][1];
                            acc[n][l][2] += sb * tmp[n][l][2], acc[n][l][3] += sb * tmp[n][l][3];
                        }
                    }
                }
            }
        // per-row scales at the end, then the lanes' accumulators to y
        for (int l = 0; l < 32; l++) {
            const int g = l / 4, q = l % 4;
            const double ra = grouped ? 1.0 : scales[(size_t)rt * 16 + g], rb = grouped ? 1.0 : scales[(size_t)rt * 16 + g + 8];
            for (int n = 0; n < NT; n++)
                for (int i = 0; i < 4; i++) {
                    const int row = rt * 16 + g + (i < 2 ? 0 : 8), tok = n * 8 + 2 * q + (i & 1);
                    if (row < rows && tok < T) y[(size_t)tok * rows + row] = acc[n][l][i] * (i < 2 ? ra : rb);
                }
        }
    }
}
