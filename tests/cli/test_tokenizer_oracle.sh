#!/bin/sh
# pq's tokenizer against the Hugging Face tokenizers library: trains
# byte-level BPE tokenizers (GPT-2, Llama 3 and Qwen2 split regexes, Qwen2
# with its NFC normalizer, ...) and Metaspace variants of the stories260K
# fixture with the library (tests/tokenizer_oracle.py), encodes
# wiki.test.raw, tinystories and c4, short corner cases and text to
# normalize with it, and compares every id and every decoded text with pq's
# (build/tests/test_tokenizer --oracle).
# The library lives in a venv under build/venv, installed from PyPI on the
# first run; without PyPI the test prints "skip".
set -u
BUILD=${BUILD:-build}
SHARED=${PQ_SHARED:-../shared}
VENV=$BUILD/venv
OUT=$BUILD/tok_oracle
if ! "$VENV/bin/python" -c 'import tokenizers' >/dev/null 2>&1; then
    if ! { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q tokenizers; } >"$BUILD/venv.log" 2>&1; then
        echo "skip - tokenizer oracle: could not install the tokenizers library from PyPI (see $BUILD/venv.log)"
        exit 0
    fi
fi
if [ ! -x "$BUILD/tests/test_tokenizer" ]; then
    echo "FAIL - tokenizer oracle: $BUILD/tests/test_tokenizer is not built"
    exit 1
fi
rm -rf "$OUT"
if ! "$VENV/bin/python" tests/tokenizer_oracle.py "$SHARED" "$OUT"; then
    echo "FAIL - tokenizer oracle: tests/tokenizer_oracle.py failed"
    exit 1
fi
"$BUILD/tests/test_tokenizer" --oracle "$OUT/manifest.tsv"
