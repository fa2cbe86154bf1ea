#!/bin/sh
# tools/bench_compare.sh — pq side by side with llama.cpp on SmolLM2-135M
# (`make bench-compare`, issue 14), results appended to docs/PERFORMANCE.md.
#
# llama.cpp is built from the source the PyPI sdist of llama-cpp-python
# vendors (pip download --no-deps --no-binary :all:), CPU only, -march=native
# without AMX (below),
# into $PQ_CACHE/llama-build (default ~/.cache/pq), reused when it is there
# and was configured from that source. The models, all made from the cached
# SmolLM2-135M-Instruct Q4_1 GGUF (tools/get_smollm2.sh):
#   llama.cpp: F16 (llama-quantize --allow-requantize of the Q4_1 GGUF), then
#              Q8_0, Q4_0, Q4_1 of that F16 (--pure; token_embd kept F16, so
#              the tied head is F16 as in pq's checkpoints);
#   pq:        `pq convert --dtype f16` of the same GGUF (the same F16 weights
#              bit for bit), then `pq quantize` (RTN) to the matching
#              compressed-tensors schemes: W8 g32 sym <-> Q8_0, W4 g32 sym <->
#              Q4_0, W4 g32 asym <-> Q4_1.
# Two comparisons, ROUNDS interleaved rounds each (the order of the two tools
# alternates), minimum / median over the rounds of each side:
#   - perplexity: `pq ppl --protocol llamacpp --ctx 512` vs `llama-perplexity
#     -c 512` on the same text (a prefix of wiki.test.raw holding WINDOWS
#     windows), the same windows, PPL_THREADS threads; plus, once, pq ppl
#     of llama.cpp's own files (GGUF blocks dequantized exactly: the same
#     weights), so that the PPL of the two engines can be compared where
#     the two tools' quantizers do not decide it;
#   - decode: `pq generate` (a 4-token prompt, 128 decode steps) vs
#     `llama-bench -p 0 -n 128` (tg128) at F16, Q8_0, Q4_0, DECODE_THREADS.
# Speeds are tokens per second of wall time (each tool's own timing of the
# evaluation) and tokens per second of CPU time (all threads; pq reports its
# own, llama.cpp's is the process's less that of a run that stops after
# loading: a text too short to score, resp. tg1). On a shared machine the CPU
# time is the steadier of the two; both are printed.
# Then tools/bench_compare_llmc.sh (llm-compressor vs pq) with
# PQ, PQ_BENCH_F16 (the F16 checkpoint), PQ_CACHE in its environment (its
# PPL windows are its own, PQ_BENCH_LLMC_WINDOWS); what it prints is
# appended to the same section.
#
#   make bench-compare
#   PQ_BENCH_ROUNDS=5 PQ_BENCH_WINDOWS=16 PQ_BENCH_PPL_THREADS="1 2" sh tools/bench_compare.sh
# Environment: PQ (build/pq), PQ_SHARED (../shared), PQ_CACHE (~/.cache/pq),
# PQ_LLAMA_CPP_PYTHON (0.3.36: the sdist version), PQ_BENCH_ROUNDS (3),
# PQ_BENCH_WINDOWS (8), PQ_BENCH_PPL_THREADS (2), PQ_BENCH_DECODE_THREADS
# ("1 2"), PQ_BENCH_DOC (docs/PERFORMANCE.md; "-": print only).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PQ=${PQ:-$ROOT/build/pq}
SHARED=${PQ_SHARED:-$ROOT/../shared}
CACHE=${PQ_CACHE:-$HOME/.cache/pq}
VER=${PQ_LLAMA_CPP_PYTHON:-0.3.36}
ROUNDS=${PQ_BENCH_ROUNDS:-3}
WINDOWS=${PQ_BENCH_WINDOWS:-8}
PPL_THREADS=${PQ_BENCH_PPL_THREADS:-2}
DECODE_THREADS=${PQ_BENCH_DECODE_THREADS:-1 2}
DOC=${PQ_BENCH_DOC:-$ROOT/docs/PERFORMANCE.md}
SRC=$CACHE/llama-src/llama_cpp_python-$VER/vendor/llama.cpp
LB=$CACHE/llama-build
BIN=$LB/bin
MODELS=$CACHE/bench-compare
NPROC=$(nproc)

say() { echo "bench_compare: $*" >&2; }
die() { say "$*"; exit 1; }

# ---- llama.cpp -------------------------------------------------------------
# Built without AMX: on a Xeon with AMX tiles this llama.cpp's AMX kernels
# crash llama-perplexity on Q8_0 (SIGSEGV; docs/PERFORMANCE.md), and give a
# wrong Q4_0 PPL on SmolLM2 as first reported; the flags win over -march=native.
NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
llama_ok() {
    for b in llama-perplexity llama-bench llama-quantize; do [ -x "$BIN/$b" ] || return 1; done
    grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$SRC" "$LB/CMakeCache.txt" 2>/dev/null &&
        grep -qx "CMAKE_C_FLAGS:STRING=$NO_AMX" "$LB/CMakeCache.txt"
}
if ! llama_ok; then
    if [ ! -d "$SRC" ]; then
        mkdir -p "$CACHE/sdist" "$CACHE/llama-src"
        tgz=$CACHE/sdist/llama_cpp_python-$VER.tar.gz
        if [ ! -f "$tgz" ]; then
            say "downloading the llama-cpp-python==$VER sdist with pip into $CACHE/sdist"
            python3 -m pip download -q --no-deps --no-binary :all: -d "$CACHE/sdist" "llama-cpp-python==$VER" >&2 ||
                die "pip download llama-cpp-python==$VER failed"
        fi
        tar -xzf "$tgz" -C "$CACHE/llama-src" || die "cannot unpack $tgz"
        [ -d "$SRC" ] || die "$tgz holds no vendor/llama.cpp"
    fi
    say "building llama.cpp (CPU, native without AMX) from $SRC into $LB"
    rm -rf "$LB"
    cmake -S "$SRC" -B "$LB" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DCMAKE_C_FLAGS="$NO_AMX" -DCMAKE_CXX_FLAGS="$NO_AMX" \
        >"$CACHE/llama-build.log" 2>&1 &&
        cmake --build "$LB" -j "$NPROC" --target llama-perplexity llama-bench llama-quantize \
            >>"$CACHE/llama-build.log" 2>&1 || die "the llama.cpp build failed: see $CACHE/llama-build.log"
    llama_ok || die "the llama.cpp build left no llama-perplexity / llama-bench / llama-quantize in $BIN"
fi

# ---- models ----------------------------------------------------------------
[ -x "$PQ" ] || die "$PQ not built (make)"
G=$(sh "$ROOT/tools/get_smollm2.sh") || die "no SmolLM2 GGUF"
mkdir -p "$MODELS"
GG=$MODELS/gguf
if [ ! -f "$GG/Q4_1.gguf" ]; then
    rm -rf "$GG.tmp" && mkdir -p "$GG.tmp"
    say "making the llama.cpp models in $GG"
    "$BIN/llama-quantize" --allow-requantize "$G" "$GG.tmp/F16.gguf" F16 >"$GG.tmp/log" 2>&1 || die "llama-quantize F16 failed"
    for t in Q8_0 Q4_0 Q4_1; do
        "$BIN/llama-quantize" --pure --token-embedding-type f16 --output-tensor-type f16 "$GG.tmp/F16.gguf" \
            "$GG.tmp/$t.gguf" "$t" "$NPROC" >>"$GG.tmp/log" 2>&1 || die "llama-quantize $t failed"
    done
    rm -rf "$GG" && mv "$GG.tmp" "$GG"
fi
RUN=$(mktemp -d "$MODELS/run.XXXXXX")
trap 'rm -rf "$RUN"' EXIT INT TERM
say "making pq's checkpoints in $RUN"
"$PQ" convert "$G" -o "$RUN/F16" --dtype f16 >/dev/null 2>&1 || die "pq convert failed"
"$PQ" quantize "$RUN/F16" -o "$RUN/Q8_0" --scheme w8a16 --group 32 --sym >/dev/null 2>&1 || die "pq quantize w8 failed"
"$PQ" quantize "$RUN/F16" -o "$RUN/Q4_0" --scheme w4a16 --group 32 --sym >/dev/null 2>&1 || die "pq quantize w4 failed"
"$PQ" quantize "$RUN/F16" -o "$RUN/Q4_1" --scheme w4a16 --group 32 --asym >/dev/null 2>&1 || die "pq quantize w4 asym failed"
pq_scheme() { case $1 in F16) echo "F16" ;; Q8_0) echo "W8A16 g32 sym" ;; Q4_0) echo "W4A16 g32 sym" ;; *) echo "W4A16 g32 asym" ;; esac; }

TEXT=$RUN/text.txt
head -c $(((WINDOWS + 1) * 512 * 5)) "$SHARED/data/wiki.test.raw" >"$TEXT"
echo "hi" >"$RUN/tiny.txt"
cpu_of() { awk '{print $1 + $2}' "$1"; } # /usr/bin/time -f "%U %S" output
T() { /usr/bin/time -f "%U %S" -o "$RUN/cpu" "$@"; }
ENGINE=?
LLAMA_COMMIT=?
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
# the tree measured (taken now: the report is written at the end)
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo "-dirty")
RES=$RUN/results # lines: kind type threads tool round wall_tps cpu_tps [ppl]

# ---- perplexity ------------------------------------------------------------
for th in $PPL_THREADS; do
    for r in $(seq 1 "$ROUNDS"); do
        for t in F16 Q8_0 Q4_0 Q4_1; do
            for side in $( [ $((r % 2)) = 1 ] && echo "llama pq" || echo "pq llama"); do
                say "ppl $t threads $th round $r: $side"
                if [ "$side" = pq ]; then
                    T "$PQ" ppl "$RUN/$t" --text "$TEXT" --protocol llamacpp --ctx 512 --max-windows "$WINDOWS" \
                        --threads "$th" --device cpu --json >"$RUN/out" 2>"$RUN/err" || die "pq ppl: $(tail -1 "$RUN/err")"
                    [ "$(jq .windows "$RUN/out")" = "$WINDOWS" ] || die "pq ppl scored $(jq .windows "$RUN/out") windows"
                    ENGINE=$(jq -r .engine "$RUN/out")
                    jq -r --arg t "$t" --arg th "$th" --arg r "$r" \
                        '"ppl \($t) \($th) pq \($r) \(.tokens_per_s) \(.windows * .ctx / .cpu_seconds) \(.ppl)"' \
                        "$RUN/out" >>"$RES"
                else
                    T "$BIN/llama-perplexity" -m "$GG/$t.gguf" -f "$RUN/tiny.txt" -c 512 -t "$th" >/dev/null 2>&1 || true
                    base=$(cpu_of "$RUN/cpu")
                    T "$BIN/llama-perplexity" -m "$GG/$t.gguf" -f "$TEXT" -c 512 --chunks "$WINDOWS" -t "$th" \
                        >"$RUN/out" 2>&1 || die "llama-perplexity failed: $(tail -1 "$RUN/out")"
                    grep -q "calculating perplexity over $WINDOWS chunks" "$RUN/out" ||
                        die "llama-perplexity did not score $WINDOWS chunks"
                    ppl=$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' "$RUN/out")
                    [ -n "$ppl" ] || die "cannot read llama-perplexity's output"
                    # the evaluation's wall time from the log's timestamps (minutes.seconds.ms.us): from the line
                    # announcing the chunks to the final estimate
                    awk -v t="$t" -v th="$th" -v r="$r" -v w="$WINDOWS" -v ppl="$ppl" -v base="$base" \
                        -v cpu="$(cpu_of "$RUN/cpu")" 'function ts(f, a) { split(f, a, "."); return a[1] * 60 + a[2] + a[3] / 1e3 + a[4] / 1e6 }
                        /calculating perplexity over/ { t0 = ts($1) } /Final estimate/ { t1 = ts($1) }
                        END { printf "ppl %s %s llama %s %.6g %.6g %s\n", t, th, r, w * 512 / (t1 - t0), w * 512 / (cpu - base), ppl }' \
                        "$RUN/out" >>"$RES"
                fi
            done
        done
    done
done

# pq on llama.cpp's own files (the same weights: GGUF blocks are dequantized
# exactly), once each: the engines' PPL on identical models
for t in F16 Q8_0 Q4_0 Q4_1; do
    say "ppl $t: pq on llama.cpp's file"
    "$PQ" ppl "$GG/$t.gguf" --text "$TEXT" --protocol llamacpp --ctx 512 --max-windows "$WINDOWS" --device cpu --json \
        >"$RUN/out" 2>"$RUN/err" || die "pq ppl $GG/$t.gguf: $(tail -1 "$RUN/err")"
    jq -r --arg t "$t" '"same \($t) \(.ppl)"' "$RUN/out" >>"$RES"
done

# ---- decode ----------------------------------------------------------------
for th in $DECODE_THREADS; do
    for r in $(seq 1 "$ROUNDS"); do
        for t in F16 Q8_0 Q4_0; do
            for side in $( [ $((r % 2)) = 1 ] && echo "llama pq" || echo "pq llama"); do
                say "decode $t threads $th round $r: $side"
                if [ "$side" = pq ]; then
                    "$PQ" generate "$RUN/$t" --prompt "Once upon a time" -n 129 --threads "$th" --device cpu --json \
                        >"$RUN/out" 2>"$RUN/err" || die "pq generate: $(tail -1 "$RUN/err")"
                    jq -r --arg t "$t" --arg th "$th" --arg r "$r" \
                        '"decode \($t) \($th) pq \($r) \(.decode_tokens_per_s) \(.decode_steps / .decode_cpu_seconds) \(.decode_steps)"' \
                        "$RUN/out" >>"$RES"
                else
                    T "$BIN/llama-bench" -m "$GG/$t.gguf" -p 0 -n 1 -t "$th" -r 1 -o json >/dev/null 2>&1 ||
                        die "llama-bench failed"
                    base=$(cpu_of "$RUN/cpu")
                    T "$BIN/llama-bench" -m "$GG/$t.gguf" -p 0 -n 128 -t "$th" -r 1 -o json >"$RUN/out" 2>/dev/null ||
                        die "llama-bench failed"
                    ts=$(jq '.[0].samples_ts[0]' "$RUN/out")
                    LLAMA_COMMIT=$(jq -r '.[0].build_commit' "$RUN/out")
                    awk -v t="$t" -v th="$th" -v r="$r" -v ts="$ts" -v base="$base" -v cpu="$(cpu_of "$RUN/cpu")" \
                        'BEGIN { printf "decode %s %s llama %s %s %.6g 128\n", t, th, r, ts, 127 / (cpu - base) }' >>"$RES"
                fi
            done
        done
    done
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- report ----------------------------------------------------------------
# stats KIND TYPE THREADS TOOL COLUMN -> "min median max" of that column over the rounds
stats() {
    awk -v k="$1" -v t="$2" -v th="$3" -v tool="$4" -v c="$5" '$1 == k && $2 == t && $3 == th && $4 == tool { v[n++] = $c }
        END { if (!n) { print "- - -"; exit } for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { x = v[i]; v[i] = v[j]; v[j] = x }
              m = n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2; printf "%g %g %g\n", v[0], m, v[n - 1] }' "$RES"
}
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
FLAGS=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx512.*|amx.*|avx_vnni)$' | tr '\n' ' ')
OUT=$RUN/report.md
{
    echo
    echo "### $(date -u +%Y-%m-%d), pq $COMMIT vs llama.cpp $LLAMA_COMMIT (llama-cpp-python $VER), SmolLM2-135M"
    echo
    echo "Machine: $NPROC CPUs, $CPU; flags: $FLAGS; load average $LOAD0 at the start, $LOAD1 at the end."
    echo "pq's engine: $ENGINE."
    echo "$ROUNDS interleaved rounds; tokens/s as min / median / max over the rounds; ratio = pq / llama.cpp of the medians."
    echo
    echo "Perplexity, ctx 512, $WINDOWS windows of wiki.test.raw (\`pq ppl --protocol llamacpp\` vs \`llama-perplexity\`):"
    echo
    echo "| llama.cpp | pq | threads | PPL llama.cpp | PPL pq | diff | PPL pq, llama.cpp's file | diff | llama.cpp tok/s (wall) | pq tok/s (wall) | ratio | llama.cpp tok/CPU-s | pq tok/CPU-s | ratio |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    for th in $PPL_THREADS; do
        for t in F16 Q8_0 Q4_0 Q4_1; do
            set -- $(stats ppl $t $th llama 6) $(stats ppl $t $th pq 6) $(stats ppl $t $th llama 7) $(stats ppl $t $th pq 7) \
                $(stats ppl $t $th llama 8 | cut -d' ' -f2) $(stats ppl $t $th pq 8 | cut -d' ' -f2) \
                $(awk -v t="$t" '$1 == "same" && $2 == t { print $3 }' "$RES")
            awk -v t="$t" -v s="$(pq_scheme $t)" -v th="$th" -v a="$*" 'BEGIN { split(a, v, " ");
                printf "| %s | %s | %s | %.4f | %.4f | %+.2f%% | %.4f | %+.2f%% | %.0f / %.0f / %.0f | %.0f / %.0f / %.0f | **%.2fx** | %.0f / %.0f / %.0f | %.0f / %.0f / %.0f | **%.2fx** |\n",
                t, s, th, v[13], v[14], 100 * (v[14] / v[13] - 1), v[15], 100 * (v[15] / v[13] - 1),
                v[1], v[2], v[3], v[4], v[5], v[6], v[5] / v[2], v[7], v[8], v[9], v[10], v[11], v[12], v[11] / v[8] }'
        done
    done
    echo
    echo "Decode (\`pq generate\`, 128 steps after a 4-token prompt, vs \`llama-bench -p 0 -n 128\`, tg128):"
    echo
    echo "| llama.cpp | pq | threads | llama.cpp tok/s (wall) | pq tok/s (wall) | ratio | llama.cpp tok/CPU-s | pq tok/CPU-s | ratio |"
    echo "|---|---|---|---|---|---|---|---|---|"
    for th in $DECODE_THREADS; do
        for t in F16 Q8_0 Q4_0; do
            set -- $(stats decode $t $th llama 6) $(stats decode $t $th pq 6) $(stats decode $t $th llama 7) $(stats decode $t $th pq 7)
            awk -v t="$t" -v s="$(pq_scheme $t)" -v th="$th" -v a="$*" 'BEGIN { split(a, v, " ");
                printf "| %s | %s | %s | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f | **%.2fx** | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f | **%.2fx** |\n",
                t, s, th, v[1], v[2], v[3], v[4], v[5], v[6], v[5] / v[2], v[7], v[8], v[9], v[10], v[11], v[12], v[11] / v[8] }'
        done
    done
    steps=$(awk '$1 == "decode" && $4 == "pq" && $8 != 128 { print $8 }' "$RES" | sort -u | tr '\n' ' ')
    if [ -n "$steps" ]; then echo; echo "(pq runs that stopped early at EOS: decode steps $steps)"; fi
    echo
    PQ=$PQ PQ_BENCH_F16=$RUN/F16 PQ_CACHE=$CACHE sh "$ROOT/tools/bench_compare_llmc.sh" ||
        echo "(tools/bench_compare_llmc.sh failed: exit $?)"
} >"$OUT"
cat "$OUT"
if [ "$DOC" != "-" ]; then
    cat "$OUT" >>"$DOC"
    say "appended to $DOC"
fi
