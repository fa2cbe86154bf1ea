#!/bin/sh
# Loads pq quantize's output with transformers + compressed-tensors for every
# scheme and compares the decompressed weights with pq's (see
# check_compressed_tensors.py). Not part of make test. Needs a Python with
# torch, transformers and compressed-tensors (PYTHON, default python3) and a
# built tree (make). Usage: sh tests/compat/run.sh [WORKDIR]
set -u
PY=${PYTHON:-python3}
PQ=${PQ:-build/pq}
SHARED=${PQ_SHARED:-../shared}
W=${1:-$(mktemp -d /tmp/pq-compat.XXXXXX)}
mkdir -p "$W"
LIBS="-ljansson -lzstd -ldl -lm -pthread"
if nm build/libpq.a 2>/dev/null | grep -q cudaMalloc; then # built with nvcc: link as the Makefile does
    CUDA=$(dirname "$(dirname "$(command -v nvcc)")")
    LIBS="$LIBS -L$CUDA/lib64 -Wl,-rpath,$CUDA/lib64 -lcublasLt -lcublas -lcudart -lstdc++"
fi
cc -std=c11 -D_GNU_SOURCE -O2 -I. -o "$W/dump_weights" tests/compat/dump_weights.c build/libpq.a $LIBS || exit 1
$PY tests/compat/make_tiny_llama.py "$W/tiny-f16" f16 "$SHARED/fixtures/stories260K" >/dev/null 2>&1 &&
    $PY tests/compat/make_tiny_llama.py "$W/tiny-bf16" bf16 "$SHARED/fixtures/stories260K" >/dev/null 2>&1 || exit 1
status=0
check() { # model flags...
    m=$1; shift
    rm -rf "$W/q"
    "$PQ" quantize "$m" -o "$W/q" "$@" >/dev/null 2>&1 || { echo "FAIL - pq quantize $m $*"; status=1; return; }
    line=$($PY tests/compat/check_compressed_tensors.py "$W/q" "$W/dump_weights" 2>/dev/null | tail -n 1)
    echo "$line" | sed "s|$W/q|$(basename "$m") $*|"
    case "$line" in ok*) ;; *) status=1 ;; esac
}
# the fixture: per-channel schemes (its 64 / 172 columns are no multiple of the groups)
F=$SHARED/fixtures/stories260K
for flags in "--scheme w4a16 --group channel" "--scheme w4a16 --group channel --asym" "--scheme w8a16" \
    "--scheme w8a8" "--scheme fp8" "--scheme fp8 --fp8-scale tensor" "--scheme fp8-dynamic"; do
    check "$F" $flags
done
# --rotate (a plain Llama with its own lm_head) and --target-bpw (several config groups, fp16 linears ignored)
C=$SHARED/data/c4_validation_2k.txt
MIX="--calib $C --nsamples 8 --seqlen 128 --kl-windows 2"
check "$F" --scheme w8a16 --rotate hadamard
check "$F" --target-bpw 6 --menu w4,w4a,w8,fp16 $MIX
check "$F" --method gptq --target-bpw 5 --menu w4,w8,fp16 --rotate hadamard --rotate-seed 3 $MIX
for m in "$W/tiny-f16" "$W/tiny-bf16"; do
    for flags in "--scheme w4a16 --group 32" "--scheme w4a16 --group 64 --asym" "--scheme w4a16 --group 128" \
        "--scheme w4a16 --group 128 --asym --quantize-head" "--scheme w8a16 --group 128" "--scheme w8a16" \
        "--scheme w8a8 --quantize-head" "--scheme fp8 --fp8-scale tensor" "--scheme fp8-dynamic --quantize-head" \
        "--target-bpw 4.6 --menu w4g32,w4g128a,w8g64,fp16 $MIX" "--scheme w4a16 --group 64 --rotate hadamard"; do
        check "$m" $flags
    done
done
exit $status
