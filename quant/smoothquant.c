// quant/smoothquant.c — SmoothQuant scales and static activation scales (see smoothquant.h).
#include "quant/smoothquant.h"

#include <math.h>

#include "quant/rtn.h"

void pq_sq_scales(const float *act_max, const float *w_max, int n, double alpha, float *s) {
    for (int j = 0; j < n; j++) {
        double v = pow(act_max[j], alpha) / pow(w_max[j], 1.0 - alpha);
        s[j] = act_max[j] > 0 && w_max[j] > 0 && isfinite(v) && v > 0 && isfinite((float)v) && (float)v > 0
                   ? (float)v : 1.0f;
    }
}

float pq_static_act_scale(const float *abs_max, const float *s_cols, int cols, int fp8, pq_dtype dt) {
    double amax = 0;
    for (int j = 0; j < cols; j++) amax = fmax(amax, (double)abs_max[j] / (s_cols ? s_cols[j] : 1.0f));
    return pq_rtn_stored_scale(amax / (fp8 ? 448.0 : 127.5), dt);
}
