#!/bin/sh
# tests/output_matrix.sh — the fixed matrix of schemes x methods on the
# fixture, one line per case: the SHA-256 of model.safetensors, config.json
# and pq.json without the fields that vary between runs (seconds, memory,
# threads). Used to prove a refactor leaves every packed output bit for bit
# as it was: run it before and after and diff the two listings
# (tests/data/output_matrix.txt is the listing of the current code; the
# test tests/cli/test_cli_matrix.sh compares against it).
#
# Usage: sh tests/output_matrix.sh [PQ [PREFIX]] > listing   (PREFIX: only the
# cases whose name starts with it)
set -u
PQ=${1:-build/pq}
ONLY=${2:-}
SHARED=${PQ_SHARED:-../shared}
M=$SHARED/fixtures/stories260K
CALIB=$SHARED/data/c4_validation_2k.txt
C="--calib $CALIB --nsamples 8 --seqlen 128 --device cpu" # the listing is the CPU's (a GPU run differs by rounding)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pq-matrix.XXXXXX")
trap 'rm -rf "$TMP"' EXIT INT TERM

one() { # name, pq quantize flags...
    name=$1; shift
    case $name in "$ONLY"*) ;; *) return 0 ;; esac
    if "$PQ" quantize "$M" -o "$TMP/$name" --threads 2 "$@" >/dev/null 2>"$TMP/err"; then
        s=$(sha256sum "$TMP/$name/model.safetensors" | cut -c1-16)
        c=$(sha256sum "$TMP/$name/config.json" | cut -c1-16)
        j=$(jq -S 'del(.seconds, .memory, .threads, .source.path, .calibration.path, .scales.file)' \
            "$TMP/$name/pq.json" | sha256sum | cut -c1-16)
        echo "$name weights $s config $c pq.json $j"
    else
        echo "$name FAILED: $(tail -n 1 "$TMP/err")"
    fi
    rm -rf "$TMP/$name"
}

one rtn-w4-g128-sym   --scheme w4a16 --group 128
one rtn-w4-g32-asym   --scheme w4a16 --group 32 --asym
one rtn-w4-chan-sym   --scheme w4a16 --group channel
one rtn-w3-g32-sym    --scheme w4a16 --group 32 --bits 3
one rtn-w8a16         --scheme w8a16
one rtn-w8a8          --scheme w8a8
one rtn-fp8           --scheme fp8
one rtn-fp8-dyn-t     --scheme fp8-dynamic --fp8-scale tensor
one gptq-w4-g32       --method gptq $C --group 32
one gptq-w4-g32-nat   --method gptq $C --group 32 --no-act-order --no-static-groups
one gptq-w4-g32-ao    --method gptq $C --group 32 --asym --act-order --no-static-groups
one gptq-w4-chan-ts   --method gptq $C --group channel --true-sequential --static-groups --no-act-order
one awq-w4-g32        --method awq $C --group 32
one awq-w4-g128-asym  --method awq $C --group 128 --asym
one awqgptq-w4-g32    --method awq+gptq $C --group 32
one sq-w8a8-static    --method smoothquant $C --act-scale static
one sq-w8a8-dyn       --method smoothquant $C --alpha 0.75
one fp8-static        --method fp8 $C
if [ -z "$ONLY" ] && "$PQ" calibrate "$M" --method awq $C --group 32 -o "$TMP/awq.scales" >/dev/null 2>"$TMP/err"; then
    one awq-from-scales --scales "$TMP/awq.scales" --group 32
elif [ -z "$ONLY" ]; then
    echo "awq-from-scales FAILED: $(tail -n 1 "$TMP/err")"
fi
