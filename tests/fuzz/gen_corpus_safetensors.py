#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz/fuzz_safetensors.c (stdlib only).

Valid small safetensors images in the layout the Hugging Face library
writes, plus one file per malformed case the reader must refuse. Run from
the repository root; the files are committed, so this only needs rerunning
when cases are added.
"""
import json
import os
import struct

OUT = "tests/fuzz/corpus/fuzz_safetensors"
SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8, "I32": 4,
         "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1}


def image(header, data=b"", pad=True):
    """8-byte length + header (a str, or a dict dumped compactly) + data."""
    h = header if isinstance(header, (str, bytes)) else json.dumps(header, separators=(",", ":"))
    h = h.encode() if isinstance(h, str) else h
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def tensors(specs, meta=None):
    """specs: [(name, dtype, shape)] laid out back to back in name order."""
    header, data = {}, b""
    if meta:
        header["__metadata__"] = meta
    for name, dt, shape in sorted(specs):
        n = SIZES[dt]
        for d in shape:
            n *= d
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + n]}
        data += bytes((len(data) + i) * 37 % 251 for i in range(n))
    return image(header, data)


def entry(dt, shape, b, e):
    return {"dtype": dt, "shape": shape, "data_offsets": [b, e]}


def main():
    os.makedirs(OUT, exist_ok=True)
    cases = {
        "valid_empty": image({}),
        "valid_metadata_only": image({"__metadata__": {"format": "pt", "k": "v"}}),
        "valid_one_f32": tensors([("w", "F32", [2, 3])]),
        "valid_all_dtypes": tensors([(f"t.{dt.lower()}", dt, [3]) for dt in SIZES], {"format": "pt"}),
        "valid_scalar_and_empty": tensors([("s", "I64", []), ("e", "U8", [0, 4]), ("x", "F16", [2])]),
        "valid_eight_dims": tensors([("d8", "U8", [1, 2, 1, 2, 1, 2, 1, 2])]),
        "valid_unicode_names": tensors([("h\u00e9llo.w", "BF16", [2, 2]), ("\u2581tok", "U8", [3]),
                                        ("a/b\"c\\d", "I8", [1])]),
        "valid_llama_like": tensors([(f"model.layers.{i}.{p}.weight", "F16", [4, 4])
                                     for i in range(2) for p in ("self_attn.q_proj", "mlp.up_proj")]
                                    + [("model.norm.weight", "F16", [4])], {"format": "pt"}),
        "valid_gap_and_order": image({"b": entry("U8", [2], 0, 2), "a": entry("U8", [2], 8, 10)}, bytes(16)),
        "valid_unpadded_header": image({"a": entry("U16", [2], 0, 4)}, bytes(4), pad=False),
        "valid_trailing_bytes": image({"a": entry("U8", [1], 0, 1)}, bytes(9)),
        "valid_escaped_key": image('{"\\u00e9\\n":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"x"),
        "valid_zero_size_inside": image({"a": entry("F32", [2], 0, 8), "z": entry("F32", [0], 4, 4)}, bytes(8)),
        "bad_short": b"\x10\x00\x00",
        "bad_len_past_eof": struct.pack("<Q", 1000) + b"{}" + bytes(10),
        "bad_len_huge": struct.pack("<Q", 2**63 + 5) + b"{}",
        "bad_len_zero": struct.pack("<Q", 0) + bytes(8),
        "bad_not_json": image('{"a": {"dtype"'),
        "bad_not_object": image("[1,2,3]"),
        "bad_string_top": image('"hello"'),
        "bad_nul_in_header": struct.pack("<Q", 8) + b'{"a\x00":1}'[:8],
        "bad_invalid_utf8": image(b'{"\xff\xfe":{}}'),
        "bad_deep_nesting": image("[" * 2040 + "]" * 2040),
        "bad_unknown_dtype": image({"a": entry("F17", [1], 0, 4)}, bytes(4)),
        "bad_dtype_number": image({"a": {"dtype": 3, "shape": [1], "data_offsets": [0, 1]}}, bytes(1)),
        "bad_size_mismatch": image({"a": entry("F32", [2, 3], 0, 20)}, bytes(24)),
        "bad_overlap": image({"a": entry("F32", [4], 0, 16), "b": entry("F32", [4], 8, 24)}, bytes(24)),
        "bad_overlap_same_start": image({"a": entry("U8", [4], 0, 4), "b": entry("U8", [2], 0, 2)}, bytes(4)),
        "bad_out_of_file": image({"a": entry("U8", [64], 0, 64)}, bytes(32)),
        "bad_begin_after_end": image({"x": entry("U8", [3], 12, 9)}, bytes(16)),
        "bad_negative_offset": image({"x": entry("U8", [3], -3, 0)}, bytes(16)),
        "bad_offsets_three": image('{"x":{"dtype":"U8","shape":[3],"data_offsets":[0,3,4]}}', bytes(4)),
        "bad_offsets_float": image('{"x":{"dtype":"U8","shape":[3],"data_offsets":[0.0,3]}}', bytes(4)),
        "bad_offsets_huge": image('{"x":{"dtype":"U8","shape":[3],"data_offsets":[0,99999999999999999999]}}'),
        "bad_negative_shape": image({"a": entry("F32", [-1, 4], 0, 16)}, bytes(16)),
        "bad_float_shape": image({"a": entry("F32", [1.5], 0, 4)}, bytes(4)),
        "bad_shape_not_array": image({"a": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}}, bytes(16)),
        "bad_nine_dims": image({"a": entry("U8", [1] * 9, 0, 1)}, bytes(1)),
        "bad_shape_overflow": image({"a": entry("U8", [2**32, 2**32], 0, 0)}),
        "bad_bytes_overflow": image({"a": entry("F64", [2**62], 0, 0)}),
        "bad_duplicate": image('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                               '"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', bytes(2)),
        "bad_duplicate_escaped": image('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                                       '"\\u0061":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', bytes(2)),
        "bad_entry_not_object": image({"a": [1, 2]}),
        "bad_missing_offsets": image({"a": {"dtype": "U8", "shape": [1]}}, bytes(1)),
        "bad_metadata_not_object": image({"__metadata__": ["x"]}),
        "bad_metadata_value": image({"__metadata__": {"k": 1}}),
        "bad_truncated_data": tensors([("a", "F32", [4]), ("b", "F32", [4])])[:-5],
        "bad_truncated_header": tensors([("a", "F32", [4])])[:20],
    }
    for name, data in cases.items():
        assert len(data) < 4096, name
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"{len(cases)} files in {OUT}")


if __name__ == "__main__":
    main()
