#!/bin/sh
# tools/bench_compare_llmc.sh — pq side by side with llm-compressor (PyPI
# `llmcompressor`, PyTorch, CPU) on SmolLM2-135M: the second half of
# `make bench-compare` (tools/bench_compare.sh calls it and appends what it
# prints to docs/PERFORMANCE.md); alone it prints a Markdown section.
#
# The same F16 checkpoint, the same calibration windows (pq's `--calib-mode
# concat` windows of c4_validation_2k.txt, NSAMPLES x SEQLEN; tools/llmc_bench.py
# cuts the same ones for the peer) and the same scheme on both sides, THREADS
# threads each (pq --threads, torch.set_num_threads):
# (group 64: SmolLM2's hidden size, 576, is no multiple of 128)
#   rtn          W4A16 g64 sym            pq --method rtn
#   gptq         W4A16 g64 sym, act-order static, damp 0.01, block 128
#   awq          W4A16 g64 asym           pq --method awq --asym
#   smoothquant  W8A8 (per channel / per token), alpha 0.5, weights RTN
# For each: wall and CPU seconds and peak RSS of the whole process (model
# load included: /usr/bin/time), and the PPL of each output scored by
# `pq ppl --protocol llamacpp --ctx 512` on the first WINDOWS windows of
# wiki.test.raw (pq reads the peer's
# compressed-tensors output; 40 windows by default: on 8, two W8A8 outputs
# of the same method differ by their rounding noise, ~0.5%, either way). A peer job still running after LIMIT seconds is
# stopped; its per-layer rate (from the times it reached each decoder layer)
# and the total that rate projects are reported instead. A peer job that
# fails reports its error.
#
#   sh tools/bench_compare_llmc.sh
# Environment: PQ (build/pq), PQ_SHARED (../shared), PQ_CACHE (~/.cache/pq),
# PQ_VENV_ORACLES ($PQ_CACHE/venv-oracles: torch, transformers, datasets,
# llmcompressor), PQ_BENCH_F16 (an F16 checkpoint of SmolLM2; default: made
# from tools/get_smollm2.sh's GGUF), PQ_BENCH_LLMC_WINDOWS (40), PQ_BENCH_LLMC_JOBS
# ("rtn gptq awq smoothquant"), PQ_BENCH_LLMC_NSAMPLES (16),
# PQ_BENCH_LLMC_SEQLEN (512), PQ_BENCH_LLMC_THREADS (2),
# PQ_BENCH_LLMC_LIMIT (900 seconds per peer job), PQ_BENCH_LLMC_ROUNDS (1: interleaved
# rounds of both sides per job while the peer finishes; each side's fastest run is reported),
# PQ_BENCH_LLMC_PRECISION ("auto f32": pq's --calib-precision values for the calibrated jobs, one
# pq row each against the same peer runs; bf16 multiplies BF16-rounded inputs, as the peer's
# forward passes run in the checkpoint's 16-bit dtype; auto, pq's default, is bf16 on a CPU with
# AMX tiles: its row says what it resolved to),
# PQ_BENCH_LLMC_CALIB (the calibration text; default c4_validation_2k.txt).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PQ=${PQ:-$ROOT/build/pq}
SHARED=${PQ_SHARED:-$ROOT/../shared}
CACHE=${PQ_CACHE:-$HOME/.cache/pq}
PY=${PQ_VENV_ORACLES:-$CACHE/venv-oracles}/bin/python
WINDOWS=${PQ_BENCH_LLMC_WINDOWS:-40}
JOBS=${PQ_BENCH_LLMC_JOBS:-rtn gptq awq smoothquant}
N=${PQ_BENCH_LLMC_NSAMPLES:-16}
L=${PQ_BENCH_LLMC_SEQLEN:-512}
TH=${PQ_BENCH_LLMC_THREADS:-2}
LIMIT=${PQ_BENCH_LLMC_LIMIT:-900}
ROUNDS=${PQ_BENCH_LLMC_ROUNDS:-1}
PRECISIONS=${PQ_BENCH_LLMC_PRECISION:-auto f32}
CALIB=${PQ_BENCH_LLMC_CALIB:-$SHARED/data/c4_validation_2k.txt}

say() { echo "bench_compare_llmc: $*" >&2; }
die() { say "$*"; exit 1; }

[ -x "$PQ" ] || die "$PQ not built (make)"
"$PY" -c 'import torch, transformers, datasets, llmcompressor' >/dev/null 2>&1 ||
    die "no venv with torch, transformers, datasets and llmcompressor at $(dirname "$(dirname "$PY")")"
mkdir -p "$CACHE"
RUN=$(mktemp -d "$CACHE/llmc-bench.XXXXXX")
trap 'rm -rf "$RUN"' EXIT INT TERM
F16=${PQ_BENCH_F16:-}
if [ -z "$F16" ]; then
    G=$(sh "$ROOT/tools/get_smollm2.sh") || die "no SmolLM2 GGUF"
    F16=$RUN/F16
    "$PQ" convert "$G" -o "$F16" --dtype f16 >/dev/null 2>&1 || die "pq convert failed"
fi
TEXT=$RUN/text.txt
head -c $(((WINDOWS + 1) * 512 * 5)) "$SHARED/data/wiki.test.raw" >"$TEXT"

pq_flags() {
    case $1 in
        rtn) echo "--scheme w4a16 --group 64 --method rtn" ;;
        gptq) echo "--scheme w4a16 --group 64 --method gptq" ;;
        awq) echo "--scheme w4a16 --group 64 --asym --method awq" ;;
        smoothquant) echo "--scheme w8a8 --method smoothquant --alpha 0.5" ;;
        *) die "unknown job $1" ;;
    esac
}
scheme_of() {
    case $1 in
        rtn | gptq) echo "W4A16 g64 sym" ;;
        awq) echo "W4A16 g64 asym" ;;
        *) echo "W8A8" ;;
    esac
}
# whether wall time $1 is below $2
faster() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
# "wall cpu rss_mb" of a /usr/bin/time -f "%e %U %S %M" file
usage_of() { awk '{ printf "%.1f %.1f %.0f\n", $1, $2 + $3, $4 / 1024 }' "$1"; }
ppl_of() {
    "$PQ" ppl "$1" --text "$TEXT" --protocol llamacpp --ctx 512 --max-windows "$WINDOWS" --threads "$TH" \
        --device cpu --json 2>/dev/null | jq -r '.ppl * 10000 | round / 10000' 
}
NL=$(sed -n 's/.*"num_hidden_layers": *\([0-9]*\).*/\1/p' "$F16/config.json")

ROWS=$RUN/rows
for job in $JOBS; do
    calib="" precs=$PRECISIONS
    [ "$job" = rtn ] && precs=-
    [ "$job" = rtn ] || calib="--calib $CALIB --nsamples $N --seqlen $L --calib-mode concat"
    # ROUNDS interleaved rounds (pq at each precision, peer, ...) while the peer finishes; each side's
    # fastest (wall) run, pq's per precision in $RUN/best.PREC ("wall cpu rss")
    rm -f "$RUN"/best.*
    lc_wall="" r=1
    while :; do
        for prec in $precs; do
            say "$job: pq ${prec#-} (round $r of $ROUNDS)"
            flags=$calib
            [ "$prec" = - ] || flags="$calib --calib-precision $prec"
            rm -rf "$RUN/pq-$job-$prec"
            # shellcheck disable=SC2046,SC2086
            /usr/bin/time -f "%e %U %S %M" -o "$RUN/time.pq" "$PQ" quantize "$F16" -o "$RUN/pq-$job-$prec" \
                $(pq_flags $job) $flags --threads "$TH" >"$RUN/pq.log" 2>&1 ||
                die "pq quantize ($job $prec) failed: $(tail -1 "$RUN/pq.log")"
            set -- $(usage_of "$RUN/time.pq")
            if [ ! -f "$RUN/best.$prec" ] || faster "$1" "$(cut -d' ' -f1 "$RUN/best.$prec")"; then
                echo "$1 $2 $3" >"$RUN/best.$prec"
            fi
        done
        say "$job: llm-compressor (round $r, at most $LIMIT s)"
        rm -rf "$RUN/llmc-$job"
        rc=0
        /usr/bin/time -f "%e %U %S %M" -o "$RUN/time.llmc" timeout "$LIMIT" "$PY" "$ROOT/tools/llmc_bench.py" "$job" \
            "$F16" "$CALIB" "$N" "$L" "$TH" "$RUN/llmc-$job" >"$RUN/llmc.log" 2>"$RUN/llmc.err" || rc=$?
        # /usr/bin/time's file starts with "Command exited with non-zero status N" when it did
        tail -1 "$RUN/time.llmc" >"$RUN/time.llmc1"
        set -- $(usage_of "$RUN/time.llmc1")
        if [ -z "$lc_wall" ] || faster "$1" "$lc_wall"; then lc_wall=$1 lc_cpu=$2 lc_rss=$3; fi
        if [ "$rc" != 0 ] || ! grep -q '^done ' "$RUN/llmc.log" || [ "$r" -ge "$ROUNDS" ]; then break; fi
        r=$((r + 1))
    done
    finished=0
    if [ "$rc" = 0 ] && grep -q '^done ' "$RUN/llmc.log"; then
        finished=1 lc_ppl=$(ppl_of "$RUN/llmc-$job") status="finished"
    elif grep -q '^failed: ' "$RUN/llmc.log"; then
        lc_ppl="-"
        status="fails: $(sed -n 's/^failed: //p' "$RUN/llmc.log" | head -1 | cut -c1-160 | tr '|' '/')"
    else
        lc_ppl="-" status="" # stopped: the status per pq row below
    fi
    for prec in $precs; do
        read -r pq_wall pq_cpu pq_rss <"$RUN/best.$prec"
        pq_ppl=$(ppl_of "$RUN/pq-$job-$prec")
        if [ "$finished" = 1 ]; then
            ratio=$(awk -v a="$lc_wall" -v b="$pq_wall" -v c="$lc_cpu" -v d="$pq_cpu" 'BEGIN { printf "%.1fx / %.1fx", a / b, c / d }')
        elif [ "${status#fails}" != "$status" ]; then
            ratio="- / -"
        else
            # per-layer rate over the layers it completed: (time reaching the last layer seen - time reaching
            # the first) / (their index difference); the projection adds the remaining layers to what it took
            # to start; the CPU speed-up projects the CPU time at the CPU share the stopped run had
            stopped=$(awk -v nl="$NL" -v lim="$LIMIT" -v b="$pq_wall" -v w="$lc_wall" -v c="$lc_cpu" -v d="$pq_cpu" \
                '$1 == "layer" { if (!n++) { i0 = $2; t0 = $3 } i1 = $2; t1 = $3 }
                END { if (n < 2) { printf "- / -|stopped after %d s before finishing one layer", lim; exit }
                      r = (t1 - t0) / (i1 - i0); p = t0 + r * nl
                      printf "~%.0fx / ~%.0fx (projected)|stopped after %d s at layer %d of %d: %.0f s per layer, ~%.0f s projected",
                             p / b, p * c / w / d, lim, i1, nl, r, p }' "$RUN/llmc.log")
            ratio=${stopped%%|*} status=${stopped#*|}
        fi
        name=$job shown=$prec
        [ "$prec" = auto ] && shown="auto: $(jq -r '.calibration.precision // "f32"' "$RUN/pq-$job-auto/pq.json")"
        [ "$prec" = - ] || name="$job ($shown)"
        echo "$name|$(scheme_of $job)|$pq_wall|$pq_cpu|$pq_rss|${pq_ppl:--}|$lc_wall|$lc_cpu|$lc_rss|${lc_ppl:--}|$ratio|$status" >>"$ROWS"
        rm -rf "$RUN/pq-$job-$prec"
    done
    rm -rf "$RUN/llmc-$job"
done

LLMC_VER=$("$PY" -c 'import llmcompressor, torch; print(llmcompressor.__version__, "/ torch", torch.__version__)' 2>/dev/null | tail -1)
echo "pq vs llm-compressor $LLMC_VER on the CPU: SmolLM2-135M F16, $N x $L calibration tokens (the same concat windows of"
echo "$(basename "$CALIB")), $TH threads each; wall and CPU seconds and peak RSS of the whole process (model load"
echo "included); PPL of each output by \`pq ppl --protocol llamacpp --ctx 512\`, $WINDOWS windows of wiki.test.raw;"
echo "pq's calibrated jobs at each --calib-precision (the job's name says which) against the same peer runs;"
echo "peer jobs stopped after $LIMIT s; each side's fastest of $ROUNDS interleaved round(s) while the peer finishes"
echo "(\`sh tools/bench_compare_llmc.sh\`, $(date -u +%Y-%m-%d))."
echo
echo "| job | scheme | pq wall s | pq CPU s | pq RSS MB | pq PPL | llm-compressor wall s | CPU s | RSS MB | PPL | speed-up (wall / CPU) | llm-compressor |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
awk -F'|' '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | **%s** | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 }' "$ROWS"
