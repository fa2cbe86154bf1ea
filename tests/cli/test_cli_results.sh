#!/bin/sh
# Results and flag values (issue 10): a write error on stdout is exit 1 with
# one line, for every command (item 5: `pq ppl --json > /dev/full` exited 0);
# out-of-range flag values are usage errors that give the valid range
# (item 12: --damp 1e-320 said "not a number", --ctx -1 "at most 512",
# --threads -1 / 10000 and --max-windows -1 were accepted).
. tests/cli/lib.sh

TEXT=$SHARED/data/tinystories_val_prefix.txt
CALIB=$SHARED/data/c4_validation_2k.txt
PPL="ppl $FIXTURE --text $TEXT --ctx 64 --max-windows 2 --device cpu"

# ---- item 5: stdout write errors ---------------------------------------------------------------
full() { # what, command...: stdout is /dev/full
    what=$1; shift
    "$@" >/dev/full 2>"$TMP/err"
    rc=$?
    last=$(tail -n 1 "$TMP/err")
    case $last in
    "pq "*": cannot write the result to stdout: No space left on device")
        [ "$rc" -eq 1 ] && ok "$what > /dev/full: exit 1, $last" || fail "$what > /dev/full: exit $rc, $last" ;;
    *) fail "$what > /dev/full: exit $rc (want 1), stderr: $(cat "$TMP/err")" ;;
    esac
}
full "pq ppl --json" $PQ $PPL --json
full "pq ppl" $PQ $PPL
full "pq inspect" $PQ inspect "$FIXTURE"
full "pq quantize --json" $PQ quantize "$FIXTURE" -o "$TMP/q" --json
[ -f "$TMP/q/model.safetensors" ] && ok "pq quantize: OUT complete even though its result line was lost" ||
    fail "pq quantize > /dev/full: no OUT"
full "pq calibrate --json" $PQ calibrate "$FIXTURE" -o "$TMP/s" --method fp8 --calib "$CALIB" --nsamples 2 --seqlen 64 --json
full "pq --help" $PQ --help
full "pq quantize --help" $PQ quantize --help
full "pq version" $PQ version

# ---- item 12: flag values out of range ------------------------------------------------------------
expect_fail 2 "--damp 1e-320: not in [1e-12, 100]" "--damp 1e-320 (an underflow, not 'not a number')" -- \
    $PQ quantize "$FIXTURE" -o "$TMP/b" --method gptq --calib "$CALIB" --damp 1e-320
expect_fail 2 "--damp 1e999: not in [1e-12, 100]" "--damp 1e999" -- \
    $PQ quantize "$FIXTURE" -o "$TMP/b" --method gptq --calib "$CALIB" --damp 1e999
expect_fail 2 "--ctx -1: not in 0..16777216" "--ctx -1" -- $PQ ppl "$FIXTURE" --text "$TEXT" --ctx -1
expect_fail 2 "--threads -1: not in 0..1024" "ppl --threads -1" -- $PQ ppl "$FIXTURE" --text "$TEXT" --threads -1
expect_fail 2 "--threads 10000: not in 0..1024" "ppl --threads 10000" -- $PQ ppl "$FIXTURE" --text "$TEXT" --threads 10000
expect_fail 2 "--threads 10000: not in 0..1024" "quantize --threads 10000" -- \
    $PQ quantize "$FIXTURE" -o "$TMP/b" --threads 10000
expect_fail 2 "--max-windows -1: not in 0..2147483647" "--max-windows -1" -- \
    $PQ ppl "$FIXTURE" --text "$TEXT" --max-windows -1
expect_fail 2 "--ctx 99999999999: not in 0..16777216" "--ctx past int" -- $PQ ppl "$FIXTURE" --text "$TEXT" --ctx 99999999999
expect_fail 2 "--awq-grid 0: not in 1..1000" "--awq-grid 0" -- \
    $PQ calibrate "$FIXTURE" -o "$TMP/b" --method awq --calib "$CALIB" --awq-grid 0
[ ! -e "$TMP/b" ] && ok "usage errors create nothing" || fail "usage errors left $TMP/b"
$PQ ppl --help | grep -q -- '--ctx N .*(default: 0, valid 0\.\.16777216)' &&
    $PQ ppl --help | grep -q -- '--threads N .*(default: 0, valid 0\.\.1024)' &&
    ok "pq ppl --help gives each number's valid range" || fail "ppl --help: $($PQ ppl --help)"
finish
