"""Independent checks of the GGUF files `pq export --to gguf` writes, with the
gguf PyPI package (not pq's reader) and a plain safetensors parser.

  gguf_export_check.py codes FILE.gguf PACKED_DIR
      every linear the export kept (INT4 g32 sym -> Q4_0, INT8 g32 sym ->
      Q8_0, INT4 g32 asym -> Q4_1) holds the packed checkpoint's codes and
      FP16 scales bit for bit, rows in llama.cpp's order (q/k permuted);
      prints the number of tensors compared.
  gguf_export_check.py dense FILE.gguf HF_DIR
      an F16 export: every tensor of the F16 checkpoint is in the file with
      the same values (F16 bits for matrices, norms widened to F32).
  gguf_export_check.py same HF_DIR_A HF_DIR_B
      two checkpoints hold the same tensors, byte for byte.
Any difference is printed and the exit status is 1.
"""
import json
import struct
import sys

import numpy as np
from gguf import GGUFReader

SLOTS = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
         "mlp.down_proj": "ffn_down"}
OTHER = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
         "lm_head.weight": "output.weight"}
NORMS = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}


def safetensors(d):
    b = open(d + "/model.safetensors", "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        dt = {"F16": np.float16, "F32": np.float32, "BF16": np.uint16, "I32": np.int32, "I64": np.int64}[v["dtype"]]
        out[k] = np.frombuffer(b[8 + n + s:8 + n + e], dtype=dt).reshape(v["shape"])
    return out


def gguf_name(hf):
    if hf in OTHER:
        return OTHER[hf]
    parts = hf.split(".")  # model.layers.L.<module>.<proj>.<suffix>
    layer = parts[2]
    mod = parts[3] + "." + parts[4] if parts[3] in ("self_attn", "mlp") else parts[3]
    if mod in SLOTS:
        return "blk.%s.%s.%s" % (layer, SLOTS[mod], parts[5] if parts[3] in ("self_attn", "mlp") else parts[4])
    return "blk.%s.%s.%s" % (layer, NORMS[mod], parts[4])


def permute(rows, n_head):
    # llama.cpp's convert_hf_to_gguf permutation of q/k rows (any row payload)
    r = rows.shape[0]
    return rows.reshape(n_head, 2, r // n_head // 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


def heads(cfg, hf):
    if ".q_proj" in hf:
        return cfg["num_attention_heads"]
    if ".k_proj" in hf:
        return cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    return 0


def unpack(packed, bits, cols):
    per = 32 // bits
    u = packed.astype(np.uint32)
    vals = np.stack([(u >> (bits * i)) & ((1 << bits) - 1) for i in range(per)], axis=-1)
    return vals.reshape(packed.shape[0], -1)[:, :cols].astype(np.int64)


def tensors(path):
    r = GGUFReader(path)
    return r, {t.name: t for t in r.tensors}


def check_codes(path, packed_dir):
    cfg = json.load(open(packed_dir + "/config.json"))
    st = safetensors(packed_dir)
    _, ts = tensors(path)
    bad = compared = 0
    for k in sorted(st):
        if not k.endswith(".weight_packed"):
            continue
        hf = k[:-len("_packed")]
        t = ts[gguf_name(hf)]
        kind = t.tensor_type.name
        rows, cols = (int(x) for x in st[hf + "_shape"])
        scale = st[hf + "_scale"]
        if kind not in ("Q4_0", "Q8_0", "Q4_1") or cols % 32 or scale.shape[1] * 32 != cols:
            continue  # re-quantized or in the fallback type: not a kept tensor
        bits = 8 if kind == "Q8_0" else 4
        u = unpack(st[k], bits, cols)                              # [rows][cols], offset codes
        raw = np.asarray(t.data, dtype=np.uint8).reshape(rows, -1)
        blk = {"Q4_0": 18, "Q4_1": 20, "Q8_0": 34}[kind]
        b = raw.reshape(rows, cols // 32, blk)
        n = heads(cfg, hf)
        if n:
            b = permute_inverse(b, n)  # the file holds llama.cpp's row order
        d = b[:, :, 0:2].copy().view(np.uint16)[:, :, 0]
        want_d = scale.view(np.uint16)
        if kind == "Q8_0":
            q = b[:, :, 2:].view(np.int8).astype(np.int64) + 128
        else:
            qs = b[:, :, blk - 16:]
            q = np.concatenate([qs & 15, qs >> 4], axis=2).astype(np.int64)
        q = q.reshape(rows, cols)
        ok = np.array_equal(d, want_d) and np.array_equal(q, u)
        compared += 1
        if not ok:
            bad += 1
            print("FAIL - %s (%s): codes or scales differ from %s" % (t.name, kind, k))
    print("%d tensors compared, %d differ" % (compared, bad))
    return bad == 0 and compared > 0


def permute_inverse(rows, n_head):
    r = rows.shape[0]
    return rows.reshape(n_head, r // n_head // 2, 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


def check_dense(path, hf_dir):
    cfg = json.load(open(hf_dir + "/config.json"))
    st = safetensors(hf_dir)
    _, ts = tensors(path)
    bad = 0
    for hf, w in sorted(st.items()):
        name = gguf_name(hf)
        if name not in ts:
            if hf == "lm_head.weight" and cfg.get("tie_word_embeddings"):
                continue
            print("FAIL - %s (%s) is not in the file" % (name, hf))
            bad += 1
            continue
        if ts[name].tensor_type.name not in ("F16", "F32"):
            print("FAIL - %s is %s, not F16 or F32" % (name, ts[name].tensor_type.name))
            bad += 1
            continue
        got = np.asarray(ts[name].data).reshape(w.shape)
        n = heads(cfg, hf)
        want = permute(w, n) if n else w
        if not np.array_equal(got.astype(np.float32), want.astype(np.float32)):
            print("FAIL - %s differs from %s" % (name, hf))
            bad += 1
    print("%d tensors compared, %d differ" % (len(st), bad))
    return bad == 0


def check_same(a, b):
    sa, sb = safetensors(a), safetensors(b)
    bad = [k for k in sa if k not in sb or sa[k].dtype != sb[k].dtype or not np.array_equal(sa[k], sb[k])]
    bad += [k for k in sb if k not in sa]
    for k in bad:
        print("FAIL - %s differs" % k)
    print("%d tensors compared, %d differ" % (len(sa), len(bad)))
    return not bad


def main():
    mode, x, y = sys.argv[1:4]
    ok = {"codes": check_codes, "dense": check_dense, "same": check_same}[mode](x, y)
    sys.exit(0 if ok else 1)


main()
