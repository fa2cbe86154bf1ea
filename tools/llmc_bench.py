#!/usr/bin/env python3
"""One llm-compressor job for tools/bench_compare_llmc.sh (the peer's side of
`make bench-compare`): quantize MODEL with llm-compressor (PyPI
`llmcompressor`, PyTorch on the CPU) the way pq does the same job.

    llmc_bench.py JOB MODEL CALIB NSAMPLES SEQLEN THREADS OUT

JOB is one of
    rtn          W4A16 g64 sym, QuantizationModifier (no calibration data)
    gptq         W4A16 g64 sym, GPTQModifier (act-order "static", damping 0.01,
                 block 128: pq's defaults)
    awq          W4A16 g64 asym, AWQModifier + QuantizationModifier
    smoothquant  W8A8 (INT8 weights per channel, activations per token),
                 SmoothQuantModifier(0.5) + QuantizationModifier
The calibration windows are pq's `--calib-mode concat` windows of CALIB:
the whole file tokenized without special tokens, window k = [BOS] +
stream[k (L - 1) .. k (L - 1) + L - 1) when the tokenizer adds a BOS, else
stream[k L .. (k + 1) L): the same token windows pq calibrates on.

The model loads in its checkpoint's dtype (F16: the peer's forward passes
run in F16 and its scales are F16, as pq's), or in PQ_BENCH_LLMC_DTYPE
(e.g. float32) when that is set.

Prints, flushed as they happen, "layer I SECONDS" when the calibration
reaches decoder layer I (seconds since the job started, the model loaded),
so that a run stopped by a time limit still tells its per-layer rate, then
"done SECONDS" once OUT is written, or "failed: REASON" (exit 1).
"""
import os
import sys
import time

os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("LLM_COMPRESSOR_LOG_LEVEL", "ERROR")  # its log goes to stdout


def windows(model_dir, calib, n, seqlen):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model_dir)
    stream = tok(open(calib, encoding="utf-8").read(), add_special_tokens=False).input_ids
    probe = tok("a").input_ids
    bos = tok.bos_token_id if tok.bos_token_id is not None and probe[:1] == [tok.bos_token_id] else None
    step = seqlen - 1 if bos is not None else seqlen
    out = []
    for k in range(n):
        piece = stream[k * step:k * step + step]
        if len(piece) < step:
            break
        out.append(([bos] if bos is not None else []) + piece)
    return out


def w4g64(sym):
    """W4A16 g64 as a config group (SmolLM2's hidden size, 576, is no multiple of 128)."""
    w = {"num_bits": 4, "type": "int", "symmetric": sym, "strategy": "group", "group_size": 64, "dynamic": False}
    return {"group_0": {"targets": ["Linear"], "weights": w}}


def recipe(job):
    from llmcompressor.modifiers.quantization import GPTQModifier, QuantizationModifier
    from llmcompressor.modifiers.smoothquant import SmoothQuantModifier
    from llmcompressor.modifiers.transform import AWQModifier
    ignore = ["lm_head"]
    if job == "rtn":
        return [QuantizationModifier(config_groups=w4g64(True), ignore=ignore)]
    if job == "gptq":
        return [GPTQModifier(config_groups=w4g64(True), ignore=ignore, actorder="static",
                             dampening_frac=0.01, block_size=128)]
    if job == "awq":
        return [AWQModifier(), QuantizationModifier(config_groups=w4g64(False), ignore=ignore)]
    if job == "smoothquant":
        return [SmoothQuantModifier(smoothing_strength=0.5),
                QuantizationModifier(scheme="W8A8", targets="Linear", ignore=ignore)]
    raise SystemExit(f"llmc_bench: unknown job {job}")


def main():
    if len(sys.argv) != 8:
        print(__doc__.strip().splitlines()[3].strip(), file=sys.stderr)
        return 2
    job, model_dir, calib, n, seqlen, threads, out = sys.argv[1:]
    n, seqlen, threads = int(n), int(seqlen), int(threads)
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from llmcompressor import oneshot
    torch.set_num_threads(threads)
    mods = recipe(job)
    dtype = os.environ.get("PQ_BENCH_LLMC_DTYPE", "auto")  # "float32": the peer computes in f32 (f32 scales)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype if dtype == "auto" else getattr(torch, dtype))
    start = time.monotonic()
    seen = set()

    def reached(i):
        def hook(*_):
            if i not in seen:
                seen.add(i)
                print(f"layer {i} {time.monotonic() - start:.1f}", flush=True)
        return hook

    for i, layer in enumerate(model.model.layers):
        layer.register_forward_pre_hook(reached(i))
    kw = {}
    if job != "rtn":
        ids = windows(model_dir, calib, n, seqlen)
        kw = dict(dataset=Dataset.from_dict({"input_ids": ids, "attention_mask": [[1] * len(w) for w in ids]}),
                  num_calibration_samples=len(ids), max_seq_length=seqlen, shuffle_calibration_samples=False)
    try:
        oneshot(model=model, recipe=mods, output_dir=out, **kw)
    except Exception as e:  # the peer failing on the CPU is a result to record
        msg = str(e).strip().splitlines()
        print(f"failed: {type(e).__name__}: {msg[0] if msg else ''}"[:300], flush=True)
        return 1
    print(f"done {time.monotonic() - start:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
