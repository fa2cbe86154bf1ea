#!/usr/bin/env python3
"""The gguf package's quantizers as the oracle for pq's (kernels/ggml_quant.c).

Usage: gguf_quant_oracle.py OUTDIR [SEED]

For every type both quantize (Q4_0, Q4_1, Q5_0, Q8_0: the ones
gguf.quants.quantize implements; its K types have no quantizer), writes
OUTDIR/<TYPE>.f32 (float32 LE rows: normal, uniform, with outliers, all
positive, small enough for subnormal fp16 scales, plus blocks that are all
zero, constant, a single non-zero, and values on the rounding ties of the
grid) and OUTDIR/<TYPE>.bin (gguf.quants.quantize of them), and
OUTDIR/manifest.tsv: "TYPE input expected" per line.
`test_ggml_quant --oracle OUTDIR/manifest.tsv` compares pq byte for byte.
"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize

TYPES = {"Q4_0": T.Q4_0, "Q4_1": T.Q4_1, "Q5_0": T.Q5_0, "Q8_0": T.Q8_0}
COLS = 256


def rows(rng):
    n = 64
    out = [
        rng.normal(0, 0.05, (n, COLS)),
        rng.uniform(-1, 1, (n, COLS)),
        rng.normal(0, 0.05, (n, COLS)) * np.where(rng.random((n, COLS)) < 0.01, 20.0, 1.0),
        np.abs(rng.normal(0, 0.05, (n, COLS))) + 0.01,
        rng.normal(0, 1e-6, (n, COLS)),
    ]
    special = np.zeros((8, COLS))
    special[1, :] = 0.25                                   # constant
    special[2, 5] = -3.0                                   # one value
    special[3, :] = np.arange(COLS) % 17 - 8               # integers: exact grid points, ties in x/d + 0.5
    special[4, :] = (np.arange(COLS) % 33 - 16) * 0.5      # halves
    special[5, :] = rng.integers(-8, 8, COLS) * 0.0625     # codes times a power of two
    special[6, :] = -special[3, :]
    special[7, :] = rng.normal(0, 1, COLS) * 60000         # near fp16's range
    out.append(special)
    return np.concatenate(out).astype(np.float32)


def main():
    outdir = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(seed)
    with open(os.path.join(outdir, "manifest.tsv"), "w") as man:
        for name, t in TYPES.items():
            x = rows(rng)
            q = quantize(x, t)
            fx, fq = os.path.join(outdir, name + ".f32"), os.path.join(outdir, name + ".bin")
            x.astype("<f4").tofile(fx)
            np.ascontiguousarray(q).tofile(fq)
            man.write(f"{name} {fx} {fq}\n")


if __name__ == "__main__":
    main()
