// pq quantize — quantize a model and write a compressed-tensors checkpoint.
#include <jansson.h>
#include <stdio.h>

#include "tools/commands.h"
#include "tools/quant_cli.h"

static int print_result(const pq_quantize_request *q, const pq_quantize_result *r, int json) {
    if (json) {
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:I, s:I, s:f, s:f, s:f, s:I, s:I, s:s, s:f}", "out",
                              q->out, "scheme", r->scheme, "method", r->method, "format", r->format,
                              "quantized_linears", r->n_quantized, "ragged_linears", r->n_ragged, "quantized_weights",
                              (json_int_t)r->n_weights, "quantized_bytes", (json_int_t)r->quant_bytes,
                              "bits_per_weight", r->bits_per_weight, PQ_JSON_REL_ERR "_mean", r->mean_rel_err,
                              PQ_JSON_REL_ERR "_max", r->max_rel_err, "output_bytes", (json_int_t)r->out_bytes,
                              "zst_bytes",
                              (json_int_t)r->zst_bytes, "source_sha256", r->source_sha256, "seconds", r->seconds);
        if (o && json_object_set_new(o, "gguf_fallback_linears", json_integer(r->n_gguf_fallback)) != 0) {
            json_decref(o);
            o = NULL;
        }
        if (o && r->calibrated &&
            json_object_update_new(
                o, json_pack("{s:f, s:f, s:i, s:i, s:i, s:i, s:I, s:I}", PQ_JSON_OUT_ERR "_mean", r->mean_out_err,
                             PQ_JSON_OUT_ERR "_max", r->max_out_err, "calibration_windows", r->calib_windows,
                             "calibration_seqlen", r->calib_len, "resumed_blocks", r->resumed_blocks, "damp_raised",
                             r->n_damp_raised, "memory_estimate_bytes", (json_int_t)r->mem_estimate, "peak_rss_bytes",
                             (json_int_t)r->peak_rss)) != 0) {
            json_decref(o);
            o = NULL;
        }
        return cli_print_json("quantize", o);
    }
    printf("%s: %s (%s), %d linears at %.4f bits per weight, rel sq err mean %.3e max %.3e, %llu bytes", q->out,
           r->scheme, r->format, r->n_quantized, r->bits_per_weight, r->mean_rel_err, r->max_rel_err, r->out_bytes);
    if (r->zst_bytes) printf(" (zstd %llu, ratio %.3f)", r->zst_bytes, (double)r->out_bytes / (double)r->zst_bytes);
    if (r->n_gguf_fallback) printf(", %d in llama.cpp's fallback type", r->n_gguf_fallback);
    if (r->calibrated)
        printf(", output rel sq err mean %.3e max %.3e on %d x %d calibration tokens, peak %.1f MiB "
               "(estimate %.1f MiB)",
               r->mean_out_err, r->max_out_err, r->calib_windows, r->calib_len, r->peak_rss / 1048576.0,
               r->mem_estimate / 1048576.0);
    printf(", %.2f s\n", r->seconds);
    return 0;
}

int main_quantize(int argc, char **argv) {
    quant_cli a;
    quant_cli_init(&a, QUANT_CLI_QUANTIZE);
    cli_progress bar;
    int rc = quant_cli_start(&a, argc, argv, "MODEL -o OUT [options]",
                             "Quantize MODEL (FP16/BF16/F32) and write OUT, a compressed-tensors checkpoint "
                             "(vLLM / SGLang load it; so does pq ppl), or with a gguf-* scheme a GGUF file "
                             "(llama.cpp runs it).", &bar);
    if (rc >= 0) return rc;
    pq_quantize_result r;
    pq_status s = pq_quantize(&a.q, quant_cli_progress, &bar, &r);
    if (s != PQ_OK) return cli_fail("quantize", s);
    rc = print_result(&a.q, &r, a.json);
    if (r.n_gguf_fallback)
        fprintf(stderr, "pq quantize: note: %d linears are stored in llama.cpp's fallback type (--fallback: their rows "
                "are not whole blocks of %s)\n", r.n_gguf_fallback, a.q.scheme.name);
    if (r.n_ragged)
        fprintf(stderr, "pq quantize: note: %d linears have in_features that are not a multiple of the group (a "
                "shorter last group): pq runs them, but compressed-tensors' decompression and vLLM's kernels "
                "need a multiple\n", r.n_ragged);
    return rc;
}
