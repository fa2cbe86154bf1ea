#!/usr/bin/env python3
"""pq quantize --method rtn against llm-compressor's QuantizationModifier
(tests/oracles/test_llmcompressor_rtn.sh runs it; needs the torch venv with
llmcompressor and compressed-tensors).

    llmc_rtn.py WORKDIR PQ DUMP_LOGITS MODEL[:CASE,CASE...]...

For every MODEL (a Hugging Face checkpoint in F16, BF16 or F32) and every
scheme below (or the CASEs named after it), both tools quantize the same weights; the two model.safetensors
must hold the same tensors, byte for byte (names, dtypes, shapes, codes,
scales, zero points), and the two config.json files must be equal except for
quantization_config.version. Then on the first MODEL and on those given with
CASEs, some of pq's outputs are
loaded with the default AutoModelForCausalLM.from_pretrained(OUT) (the model's
dtype, compressed-tensors decompressing on the first forward pass) and their
logits on one token sequence are compared with pq's engine (DUMP_LOGITS).
Prints one "ok - " / "FAIL - " line per check.
"""
import json
import os
import subprocess
import sys

os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("LLM_COMPRESSOR_LOG_LEVEL", "ERROR")  # its log goes to stdout
import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

from llmcompressor import oneshot  # noqa: E402
from llmcompressor.core import active_session  # noqa: E402
from llmcompressor.modifiers.quantization import QuantizationModifier  # noqa: E402


def weights(bits, group, sym=True, typ="int"):
    a = {"num_bits": bits, "type": typ, "symmetric": sym, "dynamic": False}
    if group in ("channel", "tensor"):
        a["strategy"] = group
    else:
        a.update(strategy="group", group_size=group)
    return {"weights": a}


FP8_TOKEN = {"num_bits": 8, "type": "float", "strategy": "token", "symmetric": True, "dynamic": True}

# name: (pq quantize flags, llm-compressor preset name or config group)
CASES = {
    "w4a16-g32-sym": ("--scheme w4a16 --group 32", weights(4, 32)),
    "w4a16-g64-sym": ("--scheme w4a16 --group 64", weights(4, 64)),
    "w4a16-g128-sym": ("--scheme w4a16 --group 128", "W4A16"),
    "w4a16-channel-sym": ("--scheme w4a16 --group channel", weights(4, "channel")),
    "w4a16-g32-asym": ("--scheme w4a16 --group 32 --asym", weights(4, 32, False)),
    "w4a16-g64-asym": ("--scheme w4a16 --group 64 --asym", weights(4, 64, False)),
    "w4a16-g128-asym": ("--scheme w4a16 --group 128 --asym", "W4A16_ASYM"),
    "w4a16-channel-asym": ("--scheme w4a16 --group channel --asym", weights(4, "channel", False)),
    "w3a16-g32-sym": ("--scheme w4a16 --bits 3 --group 32", weights(3, 32)),
    "w3a16-g64-asym": ("--scheme w4a16 --bits 3 --group 64 --asym", weights(3, 64, False)),
    "w8a16-channel": ("--scheme w8a16", weights(8, "channel")),
    "w8a16-g128": ("--scheme w8a16 --group 128", "W8A16"),
    "w8a8": ("--scheme w8a8", "W8A8"),
    "fp8-channel": ("--scheme fp8", weights(8, "channel", typ="float")),
    "fp8-tensor": ("--scheme fp8 --fp8-scale tensor", weights(8, "tensor", typ="float")),
    "fp8-dynamic": ("--scheme fp8-dynamic", "FP8_DYNAMIC"),
    "fp8-dynamic-tensor": ("--scheme fp8-dynamic --fp8-scale tensor",
                           dict(weights(8, "tensor", typ="float"), input_activations=FP8_TOKEN)),
}
# the outputs loaded with the default from_pretrained, and the largest relative
# L2 difference allowed between transformers' logits (computed in the model's
# dtype) and pq's (f32 activations on the same dequantized weights)
LOADS = ["w4a16-g128-sym", "w4a16-g64-asym", "w4a16-channel-asym", "w3a16-g32-sym", "w8a8", "fp8-dynamic"]

failures = 0


def check(ok, msg):
    global failures
    failures += not ok
    print(("ok - " if ok else "FAIL - ") + msg, flush=True)


def llmcompressor(src, out, scheme):
    active_session().reset()
    model = AutoModelForCausalLM.from_pretrained(src, dtype="auto")
    if isinstance(scheme, str):
        mod = QuantizationModifier(scheme=scheme, targets="Linear", ignore=["lm_head"])
    else:
        mod = QuantizationModifier(config_groups={"group_0": dict(scheme, targets=["Linear"])}, ignore=["lm_head"])
    oneshot(model=model, recipe=[mod], output_dir=out)


def tensors(d):
    f = safe_open(os.path.join(d, "model.safetensors"), "pt")
    return {k: f.get_tensor(k) for k in f.keys()}


def raw(t):
    return t.contiguous().view(torch.uint8) if t.dtype.is_floating_point else t


def compare(ours, theirs):
    """The differences between two outputs, as a list of short strings."""
    a, b = tensors(ours), tensors(theirs)
    diff = [f"only in pq: {k}" for k in sorted(set(a) - set(b))] + \
           [f"only in llm-compressor: {k}" for k in sorted(set(b) - set(a))]
    for k in sorted(set(a) & set(b)):
        x, y = a[k], b[k]
        if x.dtype != y.dtype or x.shape != y.shape:
            diff.append(f"{k}: {x.dtype} {list(x.shape)} vs {y.dtype} {list(y.shape)}")
        elif not torch.equal(raw(x), raw(y)):
            diff.append(f"{k}: {int((raw(x) != raw(y)).sum())} of {raw(x).numel()} elements differ")
    ca, cb = (json.load(open(os.path.join(d, "config.json"))) for d in (ours, theirs))
    va, vb = (c.get("quantization_config", {}).pop("version", None) for c in (ca, cb))
    if ca != cb:
        diff.append(f"config.json differs: {json.dumps(ca, sort_keys=True)} vs {json.dumps(cb, sort_keys=True)}")
    if va != vb:
        print(f"# quantization_config.version: pq {va}, llm-compressor {vb}")
    return diff


def run_pq(pq, src, out, flags):
    r = subprocess.run([pq, "quantize", src, "-o", out, "--force"] + flags.split(), capture_output=True, text=True)
    return r.returncode == 0, r.stderr.strip().splitlines()[-1:] if r.stderr else []


def load_check(dump_logits, out, name, work, act_quantized):
    ids = torch.tensor([[1] + [(37 * i + 11) % 500 + 3 for i in range(31)]], dtype=torch.int32)
    ids.numpy().tofile(os.path.join(work, "ids.bin"))
    want = os.path.join(work, "pq.logits")
    r = subprocess.run([dump_logits, out, os.path.join(work, "ids.bin"), want], capture_output=True, text=True)
    if r.returncode != 0:
        return check(False, f"{name}: pq's logits: {r.stderr.strip()}")
    try:
        model = AutoModelForCausalLM.from_pretrained(out)  # the default: the model's dtype, decompressed when run
        with torch.no_grad():
            got = model(ids.long()).logits[0].float()
    except Exception as e:  # a load that fails is the finding
        return check(False, f"{name}: AutoModelForCausalLM.from_pretrained(OUT): {type(e).__name__}: {e}")
    ref = torch.from_numpy(np.fromfile(want, dtype=np.float32)).reshape(got.shape)
    rel = float((got - ref).norm() / ref.norm())
    # transformers runs in the model's dtype (F16: 11-bit significands in every
    # activation and product, BF16: 8), pq in f32 on the same dequantized weights.
    # With quantized activations (w8a8, fp8-dynamic) each token's codes are
    # computed in that dtype too: a code moves by a whole step wherever F16's
    # rounding crosses a tie, and INT8 differs by design (compressed-tensors'
    # fake quantization divides by amax / 127.5, pq runs vLLM's kernels'
    # x * (127 / amax)); so the logits differ more. Measured: w8a8 1.3e-2 and
    # fp8-dynamic 3.0e-2 on the tiny F16 model, 6.6e-2 and 1.3e-1 on SmolLM2
    # F16 (loaded in F32 instead: fp8-dynamic 3.5e-7 on the tiny model, the
    # same arithmetic). A load that reads the tensors wrongly is off by ~1.
    tol = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(model.dtype, 1e-4)
    if act_quantized:
        tol = 2e-1
    check(rel <= tol, f"{name}: default AutoModelForCausalLM.from_pretrained loads pq's output ({model.dtype}); "
          f"logits vs pq's: relative L2 {rel:.2e} (<= {tol:g})")


def main():
    work, pq, dump_logits, models = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    for mi, arg in enumerate(models):
        src, _, only = arg.partition(":")
        tag = os.path.basename(src.rstrip("/"))
        for name, (flags, scheme) in CASES.items():
            if only and name not in only.split(","):
                continue
            ours, theirs = (os.path.join(work, side, tag, name) for side in ("pq", "llmc"))
            os.makedirs(os.path.dirname(ours), exist_ok=True)
            ok, err = run_pq(pq, src, ours, flags)
            if not ok:
                check(False, f"{tag} {name}: pq quantize {flags}: {' '.join(err)}")
                continue
            llmcompressor(src, theirs, scheme)
            diff = compare(ours, theirs)
            check(not diff, f"{tag} {name}: pq quantize {flags} == llm-compressor's output (every tensor byte for "
                  f"byte, config.json but the version)" + ("" if not diff else ": " + "; ".join(diff[:4])))
            if (mi == 0 or only) and name in LOADS:
                load_check(dump_logits, ours, f"{tag} {name}", work, name.startswith(("w8a8", "fp8-dynamic")))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
