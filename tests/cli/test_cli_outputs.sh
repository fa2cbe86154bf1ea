#!/bin/sh
# The output protocol of every command that writes (formats/outdir.h), as
# issue 10 found it broken: --force never replaces an input of the run
# (item 1); an OUT that appears while a run writes is never replaced without
# --force, and of two runs to one OUT one fails (item 2); pq calibrate's
# temporary file has a unique name and stale temporary directories of dead
# runs are removed, live ones left alone (item 11); pq calibrate -o a
# dangling symlink or a directory is refused before calibrating (item 13).
#
# Runs are held at a known point without timers: a calibrated run reads its
# --calib text from a FIFO after it has created its temporary directory, so
# opening the FIFO for writing returns once the run is there (`paused`),
# and the run goes on when the text is written and the FIFO closed
# (`resume_paused`). A wrapper opens the FIFO itself once pq has exited, so
# a run that fails before reading it cannot hang the test.
. tests/cli/lib.sh

CALIB=$SHARED/data/c4_validation_2k.txt
G="--method gptq --nsamples 2 --seqlen 64"
G_CAL="--nsamples 2 --seqlen 64"
M=$TMP/m
mkdir -p "$M" && cp "$FIXTURE"/*.json "$FIXTURE/model.safetensors" "$M/"
sum_of() { sha256sum "$1" | cut -d' ' -f1; }
weights=$(sum_of "$M/model.safetensors")
intact() { [ "$(sum_of "$M/model.safetensors")" = "$weights" ] && [ -f "$M/config.json" ] && [ -f "$M/tokenizer.json" ]; }

# paused NAME FD -- command...: starts the command with "--calib FIFO" appended and opens FD for writing
# to the FIFO, which returns once the command reads it (or has exited: then paused fails)
paused() {
    name=$1 fd=$2; shift 3
    fifo=$TMP/$name.fifo
    rm -f "$fifo" "$TMP/$name.rc" && mkfifo "$fifo"
    # the FIFOs other paused commands write to stay closed in this one (they would never see their end)
    (exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&-
     "$@" --calib "$fifo" >"$TMP/$name.out" 2>"$TMP/$name.err"; echo $? >"$TMP/$name.rc"; exec 9<>"$fifo") &
    eval "pid_$name=\$!; exec $fd>\"\$fifo\""
    [ ! -e "$TMP/$name.rc" ]
}
# resume_paused NAME FD: writes the text to FD, closes it, waits; the command's exit status in $rc
resume_paused() {
    eval "cat \"\$CALIB\" >&$2 2>/dev/null; exec $2>&-; wait \$pid_$1"
    rc=$(cat "$TMP/$1.rc")
}

# ---- item 1: --force never destroys the run's own inputs ----------------------------------
expect_fail 2 "$M: is or holds $M, an input of this run" "quantize -o the model directory --force" -- \
    $PQ quantize "$M" -o "$M" --force
intact && ok "the model directory as OUT with --force: refused, the source intact" || fail "the source changed"
expect_fail 2 "$M/model.safetensors: is $M/model.safetensors, an input" "quantize -o the weights file --force" -- \
    $PQ quantize "$M" -o "$M/model.safetensors" --force
expect_fail 2 "$TMP: is or holds $M, an input" "quantize -o the model's parent --force" -- \
    $PQ quantize "$M" -o "$TMP" --force
cp "$CALIB" "$TMP/calib.txt"
calib_sum=$(sum_of "$TMP/calib.txt")
expect_fail 2 "$M/model.safetensors: is $M/model.safetensors, an input" "calibrate -o the weights file --force" -- \
    $PQ calibrate "$M" --method awq --calib "$TMP/calib.txt" -o "$M/model.safetensors" --force
expect_fail 2 "$TMP/calib.txt: is $TMP/calib.txt, an input" "calibrate -o its calibration text --force" -- \
    $PQ calibrate "$M" --method awq --calib "$TMP/calib.txt" -o "$TMP/calib.txt" --force
expect_fail 2 "$TMP/calib.txt: is $TMP/calib.txt, an input" "quantize -o its calibration text --force" -- \
    $PQ quantize "$M" $G --calib "$TMP/calib.txt" -o "$TMP/calib.txt" --force
expect_fail 2 "$M/tokenizer.json: is $M/tokenizer.json, an input" "quantize -o the tokenizer --force" -- \
    $PQ quantize "$M" -o "$M/tokenizer.json" --force
intact && [ "$(sum_of "$TMP/calib.txt")" = "$calib_sum" ] && no_leftovers "$M" &&
    ok "after every refusal: the weights, config.json, tokenizer and calibration text intact" ||
    fail "an input changed: $(ls -la "$M")"
# a symlink to an input: --force replaces the link, never what it points to
ln -s "$M/model.safetensors" "$TMP/link.safetensors"
if $PQ calibrate "$M" --method fp8 --calib "$TMP/calib.txt" --nsamples 2 --seqlen 64 -o "$TMP/link.safetensors" \
    --force >/dev/null 2>"$TMP/err" && [ ! -L "$TMP/link.safetensors" ] && intact; then
    ok "calibrate -o a symlink to the weights --force: the link replaced by the scales file, the weights intact"
else
    fail "-o a symlink to an input: $(cat "$TMP/err"); $(ls -la "$TMP/link.safetensors")"
fi

# ---- item 2: an OUT that appears while a run writes it ------------------------------------------
O=$TMP/out2
if paused a 3 -- $PQ quantize "$M" -o "$O" $G; then
    mkdir "$O" && echo mine >"$O/keep.txt"
    resume_paused a 3
    if [ "$rc" -eq 2 ] && tail -n 1 "$TMP/a.err" | grep -q "$O: appeared while pq was writing it; not replaced" &&
        [ "$(cat "$O/keep.txt")" = mine ] && no_leftovers "$O"; then
        ok "a directory made at OUT during the run: exit 2, $(tail -n 1 "$TMP/a.err"), the directory untouched"
    else
        fail "OUT appeared: exit $rc, $(cat "$TMP/a.err"); $(ls -la "$O" "$O".* 2>&1)"
    fi
else
    fail "the run did not reach its calibration: $(cat "$TMP/a.err")"
fi
O=$TMP/out3
if paused b 4 -- $PQ quantize "$M" -o "$O" $G --seed 1 && paused c 5 -- $PQ quantize "$M" -o "$O" $G --seed 2; then
    resume_paused b 4; rc_b=$rc
    resume_paused c 5; rc_c=$rc
    seed=$(jq .calibration.seed "$O/pq.json" 2>/dev/null)
    if [ "$rc_b" -eq 0 ] && [ "$rc_c" -eq 2 ] && [ "$seed" = 1 ] && no_leftovers "$O" &&
        tail -n 1 "$TMP/c.err" | grep -q "appeared while pq was writing it"; then
        ok "two runs to one OUT: the first to finish wins (exit 0), the second exits 2 and leaves nothing"
    else
        fail "two runs: exits $rc_b and $rc_c, seed '$seed', $(tail -n 1 "$TMP/c.err"); $(ls -d "$O"* 2>&1)"
    fi
else
    fail "two paused runs: $(cat "$TMP/b.err" "$TMP/c.err")"
fi

# ---- item 11: unique temporary names; leftovers of dead runs removed, live ones kept -----------------
S=$TMP/s.safetensors
echo "a user's file" >"$S.tmp"
if $PQ calibrate "$M" --method fp8 --calib "$CALIB" --nsamples 2 --seqlen 64 -o "$S" >/dev/null 2>"$TMP/err" &&
    [ "$(cat "$S.tmp")" = "a user's file" ] && [ -z "$(ls -d "$S".pq-* 2>/dev/null)" ]; then
    ok "pq calibrate -o S leaves a user's S.tmp alone and no temporary name behind (it used the fixed S.tmp)"
else
    fail "calibrate and S.tmp: $(cat "$TMP/err"); $(cat "$S.tmp"); $(ls -d "$S".* 2>&1)"
fi
# a file size limit while pq calibrate writes (as pq quantize's in test_cli_quantize.sh): the write fails,
# exit 1, no temporary file left (SIGXFSZ killed it mid-write, leaving S.tmp)
S3=$TMP/fsz.safetensors
(ulimit -f 1 && exec $PQ calibrate "$M" --method awq --calib "$CALIB" $G_CAL -o "$S3") >/dev/null 2>"$TMP/err"
rc=$?
if [ "$rc" -eq 1 ] && tail -n 1 "$TMP/err" | grep -q "File too large" && [ -z "$(ls -d "$S3"* 2>/dev/null)" ]; then
    ok "calibrate past a file size limit: exit 1, $(tail -n 1 "$TMP/err"); nothing left"
else
    fail "calibrate past a file size limit: exit $rc, $(tail -n 2 "$TMP/err"); $(ls -d "$S3"* 2>&1)"
fi
O=$TMP/out4
if paused d 6 -- $PQ quantize "$M" -o "$O" $G; then
    eval "kill -9 \$(ps -o pid= --ppid \$pid_d)" # pq itself, a child of the paused wrapper
    exec 6>&-; wait "$pid_d" 2>/dev/null
    stale=$(ls -d "$O".pq-tmp-* 2>/dev/null)
    # a live run's temporary directory: locked by a holder until the test releases it
    mkdir "$O.pq-tmp-LIVE00" && rm -f "$TMP/held" "$TMP/release" && mkfifo "$TMP/held" "$TMP/release"
    flock "$O.pq-tmp-LIVE00" sh -c "echo locked >'$TMP/held'; cat '$TMP/release' >/dev/null" &
    holder=$!
    read -r _ <"$TMP/held"
    if [ -n "$stale" ] && $PQ quantize "$M" -o "$O" >/dev/null 2>"$TMP/err" && [ ! -e "$stale" ] &&
        grep -q "^pq quantize: removed 1 temporary directory of killed runs of $O ($stale)$" "$TMP/err" &&
        [ -d "$O.pq-tmp-LIVE00" ]; then
        ok "a killed run's $stale removed by the next run with a note; a locked (live) one left alone"
    else
        fail "stale leftovers: '$stale', $(cat "$TMP/err"); $(ls -d "$O"* 2>&1)"
    fi
    echo release >"$TMP/release"; wait "$holder"
else
    fail "the run to kill did not reach its calibration: $(cat "$TMP/d.err")"
fi
S2=$TMP/s2.safetensors
if paused e 7 -- $PQ calibrate "$M" --method fp8 $G_CAL -o "$S2" && paused f 8 -- $PQ calibrate "$M" --method fp8 $G_CAL -o "$S2"; then
    resume_paused e 7; rc_e=$rc
    resume_paused f 8; rc_f=$rc
    [ "$rc_e" -eq 0 ] && [ "$rc_f" -eq 2 ] && [ -f "$S2" ] && [ -z "$(ls -d "$S2".* 2>/dev/null)" ] &&
        tail -n 1 "$TMP/f.err" | grep -q "$S2: appeared while pq was writing it" &&
        ok "two pq calibrate to one file: separate temporary names, the second refused at its rename (exit 2)" ||
        fail "two calibrates: exits $rc_e $rc_f, $(cat "$TMP/f.err"); $(ls -d "$S2"* 2>&1)"
else
    fail "two paused calibrates: $(cat "$TMP/e.err" "$TMP/f.err")"
fi

# ---- item 13: pq calibrate -o a dangling symlink, -o a directory ---------------------------------
ln -s "$TMP/nowhere" "$TMP/dangling"
expect_fail 2 "$TMP/dangling: already exists (--force replaces it)" "calibrate -o a dangling symlink" -- \
    $PQ calibrate "$M" --method fp8 $G_CAL --calib "$CALIB" -o "$TMP/dangling"
[ -L "$TMP/dangling" ] && [ ! -e "$TMP/nowhere" ] && ok "the dangling symlink is left as it was" ||
    fail "the dangling symlink changed: $(ls -la "$TMP/dangling" "$TMP/nowhere" 2>&1)"
mkdir -p "$TMP/adir"
for force in "" --force; do
    expect_fail 2 "$TMP/adir: is a directory; pq calibrate writes a file" "calibrate -o a directory $force" -- \
        $PQ calibrate "$M" --method fp8 $G_CAL --calib "$CALIB" -o "$TMP/adir" $force
    grep -q "memory estimate" "$TMP/err" && fail "calibrate -o a directory $force: it calibrated first"
done
finish
