#!/bin/sh
# pq ppl and pq inspect from the command line: the golden number, --json,
# and every bad input giving one line, the right exit code and no crash.
. tests/cli/lib.sh

TEXT=$SHARED/data/tinystories_val_prefix.txt

# the README's (and make demo's) line: the golden protocol on the whole text
# gives the fixture's independently computed 5.672948841 (golden/ppl.json)
out=$($PQ ppl "$FIXTURE" --text "$TEXT" --protocol gptq --bos --ctx 256 --device cpu 2>"$TMP/err")
if [ $? -eq 0 ] && echo "$out" | grep -q '^PPL = 5\.6729 +/- 0\.0215  (392960 tokens scored, 1535 windows of 256 with BOS'; then
    ok "pq ppl prints the golden PPL +/- stderr, tokens scored, windows: $out"
else
    fail "pq ppl output: $out $(cat "$TMP/err")"
fi
json=$($PQ ppl "$FIXTURE" --text "$TEXT" --bos --ctx 256 --max-windows 2 --json --device cpu 2>/dev/null)
echo "$json" | grep -q '"ppl": [0-9]' && echo "$json" | grep -q '"tokens_scored": 512' &&
    echo "$json" | jq -e '.seconds > 0 and .cpu_seconds > 0 and .tokens_per_s > 0' >/dev/null &&
    ok "pq ppl --json (with its wall and CPU seconds)" || fail "pq ppl --json: $json"
# --kl-base: a model against itself is KLD 0 and top-1 100%; a 4-bit RTN copy
# of it is not; --json carries every statistic
out=$($PQ ppl "$FIXTURE" --text "$TEXT" --bos --ctx 256 --max-windows 3 --kl-base "$FIXTURE" --device cpu 2>"$TMP/err")
echo "$out" | grep -q '^  Mean    KLD:   0\.000000 +/- 0\.000000' && echo "$out" | grep -q 'Maximum KLD:   0\.000000' &&
    echo "$out" | grep -q 'Same top-1:  100\.000 +/- 0\.000 %' && echo "$out" | grep -q 'PPL/PPL base:     1\.000000' &&
    ok "pq ppl --kl-base: the model against itself is KLD 0, top-1 100%, PPL ratio 1" ||
    fail "pq ppl --kl-base itself: $out $(cat "$TMP/err")"
$PQ quantize "$FIXTURE" -o "$TMP/rtn4" --scheme w4a16 --group 32 >/dev/null 2>&1 || fail "quantize for --kl-base"
json=$($PQ ppl "$TMP/rtn4" --text "$TEXT" --bos --ctx 256 --max-windows 3 --kl-base "$FIXTURE" --json --device cpu 2>"$TMP/err")
echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin); k = d["kl_divergence"]
keys = ["base", "ppl_base", "kld_mean", "kld_mean_stderr", "kld_median", "kld_p90", "kld_p99", "kld_p99_9", "kld_max",
        "kld_min", "top1_agreement", "top1_agreement_stderr", "ln_ppl_ratio", "ln_ppl_ratio_stderr", "ppl_ratio",
        "ppl_ratio_stderr"]
assert all(x in k for x in keys), sorted(k)
assert 0 < k["kld_mean"] and k["kld_min"] <= k["kld_median"] <= k["kld_p99"] <= k["kld_p99_9"] <= k["kld_max"]
assert 0 < k["top1_agreement"] < 1 and abs(k["ppl_ratio"] - d["ppl"] / k["ppl_base"]) < 1e-6 * k["ppl_ratio"]
' && ok "pq ppl --kl-base --json: a W4 RTN model has KLD > 0, top-1 < 100%, ordered percentiles, ratio = PPL / PPL base" ||
    fail "pq ppl --kl-base --json: $json $(cat "$TMP/err")"
mkdir -p "$TMP/kb" && cp "$FIXTURE"/*.json "$FIXTURE/model.safetensors" "$TMP/kb/"
sed 's/"max_position_embeddings": 512/"max_position_embeddings": 128/' "$FIXTURE/config.json" >"$TMP/kb/config.json"
expect_fail 2 "--kl-base $TMP/kb: vocabulary 512 and context 128" "--kl-base whose context is shorter than the windows" \
    -- $PQ ppl "$FIXTURE" --text "$TEXT" --ctx 256 --kl-base "$TMP/kb" --device cpu
$PQ ppl --help | grep -q -- '--protocol gptq|llamacpp' && ok "pq ppl --help lists flags with defaults" || fail "ppl --help"
$PQ inspect "$FIXTURE" >"$TMP/inspect" 2>&1 && grep -q 'architecture: LlamaForCausalLM' "$TMP/inspect" &&
    grep -q 'parameters:   260032' "$TMP/inspect" && grep -q 'model.layers.4.mlp.down_proj.weight *F16 *\[64, 172\]' "$TMP/inspect" &&
    ok "pq inspect: architecture, parameters, tensors" || fail "pq inspect: $(head -5 "$TMP/inspect")"

# bad input: each one line naming the file and the problem
mkdir -p "$TMP/m"
cp "$FIXTURE"/*.json "$TMP/m/"
head -c 100000 "$FIXTURE/model.safetensors" >"$TMP/m/model.safetensors"
expect_fail 1 "model.safetensors" "truncated safetensors" -- $PQ ppl "$TMP/m" --text "$TEXT" --device cpu
cp "$FIXTURE/model.safetensors" "$TMP/m/"
# safetensors headers that lie (from the fuzz corpus): each refused naming the file and the reason
for c in "bad_len_past_eof:runs past the end of the file" "bad_overlap:overlaps tensor" \
    "bad_out_of_file:past the end of the" "bad_size_mismatch:is 24 bytes but data_offsets [0,20] hold 20"; do
    cp "tests/fuzz/corpus/fuzz_safetensors/${c%%:*}" "$TMP/m/model.safetensors"
    expect_fail 1 "$TMP/m/model.safetensors: " "safetensors ${c%%:*}" -- $PQ ppl "$TMP/m" --text "$TEXT" --device cpu
    grep -qF -- "${c#*:}" "$TMP/err" || fail "safetensors ${c%%:*}: the reason is not '${c#*:}': $(cat "$TMP/err")"
done
# tensors that do not match config.json: a shape, a dtype
sed 's/"intermediate_size": 172/"intermediate_size": 160/' "$FIXTURE/config.json" >"$TMP/m/config.json"
cp "$FIXTURE/model.safetensors" "$TMP/m/"
expect_fail 1 "tensor 'model.layers.0.mlp.gate_proj.weight' has shape [172, 64], config.json implies [160, 64]" \
    "tensor shape vs config.json" -- $PQ ppl "$TMP/m" --text "$TEXT" --device cpu
cp "$FIXTURE/config.json" "$TMP/m/"
LC_ALL=C sed 's/"model.layers.0.input_layernorm.weight":{"dtype":"F16"/"model.layers.0.input_layernorm.weight":{"dtype":"I16"/' \
    "$FIXTURE/model.safetensors" >"$TMP/m/model.safetensors"
expect_fail 1 "tensor 'model.layers.0.input_layernorm.weight' has dtype I16; expected F16, BF16 or F32" \
    "tensor dtype" -- $PQ ppl "$TMP/m" --text "$TEXT" --device cpu
cp "$FIXTURE/model.safetensors" "$TMP/m/"
printf '{"architectures": ["GPT2LMHeadModel"], "hidden_size": 64}' >"$TMP/m/config.json"
expect_fail 1 'unsupported architecture "GPT2LMHeadModel"' "unknown architecture" -- $PQ ppl "$TMP/m" --text "$TEXT" --device cpu
printf '{"architectures": ["LlamaForCausalLM"], "hidden_size": ' >"$TMP/m/config.json"
expect_fail 1 "config.json: invalid JSON" "malformed config.json" -- $PQ ppl "$TMP/m" --text "$TEXT" --device cpu
cp "$FIXTURE/config.json" "$TMP/m/"
rm "$TMP/m/tokenizer.json"
expect_fail 1 "tokenizer.json" "missing tokenizer.json" -- $PQ ppl "$TMP/m" --text "$TEXT" --device cpu
printf 'Once upon a time \377\376 there was' >"$TMP/bad.txt"
expect_fail 1 "bad.txt" "text that is not UTF-8" -- $PQ ppl "$FIXTURE" --text "$TMP/bad.txt" --device cpu
expect_fail 2 "max_position_embeddings" "--ctx beyond the model" -- $PQ ppl "$FIXTURE" --text "$TEXT" --ctx 4096 --device cpu
expect_fail 1 "nonexistent.txt" "missing text file" -- $PQ ppl "$FIXTURE" --text "$TMP/nonexistent.txt" --device cpu
expect_fail 1 "no such model directory" "missing model" -- $PQ ppl "$TMP/nope" --text "$TEXT" --device cpu
printf 'Once upon a time' >"$TMP/short.txt"
expect_fail 1 "fewer than one window" "text shorter than one window" -- $PQ ppl "$FIXTURE" --text "$TMP/short.txt" --ctx 256 --device cpu
expect_fail 2 "unknown option --frobnicate" "unknown flag" -- $PQ ppl "$FIXTURE" --frobnicate
expect_fail 2 "'abc' is not an integer" "bad flag value" -- $PQ ppl "$FIXTURE" --text "$TEXT" --ctx abc
expect_fail 2 "--text FILE is required" "missing --text" -- $PQ ppl "$FIXTURE"
if ! nvidia-smi -L >/dev/null 2>&1; then
    expect_fail 1 "--device cuda" "--device cuda without a GPU" -- $PQ ppl "$FIXTURE" --text "$TEXT" --device cuda
fi
finish
