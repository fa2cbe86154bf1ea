// formats/scheme.h — the quantization schemes `pq quantize` writes: their
// names, defaults, the combinations each one allows, and what they cost in
// bits per weight.
//
//   scheme        weights                         activations              compressed-tensors format
//   w4a16         INT4, group 32/64/128/channel,  FP16 (weight only)       pack-quantized
//                 sym (default) or asym
//   w8a16         INT8 sym, channel (default)     FP16 (weight only)       pack-quantized
//                 or group 32/64/128
//   w8a8          INT8 sym per channel            INT8 dynamic per token   int-quantized
//   fp8           FP8 E4M3, per channel (default) FP16 (weight only,       naive-quantized
//                 or per tensor scale             vLLM's "W8A16-FP8")
//   fp8-dynamic   FP8 E4M3, per channel (default) FP8 E4M3 dynamic per     float-quantized
//                 or per tensor scale             token (llm-compressor's
//                                                 FP8_DYNAMIC preset)
//   fp8-static    FP8 E4M3, per channel (default) FP8 E4M3 static per      float-quantized
//                 or per tensor scale             tensor, calibrated (with
//                                                 --fp8-scale tensor:
//                                                 llm-compressor's FP8 preset)
//   gguf-q4_0     ggml Q4_0 blocks of 32         FP16 (weight only)       a GGUF file (formats/gguf_export.h)
//   gguf-q4_1     ggml Q4_1 blocks of 32
//   gguf-q8_0     ggml Q8_0 blocks of 32
//   gguf-q4_k     ggml Q4_K super-blocks of 256
// The GGUF schemes quantize onto llama.cpp's grids (kernels/ggml_quant.h);
// their group, symmetry and bits are the type's and take no flags. A
// linear whose rows are not whole blocks of the type is refused unless
// gguf_fallback (llama.cpp's fallback type: Q4_K -> Q5_0, else F16).
// w8a8 takes static per-tensor INT8 activations instead of dynamic per-token
// ones with pq_scheme_static_act (`--act-scale static`). A static scheme's
// activation scales come from calibration (quant/smooth.h): each quantized
// linear stores M.input_scale (formats/packed.h).
//
// Scales are stored in the model's dtype (F16 / BF16 / F32), as
// compressed-tensors does (initialize.py: scale_dtype = observed dtype).
#ifndef PQ_SCHEME_H
#define PQ_SCHEME_H

#include <stddef.h>

#include "common/status.h"
#include "kernels/linear.h"

typedef enum { PQ_SCHEME_W4A16, PQ_SCHEME_W8A16, PQ_SCHEME_W8A8, PQ_SCHEME_FP8, PQ_SCHEME_FP8_DYNAMIC,
               PQ_SCHEME_FP8_STATIC, PQ_SCHEME_GGUF_Q4_0, PQ_SCHEME_GGUF_Q4_1, PQ_SCHEME_GGUF_Q8_0,
               PQ_SCHEME_GGUF_Q4_K, PQ_SCHEME_COUNT } pq_scheme_id;

// How a scheme quantizes activations at run time: dynamic per token, or with
// one static (calibrated) scale per tensor.
typedef enum { PQ_ACT_NONE, PQ_ACT_INT8_TOKEN, PQ_ACT_FP8_TOKEN, PQ_ACT_INT8_TENSOR, PQ_ACT_FP8_TENSOR } pq_act_quant;

// Granularity of the weight scales.
#define PQ_GROUP_CHANNEL 0   // one scale per output channel
#define PQ_GROUP_TENSOR (-1) // one scale for the whole matrix (FP8 only)
#define PQ_GROUP_DEFAULT (-2)
#define PQ_SYM_DEFAULT (-1)

// compressed-tensors' QuantizationArgs.actorder (set by GPTQ --act-order on
// grouped weights): "group" permutes the groups too and stores
// M.weight_g_idx; "weight" only reordered the computation (static groups, no
// g_idx).
typedef enum { PQ_ACTORDER_NONE, PQ_ACTORDER_GROUP, PQ_ACTORDER_WEIGHT } pq_actorder;

// How integer weight scales are chosen (compressed-tensors' "observer"):
// minmax from each group's range; mse by a shrink search of that range per
// group (quant/rtn.h). FP8 weights are minmax only.
typedef enum { PQ_OBSERVER_MINMAX, PQ_OBSERVER_MSE } pq_observer;

typedef struct {
    pq_scheme_id id;
    int bits;          // weight bits: the scheme's 4 or 8 (2..8 with --bits for w4a16 / w8a16)
    int is_float;      // FP8 E4M3 weights (else integers)
    int group;         // > 0 columns per group, PQ_GROUP_CHANNEL or PQ_GROUP_TENSOR
    int sym;           // 1 symmetric (no zero point), 0 asymmetric
    pq_act_quant act;
    pq_actorder actorder; // grouped pack-quantized weights only
    pq_observer observer; // integer weights only
    int gguf_fallback;    // GGUF schemes: linears whose rows are not whole blocks take llama.cpp's fallback type
} pq_scheme;

// "w4a16", ... (NULL-free: "?" for a bad id).
const char *pq_scheme_name(pq_scheme_id id);
// The compressed-tensors "format" of the scheme: "pack-quantized", ...
const char *pq_scheme_format(const pq_scheme *s);

// Builds a scheme from its name and the user's choices: group (> 0,
// PQ_GROUP_CHANNEL, PQ_GROUP_TENSOR or PQ_GROUP_DEFAULT) and sym (1, 0 or
// PQ_SYM_DEFAULT). A name that is not a scheme or a combination the scheme
// does not allow ("w8a8 --asym", "fp8 --group 64", "w4a16 --group 100") is
// PQ_ERR_ARG with a message naming both; *out is then unchanged.
pq_status pq_scheme_make(const char *name, int group, int sym, pq_scheme *out);

// Makes a w8a8 scheme's activations static per tensor (INT8); fp8-static
// already is. Any other scheme is PQ_ERR_ARG naming it (*s unchanged).
pq_status pq_scheme_static_act(pq_scheme *s);

// Whether the activations are quantized with a static (calibrated) scale.
int pq_scheme_act_static(const pq_scheme *s);

// The ggml type of a GGUF scheme (-1 for the others).
int pq_scheme_ggml_type(const pq_scheme *s);
// The ggml type a GGUF scheme gives a linear whose rows hold cols values:
// its own, or llama.cpp's fallback (Q4_K -> Q5_0, F16) when its block does
// not divide cols.
int pq_scheme_ggml_type_for(const pq_scheme *s, int cols);

// How the weights are stored and run: PQ_W_FP8 for the fp8 schemes,
// PQ_W_INT8 (one int8 per weight, compressed-tensors int-quantized) for
// w8a8, PQ_W_QPACK (pack-quantized) for the weight-only integer schemes
// (the GGUF ones too: their quantizers hand over ggml blocks instead,
// formats/qtensor.h).
pq_wformat pq_scheme_wformat(const pq_scheme *s);

// "w4a16 g128 sym", "fp8 channel sym", "w4a16 g32 sym 3-bit", "w8a8 channel
// sym static" (static activations of a w8a8 scheme), "w4a16 g64 sym mse"
// (the mse observer), ... into buf
// (always NUL-terminated).
void pq_scheme_describe(const pq_scheme *s, char *buf, size_t cap);

// Bytes one quantized [rows x cols] matrix takes in the file: codes, scales
// at scale_bytes each, packed zero points (asym), weight_shape.
long long pq_scheme_matrix_bytes(const pq_scheme *s, int rows, int cols, int scale_bytes);
// Bits per weight of that matrix: 8 * bytes / (rows * cols).
double pq_scheme_bits_per_weight(const pq_scheme *s, int rows, int cols, int scale_bytes);

#endif
