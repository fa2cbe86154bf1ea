#!/bin/sh
# make check-layers as a test: every include of the library and the CLI
# points down the layers (tools/check_layers.sh, docs/ARCHITECTURE.md); and
# the checker itself catches an upward include, an internal header used
# from outside its folder, and an upward include inside quant/.
. tests/cli/lib.sh

if out=$(sh tools/check_layers.sh 2>&1); then
    ok "check-layers: $out"
else
    echo "$out" | sed 's/^/FAIL - check-layers: /'
    failures=$((failures + 1))
fi

# a copy of the tree with one wrong include at a time
copy() { rm -rf "$TMP/tree" && mkdir -p "$TMP/tree" && cp -r common kernels formats eval calib quant tools "$TMP/tree/"; }
catches() { # what, file, include line, expected message
    copy
    printf '%s\n' "$3" >>"$TMP/tree/$2"
    if out=$(sh tools/check_layers.sh "$TMP/tree" 2>&1); then
        fail "check-layers misses $1: $out"
    else
        echo "$out" | grep -qF "$4" && ok "check-layers catches $1: $out" || fail "check-layers on $1: $out"
    fi
}
catches "formats including quant" formats/packed.h '#include "quant/rtn.h"' \
    "formats/packed.h:$(($(wc -l <formats/packed.h) + 1)): includes quant/rtn.h (quant is above formats)"
catches "kernels including eval" kernels/linear.c '#include "eval/model.h"' "includes eval/model.h (eval is above kernels)"
catches "an internal header from another folder" calib/driver.c '#include "eval/backend.h"' \
    "includes eval/backend.h (internal to eval/)"
catches "an algorithm including the method table" quant/gptq.c '#include "quant/method.h"' \
    "includes quant/method.h (above it inside quant/)"
catches "a method including the run's parts" quant/method_rtn.c '#include "quant/checkpoint.h"' \
    "includes quant/checkpoint.h (above it inside quant/)"
finish
