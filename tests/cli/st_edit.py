#!/usr/bin/env python3
"""Writes an edited copy of a safetensors file, for the CLI tests.

Usage: st_edit.py SRC DST [edit ...]
  --drop NAME                       leave tensor NAME out
  --drop-prefix PREFIX              leave out every tensor whose name starts with PREFIX
  --add NAME DTYPE SHAPE            add a zero-filled tensor (SHAPE as JSON: "[4611686018427387904, 0]")
  --reshape NAME SHAPE              give NAME another shape (same dtype; zero-filled data of the new size)
  --poke NAME INDEX HEX             overwrite element INDEX of NAME with the bytes HEX (little endian)
  --pad N                           N more spaces at the end of the header (shifts all data by N bytes)
Tensors are laid out back to back in the order of SRC's header, then the added ones.
"""
import json
import struct
import sys

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8, "I32": 4, "I16": 2,
         "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1}


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def main():
    src, dst, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    raw = open(src, "rb").read()
    (hl,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hl])
    base = 8 + hl
    meta = header.pop("__metadata__", None)
    tensors = []  # [name, dtype, shape, bytearray]
    for name, e in header.items():
        b, end = e["data_offsets"]
        tensors.append([name, e["dtype"], e["shape"], bytearray(raw[base + b:base + end])])
    pad = 0
    i = 0
    while i < len(args):
        op = args[i]
        if op == "--drop":
            tensors = [t for t in tensors if t[0] != args[i + 1]]
            i += 2
        elif op == "--drop-prefix":
            tensors = [t for t in tensors if not t[0].startswith(args[i + 1])]
            i += 2
        elif op == "--add":
            shape = json.loads(args[i + 3])
            tensors.append([args[i + 1], args[i + 2], shape, bytearray(numel(shape) * SIZES[args[i + 2]])])
            i += 4
        elif op == "--reshape":
            shape = json.loads(args[i + 2])
            for t in tensors:
                if t[0] == args[i + 1]:
                    t[2], t[3] = shape, bytearray(numel(shape) * SIZES[t[1]])
            i += 3
        elif op == "--poke":
            data = bytes.fromhex(args[i + 3])
            for t in tensors:
                if t[0] == args[i + 1]:
                    k = int(args[i + 2]) * SIZES[t[1]]
                    t[3][k:k + len(data)] = data
            i += 4
        elif op == "--pad":
            pad = int(args[i + 1])
            i += 2
        else:
            sys.exit("st_edit.py: unknown edit " + op)
    out, off, data = {}, 0, bytearray()
    if meta is not None:
        out["__metadata__"] = meta
    for name, dtype, shape, b in tensors:
        out[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
        data += b
    h = json.dumps(out, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8 + pad)
    open(dst, "wb").write(struct.pack("<Q", len(h)) + h + bytes(data))


if __name__ == "__main__":
    main()
