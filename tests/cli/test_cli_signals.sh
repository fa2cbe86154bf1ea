#!/bin/sh
# What ends a run early, and what it leaves (issue 10): a model file
# truncated while pq reads it is a one-line "changed on disk" error naming
# the file, exit 1, its temporary directory removed (item 9: it was SIGBUS,
# exit 135, the directory left); SIGINT and SIGTERM remove the temporary
# directory of every command (item 11), and a resumable run's journal
# directory stays for --resume with a line saying so.
#
# Runs are held without timers, as in test_cli_outputs.sh: the text pq
# reads (--text, --calib) is a FIFO, so opening it for writing returns once
# pq reads it, after it has mapped the model and (quantize, calibrate)
# created its temporary directory.
. tests/cli/lib.sh

CALIB=$SHARED/data/c4_validation_2k.txt
TEXT=$SHARED/data/tinystories_val_prefix.txt
G="--method gptq --nsamples 2 --seqlen 64"

# paused NAME TEXTFLAG -- command...: starts the command with "TEXTFLAG FIFO" appended, holds fd 3 open for
# writing to the FIFO once the command reads it (returns 1 if it exited first); its pid in $cmd_pid
paused() {
    name=$1 flag=$2; shift 3
    fifo=$TMP/$name.fifo
    rm -f "$fifo" "$TMP/$name.rc" && mkfifo "$fifo"
    ("$@" "$flag" "$fifo" >"$TMP/$name.out" 2>"$TMP/$name.err"; echo $? >"$TMP/$name.rc"; exec 9<>"$fifo") &
    wrapper=$!
    exec 3>"$fifo"
    [ ! -e "$TMP/$name.rc" ] || return 1
    cmd_pid=$(ps -o pid= --ppid $wrapper | tr -d ' ')
}
# finish NAME FILE: writes FILE to the paused command, closes the FIFO, waits; exit status in $rc
finish_paused() {
    cat "$2" >&3 2>/dev/null
    exec 3>&-
    wait $wrapper
    rc=$(cat "$TMP/$1.rc")
}

# ---- item 9: a model file truncated while pq runs -----------------------------------------
truncated() { # what, text file, command... (run on a fresh copy of the fixture in $TMP/t)
    what=$1 text=$2; shift 2
    rm -rf "$TMP/t" && mkdir "$TMP/t" && cp "$FIXTURE"/*.json "$FIXTURE/model.safetensors" "$TMP/t/"
    if ! paused trunc "$@"; then
        fail "$what: pq exited before reading its text: $(cat "$TMP/trunc.err")"
        return
    fi
    truncate -s 1000 "$TMP/t/model.safetensors"
    finish_paused trunc "$text"
    last=$(tail -n 1 "$TMP/trunc.err")
    if [ "$rc" -eq 1 ] && [ "$last" = "pq $cmd: $TMP/t/model.safetensors: changed on disk while pq was reading it (it is shorter than when it was opened)" ] &&
        no_leftovers "$TMP/tout" && [ ! -e "$TMP/tout" ]; then
        ok "$what: the model truncated while pq ran: exit 1, $last; no temporary directory left"
    else
        fail "$what: exit $rc, $(cat "$TMP/trunc.err"); $(ls -d "$TMP"/tout* 2>&1)"
    fi
}
cmd=ppl truncated "pq ppl" "$TEXT" --text -- $PQ ppl "$TMP/t" --ctx 64 --max-windows 4 --device cpu
cmd=quantize truncated "pq quantize --method gptq" "$CALIB" --calib -- $PQ quantize "$TMP/t" -o "$TMP/tout" $G
cmd=calibrate truncated "pq calibrate" "$CALIB" --calib -- $PQ calibrate "$TMP/t" -o "$TMP/tout" --method fp8 \
    --nsamples 2 --seqlen 64

# ---- item 11: SIGINT / SIGTERM remove the temporary directory of every command --------------------
signalled() { # what, signal, output, command...
    what=$1 sig=$2 out=$3; shift 3
    if ! paused sig --calib -- "$@"; then
        fail "$what: pq exited before reading its text: $(cat "$TMP/sig.err")"
        return
    fi
    tmpdir=$(ls -d "$out".pq-tmp-* 2>/dev/null)
    kill -s "$sig" "$cmd_pid"
    finish_paused sig /dev/null
    case $sig in INT) want=130 ;; *) want=143 ;; esac
    if [ -n "$tmpdir" ] && [ "$rc" -eq "$want" ] && [ ! -e "$tmpdir" ] && no_leftovers "$out" && [ ! -e "$out" ]; then
        ok "$what: SIG$sig while it ran (its $tmpdir existed): exit $rc, nothing left"
    else
        fail "$what: SIG$sig: exit $rc (want $want), temporary '$tmpdir', $(cat "$TMP/sig.err"); $(ls -d "$out"* 2>&1)"
    fi
}
signalled "pq quantize" INT "$TMP/q" $PQ quantize "$FIXTURE" -o "$TMP/q" $G
signalled "pq quantize" TERM "$TMP/q" $PQ quantize "$FIXTURE" -o "$TMP/q" $G
signalled "pq calibrate" TERM "$TMP/s.safetensors" $PQ calibrate "$FIXTURE" -o "$TMP/s.safetensors" --method fp8 \
    --nsamples 2 --seqlen 64

# a resumable run interrupted once its journal exists: the directory stays, with a line saying so
o=$TMP/k
env PQ_TEST_KILL_AFTER_JOURNAL=2 $PQ quantize "$FIXTURE" -o "$o" $G --calib "$CALIB" >/dev/null 2>&1
if paused res --calib -- $PQ quantize "$FIXTURE" -o "$o" $G --resume; then
    kill -s TERM "$cmd_pid"
    finish_paused res /dev/null
    kept=$(ls -d "$o".pq-tmp-* 2>/dev/null)
    [ "$rc" -eq 143 ] && [ -f "$kept/pq-journal.json" ] &&
        grep -q "^pq quantize: interrupted; the finished blocks are kept in $kept (the same command with --resume continues)$" "$TMP/res.err" &&
        ok "SIGTERM of a resumed run: its journal directory stays, and stderr says so" ||
        fail "SIGTERM of a resumed run: exit $rc, $(cat "$TMP/res.err"); $(ls -la "$o".pq-tmp-* 2>&1)"
else
    fail "the resumed run did not reach its calibration: $(cat "$TMP/res.err")"
fi
finish
