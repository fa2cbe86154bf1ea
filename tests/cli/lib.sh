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

finish() { [ "$failures" -eq 0 ]; exit $?; }
