#!/bin/sh
# tests/gpu_check.sh — the one script to run on the GPU machine (an H200),
# from the repo root, after tests/gpu_prepare.sh has filled .gpu-carry here:
#   run(command="sh tests/gpu_check.sh", carry=[".gpu-carry"], timeout_s=540)
# Steps, each run even when an earlier one failed (a failed build fails the
# rest quickly):
#   deps       unpack the carried .debs under /tmp/pq-deps (headers, libs)
#   build      make -j16: pq, every test, bench and fuzz replay binary
#   gpu tests  the test binaries with GPU checks, PQ_REQUIRE_GPU=1 (a
#              missing device is a failure)
#   bench      build/tests/bench_cuda (GEMV / GEMM / engine vs cuBLAS FP16), and
#              bench_gptq --device cuda on 4 TinyLlama-shaped layers (block
#              passes and X^T X on the GPU; the GPTQ solve on the CPU)
#   ppl        the fixture quantized in each scheme, pq ppl on the GPU and
#              on the CPU (200 windows of 256 tokens; FP16 golden on all of
#              the file is 5.672948841)
#   all tests  the whole suite as make test-gpu runs it, if time is left
#   memcheck   compute-sanitizer on test_quant_cuda, if time is left (it
#              cannot run under gVisor: then it fails, which says only that)
# Everything goes to $OUT/gpu_check.log ($OUT: the device tool's folder;
# the build directory elsewhere; BUILD, default build, is make's); the summary is printed at the end and saved as
# $OUT/gpu_check_summary.txt. Expected: ~5-6 minutes on 16 cores + an H200;
# the optional steps are cut off so that the whole run ends within ~6.5 minutes.
set -u
B=${BUILD:-build}
OUT=${OUT:-$B}
mkdir -p "$OUT"
LOG=$OUT/gpu_check.log
SUM=$OUT/gpu_check_summary.txt
: >"$LOG"
: >"$SUM"
J=${J:-16}
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }

# step NAME COMMAND...: runs it with its output in the log, records the result
# (sh has no local variables: these names stay out of the functions' way).
step() {
    _st_name=$1
    shift
    _st_t0=$(date +%s)
    echo "=== $_st_name: $*" >>"$LOG"
    "$@" >>"$LOG" 2>&1
    _st_rc=$?
    _st_dt=$(( $(date +%s) - _st_t0 ))
    case $_st_rc in
    0) _st_res=ok ;;
    124) _st_res="cut off (time)" ;; # timeout's status: the optional steps' limit
    *) _st_res="FAILED (exit $_st_rc)" ;;
    esac
    echo "=== $_st_name: $_st_res in ${_st_dt}s" >>"$LOG"
    printf '%-34s %-18s %4ss\n' "$_st_name" "$_st_res" "$_st_dt" | tee -a "$SUM"
    return $_st_rc
}

note() { echo "$*" | tee -a "$SUM"; }

# ---- environment -------------------------------------------------------------
command -v nvcc >/dev/null 2>&1 || PATH=/usr/local/cuda/bin:$PATH
export PATH
if [ -d .gpu-carry/shared ]; then PQ_SHARED=$(pwd)/.gpu-carry/shared; else PQ_SHARED=${PQ_SHARED:-../shared}; fi
export PQ_SHARED
unpack_debs() {
    rm -rf /tmp/pq-deps && mkdir -p /tmp/pq-deps || return 1
    for f in .gpu-carry/debs/*.deb; do dpkg -x "$f" /tmp/pq-deps || return 1; done
    ln -sf libjansson.so.4 /tmp/pq-deps/usr/lib/x86_64-linux-gnu/libjansson.so
    ls /tmp/pq-deps/usr/include/jansson.h /tmp/pq-deps/usr/include/zstd.h \
        /tmp/pq-deps/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0
}
if ls .gpu-carry/debs/*.deb >/dev/null 2>&1; then
    step "deps (carried .debs)" unpack_debs
    L=/tmp/pq-deps/usr/lib/x86_64-linux-gnu
    export C_INCLUDE_PATH=/tmp/pq-deps/usr/include${C_INCLUDE_PATH:+:$C_INCLUDE_PATH}
    export LIBRARY_PATH=$L${LIBRARY_PATH:+:$LIBRARY_PATH}
    export LD_LIBRARY_PATH=$L:$L/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
else
    note "no .gpu-carry/debs: using the system's libjansson / libzstd / OpenBLAS"
fi
{
    echo "=== machine"
    nvidia-smi -L 2>&1
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv 2>&1
    nvcc --version 2>&1 | tail -2
    nproc
    git log --oneline -1 2>&1
} >>"$LOG"
note "GPU: $(nvidia-smi -L 2>&1 | head -1); shared data: $PQ_SHARED"

# ---- build -------------------------------------------------------------------------
bins() { # every test, bench and fuzz replay binary make test would build
    for f in tests/test_*.c tests/bench_*.c; do b=${f#tests/}; echo "$B/tests/${b%.c}"; done
    for f in tests/fuzz/fuzz_*.c; do b=${f#tests/fuzz/}; echo "$B/fuzz/replay_${b%.c}"; done
}
step "build (make -j$J)" make -j"$J" BUILD="$B" "$B/pq" $(bins)

# ---- the GPU tests --------------------------------------------------------------------
for src in $(grep -l PQ_SKIP_UNLESS_GPU tests/test_*.c); do
    t=$(basename "$src" .c)
    before=$(wc -l <"$LOG")
    step "gpu test $t" env PQ_REQUIRE_GPU=1 "$B/tests/$t"
    part=$(tail -n +"$before" "$LOG")
    note "    $(echo "$part" | grep -c '^ok - ') ok, $(echo "$part" | grep -c '^FAIL - ') FAIL, $(echo "$part" | grep -c '^skip - ') skip"
    echo "$part" | grep '^FAIL - ' | head -20 | sed 's/^/    /' | tee -a "$SUM"
done

# ---- benchmark ----------------------------------------------------------------------------
before=$(wc -l <"$LOG")
step "bench_cuda" "$B/tests/bench_cuda"
tail -n +"$before" "$LOG" | grep -v '^===' >>"$SUM"
before=$(wc -l <"$LOG")
step "bench_gptq --device cuda (4 layers)" timeout 120 "$B/tests/bench_gptq" --device cuda --layers 4 --windows 16 \
    --seqlen 512
tail -n +"$before" "$LOG" | grep -E '^(time|peak RSS|GPU|FAIL)' >>"$SUM"

# ---- perplexity of the quantized fixture, GPU vs CPU -----------------------------------------
F=$PQ_SHARED/fixtures/stories260K
TEXT=$PQ_SHARED/data/tinystories_val_prefix.txt
Q=/tmp/pq-gpu-check
rm -rf "$Q" && mkdir -p "$Q"
ppl_of() { # MODEL DEVICE -> "ppl" or "error"
    "$B/pq" ppl "$1" --text "$TEXT" --protocol gptq --bos --ctx 256 --max-windows 200 --device "$2" --json \
        2>>"$LOG" | tee -a "$LOG" | sed -n 's/.*"ppl": \([0-9.]*\).*/\1/p' | grep . || echo error
}
ppl_pair() { # NAME MODEL
    g=$(ppl_of "$2" cuda)
    c=$(ppl_of "$2" cpu)
    note "    ppl $(printf '%-22s' "$1") cuda $g   cpu $c"
    [ "$g" != error ] && [ "$c" != error ]
}
ppl_all() {
    ppl_pair "fp16 (fixture)" "$F"
    ok=$?
    while IFS='|' read -r name args; do
        dir=$Q/$(echo "$name" | tr ' ' '_')
        # shellcheck disable=SC2086
        if "$B/pq" quantize "$F" -o "$dir" $args >>"$LOG" 2>&1; then
            ppl_pair "$name" "$dir" || ok=1
        else
            note "    ppl $(printf '%-22s' "$name") quantize failed"
            ok=1
        fi
    done <<EOF
w4a16 g128 sym|--scheme w4a16
w4a16 g32 sym|--scheme w4a16 --group 32
w4a16 g128 asym|--scheme w4a16 --asym
w3a16 g32 asym|--scheme w4a16 --bits 3 --group 32 --asym
w8a16 channel|--scheme w8a16
fp8 channel|--scheme fp8
fp8 tensor|--scheme fp8 --fp8-scale tensor
w8a8|--scheme w8a8
fp8-dynamic|--scheme fp8-dynamic
EOF
    return $ok
}
step "ppl GPU vs CPU (200 windows)" ppl_all
rm -rf "$Q"

# ---- optional, within 6.5 minutes in all: the whole suite, then memcheck ---------------------
left=$(( 390 - $(elapsed) ))
if [ "$left" -ge 60 ]; then
    before=$(wc -l <"$LOG")
    step "all tests (as make test-gpu)" env BUILD="$B" PQ_REQUIRE_GPU=1 timeout "$left" sh tests/run.sh
    tail -n +"$before" "$LOG" | grep -E '^[0-9]+ passed|^FAIL|^    FAIL' | head -30 | sed 's/^/    /' | tee -a "$SUM"
else
    note "all tests: skipped ($(elapsed)s elapsed)"
fi
left=$(( 390 - $(elapsed) ))
if [ "$left" -ge 30 ] && command -v compute-sanitizer >/dev/null 2>&1; then
    step "memcheck test_quant_cuda" timeout "$left" compute-sanitizer --tool memcheck --error-exitcode 9 \
        "$B/tests/test_quant_cuda"
else
    note "memcheck: skipped ($(elapsed)s elapsed, or no compute-sanitizer)"
fi
note "gpu_check: $(elapsed)s in all; log $LOG"
echo
echo "==================== summary ===================="
cat "$SUM"
