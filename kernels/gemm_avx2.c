// AVX2 + FMA version of kernels/gemm.h.
//
// Blocking: the columns in KC-blocks of at most 256 (a 16-row weight block of
// 16 KB stays in L1 while every token block streams past it; the packed
// tokens of one K-block, <= 512 KB for 512 tokens, in L2); within a K-block,
// each 16-row micro-panel against every 6-token block. An element's FMA
// chain runs through the K-blocks in order: the tile is stored after one and
// loaded before the next (f32 both ways, so the chain is unchanged).
#include <immintrin.h>
#include <string.h>

#include "kernels/gemm.h"
#include "kernels/simd.h"

#define MR PQ_GEMM_MR
#define NR PQ_GEMM_NR
#define KC_MAX 256

// r[k] <- column k of the 8 x 8 matrix whose rows are r[0..7]
PQ_INLINE void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

void pq_gemm_pack_x_avx2(const float *x, int T, int K, int b0, int nb, float *xp) {
    const __m256i six = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0);
    for (int b = b0; b < b0 + nb; b++) {
        int t0 = b * MR, mr = T - t0 < MR ? T - t0 : MR;
        float *o = xp + (size_t)b * K * MR;
        int c = 0;
        for (; c + 8 <= K; c += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; i++)
                r[i] = i < mr ? _mm256_loadu_ps(x + (size_t)(t0 + i) * K + c) : _mm256_setzero_ps();
            transpose8(r);
            // 8 lanes stored per column, the 2 past MR overwritten by the next column's store; the block's
            // last column only MR lanes (the next block may belong to another thread)
            for (int k = 0; k < 8; k++) {
                if (c + k == K - 1) _mm256_maskstore_ps(o + (size_t)(c + k) * MR, six, r[k]);
                else _mm256_storeu_ps(o + (size_t)(c + k) * MR, r[k]);
            }
        }
        for (; c < K; c++)
            for (int i = 0; i < MR; i++) o[(size_t)c * MR + i] = i < mr ? x[(size_t)(t0 + i) * K + c] : 0.0f;
    }
}

void pq_gemm_pack_w_avx2(const float *rows, int n, int K, float *wp) {
    for (int p = 0; p * NR < n; p++) {
        int r0 = p * NR, nr = n - r0 < NR ? n - r0 : NR;
        float *o = wp + (size_t)p * K * NR;
        int c = 0;
        for (; c + 8 <= K; c += 8)
            for (int h = 0; h < 2; h++) {
                __m256 r[8];
                for (int i = 0; i < 8; i++)
                    r[i] = h * 8 + i < nr ? _mm256_loadu_ps(rows + (size_t)(r0 + h * 8 + i) * K + c)
                                          : _mm256_setzero_ps();
                transpose8(r);
                for (int k = 0; k < 8; k++) _mm256_store_ps(o + (size_t)(c + k) * NR + h * 8, r[k]);
            }
        for (; c < K; c++)
            for (int j = 0; j < NR; j++) o[(size_t)c * NR + j] = j < nr ? rows[(size_t)(r0 + j) * K + c] : 0.0f;
    }
}

// c[i*ldc + j] (i < MR, j < NR): the chains over kc more columns, continuing
// from c's values (load) or from 0. a: [kc][MR], b: [kc][NR] (32-byte aligned).
PQ_INLINE void kernel(int kc, const float *a, const float *b, float *c, size_t ldc, int load) {
#define DECL(i) __m256 c##i##0, c##i##1;
#define INIT(i)                                                                                                       \
    c##i##0 = load ? _mm256_loadu_ps(c + i * ldc) : _mm256_setzero_ps();                                              \
    c##i##1 = load ? _mm256_loadu_ps(c + i * ldc + 8) : _mm256_setzero_ps();
#define STEP(i)                                                                                                       \
    av = _mm256_broadcast_ss(a + i);                                                                                  \
    c##i##0 = _mm256_fmadd_ps(av, b0, c##i##0);                                                                       \
    c##i##1 = _mm256_fmadd_ps(av, b1, c##i##1);
#define STORE(i)                                                                                                      \
    _mm256_storeu_ps(c + i * ldc, c##i##0);                                                                           \
    _mm256_storeu_ps(c + i * ldc + 8, c##i##1);
    DECL(0) DECL(1) DECL(2) DECL(3) DECL(4) DECL(5)
    INIT(0) INIT(1) INIT(2) INIT(3) INIT(4) INIT(5)
    for (int k = 0; k < kc; k++) {
        __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8), av;
        // both in registers: GCC would otherwise fold b1's load into each of the 6 FMAs (13 loads a column)
        __asm__("" : "+x"(b0), "+x"(b1));
        STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5)
        a += MR;
        b += NR;
    }
    STORE(0) STORE(1) STORE(2) STORE(3) STORE(4) STORE(5)
#undef DECL
#undef INIT
#undef STEP
#undef STORE
}

// A tile at the edge (mr < MR tokens or nr < NR rows): through a full tile in a buffer.
static void kernel_edge(int kc, const float *a, const float *b, float *y, size_t ldy, int mr, int nr, int load) {
    float tile[MR * NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) tile[i * NR + j] = load && i < mr && j < nr ? y[i * ldy + j] : 0.0f;
    kernel(kc, a, b, tile, NR, 1);
    for (int i = 0; i < mr; i++) memcpy(y + i * ldy, tile + i * NR, (size_t)nr * sizeof(float));
}

void pq_gemm_panel_avx2(const float *xp, int T, int K, const float *wp, int n, float *y, int ldy) {
    int nk = (K + KC_MAX - 1) / KC_MAX, kc = (K + nk - 1) / nk; // K-blocks of equal length (the last shorter)
    int nbt = (T + MR - 1) / MR, np = (n + NR - 1) / NR;
    for (int k0 = 0; k0 < K; k0 += kc) {
        int kk = K - k0 < kc ? K - k0 : kc;
        for (int p = 0; p < np; p++) {
            int nr = n - p * NR < NR ? n - p * NR : NR;
            const float *b = wp + (size_t)p * K * NR + (size_t)k0 * NR;
            for (int bt = 0; bt < nbt; bt++) {
                int mr = T - bt * MR < MR ? T - bt * MR : MR;
                const float *a = xp + ((size_t)bt * K + k0) * MR;
                float *c = y + (size_t)bt * MR * ldy + p * NR;
                if (mr == MR && nr == NR) kernel(kk, a, b, c, (size_t)ldy, k0 > 0);
                else kernel_edge(kk, a, b, c, (size_t)ldy, mr, nr, k0 > 0);
            }
        }
    }
}
