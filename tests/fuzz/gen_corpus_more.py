#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets added for issue 10:
fuzz_tokenizer_config, fuzz_packed_config, fuzz_index, fuzz_zstd,
fuzz_calib and fuzz_model_open (stdlib, the zstd command and build/pq).

Run from the repository root after `make`; the files are committed, so this
only needs rerunning when cases are added. Every seed is a few KB: tiny
models (hidden 8, one or two layers, vocab 16) in each architecture, dtype
and packed scheme, and one file per malformed case worth keeping.
"""
import json
import os
import random
import shutil
import struct
import subprocess
import tempfile

C = "tests/fuzz/corpus/"
SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "I64": 8, "I8": 1, "U8": 1, "F8_E4M3": 1}


def put(target, name, data):
    os.makedirs(C + target, exist_ok=True)
    with open(C + target + "/" + name, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, meta=None):
    """tensors: list of (name, dtype, shape, bytes)"""
    header, off, data = {}, 0, b""
    if meta:
        header["__metadata__"] = meta
    for name, dt, shape, b in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
        data += b
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def f16(x):
    return struct.pack("<e", x)


def values(dt, n, rng):
    if dt == "F32":
        return b"".join(struct.pack("<f", rng.gauss(0, 0.3)) for _ in range(n))
    if dt == "F16":
        return b"".join(f16(rng.gauss(0, 0.3)) for _ in range(n))
    return b"".join(struct.pack("<f", rng.gauss(0, 0.3))[2:] for _ in range(n))  # BF16: the top half


# ---- tokenizer_config.json -------------------------------------------------

def tokenizer_config():
    t = "fuzz_tokenizer_config"
    put(t, "empty.json", "{}")
    put(t, "bos.json", json.dumps({"add_bos_token": True, "bos_token": "<s>", "eos_token": "</s>"}))
    put(t, "objects.json", json.dumps({"bos_token": {"content": "<s>", "lstrip": False}, "add_bos_token": False,
                                       "add_eos_token": True, "eos_token": {"content": "</s>"}}))
    put(t, "nulls.json", json.dumps({"bos_token": None, "add_bos_token": None, "eos_token": None}))
    put(t, "bad_bos_number.json", json.dumps({"bos_token": 5}))
    put(t, "bad_flag_string.json", json.dumps({"add_bos_token": "true"}))
    put(t, "bad_unknown_eos.json", json.dumps({"eos_token": "<nope>", "add_eos_token": True}))
    put(t, "bad_not_object.json", "[1, 2]")
    put(t, "bad_truncated.json", '{"bos_token": "<s')


# ---- quantization_config ---------------------------------------------------

def qargs(bits=4, typ="int", sym=True, strategy="group", group=32, actorder=None, dynamic=False):
    return {"num_bits": bits, "type": typ, "symmetric": sym, "strategy": strategy, "group_size": group,
            "actorder": actorder, "dynamic": dynamic, "block_structure": None, "observer": "minmax",
            "observer_kwargs": {}}


def qconfig(fmt, weights, inputs=None, ignore=("lm_head",), **extra):
    q = {"quant_method": "compressed-tensors", "format": fmt, "quantization_status": "compressed",
         "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": inputs,
                                       "output_activations": None}},
         "ignore": list(ignore), "kv_cache_scheme": None, "sparsity_config": {}, "version": "0.20.1"}
    q.update(extra)
    return {"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "quantization_config": q}


def packed_config():
    t = "fuzz_packed_config"
    tok = {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "token", "dynamic": True}
    static = {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "tensor", "dynamic": False}
    cases = {
        "w4a16_sym_g32.json": qconfig("pack-quantized", qargs()),
        "w4a16_asym_channel.json": qconfig("pack-quantized", qargs(sym=False, strategy="channel", group=None)),
        "w8a16.json": qconfig("pack-quantized", qargs(bits=8, strategy="channel", group=None)),
        "w3_actorder.json": qconfig("pack-quantized", qargs(bits=3, actorder="group")),
        "w4_actorder_weight.json": qconfig("pack-quantized", qargs(actorder="weight")),
        "w8a8_dynamic.json": qconfig("int-quantized", qargs(bits=8, strategy="channel", group=None), tok),
        "w8a8_static.json": qconfig("int-quantized", qargs(bits=8, strategy="channel", group=None), static),
        "fp8_dynamic.json": qconfig("float-quantized", qargs(bits=8, typ="float", strategy="channel", group=None),
                                    dict(tok, type="float")),
        "fp8_naive.json": qconfig("naive-quantized", qargs(bits=8, typ="float", strategy="tensor", group=None)),
        "ignore_regex.json": qconfig("pack-quantized", qargs(),
                                     ignore=["lm_head", r"re:.*self_attn\.(k|q|v)_proj$",
                                             r"re:model\.layers\.\d{1,2}\.mlp\.(?:gate|up)_proj", "re:(a+)+$"]),
        "defaults.json": qconfig("pack-quantized", {"strategy": "group", "group_size": 128}),
        "no_quant.json": {"architectures": ["LlamaForCausalLM"]},
        "bad_transform.json": qconfig("pack-quantized", qargs(), transform_config={"config_groups": {"R1": {}}}),
        "bad_regex_possessive.json": qconfig("pack-quantized", qargs(), ignore=["re:a" + "+" * 40]),
        "bad_regex_lookahead.json": qconfig("pack-quantized", qargs(), ignore=["re:(?=x)lm_head"]),
        "bad_two_groups.json": dict(qconfig("pack-quantized", qargs()),
                                    quantization_config=dict(qconfig("pack-quantized", qargs())["quantization_config"],
                                                             config_groups={"a": {}, "b": {}})),
        "bad_kv_cache.json": qconfig("pack-quantized", qargs(), kv_cache_scheme={"num_bits": 8}),
    }
    for name, doc in cases.items():
        put(t, name, json.dumps(doc))


# ---- sharded index ---------------------------------------------------------

def index():
    t = "fuzz_index"
    good = {"metadata": {"total_size": 35}, "weight_map": {"a": "s1.safetensors", "b": "s1.safetensors",
                                                          "c": "s2.safetensors", "d": "s3.safetensors"}}
    put(t, "good.json", json.dumps(good))
    put(t, "one_shard.json", json.dumps({"weight_map": {"c": "s2.safetensors"}}))
    put(t, "bad_unlisted.json", json.dumps({"weight_map": {"a": "s1.safetensors"}}))
    put(t, "bad_wrong_shard.json", json.dumps({"weight_map": {"a": "s2.safetensors", "c": "s2.safetensors"}}))
    put(t, "bad_missing_shard.json", json.dumps({"weight_map": {"a": "nope.safetensors"}}))
    put(t, "bad_dotdot.json", json.dumps({"weight_map": {"a": "../s1.safetensors"}}))
    put(t, "bad_self.json", json.dumps({"weight_map": {"a": "model.safetensors.index.json"}}))
    put(t, "bad_empty.json", json.dumps({"weight_map": {}}))
    put(t, "bad_not_json.json", '{"weight_map": {"a": ')


# ---- .zst ------------------------------------------------------------------

def zstd(data, *flags):
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "x")
        with open(src, "wb") as f:
            f.write(data)
        subprocess.run(["zstd", "-q", "-f", *flags, src, "-o", src + ".zst"], check=True)
        return open(src + ".zst", "rb").read()


def rle_frame(prefix, zeros):
    """a frame without content size: prefix as a raw block, then zeros in RLE blocks"""
    out = bytearray(b"\x28\xb5\x2f\xfd\x00\x38")

    def block(t, payload, n, last):
        h = n << 3 | t << 1 | last
        out.extend(bytes([h & 255, h >> 8 & 255, h >> 16 & 255]))
        out.extend(payload)
    block(0, prefix, len(prefix), zeros == 0)
    done = 0
    while done < zeros:
        k = min(zeros - done, 128 << 10)
        done += k
        block(1, b"\0", k, done == zeros)
    return bytes(out)


def zst():
    t = "fuzz_zstd"
    rng = random.Random(7)
    img = safetensors([("a", "F32", [2, 3], values("F32", 6, rng)), ("b", "F16", [5], values("F16", 5, rng)),
                       ("c", "I8", [3], b"\x01\x02\x03")], {"format": "pt"})
    put(t, "plain_checksum.zst", zstd(img, "-3", "--check"))
    put(t, "no_content_size.zst", zstd(img, "-1", "--no-content-size", "--no-check"))
    put(t, "two_frames.zst", zstd(img[:40], "-1") + zstd(img[40:], "-1"))
    put(t, "skippable_first.zst", struct.pack("<II", 0x184D2A50, 4) + b"skip" + zstd(img, "-1"))
    put(t, "bad_truncated.zst", zstd(img, "-3")[:-5])
    put(t, "bad_not_zstd.zst", img[:64])
    put(t, "bad_bomb_after_image.zst", rle_frame(img, 1 << 20))
    put(t, "bad_trailing_zeros.zst", zstd(img + bytes(4096), "-1"))
    hdr = b'{"big":{"dtype":"U8","shape":[50000000],"data_offsets":[0,50000000]}}'
    put(t, "bad_claims_48MB.zst", rle_frame(struct.pack("<Q", len(hdr)) + hdr, 0))


# ---- calibration windowing ---------------------------------------------------

def calib():
    t = "fuzz_calib"
    text = "ab a ab\nbaba abab aé\x00 A ab " * 20
    for name, head in [("random_bos.bin", [2, 6, 40, 0, 200, 0, 1, 2]), ("concat_bos.bin", [3, 10, 12, 0, 64, 0, 0, 0]),
                       ("concat_no_bos.bin", [1, 39, 20, 0, 100, 0, 5, 5]),
                       ("max_pos_one.bin", [3, 5, 16, 0, 1, 0, 0, 0]), ("seqlen_zero.bin", [0, 5, 1, 0, 64, 0, 0, 0])]:
        put(t, name, bytes(head) + text.encode())
    put(t, "short_text.bin", bytes([2, 5, 100, 0, 200, 0, 0, 0]) + b"ab")


# ---- pq_model_open -------------------------------------------------------------

def tiny(arch, dt, rng, layers=1, tied=False, bias=False, obias=False, extra=None):
    h, inter, heads, kv, vocab = 8, 12, 2, 1, 16
    hd = h // heads
    cfg = {"architectures": [arch], "hidden_size": h, "intermediate_size": inter, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv, "vocab_size": vocab,
           "max_position_embeddings": 32, "rms_norm_eps": 1e-5, "tie_word_embeddings": tied}
    cfg.update(extra or {})
    ts = [("model.embed_tokens.weight", dt, [vocab, h], values(dt, vocab * h, rng)),
          ("model.norm.weight", dt, [h], values(dt, h, rng))]
    if not tied:
        ts.append(("lm_head.weight", dt, [vocab, h], values(dt, vocab * h, rng)))
    shapes = {"self_attn.q_proj": (heads * hd, h), "self_attn.k_proj": (kv * hd, h), "self_attn.v_proj": (kv * hd, h),
              "self_attn.o_proj": (h, heads * hd), "mlp.gate_proj": (inter, h), "mlp.up_proj": (inter, h),
              "mlp.down_proj": (h, inter)}
    for l in range(layers):
        p = "model.layers.%d." % l
        for s, (r, c) in shapes.items():
            ts.append((p + s + ".weight", dt, [r, c], values(dt, r * c, rng)))
            if (bias and s[-6:] in ("q_proj", "k_proj", "v_proj")) or (obias and s.endswith("o_proj")):
                ts.append((p + s + ".bias", dt, [r], values(dt, r, rng)))
        ts.append((p + "input_layernorm.weight", dt, [h], values(dt, h, rng)))
        ts.append((p + "post_attention_layernorm.weight", dt, [h], values(dt, h, rng)))
    return cfg, safetensors(ts, {"format": "pt"})


def model_open():
    t = "fuzz_model_open"
    rng = random.Random(11)
    llama3 = {"attention_bias": True, "rope_theta": 500000.0, "head_dim": 4,
              "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 16}}
    models = {
        "llama_f16": tiny("LlamaForCausalLM", "F16", rng, layers=2),
        "llama_tied_f32": tiny("LlamaForCausalLM", "F32", rng, tied=True),
        "qwen2_bf16_bias": tiny("Qwen2ForCausalLM", "BF16", rng, bias=True,
                                extra={"use_sliding_window": True, "sliding_window": 2, "max_window_layers": 0}),
        "mistral_f16_window": tiny("MistralForCausalLM", "F16", rng, extra={"sliding_window": 2}),
        "llama3_obias": tiny("LlamaForCausalLM", "F16", rng, bias=True, obias=True, extra=llama3),
        "llama_v5_rope_parameters": tiny("LlamaForCausalLM", "F16", rng, extra={
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000.0}}),
    }
    for name, (cfg, st) in models.items():
        put(t, name + ".bin", json.dumps(cfg).encode() + b"\0" + st)
    # packed checkpoints of the tiny Llama, written by pq itself
    cfg, st = models["llama_f16"]
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "src")
        os.makedirs(src)
        open(os.path.join(src, "config.json"), "w").write(json.dumps(cfg))
        open(os.path.join(src, "model.safetensors"), "wb").write(st)
        for scheme, flags in [("w4a16", ["--asym", "--group", "32"]), ("w8a8", []), ("fp8-dynamic", [])]:
            out = os.path.join(d, scheme)
            subprocess.run(["build/pq", "quantize", src, "-o", out, "--scheme", scheme, *flags], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            put(t, "packed_%s.bin" % scheme, open(os.path.join(out, "config.json"), "rb").read() + b"\0" +
                open(os.path.join(out, "model.safetensors"), "rb").read())
    cfg2 = dict(cfg, num_hidden_layers=1)
    put(t, "bad_fewer_layers.bin", json.dumps(cfg2).encode() + b"\0" + st)
    put(t, "bad_no_nul.bin", json.dumps(cfg).encode())


def main():
    tokenizer_config()
    packed_config()
    index()
    zst()
    calib()
    model_open()


if __name__ == "__main__":
    main()
