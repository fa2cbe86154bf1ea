#!/bin/sh
# tools/demo.sh — pq's main job on its real default model, SmolLM2-135M-Instruct:
# get it (tools/get_smollm2.sh), convert the GGUF to an FP16 Hugging Face
# checkpoint, quantize it with FP8 (dynamic activations), W8A16 and W8A8
# (dynamic per-token activations) by RTN and W4A16 g64 sym with RTN, GPTQ
# and AWQ, score every result on wiki.test.raw with
# llama.cpp's protocol (ctx 512) and print one table.
#
#   sh tools/demo.sh                      # what `make demo` runs
#   CALIB=FILE WIKI=FILE WINDOWS=N NSAMPLES=N SEQLEN=L sh tools/demo.sh
#
# Inputs: CALIB (default ../shared/data/c4_validation_2k.txt; without it and
# without CALIB= the demo stops and says so), WIKI (default
# ../shared/data/wiki.test.raw, else tools/get_wikitext2.sh fetches it),
# WINDOWS scored windows of 512 tokens (default 8, the first ones of the
# text), NSAMPLES x SEQLEN calibration tokens (default 16 x 512, seed 0),
# AWQ_SEARCH tokens AWQ's scale and clip searches measure their error on
# (default 1024; pq's own default, 4096, makes AWQ alone take ~6 minutes of
# 2 cores on this model). The defaults keep the whole run under 10 minutes
# on 2 cores.
# Work files go to $PQ_CACHE/demo (default ~/.cache/pq/demo), which this
# script owns and empties at the start; nothing is written into the clone.
# The model's weights are its Q4_1 file dequantized: the FP16 row is that
# model, and every other row re-quantizes it.
set -eu
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared}
PQ=${PQ:-build/pq}
WORK=${PQ_CACHE:-$HOME/.cache/pq}/demo
WINDOWS=${WINDOWS:-8}
NSAMPLES=${NSAMPLES:-16}
SEQLEN=${SEQLEN:-512}
AWQ_SEARCH=${AWQ_SEARCH:-1024}
CALIB=${CALIB:-$SHARED/data/c4_validation_2k.txt}

say() { echo "demo: $*" >&2; }
# field NAME < one-line JSON: the value of a top-level number or string field
field() { sed -n "s/.*\"$1\": \"\{0,1\}\([^,\"}]*\).*/\1/p"; }

if [ ! -f "$CALIB" ]; then
    say "no calibration text at $CALIB; pass one: make demo CALIB=FILE (plain text, a few MB)"
    exit 1
fi
WIKI=${WIKI:-$SHARED/data/wiki.test.raw}
[ -f "$WIKI" ] || WIKI=$(sh tools/get_wikitext2.sh)
GGUF=$(sh tools/get_smollm2.sh)

start=$(date +%s)
rm -rf "$WORK"
mkdir -p "$WORK"
say "converting $GGUF to an FP16 checkpoint"
$PQ convert "$GGUF" -o "$WORK/f16" --dtype f16 >&2

CAL="--calib $CALIB --nsamples $NSAMPLES --seqlen $SEQLEN --seed 0"
# name | scheme flags | method flags
ROWS="fp8|--scheme fp8-dynamic|--method rtn
w8a16|--scheme w8a16|--method rtn
w8a8|--scheme w8a8|--method rtn
w4-rtn|--scheme w4a16 --group 64 --sym|--method rtn
w4-gptq|--scheme w4a16 --group 64 --sym|--method gptq $CAL
w4-awq|--scheme w4a16 --group 64 --sym|--method awq --search-tokens $AWQ_SEARCH $CAL"

# score DIR: pq ppl's JSON line for DIR on the first $WINDOWS windows
score() {
    say "scoring $(basename "$1") on $WINDOWS windows of $WIKI"
    $PQ ppl "$1" --text "$WIKI" --protocol llamacpp --ctx 512 --max-windows "$WINDOWS" --json
}

base=$(score "$WORK/f16")
base_ppl=$(echo "$base" | field ppl)
bytes=$(stat -c %s "$WORK/f16/model.safetensors")
table="fp16|-|16.00|$bytes|$(echo "$base" | field ppl)|$(echo "$base" | field ppl_stderr)|-|$(echo "$base" | field tokens_per_s)"

echo "$ROWS" | while IFS='|' read -r name scheme method; do
    say "quantizing: $scheme $method"
    # shellcheck disable=SC2086
    q=$($PQ quantize "$WORK/f16" -o "$WORK/$name" $scheme $method --json)
    p=$(score "$WORK/$name")
    echo "$(echo "$q" | field scheme)|$(echo "$q" | field method)|$(echo "$q" | field bits_per_weight)|$(echo "$q" | field output_bytes)|$(echo "$p" | field ppl)|$(echo "$p" | field ppl_stderr)|$(echo "$q" | field seconds)|$(echo "$p" | field tokens_per_s)"
done >"$WORK/rows.txt"

{
    echo "$table"
    cat "$WORK/rows.txt"
} | awk -F'|' -v base="$base_ppl" '
    BEGIN { printf "%-24s %-12s %6s %9s %18s %8s %9s %9s\n", "scheme", "method", "bpw", "MB", "PPL", "dPPL", "quant s", "tok/s" }
    {
        mb = $4 / 1e6
        dppl = ($1 == "fp16") ? "-" : sprintf("%+.2f%%", 100 * ($5 / base - 1))
        qs = ($7 == "-") ? "-" : sprintf("%.1f", $7)
        printf "%-24s %-12s %6.2f %9.1f %9.4f +/- %-6.4f %8s %9s %9.0f\n", $1, $2, $3, mb, $5, $6, dppl, qs, $8
    }'
echo "SmolLM2-135M-Instruct (its Q4_1 GGUF dequantized = the fp16 row), wiki.test.raw, llama.cpp protocol, ctx 512, first $WINDOWS windows;" \
    "calibration $(basename "$CALIB") $NSAMPLES x $SEQLEN tokens, seed 0 (AWQ searches on $AWQ_SEARCH of them); MB = the checkpoint's model.safetensors; $(($(date +%s) - start)) s in all"
