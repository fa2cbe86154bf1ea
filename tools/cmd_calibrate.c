// pq calibrate — run a smoothing method's search and write its scales file.
#include <jansson.h>
#include <stdio.h>

#include "tools/commands.h"
#include "tools/quant_cli.h"

int main_calibrate(int argc, char **argv) {
    quant_cli a;
    quant_cli_init(&a, QUANT_CLI_CALIBRATE);
    cli_progress bar;
    int rc = quant_cli_start(&a, argc, argv, "MODEL --calib FILE --method awq|smoothquant|fp8 -o SCALES [options]",
                             "Calibrate MODEL and write the per-channel scales (AWQ clip values, static activation "
                             "scales) that pq quantize --scales applies.", &bar);
    if (rc >= 0) return rc;
    pq_calibrate_result r;
    pq_status s = pq_calibrate(&a.q, quant_cli_progress, &bar, &r);
    if (s != PQ_OK) return cli_fail("calibrate", s);
    if (a.json)
        return cli_print_json(
            "calibrate",
            json_pack("{s:s, s:s, s:s, s:i, s:f, s:f, s:i, s:i, s:s, s:s, s:I, s:I, s:I, s:f}", "out", a.q.out,
                      "method", r.method, "scheme", r.scheme, "blocks", r.blocks, PQ_JSON_OUT_ERR "_mean",
                      r.mean_out_err, PQ_JSON_OUT_ERR "_max", r.max_out_err, "calibration_windows", r.calib_windows,
                      "calibration_seqlen", r.calib_len, "calibration_sha256", r.calib_sha256, "source_sha256",
                      r.source_sha256, "bytes", (json_int_t)r.bytes, "memory_estimate_bytes",
                      (json_int_t)r.mem_estimate, "peak_rss_bytes", (json_int_t)r.peak_rss, "seconds", r.seconds));
    printf("%s: %s %s scales of %d blocks, output rel sq err mean %.3e max %.3e on %d x %d calibration tokens, %llu "
           "bytes, %.2f s\n", a.q.out, r.method, r.scheme, r.blocks, r.mean_out_err, r.max_out_err, r.calib_windows,
           r.calib_len, r.bytes, r.seconds);
    return 0;
}
