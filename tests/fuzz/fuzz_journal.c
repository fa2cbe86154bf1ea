// libFuzzer target: the resume journal reader (quant/journal.h) on arbitrary
// bytes, for a model of 5 blocks. What it accepts must be what a run can
// trust: blocks done within the model, 7 entries per block, each naming its
// block's linear in order with non-negative errors; a refusal must say why.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eval/model.h"
#include "quant/journal.h"
#include "quant/quantize.h"

#define LAYERS 5

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pq_journal j;
    if (pq_journal_parse((const char *)data, size, "fuzz.json", LAYERS, &j) != PQ_OK) {
        if (j.layers || pq_last_error()[0] == '\0') abort(); // a failure returns nothing and says why
        return 0;
    }
    if (strlen(j.key) != 64 || j.blocks_done < 0 || j.blocks_done > LAYERS || j.damp_raised < 0 ||
        json_array_size(j.layers) != (size_t)j.blocks_done * PQ_NLINEAR)
        abort();
    for (size_t i = 0; i < json_array_size(j.layers); i++) {
        json_t *e = json_array_get(j.layers, i);
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!name || strncmp(name, "model.layers.", 13) != 0) abort();
        if (!(json_real_value(json_object_get(e, PQ_JSON_REL_ERR)) >= 0)) abort();
    }
    pq_journal_free(&j);
    if (j.layers) abort();
    return 0;
}
