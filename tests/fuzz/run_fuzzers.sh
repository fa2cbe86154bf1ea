#!/bin/sh
# tests/fuzz/run_fuzzers.sh — `make fuzz`: builds every tests/fuzz/fuzz_*.c as
# a libFuzzer binary under ASan + UBSan (clang) and runs each for
# FUZZ_SECONDS (default 60), or for FUZZ_RUNS inputs when that is set, from
# its committed corpus, with at most 2 GB of memory (-rss_limit_mb=2048, and
# no single allocation above it) and 10 s per input (-timeout=10). New
# inputs go to build/fuzz-lf/corpus/<target> (the committed corpus is only
# read); crashes, leaks, timeouts and out-of-memory inputs to
# build/fuzz-lf/crashes/; tests/fuzz/<target>.dict is used when present.
# Prints how long each target ran, how many inputs it executed and whether
# it failed; exits non-zero if any did.
#
#   FUZZ_SECONDS=300 sh tests/fuzz/run_fuzzers.sh [fuzz_name ...]
#   FUZZ_RUNS=1000000 sh tests/fuzz/run_fuzzers.sh fuzz_zstd
set -eu
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_RUNS=${FUZZ_RUNS:-}
CLANG=${CLANG:-clang}
OUT=${BUILD:-build}/fuzz-lf
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CFLAGS="-std=c11 -D_GNU_SOURCE -g -O1 -pthread -I. -Wall -Wextra -Wno-unused-parameter"
AVX2_FLAGS="-mavx2 -mfma -mf16c"
AVX512_FLAGS=$(sed -n 's/^AVX512_FLAGS *:= *//p' Makefile)
SHANI_FLAGS=$(sed -n 's/^SHANI_FLAGS *:= *//p' Makefile)
LIBS="-ljansson -lzstd -ldl -lm -pthread"

command -v "$CLANG" >/dev/null || { echo "run_fuzzers: $CLANG not found" >&2; exit 2; }
mkdir -p "$OUT/obj" "$OUT/crashes" "$OUT/corpus"

# the library, instrumented; an archive so each target links only what it uses
objs=""
for src in common/*.c formats/*.c formats/tokenizer/*.c kernels/*.c eval/*.c calib/*.c quant/*.c; do
    [ -f "$src" ] || continue
    case $src in
        *_avx2.c) isa=$AVX2_FLAGS ;;
        *_avx512.c) isa=$AVX512_FLAGS ;;
        *_shani.c) isa=$SHANI_FLAGS ;;
        *) isa="" ;;
    esac
    obj="$OUT/obj/$(echo "${src%.c}" | tr / _).o"
    if [ ! -f "$obj" ] || [ -n "$(find common formats kernels eval calib quant -name '*.h' -newer "$obj" 2>/dev/null | head -1)" ] \
        || [ "$src" -nt "$obj" ]; then
        # a file clang cannot build is left out; a target that needs it then fails to link
        # shellcheck disable=SC2086
        if ! "$CLANG" $CFLAGS $SAN -fsanitize=fuzzer-no-link $isa -c "$src" -o "$obj" 2>"$obj.err"; then
            echo "run_fuzzers: left out $src (clang: $(grep -m1 'error:' "$obj.err"))" >&2
            rm -f "$obj"
            continue
        fi
    fi
    objs="$objs $obj"
done
rm -f "$OUT/libpq_fuzz.a"
# shellcheck disable=SC2086
ar rcs "$OUT/libpq_fuzz.a" $objs

targets=$*
[ -n "$targets" ] || targets=$(for f in tests/fuzz/fuzz_*.c; do basename "$f" .c; done)
status=0
for name in $targets; do
    bin="$OUT/$name"
    # shellcheck disable=SC2086
    "$CLANG" $CFLAGS $SAN -fsanitize=fuzzer "tests/fuzz/$name.c" "$OUT/libpq_fuzz.a" $LIBS -o "$bin"
    seeds="tests/fuzz/corpus/$name"
    work="$OUT/corpus/$name"
    mkdir -p "$work" "$seeds"
    log="$OUT/$name.log"
    start=$(date +%s)
    dict=""
    [ -f "tests/fuzz/$name.dict" ] && dict="-dict=tests/fuzz/$name.dict"
    rc=0
    # shellcheck disable=SC2086
    limit="-max_total_time=$FUZZ_SECONDS"
    [ -n "$FUZZ_RUNS" ] && limit="-runs=$FUZZ_RUNS"
    # shellcheck disable=SC2086
    "$bin" $limit -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 $dict \
        -artifact_prefix="$OUT/crashes/$name-" "$work" "$seeds" >"$log" 2>&1 || rc=$?
    secs=$(( $(date +%s) - start ))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    if [ "$rc" -eq 0 ]; then
        echo "$name: ran ${secs}s, ${execs:-?} inputs, no crash"
    else
        status=1
        echo "$name: CRASH after ${secs}s (exit $rc); artifact:"
        grep -E 'Test unit written to|^==[0-9]+==ERROR|SUMMARY' "$log" | sed 's/^/    /' | head -5
        echo "    full log: $log"
    fi
done
exit $status
