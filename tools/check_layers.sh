#!/bin/sh
# tools/check_layers.sh [ROOT] — checks that every #include "..." of the
# library and the CLI points down the layers of docs/ARCHITECTURE.md:
#   common < kernels < formats (with formats/tokenizer) < eval < calib < quant < tools
# and, inside quant/, down its own order:
#   the algorithms (linalg (+ linalg_avx2, linalg_avx512), rtn (+ rtn_avx2), gptq (+ gptq_avx2, gptq_avx512),
#   gptq_cuda, awq, smoothquant, fold, smooth, scales; hadamard, rotate, mixed, sensitivity, report, ggml_grid)
#   < the stage's types (quantize.h)
#   < the method table (method.h, smooth_method, method_*)
#   < the run's parts (journal, checkpoint, request)
#   < the run (run.c)
# A folder's internal headers (eval/backend.h; quant/'s method table, run
# parts and smoothing family) are included only from inside it. An include
# of the same folder without a path ("engine.h") is the file's own folder. Prints one line per include that points up and exits 1 if
# there is one; otherwise prints how many includes it checked.
ROOT=${1:-.}
cd "$ROOT" || exit 2
find common kernels formats eval calib quant tools -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null | sort |
while read -r f; do
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | sed "s|^|$f:|"
done | awk -F: '
function layer(path,   d) {
    d = path; sub(/\/.*/, "", d)
    if (d == "common") return 0
    if (d == "kernels") return 1
    if (d == "formats") return 2
    if (d == "eval") return 3
    if (d == "calib") return 4
    if (d == "quant") return 5
    if (d == "tools") return 6
    return -1
}
function quant_rank(path,   b) {
    b = path; sub(/.*\//, "", b); sub(/\.[a-z]+$/, "", b)
    if (b ~ /^(linalg|linalg_avx2|linalg_avx512|rtn|rtn_avx2|gptq|gptq_avx2|gptq_avx512|gptq_cuda|gptq_cuda_none|awq|smoothquant|fold|smooth|scales|hadamard|rotate|mixed|sensitivity|report|ggml_grid)$/) return 0
    if (b == "quantize") return 1
    if (b ~ /^(method|smooth_method|method_.*)$/) return 2
    if (b ~ /^(journal|checkpoint|request)$/) return 3
    if (b == "run") return 4
    return -1
}
function internal(path) {
    return path ~ /^eval\/backend\.h$/ || path ~ /^quant\/(method|smooth_method|request|checkpoint|journal)\.h$/
}
{
    file = $1; line = $2
    inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
    if (inc !~ /\//) { dir = file; sub(/\/[^\/]*$/, "", dir); inc = dir "/" inc }
    n++
    lf = layer(file); li = layer(inc)
    if (li < 0) next
    fdir = file; sub(/\/[^\/]*$/, "", fdir); idir = inc; sub(/\/[^\/]*$/, "", idir)
    if (internal(inc) && fdir != idir) {
        printf "%s:%s: includes %s (internal to %s/)\n", file, line, inc, idir
        bad++
    } else if (li > lf) {
        printf "%s:%s: includes %s (%s is above %s)\n", file, line, inc, substr(inc, 1, index(inc, "/") - 1),
               substr(file, 1, index(file, "/") - 1)
        bad++
    } else if (lf == 5 && li == 5) {
        rf = quant_rank(file); ri = quant_rank(inc)
        if (rf < 0 || ri < 0) {
            printf "%s:%s: includes %s (a quant/ file without a place in tools/check_layers.sh)\n", file, line, inc
            bad++
        } else if (ri > rf) {
            printf "%s:%s: includes %s (above it inside quant/)\n", file, line, inc
            bad++
        }
    }
}
END {
    if (bad) exit 1
    printf "%d includes, every one pointing down\n", n
}'
