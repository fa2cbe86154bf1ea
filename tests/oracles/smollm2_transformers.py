#!/usr/bin/env python3
"""transformers (float32, CPU) on the checkpoint `pq convert` wrote from the SmolLM2 GGUF.

Usage: smollm2_transformers.py CONVERTED_DIR SHARED OUTDIR WINDOWS

Tokenizes wiki.test.raw with the checkpoint's tokenizer.json (the tokenizers
library), then writes
  OUTDIR/window.ids, OUTDIR/window.logits   the first 512 tokens and their
                                            logits (int32 / float32 LE)
  OUTDIR/ppl.txt                            PPL over WINDOWS windows with
                                            llama.cpp's protocol at ctx 512
llama.cpp's protocol (llama-perplexity, and `pq ppl --protocol llamacpp`):
consecutive windows of 512 tokens of the whole text; BOS replaces the first
token of each window when the tokenizer adds one (SmolLM2's does not); the
logits at positions 256..510 predict the tokens after them; PPL =
exp(mean NLL), NLL in float64 from float32 logits.
"""
import array
import math
import os
import sys
import time

import torch
import transformers
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

CTX = 512


def main():
    model_dir, shared, out, windows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    text = open(os.path.join(shared, "data", "wiki.test.raw"), encoding="utf-8").read()
    ids = tok.encode(text, add_special_tokens=True).ids
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()
    t0 = time.time()
    with torch.no_grad():
        x = torch.tensor([ids[:CTX]])
        logits = model(x).logits[0].float()
        array.array("i", ids[:CTX]).tofile(open(os.path.join(out, "window.ids"), "wb"))
        logits.numpy().astype("<f4").tofile(os.path.join(out, "window.logits"))
        nll, n = 0.0, 0
        for w in range(windows):
            chunk = ids[w * CTX:(w + 1) * CTX]
            if len(chunk) < CTX:
                break
            lg = model(torch.tensor([chunk])).logits[0, CTX // 2:CTX - 1].double()
            lp = torch.log_softmax(lg, dim=-1)
            targets = torch.tensor(chunk[CTX // 2 + 1:])
            nll -= lp[torch.arange(len(targets)), targets].sum().item()
            n += len(targets)
    ppl = math.exp(nll / n)
    with open(os.path.join(out, "ppl.txt"), "w") as f:
        f.write("%.10f %d %d\n" % (ppl, n, windows))
    print("# transformers %s, torch %s: PPL %.6f over %d tokens of %d windows (%.1f s)"
          % (transformers.__version__, torch.__version__, ppl, n, windows, time.time() - t0))


if __name__ == "__main__":
    main()
