# Sourced by the llama.cpp oracle tests: llama.cpp's tools (llama-quantize,
# llama-perplexity) and libggml-base, built on the CPU from the source that
# the PyPI package llama-cpp-python 0.3.36 vendors, in a cache outside the
# clone ($PQ_LLAMA_BUILD, default ~/.cache/pq/llama-build; the source is
# unpacked into ~/.cache/pq/llama-src). Built once on first use (minutes on
# two cores); when the sdist cannot be downloaded the calling test prints
# "skip" and exits 0.
LLAMA_CACHE=${PQ_CACHE:-$HOME/.cache/pq}
LLAMA_BUILD=${PQ_LLAMA_BUILD:-$LLAMA_CACHE/llama-build}
LLAMA_VERSION=0.3.36
LLAMA_BIN=$LLAMA_BUILD/bin
llama_cpp_tools() { # WHAT: sets LLAMA_BIN or exits
    what=$1
    if [ -x "$LLAMA_BIN/llama-quantize" ] && [ -x "$LLAMA_BIN/llama-perplexity" ] && [ -f "$LLAMA_BIN/libggml-base.so" ]; then
        return 0
    fi
    src=$LLAMA_CACHE/llama-src/llama_cpp_python-$LLAMA_VERSION/vendor/llama.cpp
    log=$LLAMA_CACHE/llama-build.log
    mkdir -p "$LLAMA_CACHE/sdist" "$LLAMA_CACHE/llama-src"
    if [ ! -d "$src" ]; then
        if ! python3 -m pip download --no-deps --no-binary :all: -d "$LLAMA_CACHE/sdist" \
            "llama-cpp-python==$LLAMA_VERSION" >"$log" 2>&1; then
            echo "skip - $what: cannot download the llama-cpp-python $LLAMA_VERSION sdist ($(tail -1 "$log"))"
            exit 0
        fi
        tar -xzf "$LLAMA_CACHE/sdist/llama_cpp_python-$LLAMA_VERSION.tar.gz" -C "$LLAMA_CACHE/llama-src" || {
            echo "FAIL - $what: cannot unpack the llama-cpp-python sdist"; exit 1; }
    fi
    if ! { cmake -S "$src" -B "$LLAMA_BUILD" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=ON \
               -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF &&
           cmake --build "$LLAMA_BUILD" -j2 --target llama-quantize llama-perplexity; } >>"$log" 2>&1; then
        echo "FAIL - $what: building llama.cpp failed (see $log)"
        exit 1
    fi
}
