// eval/export.h — `pq export MODEL --to gguf -o FILE.gguf [--type T]`: a
// Hugging Face checkpoint, a packed (compressed-tensors) checkpoint or a
// GGUF file written as a GGUF file llama.cpp runs (eval/gguf_out.h: the
// metadata, tokenizer, names and tensor types).
//
// The decoder-layer linears, per source:
//   packed, grid = the GGUF type's   the codes as they are, bit for bit:
//                                     INT4 g32 symmetric -> Q4_0 (q = the unsigned code, d = scale),
//                                     INT8 g32 symmetric -> Q8_0 (q = the signed code, d = scale),
//                                     INT4 g32 asymmetric -> Q4_1 (q = the unsigned code, d = scale,
//                                     m = -scale * zero rounded to FP16); d is the scale rounded to
//                                     FP16 (exact for FP16 scales). The largest change of a weight
//                                     this causes (Q4_1's m, non-FP16 scales, and Q4_1's q*d + m
//                                     against pq's scale * (q - zero)) is reported.
//   packed, any other grid           re-quantized with ggml's round to nearest from the
//                                     dequantized weights (FP8, act-order g_idx, other groups,
//                                     bits or symmetry, ragged rows), with a note; `exact` refuses
//                                     instead
//   GGUF holding the type already    its blocks copied
//   dense (F16/BF16/F32), or GGUF   quantized with ggml's round to nearest (kernels/ggml_quant.h);
//   in another type                   a GGUF source's values are its exact dequantization, so
//                                     that is a re-quantization too and is reported as one
// Written through formats/outdir.h as one file: a temporary sibling
// directory renamed into place; an existing FILE only with force.
#ifndef PQ_EXPORT_H
#define PQ_EXPORT_H

#include "common/status.h"
#include "kernels/ggml_blocks.h"

typedef struct {
    const char *model;    // a model directory, a packed checkpoint or a .gguf
    const char *out;      // FILE.gguf
    pq_ggml_type type;    // the target: F16 (default), Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K
    int fallback;         // linears whose rows are not whole blocks: llama.cpp's fallback type
    int exact;            // refuse a packed linear whose codes cannot be written as they are
    int force;            // replace an existing out
    int nthreads;         // 0: all cores
} pq_export_params;

pq_export_params pq_export_default_params(void);

typedef struct {
    char type[8];               // "q4_0"
    char source[128];           // "dense F16", "w4a16 g32 sym (pack-quantized)", "GGUF"
    int tensors;
    int linears;                // decoder-layer linears
    int exact;                  // of them written code for code from a packed source
    int copied;                 // tensors copied block for block from a GGUF source
    int quantized;              // quantized from dense weights
    int requantized;            // re-quantized from a quantized source's dequantized weights
    char requant_reason[700];   // why (the first one), "" when none
    int fallback;               // linears in llama.cpp's fallback type
    double max_weight_change;   // exact codes: largest |w(GGUF) - w(packed)| over their weights
    long long linear_weights;
    double bits_per_weight;     // of the linears, measured in the file
    unsigned long long bytes;   // the file
    double seconds;
} pq_export_result;

// Called after each decoder layer's linears are written.
typedef void (*pq_export_progress)(void *ud, int done, int total);

// Errors: PQ_ERR_ARG (no model or output, an existing output without
// force, with exact a linear that would be re-quantized, a linear whose rows
// are not whole blocks without fallback: the message names the tensor and
// the type llama.cpp would use); PQ_ERR_FORMAT (what the source, its
// architecture or tokenizer cannot give a GGUF file); PQ_ERR_NUMERIC (a
// non-finite weight); PQ_ERR_IO (the disk). On error nothing is left at out.
pq_status pq_export_gguf(const pq_export_params *p, pq_export_progress cb, void *ud, pq_export_result *res);

#endif
