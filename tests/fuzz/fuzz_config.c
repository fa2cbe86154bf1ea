// libFuzzer target: config.json parsing. Any input must give PQ_OK with a
// consistent config or an error status; never a crash or out-of-bounds read.
#include <stdint.h>
#include <stdlib.h>

#include "formats/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pq_config c;
    if (pq_config_parse((const char *)data, size, "fuzz.json", &c) == PQ_OK) {
        // a config that parses is internally consistent
        if (c.head_dim <= 0 || c.n_heads % c.n_kv_heads != 0 || c.hidden <= 0 || c.vocab <= 0) abort();
        (void)pq_config_param_count(&c);
    }
    return 0;
}
