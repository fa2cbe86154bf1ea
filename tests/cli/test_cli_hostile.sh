#!/bin/sh
# Hostile and broken inputs from the command line (issue 10, the parser
# items): each must give one line naming the file and the reason and exit 1
# (never 2, a crash, a silent skip, or gigabytes of memory). Commands that a
# bug would let run away are started under a 4 GB address-space limit.
. tests/cli/lib.sh

TEXT=$SHARED/data/tinystories_val_prefix.txt
limited() { (ulimit -v 4194304 && exec "$@"); }

# a model directory holding copies of the fixture's files
fresh() {
    rm -rf "$TMP/m"
    mkdir -p "$TMP/m"
    for f in config.json tokenizer.json tokenizer_config.json model.safetensors; do cp "$FIXTURE/$f" "$TMP/m/"; done
}

# item 6: a regex in quantization_config.ignore that glibc's regcomp took
# past 13 GB; refused by name now (Python refuses it too)
fresh
plus=$(printf '%040d' 0 | tr 0 +)
jq --arg p "re:a$plus" '. + {quantization_config: {quant_method: "compressed-tensors", format: "pack-quantized",
    config_groups: {group_0: {targets: ["Linear"], weights: {num_bits: 4, type: "int", symmetric: true,
    strategy: "group", group_size: 32}}}, ignore: ["lm_head", $p]}}' "$FIXTURE/config.json" >"$TMP/m/config.json"
expect_fail 1 "quantization_config.ignore[1]: regex \"a++" "item 6: ignore regex a+++... (pq inspect)" -- \
    limited $PQ inspect "$TMP/m"
grep -qF "possessive quantifier is not supported" "$TMP/err" || fail "item 6: the reason is not named: $(cat "$TMP/err")"

finish
