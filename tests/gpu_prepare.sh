#!/bin/sh
# tests/gpu_prepare.sh — run HERE (a machine with network), from the repo
# root, before tests/gpu_check.sh runs on the GPU machine, which can reach
# nothing and has neither ../shared nor (perhaps) pq's build dependencies.
# Fills .gpu-carry/ (ignored by git through .git/info/exclude):
#   .gpu-carry/debs/    libjansson, libzstd and OpenBLAS .debs (apt-get
#                       download; gpu_check.sh unpacks them under /tmp)
#   .gpu-carry/shared/  a copy of ../shared (fixtures, texts: ~10 MB)
# Then: run(command="sh tests/gpu_check.sh", carry=[".gpu-carry"], timeout_s=540)
set -eu
SHARED=${PQ_SHARED:-../shared}
mkdir -p .gpu-carry/debs
grep -qx '/.gpu-carry/' .git/info/exclude 2>/dev/null || echo '/.gpu-carry/' >>.git/info/exclude
if ! ls .gpu-carry/debs/libjansson4_*.deb >/dev/null 2>&1; then
    (cd .gpu-carry/debs && apt-get download libjansson4 libjansson-dev libzstd1 libzstd-dev libopenblas0-pthread \
        libgfortran5 libquadmath0)
fi
rm -rf .gpu-carry/shared
cp -r "$SHARED" .gpu-carry/shared
du -sh .gpu-carry
