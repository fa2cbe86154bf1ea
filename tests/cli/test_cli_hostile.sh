#!/bin/sh
# Hostile and broken inputs from the command line (issue 10, the parser
# items): each must give one line naming the file and the reason and exit 1
# (never 2, a crash, a silent skip, or gigabytes of memory). Commands that a
# bug would let run away are started under a 4 GB address-space limit.
. tests/cli/lib.sh

TEXT=$SHARED/data/tinystories_val_prefix.txt
limited() { (ulimit -v 4194304 && exec "$@"); }

# fails_after_progress CODE NEEDLE DESCRIPTION -- command...: as expect_fail,
# for commands that print progress lines before their one error line
fails_after_progress() {
    code=$1; needle=$2; desc=$3; shift 4
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    last=$(tail -n 1 "$TMP/err")
    if [ "$rc" -eq "$code" ] && printf '%s' "$last" | grep -qF -- "$needle" && ! grep -q 'rror' "$TMP/out"; then
        ok "$desc: exit $rc, $last"
    else
        fail "$desc: exit $rc (want $code), last line: $last"
    fi
}

# a model directory holding copies of the fixture's files
fresh() {
    rm -rf "$TMP/m"
    mkdir -p "$TMP/m"
    for f in config.json tokenizer.json tokenizer_config.json model.safetensors; do cp "$FIXTURE/$f" "$TMP/m/"; done
}

# item 6: a regex in quantization_config.ignore that glibc's regcomp took
# past 13 GB; refused by name now (Python refuses it too)
fresh
plus=$(printf '%040d' 0 | tr 0 +)
jq --arg p "re:a$plus" '. + {quantization_config: {quant_method: "compressed-tensors", format: "pack-quantized",
    config_groups: {group_0: {targets: ["Linear"], weights: {num_bits: 4, type: "int", symmetric: true,
    strategy: "group", group_size: 32}}}, ignore: ["lm_head", $p]}}' "$FIXTURE/config.json" >"$TMP/m/config.json"
expect_fail 1 "quantization_config.ignore[1]: regex \"a++" "item 6: ignore regex a+++... (pq inspect)" -- \
    limited $PQ inspect "$TMP/m"
grep -qF "possessive quantifier is not supported" "$TMP/err" || fail "item 6: the reason is not named: $(cat "$TMP/err")"

# item 13: a tokenizer.json that is a FIFO or a link to /dev/zero was
# skipped (quantize: exit 0, OUT without a tokenizer) or read forever.
# Every file pq reads must be a regular file; anything else is refused by
# name without being opened for reading (a FIFO would block).
for kind in fifo zero; do
    fresh
    rm "$TMP/m/tokenizer.json"
    if [ $kind = fifo ]; then mkfifo "$TMP/m/tokenizer.json"; else ln -s /dev/zero "$TMP/m/tokenizer.json"; fi
    is="is a FIFO"; [ $kind = zero ] && is="is a character device"
    fails_after_progress 1 "tokenizer.json: $is, not a regular file" "item 13: tokenizer.json $kind, pq quantize" -- \
        limited timeout 120 $PQ quantize "$TMP/m" -o "$TMP/out_$kind" --scheme w4a16
    [ ! -e "$TMP/out_$kind" ] || fail "item 13: tokenizer.json $kind: an output was left at $TMP/out_$kind"
    expect_fail 1 "tokenizer.json: $is, not a regular file" "item 13: tokenizer.json $kind, pq ppl" -- \
        limited timeout 120 $PQ ppl "$TMP/m" --text "$TEXT" --max-windows 1 --device cpu
done
fresh
rm "$TMP/m/tokenizer_config.json"
mkfifo "$TMP/m/tokenizer_config.json"
expect_fail 1 "tokenizer_config.json: is a FIFO" "item 13: tokenizer_config.json a FIFO (it was ignored)" -- \
    limited timeout 120 $PQ ppl "$TMP/m" --text "$TEXT" --max-windows 1 --device cpu
fresh
rm "$TMP/m/config.json"
mkfifo "$TMP/m/config.json"
expect_fail 1 "config.json: is a FIFO" "item 13: config.json a FIFO, pq inspect" -- limited timeout 120 $PQ inspect "$TMP/m"
fresh
# --text and --calib are streams: a FIFO is read to its end (as with
# <(zcat ...)) and gives what the file gives; a device is still refused
mkfifo "$TMP/text.fifo"
(cat "$TEXT" >"$TMP/text.fifo") &
fifo_ppl=$(limited timeout 120 $PQ ppl "$TMP/m" --text "$TMP/text.fifo" --max-windows 2 --device cpu 2>"$TMP/err" | cut -d"(" -f1)
wait
file_ppl=$($PQ ppl "$TMP/m" --text "$TEXT" --max-windows 2 --device cpu 2>/dev/null | cut -d"(" -f1)
if [ -n "$file_ppl" ] && [ "$fifo_ppl" = "$file_ppl" ]; then ok "--text a FIFO reads the stream: $fifo_ppl"
else fail "--text a FIFO: '$fifo_ppl' vs the file's '$file_ppl': $(cat "$TMP/err")"; fi
ln -s /dev/zero "$TMP/text.zero"
expect_fail 1 "text.zero: is a character device" "item 13: --text a link to /dev/zero" -- \
    limited timeout 120 $PQ ppl "$TMP/m" --text "$TMP/text.zero" --device cpu
fresh
rm "$TMP/m/model.safetensors"
ln -s "$TMP/nowhere" "$TMP/m/model.safetensors"
expect_fail 1 "model.safetensors: cannot open" "item 13: model.safetensors a dangling link (not passed over)" -- \
    limited timeout 120 $PQ inspect "$TMP/m"

# item 13: a config with fewer layers than the checkpoint was accepted and
# the extra layer copied unquantized; every tensor must be accounted for
fresh
sed 's/"num_hidden_layers": 5/"num_hidden_layers": 4/' "$FIXTURE/config.json" >"$TMP/m/config.json"
expect_fail 1 "tensor 'model.layers.4.input_layernorm.weight' belongs to layer 4, but config.json has num_hidden_layers = 4" \
    "item 13: config with 4 of the 5 layers, pq ppl" -- $PQ ppl "$TMP/m" --text "$TEXT" --max-windows 1 --device cpu
expect_fail 1 "belongs to layer 4, but config.json has num_hidden_layers = 4" "item 13: the same, pq quantize" -- \
    $PQ quantize "$TMP/m" -o "$TMP/out13" --scheme w4a16
[ ! -e "$TMP/out13" ] || fail "item 13: quantize of a 4-layer config left $TMP/out13"
fresh
python3 tests/cli/st_edit.py "$FIXTURE/model.safetensors" "$TMP/m/model.safetensors" \
    --add model.layers.0.self_attn.o_proj.bias F16 '[64]'
expect_fail 1 "tensor 'model.layers.0.self_attn.o_proj.bias' is not part of the LlamaForCausalLM" \
    "item 13: an o_proj bias without attention_bias" -- $PQ ppl "$TMP/m" --text "$TEXT" --max-windows 1 --device cpu
# ... but the rotary buffers older checkpoints carry are ignored, as transformers does
python3 tests/cli/st_edit.py "$FIXTURE/model.safetensors" "$TMP/m/model.safetensors" \
    --add model.layers.0.self_attn.rotary_emb.inv_freq F32 '[4]' --add model.layers.4.self_attn.rotary_emb.inv_freq F32 '[4]'
$PQ ppl "$TMP/m" --text "$TEXT" --max-windows 1 --device cpu >/dev/null 2>"$TMP/err" &&
    ok "item 13: rotary_emb.inv_freq buffers are allowed" || fail "item 13: inv_freq refused: $(cat "$TMP/err")"

# item 12: a zero-byte tensor of shape [2^62, 0] passed inspect and ppl but
# quantize blamed its temporary file. pq inspect lists it (it is valid
# safetensors); ppl and quantize refuse it at open, by name.
fresh
python3 tests/cli/st_edit.py "$FIXTURE/model.safetensors" "$TMP/m/model.safetensors" \
    --add model.layers.0.mlp.empty F16 '[4611686018427387904, 0]'
$PQ inspect "$TMP/m" >"$TMP/out" 2>&1 && grep -q 'model.layers.0.mlp.empty *F16 *\[4611686018427387904, 0\] *0$' "$TMP/out" &&
    ok "item 12: pq inspect lists the [2^62, 0] tensor" || fail "item 12: inspect of [2^62, 0]: $(tail -3 "$TMP/out")"
expect_fail 1 "tensor 'model.layers.0.mlp.empty' is not part of" "item 12: [2^62, 0] tensor, pq ppl" -- \
    $PQ ppl "$TMP/m" --text "$TEXT" --max-windows 1 --device cpu
expect_fail 1 "tensor 'model.layers.0.mlp.empty' is not part of" "item 12: [2^62, 0] tensor, pq quantize" -- \
    $PQ quantize "$TMP/m" -o "$TMP/out12" --scheme w4a16
# shapes in messages: [64] was printed [640], a scalar [00]
python3 tests/cli/st_edit.py "$FIXTURE/model.safetensors" "$TMP/m/model.safetensors" --reshape model.norm.weight '[]'
expect_fail 1 "tensor 'model.norm.weight' has shape [], config.json implies [64]" "item 12: a scalar where [64] belongs" -- \
    $PQ ppl "$TMP/m" --text "$TEXT" --max-windows 1 --device cpu
python3 tests/cli/st_edit.py "$FIXTURE/model.safetensors" "$TMP/m/model.safetensors" --reshape model.norm.weight '[60]'
expect_fail 1 "tensor 'model.norm.weight' has shape [60], config.json implies [64]" "item 12: [60] where [64] belongs" -- \
    $PQ ppl "$TMP/m" --text "$TEXT" --max-windows 1 --device cpu
# a tokenizer mapping text to an id past the model's vocabulary: exit 1 (it was 2, a usage error)
fresh
jq '.added_tokens += [{"id": 600, "content": "Once", "single_word": false, "lstrip": false, "rstrip": false,
    "normalized": false, "special": false}]' "$FIXTURE/tokenizer.json" >"$TMP/m/tokenizer.json"
expect_fail 1 "tokenizer.json: $TEXT encodes to id 512 ('Once'), outside the 512 rows of the model's embedding" \
    "item 12: a tokenizer id past the vocabulary" -- $PQ ppl "$TMP/m" --text "$TEXT" --max-windows 1 --device cpu
# NaN weights: the tensor is named, not the text file
fresh
python3 tests/cli/st_edit.py "$FIXTURE/model.safetensors" "$TMP/m/model.safetensors" \
    --poke model.layers.2.mlp.down_proj.weight 5 007e
expect_fail 1 "tensor 'model.layers.2.mlp.down_proj.weight' element 5 is NaN or Inf" "item 12: a NaN weight in pq ppl" -- \
    $PQ ppl "$TMP/m" --text "$TEXT" --max-windows 1 --device cpu
tail -n 1 "$TMP/err" | grep -qF "$TEXT" && fail "item 12: the NaN weight still blames the text file: $(cat "$TMP/err")"
# a long path: the 1024-byte message buffer cut the path and the reason
long=$TMP
while [ ${#long} -lt 3000 ]; do long=$long/dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd; done
mkdir -p "$long"
cp "$TMP/m/tokenizer.json" "$TMP/m/model.safetensors" "$long/"
printf '{"architectures": ["LlamaForCausalLM"], "hidden_size": ' >"$long/config.json"
expect_fail 1 "$long/config.json: invalid JSON" "item 12: a ${#long}-byte model path and the reason both in the message" -- \
    $PQ ppl "$long" --text "$TEXT" --device cpu

# item 17: checks that could not fail. An oracle manifest naming a file that
# cannot be read printed "ok - ...: 0 ids equal" and exited 0.
printf 'case1\t%s\t%s\t%s\t%s\t0\n' "$FIXTURE/tokenizer.json" "$TMP/absent.txt" "$TMP/absent.ids" "$TMP/absent.dec" \
    >"$TMP/manifest.tsv"
build/tests/test_tokenizer --oracle "$TMP/manifest.tsv" >"$TMP/out" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q '^FAIL - oracle case1: read' "$TMP/out" && ! grep -q '^ok - ' "$TMP/out"; then
    ok "item 17: an oracle case whose files cannot be read fails (exit $rc)"
else
    fail "item 17: unreadable oracle inputs: exit $rc, $(cat "$TMP/out")"
fi
printf 'a line without tabs\n' >"$TMP/manifest.tsv"
build/tests/test_tokenizer --oracle "$TMP/manifest.tsv" >"$TMP/out" 2>&1 && fail "item 17: a malformed manifest passed" ||
    ok "item 17: a malformed manifest fails"
# a corpus input that cannot be read fails the replay (it was skipped)
mkdir -p "$TMP/corpus"
cp tests/fuzz/corpus/fuzz_config/llama3.json "$TMP/corpus/"
ln -s "$TMP/nowhere" "$TMP/corpus/dangling"
build/fuzz/replay_fuzz_config "$TMP/corpus" >"$TMP/out" 2>&1 && fail "item 17: replay skipped an unreadable input: $(cat "$TMP/out")" ||
    ok "item 17: a corpus input that cannot be read fails the replay: $(cat "$TMP/out")"
# a test binary that reports no check is a failure of tests/run.sh
mkdir -p "$TMP/fake/tests" "$TMP/nocli"
printf '#!/bin/sh\nexit 0\n' >"$TMP/fake/tests/test_silent"
chmod +x "$TMP/fake/tests/test_silent"
BUILD=$TMP/fake CLI=$TMP/nocli sh tests/run.sh >"$TMP/out" 2>&1
if [ $? -ne 0 ] && grep -q 'test_silent reported no checks' "$TMP/out" && grep -q '^0 passed, 1 failed' "$TMP/out"; then
    ok "item 17: tests/run.sh counts a test that checks nothing as a failure"
else
    fail "item 17: tests/run.sh and a silent test: $(cat "$TMP/out")"
fi

finish
