#!/bin/sh
# pq against transformers on the real default model (make test-oracles; too
# heavy for make test): SmolLM2-135M-Instruct's GGUF (tools/get_smollm2.sh),
# converted by pq convert to a float32 checkpoint (exact: the Q4_1/Q8_0
# blocks dequantized), loaded by transformers in float32 on the CPU.
#   - logits of the first 512-token window of wiki.test.raw: pq on the .gguf
#     within 1e-4 relative L2 of transformers', and pq on the .gguf
#     bit-identical to pq on the converted checkpoint;
#   - PPL of the first $ORACLE_WINDOWS (20) windows, llama.cpp's protocol at
#     ctx 512: pq ppl FILE.gguf equal to transformers' to 4 significant digits.
# transformers and torch come from $PQ_VENV_ORACLES (default
# ~/.cache/pq/venv-oracles); without them this prints skip.
set -u
BUILD=${BUILD:-build}
SHARED=${PQ_SHARED:-../shared}
PQ=${PQ:-$BUILD/pq}
VENV=${PQ_VENV_ORACLES:-$HOME/.cache/pq/venv-oracles}
WINDOWS=${ORACLE_WINDOWS:-20}
OUT=$BUILD/oracle_smollm2
PY=$VENV/bin/python
if ! "$PY" -c 'import torch, transformers, tokenizers' >/dev/null 2>&1; then
    echo "skip - transformers oracle: no venv with torch, transformers and tokenizers at $VENV"
    exit 0
fi
[ -f "$SHARED/data/wiki.test.raw" ] || { echo "skip - transformers oracle: no $SHARED/data/wiki.test.raw"; exit 0; }
GGUF=$(sh tools/get_smollm2.sh) || { echo "FAIL - transformers oracle: tools/get_smollm2.sh failed"; exit 1; }
rm -rf "$OUT" && mkdir -p "$OUT"
if ! $PQ convert "$GGUF" -o "$OUT/f32" --dtype f32 >"$OUT/convert.log" 2>&1; then
    echo "FAIL - pq convert $GGUF: $(tail -1 "$OUT/convert.log")"
    exit 1
fi
echo "ok - pq convert $GGUF -o $OUT/f32 --dtype f32: $(tail -1 "$OUT/convert.log")"
if ! "$PY" tests/oracles/smollm2_transformers.py "$OUT/f32" "$SHARED" "$OUT" "$WINDOWS"; then
    echo "FAIL - transformers oracle: tests/oracles/smollm2_transformers.py failed (see above)"
    exit 1
fi
"$BUILD/tests/test_gguf_model" --logits-oracle "$GGUF" "$OUT/f32" "$OUT"
status=$?
want=$(cut -d' ' -f1 "$OUT/ppl.txt")
got=$($PQ ppl "$GGUF" --text "$SHARED/data/wiki.test.raw" --protocol llamacpp --ctx 512 --max-windows "$WINDOWS" \
    --json 2>/dev/null | sed -n 's/.*"ppl": \([0-9.e+-]*\).*/\1/p')
if [ -n "$got" ] && [ "$(printf '%.4g' "$got")" = "$(printf '%.4g' "$want")" ]; then
    echo "ok - PPL of $WINDOWS windows (llamacpp protocol, ctx 512): pq $got, transformers $want (4 significant digits)"
else
    echo "FAIL - PPL of $WINDOWS windows: pq '$got', transformers $want"
    status=1
fi
rm -rf "$OUT"
exit $status
