// quant/scales.h — the scales file `pq calibrate -o SCALES` writes and
// `pq quantize --scales SCALES` applies: every block's pq_block_scales
// (quant/smooth.h) as a safetensors file, all tensors F32:
//   model.layers.L.smooth.<g>       [input channels]    awq, smoothquant: the scale of
//                                                       group g's input (g: q_k_v, o,
//                                                       gate_up, down; o only without
//                                                       grouped-query attention, quant/fold.h)
//   model.layers.L.alpha            [4]                 awq, smoothquant: the alpha chosen per group
//   model.layers.L.<slot>.clip      [rows, ngroups]     awq with clipping: the clamp of each
//                                                       row group (self_attn.v_proj, ...)
//   model.layers.L.act_scale.<g>    [1]                 static activation schemes: the scale
//                                                       of group g's input (exact in the
//                                                       model dtype)
// and in __metadata__ what they were computed from (all strings):
//   pq.kind "scales", pq.version, pq.method (awq | smoothquant | fp8),
//   pq.scheme (pq_scheme_describe: "w4a16 g128 sym"), pq.params (alpha,
//   grids, search tokens), pq.model (the config fingerprint below),
//   pq.source / pq.source_sha256 (path and SHA-256 of the source weights),
//   pq.calibration_sha256, pq.calibration ("N x L tokens, seed S, mode"),
//   pq.nsamples, pq.seqlen, pq.seed.
// The fingerprint names the architecture, every size and the weights'
// dtype: "arch=LlamaForCausalLM hidden=64 intermediate=172 layers=5
// heads=8 kv_heads=4 head_dim=8 vocab=512 qkv_bias=0 dtype=F16".
#ifndef PQ_SCALES_H
#define PQ_SCALES_H

#include "eval/model.h"
#include "quant/smooth.h"

typedef struct {
    const char *method, *scheme, *params, *source, *source_sha256, *calib_sha256, *calib_desc;
    int nsamples, seqlen;
    unsigned long long seed;
} pq_scales_meta;

void pq_scales_fingerprint(const pq_model *m, char *buf, size_t cap);

// ---- writing ----------------------------------------------------------------

typedef struct pq_scales_writer pq_scales_writer;

// Declares every tensor a result of kind k (params p, scheme s) has for
// model m, the metadata, and begins the file (written atomically: the
// final path appears at commit). PQ_ERR_IO naming the file on failure.
pq_status pq_scales_writer_create(const char *path, const pq_model *m, pq_smooth_kind k, const pq_smooth_params *p,
                                  const pq_scheme *s, const pq_scales_meta *meta, pq_scales_writer **out);
pq_status pq_scales_writer_put(pq_scales_writer *w, int layer, const pq_block_scales *sc);
pq_status pq_scales_writer_commit(pq_scales_writer *w);
void pq_scales_writer_free(pq_scales_writer *w); // NULL-safe; an uncommitted file is removed

// ---- reading ----------------------------------------------------------------

typedef struct pq_scales_file pq_scales_file;

// Opens and validates a scales file (a safetensors file whose pq.kind is
// "scales"); errors name the file.
pq_status pq_scales_open(const char *path, pq_scales_file **out);
// The same for an image already in memory (borrowed: it must outlive the
// file; a fuzzer's input), named `name` in messages.
pq_status pq_scales_open_buffer(const void *data, size_t len, const char *name, pq_scales_file **out);
void pq_scales_close(pq_scales_file *f); // NULL-safe

// A metadata string (borrowed), or NULL.
const char *pq_scales_meta_get(const pq_scales_file *f, const char *key);

// Whether the file fits this run: calibrated on model m (the fingerprint,
// then the source SHA-256) for scheme s. A mismatch is PQ_ERR_ARG naming
// the file, the field and both values.
pq_status pq_scales_check(const pq_scales_file *f, const pq_model *m, const char *source_sha256, const pq_scheme *s);

// Block `layer`'s scales into sc for a result of kind k (the file's method),
// params p (clip values are used when present) and scheme s. Arrays are
// owned by f and valid until the next call. A missing tensor, a wrong shape,
// a scale that is not finite and > 0, a negative clip, an activation scale
// not exact in the model dtype are PQ_ERR_FORMAT naming the file and tensor.
pq_status pq_scales_read_block(pq_scales_file *f, const pq_model *m, pq_smooth_kind k, const pq_scheme *s, int layer,
                               pq_block_scales *sc);

#endif
