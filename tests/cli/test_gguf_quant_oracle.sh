#!/bin/sh
# pq's ggml quantizers (kernels/ggml_quant.c) against the gguf package's
# (gguf.quants.quantize, which has Q4_0, Q4_1, Q5_0 and Q8_0):
# tests/gguf_quant_oracle.py writes random rows and edge cases with the
# package's bytes; test_ggml_quant --oracle compares byte for byte. A fresh
# seed each run (printed). The K types are checked against ggml's own
# library in make test-oracles (tests/oracles/test_ggml_quant_llamacpp.sh).
set -u
BUILD=${BUILD:-build}
. tests/cli/venv_gguf.sh
venv_gguf_python "gguf quantization oracle"
OUT=$BUILD/gguf_quant_oracle
rm -rf "$OUT"
seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
echo "# seed $seed"
if ! "$PY" tests/gguf_quant_oracle.py "$OUT" "$seed"; then
    echo "FAIL - gguf quantization oracle: tests/gguf_quant_oracle.py failed"
    exit 1
fi
"$BUILD/tests/test_ggml_quant" --oracle "$OUT/manifest.tsv"
status=$?
rm -rf "$OUT"
exit $status
