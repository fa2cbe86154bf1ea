#!/bin/sh
# pq quantize --method gptq on the fixture, calibrated on c4_validation_2k.txt
# with few small windows (test time): end to end (GPTQ beats RTN at W4 and
# W3 g32 on the golden protocol's first windows), pq.json provenance,
# byte-identical outputs for repeated runs and thread counts, act-order /
# static groups in the checkpoint, kill -9 at several points (test hooks and
# a real kill at a random time) and --resume giving byte-identical files,
# leftovers and bad inputs refused with one line and the right exit code.
#
# The kill points use the test-only hooks of quant/journal.h:
# PQ_TEST_KILL_AFTER_BLOCK=k (block k's tensors written, not yet fsync'd nor
# journaled) and PQ_TEST_KILL_AFTER_JOURNAL=k (block k journaled).
. tests/cli/lib.sh

CALIB=$SHARED/data/c4_validation_2k.txt
TEXT=$SHARED/data/tinystories_val_prefix.txt
G="--method gptq --calib $CALIB --nsamples 8 --seqlen 256"
PPL_ARGS="--text $TEXT --protocol gptq --bos --ctx 256 --max-windows 100 --device cpu --json"


# ---- end to end, GPTQ vs RTN -------------------------------------------------
for bits in 4 3; do
    if quantize -o "$TMP/gptq$bits" $G --group 32 --bits $bits &&
        quantize -o "$TMP/rtn$bits" --group 32 --bits $bits; then
        pg=$(ppl_of "$TMP/gptq$bits"); pr=$(ppl_of "$TMP/rtn$bits")
        less_than "$pg" "$pr" && ok "W$bits g32: GPTQ PPL $pg < RTN $pr (first 100 windows)" ||
            fail "W$bits g32: GPTQ '$pg' vs RTN '$pr': $(cat "$TMP/ppl_err")"
    else
        fail "W$bits g32 quantize: $(cat "$TMP/q_out" "$TMP/q_err")"
    fi
done
out=$TMP/gptq4
quantize -o "$TMP/echo" $G --group 32 --act-order
head -n 1 "$TMP/q_err" | grep -q "^pq quantize: $FIXTURE -> $TMP/echo: gptq w4a16 g32 sym (pack-quantized), calibration $CALIB 8 x 256 tokens (random, seed 0), damp 0.01, block 128, act-order" &&
    grep -q '^pq quantize: memory estimate [0-9.]* MiB: ' "$TMP/q_err" &&
    [ "$(grep -c '^pq quantize: layer [1-5]/5 rel sq err [0-9.e+-]*, output rel sq err [0-9.e+-]*$' "$TMP/q_err")" -eq 5 ] &&
    grep -q '^pq quantize: peak memory [0-9.]* MiB (estimate [0-9.]* MiB, ratio [0-9.]*)$' "$TMP/q_err" &&
    ok "stderr: the configuration, the memory estimate, one line per layer with its output error, the peak" ||
    fail "stderr: $(cat "$TMP/q_err")"
sha=$(sha256sum "$CALIB" | cut -d' ' -f1)
j=$out/pq.json
[ "$(jq -r .method "$j")" = gptq ] && [ "$(jq -r .calibration.sha256 "$j")" = "$sha" ] &&
    [ "$(jq .calibration.nsamples "$j")" = 8 ] && [ "$(jq .calibration.seqlen "$j")" = 256 ] &&
    [ "$(jq .calibration.seed "$j")" = 0 ] && [ "$(jq .gptq.damp "$j")" = 0.01 ] &&
    [ "$(jq '[.layers[] | select(.output_rel_sq_error > 0 and .output_rel_sq_error < 1)] | length' "$j")" = 35 ] &&
    [ "$(jq '.memory.peak_rss_bytes > 0 and .memory.estimate_bytes > 0 and .seconds.total > 0 and .threads > 0' \
        "$out/pq-run.json")" = true ] && [ "$(jq 'has("memory") or has("seconds") or has("threads")' "$j")" = false ] &&
    ok "pq.json: method, calibration sha256 $sha, N, L, seed, damp, 35 per-linear output errors; pq-run.json: memory, seconds, threads" ||
    fail "pq.json: $(jq -c '{method, calibration, gptq, l0: .layers[0]}' "$j")"
[ "$(jq .quantization_config.config_groups.group_0.weights.num_bits "$TMP/gptq3/config.json")" = 3 ] &&
    $PQ inspect "$TMP/gptq3" --summary 2>&1 | grep -q '^quantization: w4a16 g32 sym 3-bit' &&
    ok "--bits 3: num_bits 3 in config.json, inspect shows it" || fail "--bits 3: $($PQ inspect "$TMP/gptq3" --summary 2>&1)"

# ---- determinism -----------------------------------------------------------------
quantize -o "$TMP/again" $G --group 32 --bits 4 --threads 1 && same_output "$out" "$TMP/again" &&
    ok "a second run with --threads 1: byte-identical files" || fail "rerun differs: $(cat "$TMP/q_err")"
A="--group 32 --asym --act-order --no-static-groups"
quantize -o "$TMP/ao" $G $A --threads 2 && quantize -o "$TMP/ao1" $G $A --threads 1 && same_output "$TMP/ao" "$TMP/ao1" &&
    ok "act-order asym: --threads 1 and 2 byte-identical" || fail "act-order threads: $(cat "$TMP/q_err")"
cfg=$TMP/ao/config.json
hdr=$(od -An -t u8 -N 8 "$TMP/ao/model.safetensors" | tr -d ' ')
names=$(dd if="$TMP/ao/model.safetensors" bs=1 skip=8 count="$hdr" 2>/dev/null)
[ "$(jq -r .quantization_config.config_groups.group_0.weights.actorder "$cfg")" = group ] &&
    echo "$names" | grep -q '"model.layers.0.mlp.down_proj.weight_g_idx":{"dtype":"I32","shape":\[172\]' &&
    p=$(ppl_of "$TMP/ao") && [ -n "$p" ] &&
    ok "act-order: actorder \"group\", weight_g_idx I32 [in] per linear, loads (PPL $p)" ||
    fail "act-order checkpoint: $(jq -c .quantization_config.config_groups.group_0.weights "$cfg") $(cat "$TMP/ppl_err")"
quantize -o "$TMP/sg" $G --group 32 --act-order --static-groups &&
    [ "$(jq -r .quantization_config.config_groups.group_0.weights.actorder "$TMP/sg/config.json")" = weight ] &&
    ! grep -q weight_g_idx "$TMP/sg/model.safetensors" && [ -n "$(ppl_of "$TMP/sg")" ] &&
    ok "act-order + static groups: actorder \"weight\", no g_idx" || fail "static groups: $(cat "$TMP/q_err")"
# the default is act-order with static groups (llm-compressor's actorder "static"); --no-act-order
# --no-static-groups is the natural order with group scales on the fly (other codes)
[ "$(jq -r .quantization_config.config_groups.group_0.weights.actorder "$out/config.json")" = weight ] &&
    [ "$(jq '.gptq.act_order and .gptq.static_groups' "$out/pq.json")" = true ] &&
    quantize -o "$TMP/nat" $G --group 32 --no-act-order --no-static-groups &&
    head -n 1 "$TMP/q_err" | grep -q "damp 0.01, block 128\(, bf16 products\)\{0,1\}\$" &&
    [ "$(jq -r .quantization_config.config_groups.group_0.weights.actorder "$TMP/nat/config.json")" = null ] &&
    [ "$(jq '.gptq.act_order or .gptq.static_groups' "$TMP/nat/pq.json")" = false ] &&
    ! cmp -s "$TMP/nat/model.safetensors" "$out/model.safetensors" &&
    ok "default: act-order + static groups (actorder \"weight\"); --no-act-order --no-static-groups: natural order, other codes" ||
    fail "gptq defaults: $(jq -c .gptq "$out/pq.json" "$TMP/nat/pq.json") $(head -n 1 "$TMP/q_err")"
quantize -o "$TMP/ts" $G --group 32 --true-sequential && ! cmp -s "$TMP/ts/model.safetensors" "$out/model.safetensors" &&
    [ "$(jq .gptq.true_sequential "$TMP/ts/pq.json")" = true ] && [ -n "$(ppl_of "$TMP/ts")" ] &&
    ok "--true-sequential: other codes, recorded in pq.json" || fail "true-sequential: $(cat "$TMP/q_err")"

# --calib-precision bf16: the block passes multiply BF16-rounded inputs (AMX tiles where the CPU has
# them): other codes than f32's, as good a model (PPL within 2% of the f32 run's on the fixture),
# recorded in pq.json and the configuration line (f32 in neither), byte-identical for --threads 1 and
# 2; auto (the default) is bf16 on a CPU with AMX tiles (pq ppl's engine says "+amx") and f32
# elsewhere (also where PQ_ISA=avx512 turns the tiles off); a resume with the other precision is
# refused (the journal binds it); an uncalibrated method refuses the flag
B="$G --group 32 --bits 4"
if quantize -o "$TMP/f32" $B --calib-precision f32 && ! head -n 1 "$TMP/q_err" | grep -q bf16 &&
    quantize -o "$TMP/bf" $B --calib-precision bf16 &&
    head -n 1 "$TMP/q_err" | grep -q "calibration $CALIB 8 x 256 tokens (random, seed 0), damp .*, bf16 products\$" &&
    [ "$(jq -r .calibration.precision "$TMP/bf/pq.json")" = bf16 ] &&
    [ "$(jq -r .calibration.precision "$TMP/f32/pq.json")" = null ] &&
    ! cmp -s "$TMP/bf/model.safetensors" "$TMP/f32/model.safetensors" &&
    pb=$(ppl_of "$TMP/bf") && pf=$(ppl_of "$TMP/f32") && within "$pb" "$pf" 2; then
    ok "--calib-precision bf16: other codes, PPL $pb within 2% of f32's $pf, recorded in pq.json and stderr"
else
    fail "--calib-precision bf16: $(head -n 1 "$TMP/q_err") $(jq -c .calibration "$TMP/bf/pq.json" 2>&1) ppl '$pb' vs '$pf'"
fi
quantize -o "$TMP/bf1" $B --calib-precision bf16 --threads 1 && same_output "$TMP/bf" "$TMP/bf1" &&
    ok "--calib-precision bf16: --threads 1 and 2 byte-identical" || fail "bf16 threads: $(cat "$TMP/q_err")"
engine=$($PQ ppl "$out" $PPL_ARGS 2>/dev/null | jq -r .engine)
case $engine in *+amx*) want=bf ;; *) want=f32 ;; esac
same_output "$out" "$TMP/$want" &&
    ok "default precision auto: the $want run's bytes on this CPU ($engine)" ||
    fail "auto on '$engine': not the $want run's output ($(jq -c .calibration "$out/pq.json"))"
env PQ_ISA=avx512 $PQ quantize "$FIXTURE" -o "$TMP/noamx" $B >/dev/null 2>"$TMP/q_err" &&
    same_output "$TMP/noamx" "$TMP/f32" && ok "auto with PQ_ISA=avx512 (no tiles): the f32 run's bytes" ||
    fail "auto without tiles: $(cat "$TMP/q_err") $(jq -c .calibration "$TMP/noamx/pq.json")"
o=$TMP/bf_resume
env PQ_TEST_KILL_AFTER_JOURNAL=2 $PQ quantize "$FIXTURE" -o "$o" $B --calib-precision f32 >/dev/null 2>&1
expect_fail 2 "used other inputs or flags" "--resume with --calib-precision bf16 after an f32 start" -- \
    $PQ quantize "$FIXTURE" -o "$o" $B --calib-precision bf16 --resume
expect_fail 2 "--calib-precision" "--calib-precision with rtn (uncalibrated)" -- \
    $PQ quantize "$FIXTURE" -o "$TMP/bf_rtn" --calib-precision bf16

# ---- kill and resume ------------------------------------------------------------------
# a Hessian that is not positive definite: 8 calibration tokens for 64..172 input
# columns (rank <= 8) with f32 X^T X and almost no dampening; pq raises the damp,
# warns naming the block and input, records it, and writes finite weights
if quantize -o "$TMP/lowrank" --method gptq --calib "$CALIB" --nsamples 1 --seqlen 8 --damp 1e-9 &&
    grep -q '^pq quantize: warning: model.layers.0 q/k/v input: the Hessian is not positive definite with damp 1e-09; raised to 1e-0[5-8]$' "$TMP/q_err" &&
    [ "$(jq '.gptq.damp_raised' "$TMP/lowrank/pq.json")" -gt 0 ] &&
    [ "$(jq '[.layers[] | select(.damp > 1e-9)] | length' "$TMP/lowrank/pq.json")" -gt 0 ] &&
    p=$(ppl_of "$TMP/lowrank") && [ -n "$p" ] && awk -v p="$p" 'BEGIN { exit !(p > 0 && p < 1e6) }'; then
    ok "indefinite Hessian: damp raised with a warning naming the input ($(grep -c warning "$TMP/q_err") inputs), recorded in pq.json, finite output (PPL $p)"
else
    fail "indefinite Hessian: $(grep -m2 warning "$TMP/q_err"; jq -c .gptq "$TMP/lowrank/pq.json" 2>&1)"
fi

# kill_resume NAME VAR K: killed by the hook, refused without --resume, resumed identical
kill_resume() {
    name=$1; var=$2; k=$3; o=$TMP/k_$name
    env "$var=$k" $PQ quantize "$FIXTURE" -o "$o" $G --group 32 --bits 4 >/dev/null 2>"$TMP/k_err"
    rc=$?
    if [ $rc -ne 137 ] || [ -e "$o" ] || no_leftovers "$o"; then
        fail "$name: killed run: exit $rc, $(ls -d "$o"* 2>&1)"; return
    fi
    expect_fail 2 "an interrupted run left $o.pq-tmp-" "$name: rerun without --resume refused" -- \
        $PQ quantize "$FIXTURE" -o "$o" $G --group 32 --bits 4
    if quantize -o "$o" $G --group 32 --bits 4 --resume && same_output "$out" "$o" && no_leftovers "$o"; then
        ok "$name: --resume continues ($(grep -c 'resumed)$' "$TMP/q_err") blocks re-run), byte-identical files"
    else
        fail "$name: resume: $(cat "$TMP/q_err"); $(cmp "$out/model.safetensors" "$o/model.safetensors" 2>&1)"
    fi
}
kill_resume block1 PQ_TEST_KILL_AFTER_BLOCK 1
kill_resume block3 PQ_TEST_KILL_AFTER_BLOCK 3
kill_resume journal2 PQ_TEST_KILL_AFTER_JOURNAL 2
kill_resume journal5 PQ_TEST_KILL_AFTER_JOURNAL 5

# --resume --json reports the blocks the interrupted run had finished (issue 10 item 18: it said all of them)
o=$TMP/k_json
env PQ_TEST_KILL_AFTER_JOURNAL=2 $PQ quantize "$FIXTURE" -o "$o" $G --group 32 >/dev/null 2>&1
rb=$($PQ quantize "$FIXTURE" -o "$o" $G --group 32 --resume --json 2>/dev/null | jq .resumed_blocks)
[ "$rb" = 2 ] && ok "--resume --json: resumed_blocks 2 after a kill with 2 of 5 blocks journaled" ||
    fail "--resume --json: resumed_blocks '$rb' (want 2)"

# a resume whose inputs changed is refused: the journal binds config.json and the tokenizer files too
# (issue 10 item 3: a changed rms_norm_eps or a cut merges list resumed with layers of two models mixed)
S3=$TMP/src3
mkdir -p "$S3" && cp "$FIXTURE"/*.json "$FIXTURE/model.safetensors" "$S3/"
o=$TMP/k_inputs
env PQ_TEST_KILL_AFTER_JOURNAL=2 $PQ quantize "$S3" -o "$o" $G --group 32 >/dev/null 2>&1
sed -i 's/"rms_norm_eps": 1e-05/"rms_norm_eps": 1e-06/' "$S3/config.json"
expect_fail 2 "used other inputs or flags" "--resume after config.json changed (rms_norm_eps)" -- \
    $PQ quantize "$S3" -o "$o" $G --group 32 --resume
cp "$FIXTURE/config.json" "$S3/"
jq -c '.model.merges |= .[0:100]' "$FIXTURE/tokenizer.json" >"$S3/tokenizer.json"
expect_fail 2 "used other inputs or flags" "--resume after the tokenizer's merges were cut" -- \
    $PQ quantize "$S3" -o "$o" $G --group 32 --resume
cp "$FIXTURE/tokenizer.json" "$S3/"
quantize_src() { $PQ quantize "$S3" "$@" >"$TMP/q_out" 2>"$TMP/q_err"; }
quantize_src -o "$o" $G --group 32 --resume && grep -q "resuming .*: 2 of 5 blocks done" "$TMP/q_err" &&
    quantize_src -o "$o.ref" $G --group 32 && same_output "$o" "$o.ref" &&
    ok "with the inputs restored, the same --resume continues to the uninterrupted run's files" ||
    fail "resume with restored inputs: $(cat "$TMP/q_err")"

# a real kill -9 at an arbitrary moment of a longer run (64 windows): as soon as the run reports block k
# (k random in 1..4) on stderr, read through a FIFO, so the kill lands wherever the run has got to by then
# (no timer: the test waits on the run's own output)
R="--nsamples 64 --seqlen 256"
quantize -o "$TMP/rk_ref" $G $R --group 32
k=$(($(od -An -N1 -tu1 /dev/urandom) % 4 + 1))
mkfifo "$TMP/progress"
$PQ quantize "$FIXTURE" -o "$TMP/rk" $G $R --group 32 >/dev/null 2>"$TMP/progress" &
pid=$!
while IFS= read -r line; do
    case $line in *"layer $k/5 "*) kill -9 $pid 2>/dev/null; break ;; esac
done <"$TMP/progress"
wait $pid 2>/dev/null
if [ -e "$TMP/rk" ]; then
    echo "skip - kill -9 once block $k was reported: the run had already finished"
elif $PQ quantize "$FIXTURE" -o "$TMP/rk" $G $R --group 32 --resume >"$TMP/q_out" 2>"$TMP/q_err" &&
    same_output "$TMP/rk_ref" "$TMP/rk" && no_leftovers "$TMP/rk"; then
    ok "kill -9 once block $k was reported, then --resume: byte-identical ($(grep -c 'resumed)$' "$TMP/q_err") blocks re-run)"
else
    fail "kill -9 once block $k was reported: resume: $(cat "$TMP/q_err")"
fi

# other flags on resume refused; --force starts over; a locked leftover refused
o=$TMP/k_flags
env PQ_TEST_KILL_AFTER_JOURNAL=2 $PQ quantize "$FIXTURE" -o "$o" $G --group 32 --bits 4 >/dev/null 2>&1
expect_fail 2 "used other inputs or flags" "--resume with another --damp" -- \
    $PQ quantize "$FIXTURE" -o "$o" $G --group 32 --bits 4 --damp 0.02 --resume
leftover=$(ls -d "$o".pq-tmp-* 2>/dev/null)
# another process holds the leftover's lock (a live run) until told to let go: synchronized on two FIFOs,
# never on a timer (the holder says it has the lock; the test says when to release it)
mkfifo "$TMP/held" "$TMP/release"
flock "$leftover" sh -c "echo locked >'$TMP/held'; cat '$TMP/release' >/dev/null" &
lockpid=$!
read -r _ <"$TMP/held"
expect_fail 2 "another pq is writing it" "--resume while another process holds the lock" -- \
    $PQ quantize "$FIXTURE" -o "$o" $G --group 32 --bits 4 --resume
expect_fail 2 "another pq is writing it" "--force while another process holds the lock" -- \
    $PQ quantize "$FIXTURE" -o "$o" $G --group 32 --bits 4 --force
echo release >"$TMP/release"
wait $lockpid
[ "$leftover" = "$(ls -d "$o".pq-tmp-* 2>/dev/null)" ] && [ -f "$leftover/pq-journal.json" ] &&
    ok "refused resumes left the interrupted run as it was" || fail "the leftover changed: $(ls -la "$o".pq-tmp-* 2>&1)"
quantize -o "$o" $G --group 32 --bits 4 --damp 0.02 --force && [ "$(jq .gptq.damp "$o/pq.json")" = 0.02 ] &&
    no_leftovers "$o" && ok "--force discards the interrupted run and starts over" || fail "--force: $(cat "$TMP/q_err")"
quantize -o "$TMP/fresh" $G --group 32 --bits 4 --resume && grep -q 'no interrupted run of .* to continue; starting' "$TMP/q_err" &&
    same_output "$out" "$TMP/fresh" && ok "--resume with nothing to resume starts (same files)" ||
    fail "--resume fresh: $(cat "$TMP/q_err")"

# a runtime failure after the start keeps the finished blocks: a NaN in one weight of layer 2
mkdir -p "$TMP/nan"
cp "$FIXTURE"/*.json "$FIXTURE/model.safetensors" "$TMP/nan/"
st=$TMP/nan/model.safetensors
hlen=$(od -An -t u8 -N 8 "$st" | tr -d ' ')
begin=$(dd if="$st" bs=1 skip=8 count="$hlen" 2>/dev/null |
    sed 's/.*"model\.layers\.2\.mlp\.up_proj\.weight":{[^}]*"data_offsets":\[\([0-9]*\),.*/\1/')
printf '\000\176' | dd of="$st" bs=1 seek=$((8 + hlen + begin + 2 * 77)) conv=notrunc 2>/dev/null
$PQ quantize "$TMP/nan" -o "$TMP/nanout" $G --group 32 >"$TMP/out" 2>"$TMP/err"
rc=$?
last=$(tail -n 1 "$TMP/err")
kept=$(ls -d "$TMP"/nanout.pq-tmp-* 2>/dev/null)
if [ $rc -eq 1 ] && printf '%s' "$last" | grep -q "nanout: 2 of 5 blocks done are kept in $kept (fix the cause, then --resume): .*model.layers.2.mlp.up_proj.weight: weight \[1, 13\] is NaN" &&
    [ ! -e "$TMP/nanout" ] && [ -f "$kept/pq-journal.json" ] && [ -f "$kept/model.safetensors.tmp" ]; then
    ok "a NaN weight in layer 2: exit 1, blocks 0-1 kept with their journal: $last"
else
    fail "NaN in layer 2: exit $rc, $(cat "$TMP/err"); $(ls -la "$kept" 2>&1)"
fi

# ---- bad inputs ------------------------------------------------------------------------
B=$TMP/bad
printf 'Once upon a time.\n' >"$TMP/short.txt"
expect_fail 2 "--method gptq needs calibration text: --calib FILE" "no --calib" -- $PQ quantize "$FIXTURE" -o "$B" --method gptq
expect_fail 1 "/nonexistent.txt: cannot open" "missing calibration file" -- \
    $PQ quantize "$FIXTURE" -o "$B" --method gptq --calib /nonexistent.txt
expect_fail 1 "fewer than one calibration window of 255" "calibration text shorter than one window" -- \
    $PQ quantize "$FIXTURE" -o "$B" --method gptq --calib "$TMP/short.txt" --seqlen 256
expect_fail 2 "--nsamples 0: not in 1..1048576" "--nsamples 0" -- $PQ quantize "$FIXTURE" -o "$B" $G --nsamples 0
expect_fail 2 "--seqlen 0: not in 2..16777216" "--seqlen 0" -- $PQ quantize "$FIXTURE" -o "$B" $G --seqlen 0
expect_fail 2 "--damp 0: not in [1e-12, 100]" "--damp 0" -- $PQ quantize "$FIXTURE" -o "$B" $G --damp 0
expect_fail 2 "--block-size 0: not in 1..65536" "--block-size 0" -- $PQ quantize "$FIXTURE" -o "$B" $G --block-size 0
expect_fail 2 "--bits 9: not in 2..8" "--bits 9" -- $PQ quantize "$FIXTURE" -o "$B" $G --bits 9
expect_fail 2 "--bits 3: only the weight-only integer schemes" "--bits with w8a8" -- \
    $PQ quantize "$FIXTURE" -o "$B" --scheme w8a8 --bits 3
expect_fail 2 "--method gptq --scheme fp8: GPTQ writes the weight-only integer schemes" "gptq fp8" -- \
    $PQ quantize "$FIXTURE" -o "$B" $G --scheme fp8
expect_fail 2 "--act-order: not a flag of --method rtn (it is one of gptq, awq+gptq)" "--act-order with rtn" -- \
    $PQ quantize "$FIXTURE" -o "$B" --act-order
expect_fail 2 "--resume: not a flag of --method rtn (it is one of gptq, awq, awq+gptq, smoothquant, fp8)" "--resume with rtn" -- \
    $PQ quantize "$FIXTURE" -o "$B" --resume
# a flag the method does not take is a usage error naming it and the method, whatever its value
# (it used to be guessed by comparing with the default: --damp 0.5 and --block-size 7 passed with rtn)
expect_fail 2 "--damp: not a flag of --method rtn (it is one of gptq, awq+gptq)" "--damp with rtn" -- \
    $PQ quantize "$FIXTURE" -o "$B" --method rtn --damp 0.5
expect_fail 2 "--block-size: not a flag of --method rtn (it is one of gptq, awq+gptq)" "--block-size with rtn" -- \
    $PQ quantize "$FIXTURE" -o "$B" --method rtn --block-size 7
expect_fail 2 "--damp: not a flag of --method awq (it is one of gptq, awq+gptq)" "--damp 0.01 (its default) with awq" -- \
    $PQ quantize "$FIXTURE" -o "$B" --method awq --calib "$CALIB" --damp 0.01
expect_fail 2 "--device: not a flag of --method rtn" "--device with rtn (it runs on the CPU)" -- \
    $PQ quantize "$FIXTURE" -o "$B" --device cpu
expect_fail 2 "--calib-mode: 'shuffle' is not one of the choices" "bad --calib-mode" -- \
    $PQ quantize "$FIXTURE" -o "$B" $G --calib-mode shuffle
expect_fail 2 "--seed -1: not in 0..2147483647" "negative --seed" -- $PQ quantize "$FIXTURE" -o "$B" $G --seed -1
# --device cuda: block passes and Hessians on the GPU when there is one (within
# 2% of the CPU run's PPL: FP16 activations), else one line and exit 1
if $PQ quantize "$FIXTURE" -o "$TMP/cuda" $G --group 32 --device cuda >"$TMP/q_out" 2>"$TMP/q_err"; then
    pc=$(ppl_of "$TMP/cuda"); p4=$(ppl_of "$TMP/gptq4")
    [ "$(jq -r .gptq.hessian_device "$TMP/cuda/pq.json")" = cuda ] &&
        [ "$(jq -r .gptq.forward_device "$TMP/cuda/pq.json")" = cuda ] &&
        [ "$(jq -r .gptq.forward_cpu_fallbacks "$TMP/cuda/pq.json")" = 0 ] &&
        [ "$(jq -r .gptq.solve_device "$TMP/cuda/pq.json")" = cuda ] &&
        grep -q '^pq quantize: peak memory .*; GPU memory in use at most [0-9.]* MiB, estimate [0-9.]* MiB$' "$TMP/q_err" &&
        [ "$(jq '.memory.gpu_estimate_bytes > 0' "$TMP/cuda/pq-run.json")" = true ] &&
        awk -v a="$pc" -v b="$p4" 'BEGIN { exit !(a > 0 && a < 1.02 * b && a > b / 1.02) }' &&
        ok "--device cuda: block passes, X^T X and the GPTQ solve on the GPU, GPU memory printed, PPL $pc vs CPU $p4" ||
        fail "--device cuda: PPL '$pc' vs '$p4', $(jq -c .gptq "$TMP/cuda/pq.json") $(cat "$TMP/q_err")"
elif [ $? -eq 1 ] && tail -n 1 "$TMP/q_err" | grep -q "^pq quantize: .*--device cuda: no usable CUDA device (" &&
    no_leftovers "$TMP/cuda" && [ ! -e "$TMP/cuda" ]; then
    ok "--device cuda without a GPU: exit 1, $(tail -n 1 "$TMP/q_err")"
else
    fail "--device cuda: $(cat "$TMP/q_err")"
fi
[ ! -e "$B" ] && no_leftovers "$B" && ok "bad inputs leave nothing behind" || fail "bad inputs left $(ls -d "$B"*)"
$PQ quantize --help >"$TMP/help" && grep -q -- '--calib FILE' "$TMP/help" &&
    grep -q -- '--nsamples N .*(default: 128, valid 1\.\.1048576)' "$TMP/help" &&
    grep -q -- '--seqlen L .*(default: 2048, valid 2\.\.16777216)' "$TMP/help" &&
    grep -q -- '--damp X .*(default: 0.01, valid \[1e-12, 100\])' "$TMP/help" &&
    grep -q -- '--block-size N .*(default: 128, valid 1\.\.65536)' "$TMP/help" && grep -q -- '--calib-mode random|concat' "$TMP/help" &&
    ok "pq quantize --help lists the GPTQ flags with defaults" || fail "--help: $(cat "$TMP/help")"
finish
