#!/bin/sh
# pq's ggml block dequantizers (kernels/ggml_dequant.c) against the gguf
# package's (gguf.quants.dequantize): tests/gguf_dequant_oracle.py writes
# random blocks of every supported type with extreme fp16 scales (zero,
# subnormal, 65504, inf, NaN) and the package's values; test_ggml_dequant
# --oracle compares bit for bit. A fresh seed each run (printed).
set -u
BUILD=${BUILD:-build}
. tests/cli/venv_gguf.sh
venv_gguf_python "gguf dequantization oracle"
OUT=$BUILD/gguf_dequant_oracle
rm -rf "$OUT"
seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
echo "# seed $seed"
if ! "$PY" tests/gguf_dequant_oracle.py "$OUT" "$seed"; then
    echo "FAIL - gguf dequantization oracle: tests/gguf_dequant_oracle.py failed"
    exit 1
fi
"$BUILD/tests/test_ggml_dequant" --oracle "$OUT/manifest.tsv"
