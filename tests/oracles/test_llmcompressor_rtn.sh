#!/bin/sh
# pq's RTN outputs against llm-compressor's (make test-oracles; needs the
# torch venv with llmcompressor): tests/oracles/llmc_rtn.py quantizes the same
# models with both and requires every tensor of model.safetensors to be
# byte-identical and config.json equal but for the compressed-tensors version:
# W4A16 sym and asym at g32 / g64 / g128 / per channel, 3-bit sym and asym,
# W8A16, W8A8 (INT8, dynamic per token), FP8 weight-only and FP8 dynamic
# (per channel and per tensor). Models: two small random Llamas whose sizes
# are multiples of every group (F16 and BF16, tests/compat/make_tiny_llama.py)
# and SmolLM2-135M (tools/get_smollm2.sh, pq convert --dtype f16) for INT4
# g64 asym, W8A8 and FP8 dynamic (~40 s of CPU each; the whole script took
# over 30 minutes of wall time on the 2 shared cores here). Then
# the default AutoModelForCausalLM.from_pretrained(OUT) loads pq's sym, asym
# (packed zero points), 3-bit, W8A8 and FP8 outputs of the F16 fixture and
# SmolLM2's, and their logits are compared with pq's. Without the venv this
# prints skip.
set -u
BUILD=${BUILD:-build}
SHARED=${PQ_SHARED:-../shared}
PQ=${PQ:-$BUILD/pq}
VENV=${PQ_VENV_ORACLES:-$HOME/.cache/pq/venv-oracles}
PY=$VENV/bin/python
OUT=$BUILD/oracle_llmc
if ! "$PY" -c 'import torch, transformers, compressed_tensors, llmcompressor' >/dev/null 2>&1; then
    echo "skip - llm-compressor oracle: no venv with torch, transformers, compressed-tensors and llmcompressor at $VENV"
    exit 0
fi
rm -rf "$OUT" && mkdir -p "$OUT"
for d in f16 bf16; do
    "$PY" tests/compat/make_tiny_llama.py "$OUT/tiny-$d" $d "$SHARED/fixtures/stories260K" >"$OUT/make.log" 2>&1 ||
        { echo "FAIL - make_tiny_llama.py $d: $(tail -1 "$OUT/make.log")"; exit 1; }
done
MODELS="$OUT/tiny-f16 $OUT/tiny-bf16"
if GGUF=$(sh tools/get_smollm2.sh 2>/dev/null) && $PQ convert "$GGUF" -o "$OUT/smollm2-f16" --dtype f16 >/dev/null 2>&1; then
    MODELS="$MODELS $OUT/smollm2-f16:w4a16-g64-asym,w8a8,fp8-dynamic"
else
    echo "skip - llm-compressor oracle on SmolLM2: tools/get_smollm2.sh or pq convert failed"
fi
# shellcheck disable=SC2086
"$PY" tests/oracles/llmc_rtn.py "$OUT" "$PQ" "$BUILD/oracles/dump_logits" $MODELS 2>"$OUT/stderr.log"
status=$?
[ $status -eq 0 ] || tail -5 "$OUT/stderr.log" | sed 's/^/# /'
rm -rf "$OUT"
exit $status
