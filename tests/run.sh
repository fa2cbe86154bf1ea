#!/bin/sh
# Runs every test: unit/golden binaries, CLI scripts, fuzz corpus replays.
# Each prints "ok - ...", "FAIL - ..." or "skip - ..." lines; a binary that
# exits non-zero without printing a FAIL line (a crash), or prints no line at
# all, counts as one failure.
# Ends with the line "N passed, N failed".
set -u
BUILD=${BUILD:-build}
CLI=${CLI:-tests/cli}
log=$(mktemp)
passed=0; failed=0; skipped=0

run_one() { # name, command...
    name=$1; shift
    start=$(date +%s)
    "$@" >"$log" 2>&1
    rc=$?
    p=$(grep -c '^ok - ' "$log"); f=$(grep -c '^FAIL - ' "$log"); s=$(grep -c '^skip - ' "$log")
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1; echo "FAIL - $name exited with status $rc" >>"$log"
    elif [ $((p + f + s)) -eq 0 ]; then # a test that checked nothing cannot fail: that is a failure
        f=1; echo "FAIL - $name reported no checks" >>"$log"
    fi
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    printf '%-40s %4d ok %3d failed %3d skipped  %3ss\n' "$name" "$p" "$f" "$s" $(( $(date +%s) - start ))
    if [ "$f" -gt 0 ]; then grep -v '^ok - ' "$log" | sed 's/^/    /' | tail -40; fi
    if [ -n "${VERBOSE:-}" ]; then sed 's/^/    /' "$log"; fi
}

for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "$(basename "$t")" "$t"
done
for t in "$CLI"/test_*.sh; do
    [ -f "$t" ] || continue
    run_one "$(basename "$t")" sh "$t"
done
for r in "$BUILD"/fuzz/replay_fuzz_*; do
    [ -x "$r" ] || continue
    target=${r##*/replay_}
    run_one "$target (corpus)" "$r" "tests/fuzz/corpus/$target"
done
rm -f "$log"
echo "($skipped skipped)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
