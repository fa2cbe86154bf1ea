#!/bin/sh
# pq's tokenizer against the Hugging Face tokenizers library: trains
# byte-level BPE tokenizers (GPT-2, Llama 3 and Qwen2 split regexes, Qwen2
# with its NFC normalizer, ...) and Metaspace variants of the stories260K
# fixture with the library (tests/tokenizer_oracle.py), encodes
# wiki.test.raw, tinystories and c4, short corner cases and text to
# normalize with it, and compares every id and every decoded text with pq's
# (build/tests/test_tokenizer --oracle).
# The library lives in a venv under build/venv, installed from PyPI on the
# first run; when PyPI (or $PIP_INDEX_URL) cannot be reached the test prints
# "skip", any other failure to install is a failure.
set -u
BUILD=${BUILD:-build}
SHARED=${PQ_SHARED:-../shared}
VENV=$BUILD/venv
OUT=$BUILD/tok_oracle
INDEX=${PIP_INDEX_URL:-https://pypi.org/simple}
if ! "$VENV/bin/python" -c 'import tokenizers' >/dev/null 2>&1; then
    if ! { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q tokenizers; } >"$BUILD/venv.log" 2>&1; then
        if ! python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1].rstrip("/") + "/tokenizers/", timeout=20)' \
            "$INDEX" >/dev/null 2>&1; then
            echo "skip - tokenizer oracle: $INDEX is not reachable, so the tokenizers library cannot be installed"
            exit 0
        fi
        echo "FAIL - tokenizer oracle: installing the tokenizers library failed with $INDEX reachable: $(tail -3 "$BUILD/venv.log" | tr '\n' ' ')"
        exit 1
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
