#!/bin/sh
# tools/get_wikitext2.sh — wiki.test.raw (WikiText-2 raw, test split), the
# perplexity text of llama.cpp and the GPTQ/AWQ papers, for a user without
# ../shared/data. As llama.cpp's scripts/get-wikitext-2.sh does, it fetches
# the raw v1 archive from the usual URL and unpacks the test file; the
# SHA-256 is the one commonly pinned for the official file (also in
# ../shared/data/README.md).
#
#   sh tools/get_wikitext2.sh [DIR]   # default DIR: ~/.cache/pq/wikitext-2-raw; prints the path
#   WIKITEXT2_URL=... sh tools/get_wikitext2.sh   # another mirror of wikitext-2-raw-v1.zip
# Needs curl or wget, and unzip or python3. Exit 1 on a failed download or a
# wrong checksum.
set -eu
DIR=${1:-${PQ_CACHE:-$HOME/.cache/pq}/wikitext-2-raw}
URL=${WIKITEXT2_URL:-https://huggingface.co/datasets/ggml-org/ci/resolve/main/wikitext-2-raw-v1.zip}
SHA=173c87a53759e0201f33e0ccf978e510c2042d7f2cb78229d9a50d79b9e7dd08
OUT=$DIR/wiki.test.raw

say() { echo "get_wikitext2: $*" >&2; }
if [ -f "$OUT" ] && [ "$(sha256sum "$OUT" | cut -d' ' -f1)" = "$SHA" ]; then
    echo "$OUT"
    exit 0
fi
mkdir -p "$DIR"
zip=$DIR/wikitext-2-raw-v1.zip.tmp.$$
trap 'rm -f "$zip" "$OUT.tmp"' EXIT
say "downloading $URL"
if command -v curl >/dev/null 2>&1; then
    curl -fL --retry 3 -o "$zip" "$URL" || { say "download failed: $URL"; exit 1; }
elif command -v wget >/dev/null 2>&1; then
    wget -q -O "$zip" "$URL" || { say "download failed: $URL"; exit 1; }
else
    say "neither curl nor wget is installed"
    exit 1
fi
python3 -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
name = [n for n in z.namelist() if n.endswith("wiki.test.raw")][0]
open(sys.argv[2], "wb").write(z.read(name))' "$zip" "$OUT.tmp" 2>/dev/null ||
    unzip -p "$zip" "wikitext-2-raw/wiki.test.raw" >"$OUT.tmp" || { say "cannot unpack wiki.test.raw from the archive"; exit 1; }
got=$(sha256sum "$OUT.tmp" | cut -d' ' -f1)
if [ "$got" != "$SHA" ]; then
    say "wiki.test.raw has SHA-256 $got, expected $SHA"
    exit 1
fi
mv "$OUT.tmp" "$OUT"
echo "$OUT"
