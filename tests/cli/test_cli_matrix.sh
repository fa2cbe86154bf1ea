#!/bin/sh
# The packed outputs of RTN on the fixture, bit for bit as recorded in
# tests/data/output_matrix.txt (tests/output_matrix.sh). RTN's codes do not
# depend on BLAS or the CPU's instruction set, so its rows must match on any
# machine; the calibrated rows go through the forward pass and X^T X (whose
# OpenBLAS kernels, in attention and the Hessians, differ per CPU) and are
# compared by tests/output_matrix.sh on one machine, before and after a
# change (the recorded ones: the 2-vCPU Xeon with AVX-512).
. tests/cli/lib.sh

sh tests/output_matrix.sh "$PQ" rtn >"$TMP/now" 2>&1
grep '^rtn-' tests/data/output_matrix.txt >"$TMP/want"
while read -r name rest; do
    got=$(grep "^$name " "$TMP/now")
    [ "$got" = "$name $rest" ] && ok "$name: weights, config.json and pq.json as recorded" ||
        fail "$name: got '$got', recorded '$name $rest'"
done <"$TMP/want"
[ -s "$TMP/want" ] || fail "no rtn rows in tests/data/output_matrix.txt"
finish
