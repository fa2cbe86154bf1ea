#!/bin/sh
# pq quantize --rotate hadamard and --target-bpw from the command line: the
# rotated checkpoint is a plain Llama (its own lm_head, tie_word_embeddings
# false) that pq ppl runs as well as the unrotated one, a seed is recorded
# and repeats the output byte for byte (its FP16 PPL equal to the
# original's within 1e-4 is tests/test_rotate.c's); a mixed run keeps to its
# budget, writes several config groups naming every linear once and the
# sensitivity table and choice in pq.json, is byte-identical for any
# --threads, is run by pq ppl and resumes; its --report (.html, .svg) is
# well-formed SVG with both plots; wrong uses are usage errors (exit 2)
# with one line.
. tests/cli/lib.sh

TEXT=$SHARED/data/tinystories_val_prefix.txt
C4=$SHARED/data/c4_validation_2k.txt
PPL_ARGS="--text $TEXT --protocol gptq --bos --ctx 256 --max-windows 10 --device cpu --json"
json_get() { sed -n "s/.*\"$2\": \\([^,]*\\),*$/\\1/p" "$1" | head -n 1; }

# --rotate: w8a16 of the rotated fixture scores as the unrotated w8a16 does (8-bit noise only)
$PQ quantize "$FIXTURE" -o "$TMP/w8" --scheme w8a16 >/dev/null 2>&1
if $PQ quantize "$FIXTURE" -o "$TMP/r1" --scheme w8a16 --rotate hadamard --rotate-seed 7 >"$TMP/out" 2>"$TMP/err" &&
    grep -q "rotated (hadamard, seed 7)" "$TMP/err" && grep -q "lm_head untied" "$TMP/err" &&
    grep -q '"tie_word_embeddings": false' "$TMP/r1/config.json" &&
    grep -q '"untied_lm_head": true' "$TMP/r1/pq.json" && grep -q '"seed": 7' "$TMP/r1/pq.json"; then
    ok "--rotate hadamard: untied lm_head said on stderr, config.json, pq.json (seed recorded)"
else
    fail "--rotate hadamard: $(cat "$TMP/out" "$TMP/err")"
fi
a=$(ppl_of "$TMP/w8"); b=$(ppl_of "$TMP/r1")
[ -n "$a" ] && [ -n "$b" ] && within "$b" "$a" 0.5 && ok "rotated w8a16 PPL $b vs unrotated $a (within 0.5%)" ||
    fail "rotated w8a16 PPL '$b' vs '$a': $(cat "$TMP/ppl_err")"
$PQ quantize "$FIXTURE" -o "$TMP/r2" --scheme w8a16 --rotate hadamard --rotate-seed 7 --threads 1 >/dev/null 2>&1
$PQ quantize "$FIXTURE" -o "$TMP/r3" --scheme w8a16 --rotate hadamard --rotate-seed 8 >/dev/null 2>&1
same_output "$TMP/r1" "$TMP/r2" && ! cmp -s "$TMP/r1/model.safetensors" "$TMP/r3/model.safetensors" &&
    ok "--rotate-seed 7 twice (2 and 1 threads): byte-identical; seed 8: other weights" ||
    fail "--rotate determinism per seed"

# --target-bpw: rtn with the sensitivity on 2 windows, the plan within the budget, any thread count
MIX="--method rtn --calib $C4 --nsamples 4 --seqlen 128 --kl-windows 2 --target-bpw 4.6"
if $PQ quantize "$FIXTURE" -o "$TMP/m1" $MIX --report "$TMP/r.html" --json >"$TMP/out" 2>"$TMP/err"; then
    bpw=$(sed -n 's/.*"bits_per_weight": \([0-9.]*\).*/\1/p' "$TMP/out")
    awk -v b="$bpw" 'BEGIN { exit !(b > 4.2 && b <= 4.6) }' &&
        grep -q "mixed plan: " "$TMP/err" && grep -q '"scheme": "mixed"' "$TMP/m1/pq.json" &&
        ok "--target-bpw 4.6: $bpw bits per weight, pq.json says mixed" ||
        fail "--target-bpw 4.6: bpw '$bpw', $(tail -n 3 "$TMP/err")"
    # config.json: several config groups, every linear in one group's targets or in ignore; pq.json: the
    # table (per unit: bits and predicted KL of every menu item, the choice) and the uniform points
    if python3 - "$TMP/m1" <<'PY' >"$TMP/py" 2>&1; then
import json, sys
d = sys.argv[1]
qc = json.load(open(d + "/config.json"))["quantization_config"]
mix = json.load(open(d + "/pq.json"))["mixed"]
groups = qc["config_groups"]
assert len(groups) > 1, "one config group"
named = [t for g in groups.values() for t in g["targets"]] + qc["ignore"]
linears = [f"model.layers.{l}.{m}" for l in range(5) for m in ("self_attn.q_proj", "self_attn.k_proj",
           "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")]
assert all(named.count(x) == 1 for x in linears), "a linear named twice or never"
menu, units = mix["menu"], mix["units"]
assert len(units) == 20 and len(mix["uniform"]) == len(menu), "table size"
for u in units:
    assert u["choice"] in menu and len(u["bits"]) == len(menu) and len(u["predicted_kl"]) == len(menu), u
print(f"{len(groups)} config groups, {len(units)} units x {len(menu)} items")
PY
        ok "--target-bpw: $(cat "$TMP/py"); every linear in exactly one group or ignore"
    else
        fail "--target-bpw tables: $(tail -n 2 "$TMP/py")"
    fi
else
    fail "--target-bpw: $(cat "$TMP/out" "$TMP/err")"
fi
# --report: the HTML's plot and the .svg are well-formed SVG with the Pareto plot and the sensitivity
$PQ quantize "$FIXTURE" -o "$TMP/m2" $MIX --threads 1 --report "$TMP/r.svg" >/dev/null 2>&1
if python3 - "$TMP/r.html" "$TMP/r.svg" <<'PY' >"$TMP/py" 2>&1; then
import sys, xml.etree.ElementTree as ET
html = open(sys.argv[1]).read()
assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>"), "html frame"
svg = html[html.index("<svg"):html.index("</svg>") + 6]
for root in (ET.fromstring(svg), ET.parse(sys.argv[2]).getroot()):
    assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
    text = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert "Perplexity against bits per weight" in text and "Sensitivity" in text, text[:200]
    assert len(list(root.iter("{http://www.w3.org/2000/svg}circle"))) >= 6, "the uniform points (fp16 off the axis)"
PY
    ok "--report: HTML (its plot well-formed SVG) and .svg, both with the Pareto plot and the sensitivity"
else
    fail "--report: $(tail -n 2 "$TMP/py")"
fi
same_output "$TMP/m1" "$TMP/m2" && ok "--target-bpw: byte-identical with 2 and 1 threads" ||
    fail "--target-bpw: outputs differ across --threads"
p=$(ppl_of "$TMP/m1")
[ -n "$p" ] && ok "pq ppl runs the mixed checkpoint: PPL $p" || fail "pq ppl mixed: $(cat "$TMP/ppl_err")"

# gptq, rotated and mixed (fp16 in the menu), killed after block 3's journal entry, resumed: the same files
GM="--method gptq --calib $C4 --nsamples 4 --seqlen 128 --kl-windows 2 --target-bpw 6 --menu w4g32,w8,fp16 --rotate hadamard"
$PQ quantize "$FIXTURE" -o "$TMP/g1" $GM >/dev/null 2>&1
PQ_TEST_KILL_AFTER_JOURNAL=3 $PQ quantize "$FIXTURE" -o "$TMP/g2" $GM >/dev/null 2>&1
$PQ quantize "$FIXTURE" -o "$TMP/g2" $GM --resume >/dev/null 2>"$TMP/err"
grep -q "3 of 5 blocks done" "$TMP/err" && same_output "$TMP/g1" "$TMP/g2" && grep -q '"fp16"\|fp16' "$TMP/g1/pq.json" &&
    ok "gptq --rotate --target-bpw killed after block 3 and resumed: byte-identical" ||
    fail "gptq --rotate --target-bpw resume: $(tail -n 2 "$TMP/err")"

expect_fail 2 "--target-bpw: with --method rtn or gptq" "--target-bpw with awq" -- \
    $PQ quantize "$FIXTURE" -o "$TMP/x" --method awq --calib "$C4" --target-bpw 4.5
expect_fail 2 "needs calibration text" "--target-bpw without --calib" -- \
    $PQ quantize "$FIXTURE" -o "$TMP/x" --target-bpw 4.5
expect_fail 2 "the schemes come from --menu" "--target-bpw with --group" -- \
    $PQ quantize "$FIXTURE" -o "$TMP/x" --calib "$C4" --target-bpw 4.5 --group 32
expect_fail 2 "--menu and --report go with --target-bpw" "--menu alone" -- \
    $PQ quantize "$FIXTURE" -o "$TMP/x" --menu w4,w8
expect_fail 2 "--menu: 'w4g100'" "a bad menu item" -- \
    $PQ quantize "$FIXTURE" -o "$TMP/x" --calib "$C4" --target-bpw 4.5 --menu w4g100,w8
expect_fail 2 "already exists" "--report over an existing file without --force" -- \
    $PQ quantize "$FIXTURE" -o "$TMP/x" --calib "$C4" --target-bpw 4.5 --report "$TMP/r.html"
expect_fail 2 "the menu's cheapest items take" "a budget below the menu's cheapest plan" -- \
    $PQ quantize "$FIXTURE" -o "$TMP/x" $MIX --menu w4g32,w8 --target-bpw 4.3
expect_fail 2 "a --scales file was calibrated on the unrotated model" "--rotate with --scales" -- \
    $PQ quantize "$FIXTURE" -o "$TMP/x" --scales "$TMP/none" --rotate hadamard
no_leftovers "$TMP/x" && [ ! -e "$TMP/x" ] && ok "no output left by the refused runs" || fail "leftovers at $TMP/x"
finish
