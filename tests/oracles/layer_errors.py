#!/usr/bin/env python3
"""Per-linear output errors of quantized checkpoints, on held-out text and on
pq's calibration windows: the diagnostic behind docs/ACCURACY.md's "Why GPTQ
lost to RTN on SmolLM2" (not a test; it needs torch).

Usage:
  layer_errors.py SOURCE_DIR NAME=PACKED_DIR [NAME=PACKED_DIR ...]
      [--text wiki.test.raw] [--windows 8] [--ctx 512]
      [--calib c4_validation_2k.txt --nsamples 32 --seqlen 512 --seed 0]
      [--skip-first N]

SOURCE_DIR is the unquantized checkpoint the packed ones were quantized
from (pq convert's output); every PACKED_DIR is a pq quantize output in the
pack-quantized format (w4a16 / w8a16, sym or asym, with or without g_idx).
The source model runs in float32 (transformers); a hook on every decoder
linear takes its input X (the source model's own activations, so every
checkpoint is judged on the same inputs) and accumulates, per checkpoint,
  ||X (W - W')^T||^2 / ||X W^T||^2
over the tokens of
  held-out   the first --windows windows of --ctx tokens of --text, as
             pq ppl --protocol gptq cuts them (no BOS: SmolLM2 adds none)
  calib      pq's calibration windows, reproduced exactly: the whole --calib
             file tokenized without special tokens, N starts drawn with
             splitmix64 (calib/data.c), a BOS first when the tokenizer adds
             one (SmolLM2's does not)
--skip-first N leaves the first N tokens of every window out of the sums
(the tokens where small models park their attention sink; the errors there
are reported separately as "first").  Prints one table per set: the mean
of the per-linear ratios by linear type, and by layer for the whole block.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
from safetensors import safe_open
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

M64 = (1 << 64) - 1
SLOTS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def calib_windows(ids, n, seqlen, seed, bos):
    text_len = seqlen - (bos is not None)
    span = len(ids) - text_len + 1
    limit = M64 - M64 % span
    state, out = seed, []
    for _ in range(n):
        while True:
            state, r = splitmix64(state)
            if r < limit:
                break
        s = r % span
        out.append(([bos] if bos is not None else []) + ids[s:s + text_len])
    return out


def unpack(f, prefix, nbits, dtype=torch.float32):
    """The dequantized weight of a pack-quantized linear: scale * (q - z)."""
    shape = f.get_tensor(prefix + ".weight_shape").tolist()
    rows, cols = int(shape[0]), int(shape[1])
    packed = f.get_tensor(prefix + ".weight_packed").astype(np.uint32)
    scale = f.get_tensor(prefix + ".weight_scale").astype(np.float32)
    keys = set(f.keys())
    per = 32 // nbits
    codes = np.zeros((rows, packed.shape[1] * per), dtype=np.int32)
    for k in range(per):
        codes[:, k::per] = (packed >> (nbits * k)) & ((1 << nbits) - 1)
    codes = codes[:, :cols] - (1 << (nbits - 1))
    ngroups = scale.shape[1]
    if prefix + ".weight_g_idx" in keys:
        gidx = f.get_tensor(prefix + ".weight_g_idx").astype(np.int64)
    else:
        group = -(-cols // ngroups)
        gidx = np.arange(cols) // group
    zero = np.zeros((rows, ngroups), dtype=np.int32)
    if prefix + ".weight_zero_point" in keys:
        zp = f.get_tensor(prefix + ".weight_zero_point").astype(np.uint32)  # packed along rows
        z = np.zeros((zp.shape[0] * per, ngroups), dtype=np.int32)
        for k in range(per):
            z[k::per, :] = (zp >> (nbits * k)) & ((1 << nbits) - 1)
        zero = z[:rows] - (1 << (nbits - 1))
    w = scale[:, gidx] * (codes - zero[:, gidx]).astype(np.float32)
    return torch.from_numpy(w).to(dtype)


def load_packed(path, n_layers):
    qc = json.load(open(os.path.join(path, "config.json")))["quantization_config"]
    nbits = qc["config_groups"]["group_0"]["weights"]["num_bits"]
    ws = {}
    with safe_open(os.path.join(path, "model.safetensors"), framework="np") as f:
        for l in range(n_layers):
            for s in SLOTS:
                part = "self_attn" if s[0] in "qkvo" else "mlp"
                name = "model.layers.%d.%s.%s" % (l, part, s)
                ws[name] = unpack(f, name, nbits)
    return ws


class Acc:
    def __init__(self, names, variants):
        self.err = {v: {n: [0.0, 0.0] for n in names} for v in variants}  # [rest, first]
        self.norm = {n: [0.0, 0.0] for n in names}


def run(model, windows, variants, weights, skip_first):
    names = list(next(iter(weights.values())).keys())
    acc = Acc(names, variants)
    hooks = []
    mods = dict(model.named_modules())
    for n in names:
        lin = mods[n]

        def hook(mod, args, n=n):
            x = args[0].reshape(-1, args[0].shape[-1]).double()
            w = mod.weight.double()
            y = x @ w.t()
            first = torch.zeros(x.shape[0], dtype=torch.bool)
            first[:skip_first] = True
            rest = ~first
            acc.norm[n][0] += float((y[rest] ** 2).sum())
            acc.norm[n][1] += float((y[first] ** 2).sum())
            for v in variants:
                e = x @ (w - weights[v][n].double()).t()
                acc.err[v][n][0] += float((e[rest] ** 2).sum())
                acc.err[v][n][1] += float((e[first] ** 2).sum())

        hooks.append(lin.register_forward_pre_hook(hook))
    with torch.no_grad():
        for i, win in enumerate(windows):
            model(torch.tensor([win]))
            print("  window %d/%d" % (i + 1, len(windows)), file=sys.stderr)
    for h in hooks:
        h.remove()
    return acc


def report(title, acc, variants, n_layers):
    print("\n## %s" % title)
    print("mean over linears of ||X dW^T||^2 / ||X W^T||^2 (tokens after the first; first tokens in brackets)")
    print("%-10s" % "linear" + "".join("%24s" % v for v in variants))
    for s in SLOTS:
        cells = []
        for v in variants:
            r = [acc.err[v][n][0] / acc.norm[n][0] for n in acc.norm if n.endswith(s)]
            f = [acc.err[v][n][1] / acc.norm[n][1] for n in acc.norm if n.endswith(s) and acc.norm[n][1] > 0]
            cells.append("%.3e [%.2e]" % (np.mean(r), np.mean(f) if f else float("nan")))
        print("%-10s" % s + "".join("%24s" % c for c in cells))
    print("per layer, sum over its linears of the error / sum of the norms (tokens after the first):")
    print("%-10s" % "layer" + "".join("%14s" % v for v in variants))
    for l in range(n_layers):
        pre = "model.layers.%d." % l
        ns = [n for n in acc.norm if n.startswith(pre)]
        cells = ["%14.3e" % (sum(acc.err[v][n][0] / acc.norm[n][0] for n in ns) / len(ns)) for v in variants]
        print("%-10d" % l + "".join(cells))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("source")
    ap.add_argument("quant", nargs="+")
    ap.add_argument("--text")
    ap.add_argument("--windows", type=int, default=8)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--calib")
    ap.add_argument("--nsamples", type=int, default=32)
    ap.add_argument("--seqlen", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-first", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    cfg = json.load(open(os.path.join(a.source, "config.json")))
    n_layers = cfg["num_hidden_layers"]
    tok = Tokenizer.from_file(os.path.join(a.source, "tokenizer.json"))
    probe = tok.encode("a", add_special_tokens=True).ids
    bos = probe[0] if len(probe) > 1 and probe[0] == cfg.get("bos_token_id") else None
    model = AutoModelForCausalLM.from_pretrained(a.source, dtype=torch.float32).eval()
    variants, weights = [], {}
    for q in a.quant:
        name, path = q.split("=", 1)
        variants.append(name)
        weights[name] = load_packed(path, n_layers)
    if a.text:
        ids = tok.encode(open(a.text, encoding="utf-8").read(), add_special_tokens=False).ids
        wins = [ids[i * a.ctx:(i + 1) * a.ctx] for i in range(a.windows)]
        report("held-out: %s, %d x %d tokens" % (a.text, a.windows, a.ctx),
               run(model, wins, variants, weights, a.skip_first), variants, n_layers)
    if a.calib:
        ids = tok.encode(open(a.calib, encoding="utf-8").read(), add_special_tokens=False).ids
        wins = calib_windows(ids, a.nsamples, a.seqlen, a.seed, bos)
        report("calibration: %s, %d x %d tokens, seed %d" % (a.calib, a.nsamples, a.seqlen, a.seed),
               run(model, wins, variants, weights, a.skip_first), variants, n_layers)


if __name__ == "__main__":
    main()
