// AVX2 + F16C version of quant/rtn.h's pq_rtn_codes: 8 weights at a time,
// each operation rounded to F16 by a round trip through vcvtps2ph (round to
// nearest even, overflow to Inf: the conversion pq_round_to_dtype makes) or
// left in f32; the same operations in the same order as the _ref.
#include <immintrin.h>

#include "quant/rtn.h"

static inline __m256 to_f16(__m256 x) { return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT)); }

void pq_rtn_codes_avx2(const float *w, int n, float scale, float zero, int bits, pq_dtype dt, float *codes) {
    int f16 = dt == PQ_DT_F16, i = 0;
    __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(zero);
    __m256 lo = _mm256_set1_ps((float)-(1 << (bits - 1))), hi = _mm256_set1_ps((float)((1 << (bits - 1)) - 1));
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(w + i);
        if (f16) x = to_f16(x);
        x = _mm256_div_ps(x, s);
        if (f16) x = to_f16(x);
        if (zero != 0) {
            x = _mm256_add_ps(x, z);
            if (f16) x = to_f16(x);
        }
        // the clamp: x is never NaN here (finite weights, a finite nonzero scale)
        x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
        _mm256_storeu_ps(codes + i, _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    pq_rtn_codes_ref(w + i, n - i, scale, zero, bits, dt, codes + i);
}
