#!/bin/sh
# Stock llama.cpp runs the GGUF files pq writes of the real default model
# (make test-oracles; minutes per file): SmolLM2-135M-Instruct
# (tools/get_smollm2.sh) converted to F16 with pq convert, then
#   - pq export --to gguf --type f16, q8_0, q4_0, q4_1, q4_k and q6_k (the
#     K types with --fallback: SmolLM2's 576-value rows are not whole
#     super-blocks of 256; llama.cpp's own llama-quantize stores those
#     tensors as Q5_0 / Q8_0, and so does pq);
#   - pq quantize --scheme gguf-q4_k --method gptq (the GPTQ codes on the
#     Q4_K / Q5_0 grids);
# each scored by llama.cpp's llama-perplexity and by pq ppl FILE.gguf on the
# first $ORACLE_WINDOWS (20) windows of 512 tokens of wiki.test.raw; the two
# must agree within 1% (the issue's bound). They are not equal: llama.cpp
# rounds the activations to 8 bits (Q8_0 / Q8_1 / Q8_K) before each
# quantized matmul and pq does not. Measured by hand on 8 windows
# (docs/PERFORMANCE.md; F16 and Q4_0 on 4): F16 0.01%, Q4_0 0.17%, Q4_K RTN 0.53%, AWQ 0.27%,
# GPTQ 1.02% -- so the GPTQ check sits at the bound, an open question this
# test is meant to keep visible rather than hide with a wider tolerance.
# The gguf package (tests/cli/venv_gguf.sh) reads the F16 file back: every
# tensor equal to the F16 checkpoint's (q/k rows in llama.cpp's order).
set -u
BUILD=${BUILD:-build}
SHARED=${PQ_SHARED:-../shared}
PQ=${PQ:-$BUILD/pq}
WINDOWS=${ORACLE_WINDOWS:-20}
OUT=$BUILD/oracle_gguf_export
WIKI=$SHARED/data/wiki.test.raw
CALIB=$SHARED/data/c4_validation_2k.txt
. tests/oracles/llama_cpp.sh
llama_cpp_tools "GGUF export oracle"
[ -f "$WIKI" ] || { echo "skip - GGUF export oracle: no $WIKI"; exit 0; }
GGUF=$(sh tools/get_smollm2.sh) || { echo "FAIL - GGUF export oracle: tools/get_smollm2.sh failed"; exit 1; }
rm -rf "$OUT" && mkdir -p "$OUT"
if ! $PQ convert "$GGUF" -o "$OUT/f16" --dtype f16 >"$OUT/convert.log" 2>&1; then
    echo "FAIL - pq convert $GGUF: $(tail -1 "$OUT/convert.log")"
    exit 1
fi
failures=0

# llama-perplexity (0.3.36's llama.cpp) now and then exits 0 before its last
# lines are written on a loaded machine; such a run is repeated (at most 3).
llama_ppl() {
    for _ in 1 2 3; do
        l=$("$LLAMA_BIN/llama-perplexity" -m "$1" -f "$WIKI" -c 512 --chunks "$WINDOWS" 2>&1 |
            sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p')
        [ -n "$l" ] && break
    done
    echo "$l"
}
compare() { # FILE WHAT
    l=$(llama_ppl "$1")
    p=$($PQ ppl "$1" --text "$WIKI" --protocol llamacpp --ctx 512 --max-windows "$WINDOWS" 2>/dev/null |
        sed -n 's/^PPL = \([0-9.]*\).*/\1/p')
    if awk -v a="$l" -v b="$p" 'BEGIN { r = a / b; exit !(a > 0 && r < 1.01 && r > 0.99) }'; then
        echo "ok - llama.cpp runs $2: PPL $l, pq ppl $p ($WINDOWS windows of 512, $(wc -c <"$1") bytes)"
    else
        echo "FAIL - $2: llama.cpp PPL '$l', pq ppl '$p'"
        failures=$((failures + 1))
    fi
}

for ty in f16 q8_0 q4_0 q4_1 q4_k q6_k; do
    fb=""
    case $ty in q4_k | q6_k) fb=--fallback ;; esac
    # shellcheck disable=SC2086
    if $PQ export "$OUT/f16" --to gguf -o "$OUT/$ty.gguf" --type "$ty" $fb >"$OUT/$ty.log" 2>&1; then
        compare "$OUT/$ty.gguf" "pq export --type $ty $fb"
    else
        echo "FAIL - pq export --type $ty: $(tail -1 "$OUT/$ty.log")"
        failures=$((failures + 1))
    fi
done
if $PQ quantize "$OUT/f16" -o "$OUT/gptq_q4_k.gguf" --scheme gguf-q4_k --method gptq --fallback --calib "$CALIB" \
    --nsamples 32 --seqlen 512 >"$OUT/gptq.log" 2>&1; then
    compare "$OUT/gptq_q4_k.gguf" "pq quantize --scheme gguf-q4_k --method gptq --fallback"
else
    echo "FAIL - pq quantize --scheme gguf-q4_k --method gptq: $(tail -1 "$OUT/gptq.log")"
    failures=$((failures + 1))
fi

. tests/cli/venv_gguf.sh
venv_gguf_python "GGUF export oracle (gguf package)"
if r=$("$PY" tests/gguf_export_check.py dense "$OUT/f16.gguf" "$OUT/f16" 2>&1); then
    echo "ok - the gguf package reads pq's F16 export of SmolLM2 as the checkpoint ($r)"
else
    echo "FAIL - the gguf package on pq's F16 export: $r"
    failures=$((failures + 1))
fi
rm -rf "$OUT"
[ "$failures" -eq 0 ]
