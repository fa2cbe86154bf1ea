#!/bin/sh
# tools/accuracy_table.sh — issue 12's accuracy table: W4 g32 sym by RTN,
# GPTQ, AWQ and AWQ+GPTQ, each with and without --rotate hadamard, and
# GPTQ's mixed plan at the bits of W4 g32 sym (--target-bpw, default
# menu), with and without the rotation; each scored against the source
# model (PPL, KL divergence, top-1 agreement on the same windows).
#
#   sh tools/accuracy_table.sh fixture [ROW...]   # stories260K, golden protocol
#   sh tools/accuracy_table.sh smollm2 [ROW...]   # SmolLM2-135M F16, llama.cpp protocol
#
# ROWs (default all, in this order): rtn gptq awq awq+gptq rtn-rot gptq-rot
# awq-rot awq+gptq-rot bpw bpw-rot. Prints one Markdown table row per ROW
# as soon as it is measured.
#
# fixture: ../shared/fixtures/stories260K; calibration c4_validation_2k.txt,
# 32 windows of 512 tokens, seed 0; scored with the golden protocol (ctx 256,
# BOS, every window) on tinystories_val_prefix.txt (PPL, KLD, top-1) and on
# the first 200 KB of wiki.test.raw (PPL).
# smollm2: SmolLM2-135M-Instruct's GGUF (tools/get_smollm2.sh) converted to
# FP16; calibration 16 windows of 512 tokens, seed 0, AWQ's searches on 1024
# tokens (tools/demo.sh's settings); scored on the first WINDOWS (default 8)
# windows of wiki.test.raw, llama.cpp protocol, ctx 512.
# PRECISION (unset: pq's default, auto) is given to the calibrated rows as
# --calib-precision (f32 or bf16 to compare the two on one machine); its
# work files go to MODE-PRECISION.
# The bpw rows aim at the bits per weight the rtn row measured (its result
# is reused, or made first). Work files go to $PQ_CACHE/accuracy_table/MODE
# (default ~/.cache/pq); a row's output directory is replaced when the row
# is measured again. Nothing is written into the clone.
set -eu
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared}
PQ=${PQ:-build/pq}
MODE=${1:-}
[ $# -gt 0 ] && shift
ROOT=${PQ_CACHE:-$HOME/.cache/pq}/accuracy_table
WORK=$ROOT/$MODE${PRECISION:+-$PRECISION}
C4=$SHARED/data/c4_validation_2k.txt
WIKI=$SHARED/data/wiki.test.raw

say() { echo "accuracy_table: $*" >&2; }
# field NAME < one-line JSON: the value of the number or string field NAME
field() { sed -n "s/.*\"$1\": \"\{0,1\}\([^,\"}]*\).*/\1/p"; }

PREC=${PRECISION:+--calib-precision $PRECISION}
case "$MODE" in
fixture)
    SRC=$SHARED/fixtures/stories260K
    CAL="--calib $C4 --nsamples 32 --seqlen 512 --seed 0 --device cpu $PREC"
    AWQ_CAL=$CAL
    mkdir -p "$WORK"
    if [ ! -f "$WORK/wiki200k.txt" ]; then
        head -c 200000 "$WIKI" >"$WORK/wiki200k.tmp"
        mv "$WORK/wiki200k.tmp" "$WORK/wiki200k.txt"
    fi
    ;;
smollm2)
    SRC=$ROOT/smollm2-f16
    CAL="--calib $C4 --nsamples 16 --seqlen 512 --seed 0 --device cpu $PREC"
    AWQ_CAL="$CAL --search-tokens 1024"
    mkdir -p "$WORK"
    if [ ! -d "$SRC" ]; then
        say "converting SmolLM2 to FP16 at $SRC"
        $PQ convert "$(sh tools/get_smollm2.sh)" -o "$SRC" --dtype f16 >&2
    fi
    ;;
*)
    echo "usage: sh tools/accuracy_table.sh fixture|smollm2 [ROW...]" >&2
    exit 2
    ;;
esac

# score DIR TEXT: pq ppl's JSON line for DIR on TEXT, with the KL from SRC
score() {
    say "scoring $(basename "$1") on $(basename "$2")"
    if [ "$MODE" = fixture ]; then
        $PQ ppl "$1" --text "$2" --protocol gptq --bos --ctx 256 --device cpu --kl-base "$SRC" --json
    else
        $PQ ppl "$1" --text "$2" --protocol llamacpp --ctx 512 --max-windows "${WINDOWS:-8}" \
            --device cpu --kl-base "$SRC" --json
    fi
}

# quantize NAME FLAGS...: writes $WORK/NAME and its JSON line $WORK/NAME.q.json
quantize() {
    name=$1
    shift
    say "quantizing $name: $*"
    rm -rf "${WORK:?}/$name" "${WORK:?}/$name".pq-tmp-* # and what an interrupted run of the table left
    $PQ quantize "$SRC" -o "$WORK/$name" "$@" --json >"$WORK/$name.q.tmp"
    mv "$WORK/$name.q.tmp" "$WORK/$name.q.json"
}

W4="--scheme w4a16 --group 32 --sym"
# row NAME: quantize and score one row, print it ($W4, $CAL, $rot split on purpose)
# shellcheck disable=SC2086
row() {
    rot=""
    label=—
    case "$1" in *-rot) rot="--rotate hadamard" label=hadamard ;; esac
    weights="W4 g32 sym"
    case "$1" in
    rtn | rtn-rot) method=RTN; quantize "$1" $W4 --method rtn $rot ;;
    gptq | gptq-rot) method=GPTQ; quantize "$1" $W4 --method gptq $CAL $rot ;;
    awq | awq-rot) method=AWQ; quantize "$1" $W4 --method awq $AWQ_CAL $rot ;;
    awq+gptq | awq+gptq-rot) method=AWQ+GPTQ; quantize "$1" $W4 --method awq+gptq $AWQ_CAL $rot ;;
    bpw | bpw-rot)
        [ -f "$WORK/rtn.q.json" ] || quantize rtn $W4 --method rtn
        target=$(field bits_per_weight <"$WORK/rtn.q.json")
        weights="mixed, \`--target-bpw $target\`"
        method=GPTQ
        quantize "$1" --method gptq --target-bpw "$target" $CAL $rot
        ;;
    *)
        echo "accuracy_table: unknown row $1" >&2
        exit 2
        ;;
    esac
    q=$WORK/$1.q.json
    bpw=$(field bits_per_weight <"$q")
    secs=$(field seconds <"$q")
    if [ "$MODE" = fixture ]; then
        a=$(score "$WORK/$1" "$SHARED/data/tinystories_val_prefix.txt")
        b=$(score "$WORK/$1" "$WORK/wiki200k.txt")
    else
        a=$(score "$WORK/$1" "$WIKI")
        b=""
    fi
    echo "$a" >"$WORK/$1.ppl.json"
    echo "$b" >"$WORK/$1.wiki.json"
    printf '%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s\n' "$weights" "$method" "$label" "$bpw" \
        "$(echo "$a" | field ppl)" "$(echo "$a" | field ppl_stderr)" "$(echo "$a" | field ppl_base)" \
        "$(echo "$a" | field kld_mean)" "$(echo "$a" | field kld_p99_9)" "$(echo "$a" | field top1_agreement)" \
        "$(echo "$b" | field ppl)" "$(echo "$b" | field ppl_base)" "$secs" |
        awk -F'|' '{
            wiki = ($11 == "") ? "" : sprintf(" %.4f | %+.2f%% |", $11, 100 * ($11 / $12 - 1))
            printf "| %s | %s | %s | %.4f | %.4f ± %.4f | %+.2f%% | %.5f | %.4f | %.2f%% |%s %.1f s |\n",
                $1, $2, $3, $4, $5, $6, 100 * ($5 / $7 - 1), $8, $9, 100 * $10, wiki, $13
        }'
}

ROWS=${*:-rtn gptq awq awq+gptq rtn-rot gptq-rot awq-rot awq+gptq-rot bpw bpw-rot}
for r in $ROWS; do
    row "$r"
done
