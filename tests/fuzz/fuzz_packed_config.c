// libFuzzer target: config.json's quantization_config (formats/packed_config.c)
// and the "re:" patterns of its ignore list (formats/regex.c). A config that
// parses describes a scheme pq runs; every ignore entry is matched against
// module names and against the other entries (linear time, whatever the
// pattern); pq_packed_config_json on the input writes a config that parses
// back to the same scheme.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/packed.h"

static const char *const MODULES[] = {"lm_head", "model.layers.0.self_attn.q_proj", "model.layers.31.mlp.down_proj",
                                      "model.embed_tokens", ""};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pq_packed_info info;
    if (pq_packed_info_parse((const char *)data, size, "fuzz.json", &info) != PQ_OK) {
        if (info.quantized || info.ignore || pq_last_error()[0] == '\0') abort();
        return 0;
    }
    if (!info.quantized) return pq_packed_info_free(&info), 0;
    const pq_scheme *s = &info.scheme;
    if (s->bits < 2 || s->bits > 8 || (s->is_float && s->bits != 8) || s->group < PQ_GROUP_TENSOR ||
        (s->group == PQ_GROUP_TENSOR && !s->is_float))
        abort();
    for (size_t m = 0; m < sizeof MODULES / sizeof MODULES[0]; m++) (void)pq_packed_ignored(&info, MODULES[m]);
    for (int i = 0; i < info.n_ignore; i++) {
        (void)pq_packed_ignored(&info, info.ignore[i]);
        if (strncmp(info.ignore[i], "re:", 3) != 0 && !pq_packed_ignored(&info, info.ignore[i])) abort();
    }
    // the writer's config for this scheme reads back as the same scheme
    char *out = NULL;
    if (pq_packed_config_json((const char *)data, size, "fuzz.json", s, 0, &out) == PQ_OK) {
        pq_packed_info back;
        if (pq_packed_info_parse(out, strlen(out), "out.json", &back) != PQ_OK) abort();
        if (back.scheme.id != s->id || back.scheme.bits != s->bits || back.scheme.sym != s->sym ||
            back.scheme.group != s->group || back.scheme.act != s->act || back.scheme.actorder != s->actorder)
            abort();
        pq_packed_info_free(&back);
        free(out);
    }
    pq_packed_info_free(&info);
    return 0;
}
