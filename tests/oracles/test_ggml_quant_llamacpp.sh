#!/bin/sh
# pq's ggml quantizers against ggml's own library, byte for byte
# (tests/oracles/ggml_quant_oracle.c): Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q6_K,
# and Q4_K, Q6_K with an importance matrix, on rows of six distributions.
# A fresh seed each run (printed).
set -u
BUILD=${BUILD:-build}
. tests/oracles/llama_cpp.sh
llama_cpp_tools "ggml quantizer oracle"
bin=$BUILD/oracles/ggml_quant_oracle
mkdir -p "$BUILD/oracles"
if ! ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -ffp-contract=off -I. tests/oracles/ggml_quant_oracle.c "$BUILD/libpq.a" \
    -L"$LLAMA_BIN" -lggml-base -Wl,-rpath,"$LLAMA_BIN" -ljansson -lzstd -ldl -lm -pthread -o "$bin"; then
    echo "FAIL - ggml quantizer oracle: cannot build $bin"
    exit 1
fi
"$bin" "$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')"
