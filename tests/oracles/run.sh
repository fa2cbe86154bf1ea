#!/bin/sh
# make test-oracles: the checks against torch-sized references
# (tests/oracles/test_*.sh), counted like tests/run.sh; ends with one line
# "N passed, N failed".
set -u
log=$(mktemp)
passed=0; failed=0; skipped=0
for t in tests/oracles/test_*.sh; do
    start=$(date +%s)
    sh "$t" >"$log" 2>&1
    rc=$?
    p=$(grep -c '^ok - ' "$log"); f=$(grep -c '^FAIL - ' "$log"); s=$(grep -c '^skip - ' "$log")
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "FAIL - $t exited with status $rc" >>"$log"; fi
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    printf '%-40s %4d ok %3d failed %3d skipped  %3ss\n' "$(basename "$t")" "$p" "$f" "$s" $(( $(date +%s) - start ))
    sed 's/^/    /' "$log"
done
rm -f "$log"
echo "($skipped skipped)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
