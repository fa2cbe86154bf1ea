#!/usr/bin/env python3
"""Checks that a checkpoint written by `pq quantize` loads in the Hugging Face
stack (transformers + compressed-tensors) and that the weights it
decompresses equal pq's own dequantized weights.

Not part of `make test`: it needs torch, transformers and compressed-tensors
(pip install torch compressed-tensors). tests/compat/run.sh runs it for every
scheme; by hand:

    python3 tests/compat/check_compressed_tensors.py OUT DUMP_WEIGHTS

where DUMP_WEIGHTS is tests/compat/dump_weights.c built against build/libpq.a.

For every quantized linear it compares
  - transformers' AutoModelForCausalLM.from_pretrained(OUT) with
    CompressedTensorsConfig(run_compressed=False) (compressed-tensors
    decompresses the checkpoint into dense weights of the model's dtype), and
  - pq's pq_linear_rows (f32) rounded to that dtype,
bit for bit, and prints one line per scheme with the result. The f32 value
s * (q - z) is exact (11 + 8 bits), so rounding it once to the model dtype is
exactly what compressed-tensors' dequantize computes in that dtype.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from transformers import AutoModelForCausalLM, CompressedTensorsConfig


def main():
    out, dumper = sys.argv[1], sys.argv[2]
    cfg = json.load(open(os.path.join(out, "config.json")))
    qc = cfg["quantization_config"]
    dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}[cfg.get("torch_dtype") or cfg.get("dtype") or "float16"]
    model = AutoModelForCausalLM.from_pretrained(
        out, quantization_config=CompressedTensorsConfig(run_compressed=False), dtype=dtype)
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([dumper, out, d], check=True)
        n, worst = 0, 0.0
        for name, mod in model.named_modules():
            path = os.path.join(d, name + ".f32")
            if not isinstance(mod, torch.nn.Linear) or not os.path.exists(path):
                continue
            w_ct = mod.weight.detach().to(torch.float32).numpy()
            w_pq = np.fromfile(path, dtype=np.float32).reshape(w_ct.shape)
            w_pq_rounded = torch.from_numpy(w_pq).to(dtype).to(torch.float32).numpy()
            if not np.array_equal(w_ct, w_pq_rounded):
                diff = np.abs(w_ct - w_pq_rounded)
                print(f"FAIL - {out}: {name}: {int((diff > 0).sum())} weights differ, max {diff.max():.3g}")
                sys.exit(1)
            worst = max(worst, float(np.abs(w_pq - w_ct).max()))
            n += 1
    if n == 0:
        print(f"FAIL - {out}: no quantized linear found")
        sys.exit(1)
    groups = qc["config_groups"]
    kinds = ", ".join(f"{g['weights']['type']}{g['weights']['num_bits']} {g['weights']['strategy']} group "
                      f"{g['weights']['group_size']} sym {g['weights']['symmetric']}" for g in groups.values())
    print(f"ok - {out}: {qc['format']} {kinds}{' (%d groups)' % len(groups) if len(groups) > 1 else ''}: {n} "
          f"linears decompressed by compressed-tensors equal pq's weights (rounded to {dtype}; f32 vs {dtype} "
          f"max diff {worst:.3g})")


if __name__ == "__main__":
    main()
