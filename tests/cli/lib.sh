# Shared helpers for the CLI tests (sourced). Each check prints one
# "ok - ..." or "FAIL - ..." line; tests/run.sh counts them.
PQ=${PQ:-build/pq}
SHARED=${PQ_SHARED:-../shared}
FIXTURE=$SHARED/fixtures/stories260K
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pq-cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
failures=0

ok() { echo "ok - $*"; }
fail() { echo "FAIL - $*"; failures=$((failures + 1)); }

# expect_fail CODE NEEDLE DESCRIPTION -- command...
# The command must exit with CODE (not crash) and end its stderr with one
# error line that contains NEEDLE (a first line may echo the configuration).
expect_fail() {
    code=$1; needle=$2; what=$3; shift 4
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    last=$(tail -n 1 "$TMP/err")
    nlines=$(wc -l <"$TMP/err")
    if [ "$rc" -eq "$code" ] && [ "$nlines" -le 2 ] && printf '%s' "$last" | grep -qF -- "$needle"; then
        ok "$what: exit $rc, $last"
    else
        fail "$what: exit $rc (want $code), stderr: $(head -c 400 "$TMP/err")"
    fi
}

no_leftovers() { [ -z "$(ls -d "$1".pq-tmp-* "$1".pq-old-* 2>/dev/null)" ]; }
# same_output A B: every file byte-identical (pq.json included), but pq-run.json (timings, memory, threads)
same_output() {
    for f in model.safetensors config.json tokenizer.json tokenizer_config.json pq.json; do
        cmp -s "$1/$f" "$2/$f" || return 1
    done
    [ -f "$1/pq-run.json" ] && [ -f "$2/pq-run.json" ]
}

# ppl_of MODEL: pq ppl with the script's $PPL_ARGS (which hold --json) -> the PPL (empty on failure; stderr in
# $TMP/ppl_err)
ppl_of() { $PQ ppl "$1" $PPL_ARGS 2>"$TMP/ppl_err" | sed -n 's/.*"ppl": \([0-9.e+-]*\),.*/\1/p'; }
# within A B PCT: |A/B - 1| <= PCT/100
within() { awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { r = a / b - 1; if (r < 0) r = -r; exit !(r <= p / 100) }'; }
# less_than A B: 0 < A < B
less_than() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b + 0 && a + 0 > 0) }'; }
# quantize FLAGS...: pq quantize of the fixture (stdout in $TMP/q_out, stderr in $TMP/q_err)
quantize() { $PQ quantize "$FIXTURE" "$@" >"$TMP/q_out" 2>"$TMP/q_err"; }

finish() { [ "$failures" -eq 0 ]; exit $?; }
