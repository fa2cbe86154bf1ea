// libFuzzer target: config.json parsing. Any input must give PQ_OK with a
// consistent config or an error status; never a crash or out-of-bounds read.
#include <stdint.h>
#include <stdlib.h>

#include "formats/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pq_config c;
    if (pq_config_parse((const char *)data, size, "fuzz.json", &c) == PQ_OK) {
        // a config that parses is internally consistent
        if (c.head_dim <= 0 || c.head_dim % 2 || c.n_heads % c.n_kv_heads != 0 || c.hidden <= 0 || c.vocab <= 0 ||
            c.intermediate <= 0 || c.n_layers <= 0 || c.max_pos <= 0 || !(c.rope_theta >= 1) || !(c.rms_eps >= 0))
            abort();
        // llama3 RoPE scaling: every number present and sane (issue 10 item 4: factor was -2)
        if (c.rope_llama3 && (!(c.rope_factor >= 1) || !(c.rope_high_freq_factor > c.rope_low_freq_factor) ||
                              !(c.rope_low_freq_factor > 0) || c.rope_orig_max_pos < 1))
            abort();
        if (c.sliding_window < 0 || c.window_from_layer < 0) abort();
        (void)pq_config_param_count(&c);
    }
    return 0;
}
