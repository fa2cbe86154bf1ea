#!/bin/sh
# pq quantize --target-bpw and --rotate outputs in the Hugging Face stack
# (make test-oracles; needs torch): transformers + compressed-tensors load
# each checkpoint and decompress every quantized linear to exactly pq's
# weights (tests/compat/check_compressed_tensors.py):
#   - a mixed plan on a tiny Llama whose sizes are multiples of the groups
#     (several config groups with per-module targets, fp16 linears in
#     "ignore"), and one with gptq and --rotate;
#   - a rotated w4a16 g64 checkpoint (an untied lm_head of its own).
# The whole of tests/compat/run.sh (every scheme) stays a by-hand run.
set -u
BUILD=${BUILD:-build}
SHARED=${PQ_SHARED:-../shared}
PQ=${PQ:-$BUILD/pq}
VENV=${PQ_VENV_ORACLES:-$HOME/.cache/pq/venv-oracles}
PY=$VENV/bin/python
if ! "$PY" -c 'import torch, transformers, compressed_tensors' >/dev/null 2>&1; then
    echo "skip - compressed-tensors oracle: no venv with torch, transformers and compressed-tensors at $VENV"
    exit 0
fi
W=$(mktemp -d "${TMPDIR:-/tmp}/pq-compat-mixed.XXXXXX")
trap 'rm -rf "$W"' EXIT
LIBS="-ljansson -lzstd -ldl -lm -pthread"
if nm "$BUILD/libpq.a" 2>/dev/null | grep -q cudaMalloc; then # built with nvcc: link as the Makefile does
    CUDA=$(dirname "$(dirname "$(command -v nvcc)")")
    LIBS="$LIBS -L$CUDA/lib64 -Wl,-rpath,$CUDA/lib64 -lcublasLt -lcublas -lcudart -lstdc++"
fi
cc -std=c11 -D_GNU_SOURCE -O2 -I. -o "$W/dump_weights" tests/compat/dump_weights.c "$BUILD/libpq.a" $LIBS ||
    { echo "FAIL - compressed-tensors oracle: building dump_weights"; exit 1; }
"$PY" tests/compat/make_tiny_llama.py "$W/tiny" f16 "$SHARED/fixtures/stories260K" >/dev/null 2>&1 ||
    { echo "FAIL - compressed-tensors oracle: make_tiny_llama.py"; exit 1; }
MIX="--calib $SHARED/data/c4_validation_2k.txt --nsamples 4 --seqlen 128 --kl-windows 2"
for flags in "--target-bpw 4.6 --menu w4g32,w4g128a,w8g64,fp16 $MIX" \
    "--method gptq --target-bpw 5 --menu w4g32,w8,fp16 --rotate hadamard --rotate-seed 3 $MIX" \
    "--scheme w4a16 --group 64 --rotate hadamard"; do
    rm -rf "$W/q"
    # shellcheck disable=SC2086
    if ! $PQ quantize "$W/tiny" -o "$W/q" $flags >"$W/log" 2>&1; then
        echo "FAIL - pq quantize tiny $flags: $(tail -n 1 "$W/log")"
        continue
    fi
    line=$("$PY" tests/compat/check_compressed_tensors.py "$W/q" "$W/dump_weights" 2>&1 | tail -n 1)
    case "$line" in
    ok*) echo "$line" | sed "s|$W/q|tiny $flags|" ;;
    *) echo "FAIL - tiny $flags: $line" ;;
    esac
done
