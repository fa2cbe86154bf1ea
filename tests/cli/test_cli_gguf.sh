#!/bin/sh
# GGUF files from the command line: the stories260K fixture written as a
# llama GGUF (build/tests/test_gguf_model --write) scores exactly as the
# fixture directory under pq ppl, converts to a checkpoint that scores the
# same, quantizes, and inspects; broken files (truncated, lying counts or
# offsets, unknown tensor type, architecture or pre-tokenizer, a string
# length past the end) each give one line naming the file, exit 1.
. tests/cli/lib.sh
WRITE=${BUILD:-build}/tests/test_gguf_model
TEXT=$SHARED/data/tinystories_val_prefix.txt
if [ ! -d "$FIXTURE" ]; then
    echo "skip - GGUF CLI tests: no fixture at $FIXTURE"
    exit 0
fi
$WRITE --write "$FIXTURE" "$TMP/fx.gguf" f16 && $WRITE --write "$FIXTURE" "$TMP/q8.gguf" q8_0 ||
    { fail "test_gguf_model --write"; finish; }

ppl() { $PQ ppl "$1" --text "$TEXT" --protocol gptq --bos --ctx 256 --max-windows 40 --device cpu 2>/dev/null | sed 's/, [0-9]* tokens\/s.*//'; }
want=$(ppl "$FIXTURE")
got=$(ppl "$TMP/fx.gguf")
[ -n "$want" ] && [ "$got" = "$want" ] && ok "pq ppl FILE.gguf equals the fixture directory: $got" ||
    fail "pq ppl on the GGUF: '$got', on the directory: '$want'"
q8=$(ppl "$TMP/q8.gguf" | sed -n 's/^PPL = \([0-9.]*\).*/\1/p')
base=$(echo "$want" | sed -n 's/^PPL = \([0-9.]*\).*/\1/p')
awk -v a="$q8" -v b="$base" 'BEGIN { exit !(a > 0 && a / b < 1.01 && a / b > 0.99) }' &&
    ok "a Q8_0 GGUF scores within 1% of F16 ($q8 vs $base)" || fail "Q8_0 GGUF PPL $q8 vs $base"

$PQ convert "$TMP/fx.gguf" -o "$TMP/conv" --dtype f16 >"$TMP/out" 2>"$TMP/err" &&
    grep -q "LlamaForCausalLM, 260032 parameters, 47 tensors" "$TMP/out" &&
    ok "pq convert: $(cat "$TMP/out")" || fail "pq convert: $(cat "$TMP/out" "$TMP/err")"
for f in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json; do
    [ -f "$TMP/conv/$f" ] || fail "pq convert wrote no $f"
done
[ "$(ppl "$TMP/conv")" = "$want" ] && ok "the converted checkpoint scores as the fixture" ||
    fail "converted checkpoint: $(ppl "$TMP/conv")"
no_leftovers "$TMP/conv" && ok "no temporary directory left" || fail "leftovers next to $TMP/conv"
expect_fail 2 "exists" "convert onto an existing directory without --force" -- \
    $PQ convert "$TMP/fx.gguf" -o "$TMP/conv"
$PQ convert "$TMP/q8.gguf" -o "$TMP/conv" --force --json >"$TMP/out" 2>/dev/null &&
    grep -q '"tensors": 47' "$TMP/out" && ok "convert --force --json replaces it" || fail "convert --force: $(cat "$TMP/out")"
expect_fail 2 "--dtype 'fp8' is not one of f16, bf16, f32" "a bad --dtype" -- \
    $PQ convert "$TMP/fx.gguf" -o "$TMP/conv2" --dtype fp8
expect_fail 2 "-o DIR is required" "convert without -o" -- $PQ convert "$TMP/fx.gguf"
expect_fail 1 "not a GGUF file" "convert of a directory" -- $PQ convert "$FIXTURE" -o "$TMP/conv3"

$PQ inspect "$TMP/fx.gguf" >"$TMP/inspect" 2>&1 && grep -q 'architecture: llama -> LlamaForCausalLM' "$TMP/inspect" &&
    grep -q 'parameters:   260032' "$TMP/inspect" && grep -q 'tokenizer:    llama, pre-tokenizer default, 512 tokens' "$TMP/inspect" &&
    grep -q 'blk.0.attn_q.weight *F16 *\[64, 64\]' "$TMP/inspect" && grep -q '^  Q8_0\|^  F16 ' "$TMP/inspect" &&
    ok "pq inspect FILE.gguf: architecture, parameters, tokenizer, tensors with ggml types" ||
    fail "pq inspect: $(head -8 "$TMP/inspect")"
$PQ quantize "$TMP/fx.gguf" -o "$TMP/w4" --scheme w4a16 --group 32 >/dev/null 2>&1 && [ -f "$TMP/w4/tokenizer.json" ] &&
    $PQ ppl "$TMP/w4" --text "$TEXT" --bos --ctx 256 --max-windows 4 >/dev/null 2>&1 &&
    ok "pq quantize FILE.gguf writes a checkpoint that pq ppl reads" || fail "pq quantize of a GGUF"

$PQ quantize "$TMP/q8.gguf" -o "$TMP/awq" --method awq --calib "$SHARED/data/c4_validation_2k.txt" --nsamples 4 \
    --seqlen 64 >/dev/null 2>"$TMP/err" && ok "pq quantize --method awq from a Q8_0 GGUF with a matrix kept in F16" ||
    fail "awq from a Q8_0 GGUF: $(tail -1 "$TMP/err")"

# bad files: one line naming the file, exit 1, no crash
head -c 300000 "$TMP/fx.gguf" >"$TMP/trunc.gguf"
expect_fail 1 "$TMP/trunc.gguf: tensor 'blk." "a truncated GGUF" -- $PQ ppl "$TMP/trunc.gguf" --text "$TEXT"
head -c 2000 "$TMP/fx.gguf" >"$TMP/trunc2.gguf"
expect_fail 1 "$TMP/trunc2.gguf: " "a GGUF cut in its header" -- $PQ inspect "$TMP/trunc2.gguf"
for c in "count:a tensor name: string length" "offset:run past the end of the file" \
    "ttype:has unknown ggml type 77" "arch:architecture 'gpt9' is not supported" \
    "pre:pre-tokenizer 'mystery' is not supported" "strlen:string length 1099511627776"; do
    k=${c%%:*}
    $WRITE --write "$FIXTURE" "$TMP/bad_$k.gguf" f16 "$k"
    expect_fail 1 "$TMP/bad_$k.gguf: " "GGUF $k (pq ppl)" -- $PQ ppl "$TMP/bad_$k.gguf" --text "$TEXT"
    grep -qF -- "${c#*:}" "$TMP/err" || fail "GGUF $k: the reason is not '${c#*:}': $(cat "$TMP/err")"
    expect_fail 1 "$TMP/bad_$k.gguf: " "GGUF $k (pq convert)" -- $PQ convert "$TMP/bad_$k.gguf" -o "$TMP/bad_$k"
    [ ! -e "$TMP/bad_$k" ] && no_leftovers "$TMP/bad_$k" || fail "GGUF $k: convert left files behind"
done
printf 'GGUF\003\0\0\0' >"$TMP/tiny.gguf"
expect_fail 1 "$TMP/tiny.gguf: truncated" "an 8-byte GGUF" -- $PQ ppl "$TMP/tiny.gguf" --text "$TEXT"
finish
