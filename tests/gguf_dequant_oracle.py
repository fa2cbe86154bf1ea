#!/usr/bin/env python3
"""The gguf package's dequantizers as the oracle for pq's (kernels/ggml_dequant.c).

Usage: gguf_dequant_oracle.py OUTDIR [SEED]

For every type pq dequantizes, writes OUTDIR/<TYPE>.bin (rows of blocks:
random bytes, then the fp16 scale fields overwritten with random normal
values and the extremes: +-0, the smallest and largest subnormals, the
smallest normal, 65504, +-inf, quiet and signalling NaNs) and
OUTDIR/<TYPE>.f32 (gguf.quants.dequantize of those bytes, float32 LE; F16
and BF16 hold all 65536 bit patterns), and
OUTDIR/manifest.tsv: type id, name, block count, file stem. Every code value
of every field is covered by the random bytes (hundreds of blocks per type).
`test_ggml_dequant --oracle OUTDIR/manifest.tsv` compares pq bit for bit.
"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

# type -> byte offsets of its fp16 fields inside a block (ggml-common.h)
HALF_FIELDS = {
    T.F16: None,  # every bit pattern, see below
    T.BF16: None,
    T.F32: (),
    T.Q4_0: (0,),
    T.Q4_1: (0, 2),
    T.Q5_0: (0,),
    T.Q5_1: (0, 2),
    T.Q8_0: (0,),
    T.Q2_K: (80, 82),
    T.Q3_K: (108,),
    T.Q4_K: (0, 2),
    T.Q5_K: (0, 2),
    T.Q6_K: (208,),
}
EXTREME_HALVES = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00,
                  0x7E00, 0x7C01, 0xFE00, 0x3C00, 0xBC00]


def main():
    out = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 12345
    rng = np.random.default_rng(seed)
    os.makedirs(out, exist_ok=True)
    lines = []
    for qtype, halves in HALF_FIELDS.items():
        block, size = GGML_QUANT_SIZES[qtype]
        nblocks = 512
        raw = rng.integers(0, 256, size=(nblocks, size), dtype=np.uint8)
        if qtype in (T.F16, T.BF16):  # every bit pattern once
            nblocks = 65536
            raw = np.arange(65536, dtype=np.uint16).view(np.uint8).reshape(nblocks, 2)
        elif qtype == T.F32:
            vals = rng.normal(0, 1, size=nblocks).astype(np.float32)
            vals[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45]
            raw = vals.view(np.uint8).reshape(nblocks, 4)
        elif halves:
            for off in halves:
                h = rng.normal(0, 0.05, size=nblocks).astype(np.float16).view(np.uint16)
                # every tenth block takes an extreme value, the rest stay random normals
                pick = np.arange(nblocks) % 10 == 0
                h[pick] = np.resize(np.array(EXTREME_HALVES, dtype=np.uint16), pick.sum())
                raw[:, off] = (h & 0xFF).astype(np.uint8)
                raw[:, off + 1] = (h >> 8).astype(np.uint8)
        data = raw.reshape(-1)
        with np.errstate(all="ignore"):  # inf * 0 and the like are part of the test
            want = np.asarray(dequantize(data, qtype), dtype=np.float32).reshape(-1)
        assert want.size == nblocks * block, (qtype.name, want.size)
        stem = qtype.name
        data.tofile(os.path.join(out, stem + ".bin"))
        want.astype("<f4").tofile(os.path.join(out, stem + ".f32"))
        lines.append(f"{int(qtype)}\t{qtype.name}\t{nblocks}\t{stem}\n")
    with open(os.path.join(out, "manifest.tsv"), "w") as f:
        f.writelines(lines)


if __name__ == "__main__":
    main()
