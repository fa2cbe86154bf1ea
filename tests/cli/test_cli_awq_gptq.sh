#!/bin/sh
# pq quantize --method awq+gptq on the fixture (calibrated on
# c4_validation_2k.txt with few small windows, test time): deterministic
# for 1 and 2 threads; AWQ's scales folded (block 0's norm is the one --method
# awq folds, and not the source's); pq.json records both methods' parameters;
# PPL on the golden protocol's first windows no worse than RTN's at the same
# scheme; killed after a block and resumed to identical files; the flags
# neither method takes refused.
. tests/cli/lib.sh

CALIB=$SHARED/data/c4_validation_2k.txt
TEXT=$SHARED/data/tinystories_val_prefix.txt
CAL="--calib $CALIB --nsamples 8 --seqlen 128 --search-tokens 512"
AG="--method awq+gptq $CAL --group 32"
PPL_ARGS="--text $TEXT --protocol gptq --bos --ctx 256 --max-windows 50 --device cpu --json"

hlen() { od -An -t u8 -N 8 "$1" | tr -d ' '; }
# tensor_sha FILE NAME: the SHA-256 of a safetensors tensor's bytes
tensor_sha() {
    n=$(hlen "$1")
    set -- "$1" "$2" "$n" "$(dd if="$1" bs=1 skip=8 count="$n" 2>/dev/null | jq -r ".[\"$2\"].data_offsets | \"\\(.[0]) \\(.[1])\"")"
    a=${4% *} b=${4#* }
    tail -c +$(($3 + 9 + a)) "$1" | head -c $((b - a)) | sha256sum | cut -c1-16
}

# ---- runs, threads, provenance --------------------------------------------------------
out=$TMP/ag
if quantize -o "$out" $AG --threads 2 && quantize -o "$TMP/ag1" $AG --threads 1; then
    same_output "$out" "$TMP/ag1" && ok "awq+gptq: --threads 1 and 2 byte-identical files" ||
        fail "awq+gptq: threads differ"
else
    fail "awq+gptq: $(cat "$TMP/q_err")"
fi
# --calib-precision auto keeps f32 for awq+gptq on any CPU (BF16 products cost it accuracy); bf16 is
# taken when asked for
[ "$(jq -r .calibration.precision "$out/pq.json")" = null ] && ! head -n 1 "$TMP/q_err" | grep -q bf16 &&
    quantize -o "$TMP/ag_bf" $AG --calib-precision bf16 &&
    [ "$(jq -r .calibration.precision "$TMP/ag_bf/pq.json")" = bf16 ] &&
    ! cmp -s "$TMP/ag_bf/model.safetensors" "$out/model.safetensors" &&
    ok "awq+gptq: auto is f32 (pq.json, the configuration line); --calib-precision bf16 gives other codes" ||
    fail "awq+gptq precision: $(jq -c .calibration "$out/pq.json" "$TMP/ag_bf/pq.json" 2>&1) $(head -n 1 "$TMP/q_err")"
j=$out/pq.json
[ "$(jq -r .method "$j")" = "awq+gptq" ] &&
    [ "$(jq -c '.["awq+gptq"].awq | [.grid, .clip_grid, .search_tokens]' "$j")" = "[20,20,512]" ] &&
    [ "$(jq -c '.["awq+gptq"].gptq | [.damp, .block_size, .act_order, .static_groups]' "$j")" = "[0.01,128,true,true]" ] &&
    [ "$(jq '[.layers[] | select(.output_rel_sq_error > 0 and .damp == 0.01)] | length' "$j")" = 35 ] &&
    [ "$(jq '[.layers[] | select(.alpha != null)] | length' "$j")" -gt 0 ] &&
    ok "pq.json: method awq+gptq, AWQ's grid / clip grid / search tokens and GPTQ's damp / block / act-order, per linear output error, damp and alpha" ||
    fail "pq.json: $(jq -c '.["awq+gptq"]' "$j" 2>&1)"
quantize -o "$TMP/ag_flags" $AG --awq-grid 5 --awq-clip-grid 0 --damp 0.05 --block-size 32 --no-act-order \
    --no-static-groups && [ "$(jq -c '.["awq+gptq"] | [.awq.grid, .awq.clip_grid, .gptq.damp, .gptq.block_size,
    .gptq.act_order]' "$TMP/ag_flags/pq.json")" = "[5,0,0.05,32,false]" ] &&
    ! cmp -s "$TMP/ag_flags/model.safetensors" "$out/model.safetensors" &&
    ok "both methods' flags taken and recorded (--awq-grid --awq-clip-grid --damp --block-size --no-act-order)" ||
    fail "flags: $(cat "$TMP/q_err")"

# ---- the fold: AWQ's scales ---------------------------------------------------------------
N0=model.layers.0.input_layernorm.weight
if quantize -o "$TMP/awq" --method awq $CAL --group 32; then
    src=$(tensor_sha "$FIXTURE/model.safetensors" $N0) ag=$(tensor_sha "$out/model.safetensors" $N0)
    aw=$(tensor_sha "$TMP/awq/model.safetensors" $N0)
    [ -n "$ag" ] && [ "$ag" != "$src" ] && [ "$ag" = "$aw" ] &&
        ok "AWQ's scales folded: block 0's input_layernorm differs from the source ($src) and equals --method awq's ($ag)" ||
        fail "fold: source $src awq+gptq $ag awq $aw"
else
    fail "awq: $(cat "$TMP/q_err")"
fi

# ---- accuracy: no worse than RTN ------------------------------------------------------------
quantize -o "$TMP/rtn" --group 32
pr=$(ppl_of "$TMP/rtn") pa=$(ppl_of "$out")
[ -n "$pr" ] && [ -n "$pa" ] && awk -v a="$pa" -v r="$pr" 'BEGIN { exit !(a > 0 && a <= r) }' &&
    ok "golden protocol, 50 windows, W4 g32 sym: awq+gptq PPL $pa <= RTN $pr" ||
    fail "awq+gptq PPL '$pa' vs RTN '$pr': $(cat "$TMP/ppl_err")"

# ---- kill and resume ------------------------------------------------------------------------
# kill_resume NAME VAR K: killed by the hook (block K written, or journaled), resumed identical
kill_resume() {
    name=$1; var=$2; k=$3; o=$TMP/k_$name
    env "$var=$k" $PQ quantize "$FIXTURE" -o "$o" $AG >/dev/null 2>&1
    rc=$?
    if [ $rc -ne 137 ] || [ -e "$o" ] || no_leftovers "$o"; then
        fail "$name: killed run: exit $rc, $(ls -d "$o"* 2>&1)"; return
    fi
    if quantize -o "$o" $AG --resume && same_output "$out" "$o" && no_leftovers "$o"; then
        ok "$name: --resume continues ($(grep -c 'resumed)$' "$TMP/q_err") blocks re-run), byte-identical files"
    else
        fail "$name: resume: $(cat "$TMP/q_err"); $(cmp "$out/model.safetensors" "$o/model.safetensors" 2>&1)"
    fi
}
kill_resume block2 PQ_TEST_KILL_AFTER_BLOCK 2
kill_resume journal3 PQ_TEST_KILL_AFTER_JOURNAL 3

# ---- refused ------------------------------------------------------------------------------------
expect_fail 2 "--alpha: not a flag of --method awq+gptq" "--alpha (smoothquant's)" -- \
    $PQ quantize "$FIXTURE" -o "$TMP/x" $AG --alpha 0.5
expect_fail 2 "--true-sequential: not a flag of --method awq+gptq" "--true-sequential (AWQ's search needs the whole block)" -- \
    $PQ quantize "$FIXTURE" -o "$TMP/x" $AG --true-sequential
expect_fail 2 "--imatrix: not a flag of --method awq+gptq" "--imatrix (gptq with gguf-q4_k)" -- \
    $PQ quantize "$FIXTURE" -o "$TMP/x" $AG --imatrix
expect_fail 2 "AWQ+GPTQ writes the compressed-tensors weight-only integer schemes" "--scheme w8a8" -- \
    $PQ quantize "$FIXTURE" -o "$TMP/x" --method awq+gptq $CAL --scheme w8a8
expect_fail 2 "AWQ+GPTQ writes the compressed-tensors weight-only integer schemes" "--scheme gguf-q4_0" -- \
    $PQ quantize "$FIXTURE" -o "$TMP/x" --method awq+gptq $CAL --scheme gguf-q4_0
expect_fail 2 "needs calibration text" "without --calib" -- $PQ quantize "$FIXTURE" -o "$TMP/x" --method awq+gptq
expect_fail 2 "pq calibrate runs awq, smoothquant or fp8" "pq calibrate --method awq+gptq" -- \
    $PQ calibrate "$FIXTURE" -o "$TMP/x.scales" --method awq+gptq $CAL
[ ! -e "$TMP/x" ] && [ ! -e "$TMP/x.scales" ] && no_leftovers "$TMP/x" && ok "refused runs leave nothing" ||
    fail "refused runs left $(ls -d "$TMP"/x* 2>&1)"

finish
