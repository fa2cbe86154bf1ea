#!/bin/sh
# tests/gpu_check.sh — the one script to run on a lent GPU machine (an
# H200, 16 cores), from the repo root, after tests/gpu_prepare.sh has filled
# .gpu-carry here:
#   run(command="sh tests/gpu_check.sh", carry=[".gpu-carry"], timeout_s=540)
# It aims at the most truth per minute and ends within ~8 minutes, build
# included: every step runs under `timeout`, capped by what is left of the
# time budget (BUDGET seconds, default 470) after the later steps' minimum
# shares, and a step with too little left is skipped and says so. Steps,
# each run even when an earlier one failed:
#   build      make -j16: pq, the GPU test binaries, bench_cuda, bench_gptq
#   gpu tests  test_quant_cuda, test_engine_cuda, test_calib, test_gptq_cuda
#              with PQ_REQUIRE_GPU=1 (a missing device is a failure): every
#              CUDA kernel against its C reference, the engine against the
#              CPU's, GPTQ's prepare and solve against the CPU's
#   sanitizer  compute-sanitizer memcheck on the four GPU tests, racecheck
#              on test_quant_cuda and test_engine_cuda (shared memory of
#              the tiled GEMV and the attention kernels)
#   ppl        pq ppl --device cuda on the fixture (FP16 and 9 quantized
#              schemes, carried in .gpu-carry/q) against the CPU values
#              gpu_prepare.sh computed before the run: within 0.5% or FAIL;
#              SmolLM2 too when .gpu-carry/smollm2 was carried; then the
#              SmolLM2 GGUF itself when this machine has it cached
#              (tools/get_smollm2.sh's path; nothing is downloaded here): pq
#              ppl --device cpu and --device cuda on 8 windows of
#              wiki.test.raw, both run here, within 0.5% or FAIL
#   ncu        one Nsight Compute pass over bench_cuda's "ncu" part: the
#              W4A16 g128 GEMV (4096 x 14336, T = 1) and the prefill and
#              decode attention kernels (speed of light, occupancy, memory
#              workload, warp stall reasons)
#   bench      bench_cuda (GEMV / GEMM / W8A8 at T = 1, 16, 17, 32 /
#              attention at the issue's shapes, timed by CUDA-graph replay),
#              then its engine part and bench_gptq --device cuda
# Results, each its own file under $OUT (the device tool returns at most 8):
#   summary.txt  one line per step, the FAIL lines, the ppl table
#   check.log    build and GPU test output
#   sanitizer.log, ppl.txt, ncu.txt, bench_kernels.txt, bench_engine.txt
set -u
# the perplexity step runs as `sh tests/gpu_check.sh ppl` (timeout runs
# commands, not shell functions): see ppl_all below
MODE=${1:-all}
TEXT=${PQ_SHARED:-../shared}/data/tinystories_val_prefix.txt
# the command gpu_prepare.sh ran on the CPU, with --device cuda
ppl_cuda() {
    build/pq ppl "$1" --text "$TEXT" --protocol gptq --bos --ctx 256 --max-windows 200 --device cuda --json |
        sed -n 's/.*"ppl": \([0-9.eE+-]*\).*/\1/p'
}
ppl_all() {
    [ -s .gpu-carry/cpu_ppl.txt ] || { echo "no .gpu-carry/cpu_ppl.txt: run tests/gpu_prepare.sh here first"; return 1; }
    bad=0
    while IFS='|' read -r name dir cpu; do
        case $name in smollm2*) [ -d "$dir" ] || { echo "$name: not carried, not checked"; continue; } ;; esac
        g=$(ppl_cuda "$dir")
        verdict=$(awk -v g="$g" -v c="$cpu" 'BEGIN { if (g == "") { print "FAIL (no value)"; exit }
            d = (g - c) / c; if (d < 0) d = -d
            printf "%s %.3f%%", d <= 0.005 ? "ok" : "FAIL", 100 * d }')
        printf '%-18s cpu %-12s cuda %-12s %s\n' "$name" "$cpu" "${g:-none}" "$verdict"
        case $verdict in ok*) ;; *) bad=1 ;; esac
    done <.gpu-carry/cpu_ppl.txt
    return $bad
}
# SmolLM2-135M's GGUF, CPU and GPU both measured here (`sh tests/gpu_check.sh smollm2`)
smollm2() {
    gguf=${PQ_SMOLLM2:-${PQ_CACHE:-$HOME/.cache/pq}/SmolLM2-135M-Instruct.Q4_1.gguf}
    [ -f "$gguf" ] || { echo "smollm2_gguf: $gguf is not on this machine, not checked"; return 0; }
    G=$(sh tools/get_smollm2.sh) || { echo "smollm2_gguf: FAIL (tools/get_smollm2.sh: the cached file does not check)"; return 1; }
    wiki=${PQ_SHARED:-../shared}/data/wiki.test.raw
    for d in cpu cuda; do
        build/pq ppl "$G" --text "$wiki" --protocol llamacpp --ctx 512 --max-windows 8 --device $d --json |
            sed -n 's/.*"ppl": \([0-9.eE+-]*\).*/\1/p' >".smollm2_$d.$$"
    done
    c=$(cat ".smollm2_cpu.$$") g=$(cat ".smollm2_cuda.$$")
    rm -f ".smollm2_cpu.$$" ".smollm2_cuda.$$"
    verdict=$(awk -v g="$g" -v c="$c" 'BEGIN { if (g == "" || c == "") { print "FAIL (no value)"; exit }
        d = (g - c) / c; if (d < 0) d = -d
        printf "%s %.3f%%", d <= 0.005 ? "ok" : "FAIL", 100 * d }')
    printf '%-18s cpu %-12s cuda %-12s %s\n' smollm2_gguf "${c:-none}" "${g:-none}" "$verdict"
    case $verdict in ok*) return 0 ;; *) return 1 ;; esac
}
if [ "$MODE" = ppl ]; then
    ppl_all
    exit $?
fi
if [ "$MODE" = smollm2 ]; then
    smollm2
    exit $?
fi
OUT=${OUT:-build/gpu-check}
mkdir -p "$OUT"
SUM=$OUT/summary.txt
LOG=$OUT/check.log
: >"$SUM"
: >"$LOG"
J=${J:-16}
BUDGET=${BUDGET:-470}
T0=$(date +%s)
elapsed() { echo $(($(date +%s) - T0)); }

note() { echo "$*" | tee -a "$SUM"; }

# step NAME CAP RESERVE LOGFILE COMMAND...: runs COMMAND under timeout, at
# most CAP seconds and no more than leaves RESERVE seconds of the budget to
# the later steps; output appended to LOGFILE; one summary line.
step() {
    _n=$1 _cap=$2 _res=$3 _log=$4
    shift 4
    _left=$((BUDGET - $(elapsed) - _res))
    [ "$_left" -lt "$_cap" ] && _cap=$_left
    if [ "$_cap" -lt 5 ]; then
        printf '%-40s %-20s\n' "$_n" "skipped (no time)" | tee -a "$SUM"
        return 125
    fi
    _t=$(date +%s)
    echo "=== $_n (timeout ${_cap}s): $*" >>"$_log"
    timeout -k 5 "$_cap" "$@" >>"$_log" 2>&1
    _rc=$?
    case $_rc in
    0) _r=ok ;;
    124 | 137) _r="cut off at ${_cap}s" ;;
    *) _r="FAILED (exit $_rc)" ;;
    esac
    echo "=== $_n: $_r" >>"$_log"
    printf '%-40s %-20s %4ss\n' "$_n" "$_r" $(($(date +%s) - _t)) | tee -a "$SUM"
    return $_rc
}

# ---- environment -------------------------------------------------------------------
command -v nvcc >/dev/null 2>&1 || PATH=/usr/local/cuda/bin:$PATH
export PATH
if [ -d .gpu-carry/shared ]; then PQ_SHARED=$(pwd)/.gpu-carry/shared; else PQ_SHARED=${PQ_SHARED:-../shared}; fi
export PQ_SHARED
if ls .gpu-carry/debs/*.deb >/dev/null 2>&1; then
    rm -rf /tmp/pq-deps && mkdir -p /tmp/pq-deps
    for f in .gpu-carry/debs/*.deb; do dpkg -x "$f" /tmp/pq-deps; done
    L=/tmp/pq-deps/usr/lib/x86_64-linux-gnu
    ln -sf libjansson.so.4 $L/libjansson.so
    export C_INCLUDE_PATH=/tmp/pq-deps/usr/include${C_INCLUDE_PATH:+:$C_INCLUDE_PATH}
    export LIBRARY_PATH=$L${LIBRARY_PATH:+:$LIBRARY_PATH}
    export LD_LIBRARY_PATH=$L:$L/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
{
    echo "=== machine"
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total --format=csv 2>&1
    nvcc --version 2>&1 | tail -2
    nproc
    git log --oneline -1 2>&1
} >>"$LOG"
note "GPU: $(nvidia-smi -L 2>&1 | head -1); commit $(git log --format=%h -1 2>/dev/null); shared data: $PQ_SHARED"

# ---- build ---------------------------------------------------------------------------
GPU_TESTS="test_quant_cuda test_engine_cuda test_calib test_gptq_cuda"
BINS="build/pq build/tests/bench_cuda build/tests/bench_gptq"
for t in $GPU_TESTS; do BINS="$BINS build/tests/$t"; done
# shellcheck disable=SC2086
step "build (make -j$J)" 240 200 "$LOG" make -j"$J" $BINS

# ---- the GPU tests: every kernel against its C reference ---------------------------------
for t in $GPU_TESTS; do
    before=$(wc -l <"$LOG")
    step "gpu test $t" 60 180 "$LOG" env PQ_REQUIRE_GPU=1 "build/tests/$t"
    part=$(tail -n +"$before" "$LOG")
    note "    $(echo "$part" | grep -c '^ok - ') ok, $(echo "$part" | grep -c '^FAIL - ') FAIL, $(echo "$part" | grep -c '^skip - ') skip"
    echo "$part" | grep '^FAIL - ' | head -20 | sed 's/^/    /' | tee -a "$SUM"
done

# ---- compute-sanitizer ------------------------------------------------------------------
SAN=$OUT/sanitizer.log
: >"$SAN"
if command -v compute-sanitizer >/dev/null 2>&1; then
    for t in $GPU_TESTS; do
        step "memcheck $t" 60 120 "$SAN" env PQ_REQUIRE_GPU=1 compute-sanitizer --tool memcheck --leak-check full \
            --error-exitcode 9 "build/tests/$t"
    done
    for t in test_quant_cuda test_engine_cuda; do
        step "racecheck $t" 45 100 "$SAN" env PQ_REQUIRE_GPU=1 compute-sanitizer --tool racecheck \
            --racecheck-report analysis --error-exitcode 9 "build/tests/$t"
    done
    grep -E '^========= (ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY)' "$SAN" | sort | uniq -c | sed 's/^/    /' |
        tee -a "$SUM"
else
    note "compute-sanitizer: not found"
fi

# ---- perplexity, GPU vs the CPU values computed before the run -----------------------------
PPL=$OUT/ppl.txt
: >"$PPL"
step "ppl GPU vs CPU (within 0.5%)" 60 90 "$PPL" sh "$0" ppl
step "ppl SmolLM2 GGUF GPU vs CPU (within 0.5%)" 90 90 "$PPL" sh "$0" smollm2
grep -E '^[a-z0-9_]+ +cpu |^smollm2_gguf: ' "$PPL" | sed 's/^/    /' | tee -a "$SUM"

# ---- one Nsight Compute pass ---------------------------------------------------------------
NCU=$OUT/ncu.txt
: >"$NCU"
NCU_BIN=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
if [ -x "$NCU_BIN" ]; then
    SECTIONS="--section SpeedOfLight --section Occupancy --section MemoryWorkloadAnalysis --section WarpStateStats"
    # shellcheck disable=SC2086
    step "ncu W4A16 GEMV 4096x14336" 45 60 "$NCU" "$NCU_BIN" --kernel-name regex:gemv_tiled --launch-skip 1 \
        --launch-count 1 $SECTIONS build/tests/bench_cuda ncu
    # shellcheck disable=SC2086
    step "ncu attention prefill + decode" 45 45 "$NCU" "$NCU_BIN" --kernel-name regex:'fa2_prefill|decode_split' \
        --launch-count 2 $SECTIONS build/tests/bench_cuda ncu
    grep -E 'gemv_tiled|fa2_prefill|decode_split|Memory Throughput|DRAM Throughput|Achieved Occupancy|Compute \(SM\) Throughput' \
        "$NCU" | head -24 | sed 's/^ */    /' | tee -a "$SUM"
else
    note "ncu: not found"
fi

# ---- benchmarks at the issue's shapes, CUDA-graph replay ---------------------------------------
BK=$OUT/bench_kernels.txt
BE=$OUT/bench_engine.txt
: >"$BK"
: >"$BE"
for part in gemv attn w8a8 gemm; do
    step "bench_cuda $part" 60 20 "$BK" build/tests/bench_cuda "$part"
done
grep -E 'issue 13|device:|memory bandwidth' "$BK" | sort -u | sed 's/^/    /' | tee -a "$SUM"
step "bench_cuda engine (TinyLlama shapes)" 60 10 "$BE" build/tests/bench_cuda engine 22
step "bench_gptq --device cuda (4 layers)" 60 0 "$BE" build/tests/bench_gptq --device cuda --layers 4 --windows 16 \
    --seqlen 512

note "gpu_check: $(elapsed)s in all (budget ${BUDGET}s); files in $OUT"
