// formats/packed.h — the compressed-tensors checkpoint (vLLM's
// llm-compressor format, loaded by vLLM and SGLang): config.json's
// "quantization_config" and the tensors of each quantized linear.
//
// config.json gains (formats/packed_config.c; field set of
// compressed_tensors.quantization.{quant_config,quant_scheme,quant_args}):
//   "quantization_config": {
//     "config_groups": {"group_0": {"targets": ["Linear"],
//         "weights": {"num_bits": 4, "type": "int", "symmetric": true,
//                     "strategy": "group", "group_size": 128, "dynamic": false,
//                     "actorder": null | "group" | "weight", "block_structure": null,
//                     "observer": "minmax", "observer_kwargs": {}},
//         "input_activations": null (or {"num_bits": 8, "type": "int"|"float",
//                     "strategy": "token", "dynamic": true, "symmetric": true, ...}
//                     for dynamic per-token activations, or "strategy": "tensor",
//                     "dynamic": false, "observer": "minmax" for static ones),
//         "output_activations": null}},
//     "format": "pack-quantized" | "int-quantized" | "float-quantized" | "naive-quantized",
//     "ignore": ["lm_head"], "quant_method": "compressed-tensors",
//     "quantization_status": "compressed", "kv_cache_scheme": null,
//     "global_compression_ratio": null, "sparsity_config": {}, "version": ...}
//
// Tensors of a quantized linear M (formats/packed.c), as compressed-tensors'
// compressors write them (compressors/pack_quantized, naive_quantized):
//   pack-quantized (INT4 / INT8 weight only)
//     M.weight_packed      I32 [out, ceil(in * bits / 32)]: codes + 2^(bits-1),
//                          a dense bit stream along the row, first in the low bits
//                          (a value may straddle two words when 32 % bits != 0)
//     M.weight_scale       scale dtype [out, ceil(in / group)] ([out, 1] per channel)
//     M.weight_zero_point  I32 [ceil(out * bits / 32), ngroups], asymmetric only:
//                          signed zero points + 2^(bits-1), packed along dim 0
//     M.weight_shape       I64 [2] = [out, in]   (I32 accepted when reading)
//     M.weight_g_idx       I32 [in]: the group of each input column, when
//                          "actorder": "group" (GPTQ act-order); written from
//                          pq_qtensor.g_idx, optional when reading
//   int-quantized (w8a8): M.weight I8 [out, in], M.weight_scale [out, 1]
//   float-quantized / naive-quantized (fp8): M.weight F8_E4M3 [out, in],
//     M.weight_scale [out, 1] per channel or [1] per tensor
//   static activations (w8a8 static, fp8-static), as compressed-tensors'
//   initialize.py sizes them for the "tensor" strategy:
//     M.input_scale        scale dtype [1] (a scalar [] is accepted when reading):
//                          x is quantized as sat8(rne(x / s)) or e4m3(x / s); no
//                          input_zero_point (symmetric only)
// The scale dtype is the model's (F16 / BF16 / F32). Everything else in the
// checkpoint (embeddings, norms, an ignored lm_head) is the source's tensor,
// unchanged.
#ifndef PQ_PACKED_H
#define PQ_PACKED_H

#include <stddef.h>

#include "formats/safetensors.h"
#include "formats/qtensor.h"
#include "formats/regex.h"
#include "formats/scheme.h"

// ---- quantization_config (formats/packed_config.c) ----------------------

typedef struct {
    int quantized;      // config.json has a quantization_config
    pq_scheme scheme;   // what its single config group describes
    char format[32];    // "pack-quantized", ...
    char **ignore;      // module names or "re:" patterns (owned)
    pq_regex **ignore_re; // the compiled "re:" patterns, NULL for names (owned)
    int n_ignore;
} pq_packed_info;

// Parses config.json text (`name` prefixes messages). Without a
// quantization_config, out->quantized is 0. A quantization_config pq cannot
// run (another quant_method or format, several config groups, targets other
// than ["Linear"], asymmetric activations, a kv_cache_scheme, bits other
// than 4/8, ...) is PQ_ERR_FORMAT naming the field. Free with
// pq_packed_info_free.
pq_status pq_packed_info_parse(const char *json, size_t len, const char *name, pq_packed_info *out);
void pq_packed_info_free(pq_packed_info *info); // NULL-safe; leaves it zeroed

// Whether the module (e.g. "lm_head", "model.layers.0.mlp.up_proj") is in
// the ignore list: an exact name, or a "re:" pattern matching from its start
// (Python re.match, as compressed-tensors does, through formats/regex.h: its
// subset of Python syntax in linear time; a pattern outside it is refused
// when the config is parsed).
int pq_packed_ignored(const pq_packed_info *info, const char *module);

// config.json for the packed checkpoint: the source's config.json text with
// "quantization_config" for scheme s set ("ignore": ["lm_head"] unless
// quantize_head). *out is malloc'd NUL-terminated JSON.
pq_status pq_packed_config_json(const char *src_json, size_t len, const char *name, const pq_scheme *s,
                                int quantize_head, char **out);

// ---- tensors of one quantized linear (formats/packed.c) -----------------

// Declares module M's tensors for a [rows x cols] matrix quantized with
// scheme s, scales stored as scale_dtype; then writes them from q (which
// pq_qtensor_init made for the same s, shape and scale_dtype; for a static
// activation scheme with q->input_scale set): scales converted to the
// stored dtype, zero points packed. Both fail as the
// writer does (PQ_ERR_IO naming the file on a full disk).
pq_status pq_packed_declare(pq_st_writer *w, const char *module, const pq_scheme *s, int rows, int cols,
                            pq_dtype scale_dtype);
pq_status pq_packed_put(pq_st_writer *w, const char *module, const pq_qtensor *q);

// Arrays a pq_linear read from a file needs beyond the mapped tensors, and
// the tensors it was read from (so a caller can tell which are left over).
#define PQ_PACKED_MAX_OWNED 3
#define PQ_PACKED_MAX_USED 6
typedef struct {
    void *p[PQ_PACKED_MAX_OWNED]; // free each with pq_free
    const pq_tensor *used[PQ_PACKED_MAX_USED];
    int n_used;
} pq_packed_owned;

// Builds the pq_linear of module M ([rows x cols], as config.json implies)
// from st: codes point into the mapped file (pq_st keeps them aligned);
// scales are widened to owned f32, zero points unpacked to owned bytes.
// Names, dtypes and shapes are checked against info and [rows, cols]; a
// missing or different tensor, a non-finite scale, a g_idx out of
// range, a static activation scale that is not finite and > 0 are
// PQ_ERR_FORMAT naming the file and tensor, as are tensors that contradict
// quantization_config: zero points in a symmetric checkpoint, a g_idx
// without actorder "group", actorder "group" (over more than one group)
// without one. A static activation scheme sets out->act.static_scale from
// M.input_scale. On error nothing is left in *own.
pq_status pq_packed_load(const pq_st *st, const pq_packed_info *info, const char *module, int rows, int cols,
                         pq_linear *out, pq_packed_owned *own);

#endif
