#!/bin/sh
# tests/gpu_prepare.sh — run HERE (a machine with network and a built
# build/pq), from the repo root, before tests/gpu_check.sh runs on the GPU
# machine, which can reach nothing and has neither ../shared nor (perhaps)
# pq's build dependencies. Fills .gpu-carry/ (ignored by git through
# .git/info/exclude; the device tool carries at most 64 MiB in all):
#   .gpu-carry/debs/       libjansson, libzstd and OpenBLAS .debs (apt-get
#                          download; gpu_check.sh unpacks them under /tmp)
#   .gpu-carry/shared/     a copy of ../shared (fixtures, texts: ~10 MB)
#   .gpu-carry/q/NAME/     the fixture quantized in each scheme (RTN, here)
#   .gpu-carry/cpu_ppl.txt NAME|MODEL DIR|CPU perplexity, computed here with
#                          the command gpu_check.sh repeats with --device cuda
# SmolLM2-135M (98 MB as Q4_1 GGUF, 270 MB as F16) does not fit the 64 MiB
# the device tool carries: gpu_check.sh checks a pq checkpoint of it when
# .gpu-carry/smollm2/ holds one and cpu_ppl.txt a line for it (add both by
# hand where a larger carry is possible), and the GGUF itself, CPU and GPU
# both measured there, when the GPU machine has it cached
# (tools/get_smollm2.sh's path).
# Then: run(command="sh tests/gpu_check.sh", carry=[".gpu-carry"], timeout_s=540)
set -eu
SHARED=${PQ_SHARED:-../shared}
PQ=${PQ:-build/pq}
[ -x "$PQ" ] || { echo "gpu_prepare: $PQ not built (make -j2 first)" >&2; exit 1; }
mkdir -p .gpu-carry/debs
EXCLUDE=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$EXCLUDE")"
grep -qx '/.gpu-carry/' "$EXCLUDE" 2>/dev/null || echo '/.gpu-carry/' >>"$EXCLUDE"
if ! ls .gpu-carry/debs/libjansson4_*.deb >/dev/null 2>&1; then
    (cd .gpu-carry/debs && apt-get download libjansson4 libjansson-dev libzstd1 libzstd-dev libopenblas0-pthread \
        libgfortran5 libquadmath0)
fi
rm -rf .gpu-carry/shared .gpu-carry/q
: >.gpu-carry/prepare.log
cp -r "$SHARED" .gpu-carry/shared
mkdir -p .gpu-carry/q
F=.gpu-carry/shared/fixtures/stories260K
TEXT=.gpu-carry/shared/data/tinystories_val_prefix.txt
# the perplexity command both machines run (gpu_check.sh has the same line)
ppl_cpu() {
    "$PQ" ppl "$1" --text "$TEXT" --protocol gptq --bos --ctx 256 --max-windows 200 --device cpu --json \
        2>>.gpu-carry/prepare.log |
        sed -n 's/.*"ppl": \([0-9.eE+-]*\).*/\1/p'
}
: >.gpu-carry/cpu_ppl.txt.tmp
while IFS='|' read -r name args; do
    dir=$F
    if [ -n "$args" ]; then
        dir=.gpu-carry/q/$name
        # shellcheck disable=SC2086
        "$PQ" quantize "$F" -o "$dir" $args >>.gpu-carry/prepare.log 2>&1 ||
            { echo "gpu_prepare: pq quantize $args failed (.gpu-carry/prepare.log)" >&2; exit 1; }
    fi
    v=$(ppl_cpu "$dir")
    [ -n "$v" ] || { echo "gpu_prepare: no perplexity for $name" >&2; exit 1; }
    echo "$name|$dir|$v" >>.gpu-carry/cpu_ppl.txt.tmp
    echo "cpu ppl $name: $v"
done <<EOF
fp16|
w4a16_g128|--scheme w4a16
w4a16_g32|--scheme w4a16 --group 32
w4a16_g128_asym|--scheme w4a16 --asym
w3a16_g32_asym|--scheme w4a16 --bits 3 --group 32 --asym
w8a16|--scheme w8a16
fp8|--scheme fp8
fp8_tensor|--scheme fp8 --fp8-scale tensor
w8a8|--scheme w8a8
fp8_dynamic|--scheme fp8-dynamic
EOF
mv .gpu-carry/cpu_ppl.txt.tmp .gpu-carry/cpu_ppl.txt
du -sh .gpu-carry
