#!/usr/bin/env python3
"""The Hugging Face tokenizers library on a tokenizer.json pq made from a GGUF file.

Usage: gguf_tokenizer_oracle.py TOKENIZER_JSON SHARED OUTDIR

Writes OUTDIR/wiki.{txt,ids,dec}: wiki.test.raw, its ids (int32 LE,
add_special_tokens=True) and the library's decoding of them; and
OUTDIR/c4.{txt,ids,lens}: c4_validation_2k.txt, the ids of each document
(documents are separated by one blank line) concatenated, and each
document's id count. `test_gguf_model --tok-oracle FILE.gguf OUTDIR`
compares pq's tokenizer, read from the .gguf itself, with them.
"""
import array
import os
import shutil
import sys

from tokenizers import Tokenizer


def main():
    tok = Tokenizer.from_file(sys.argv[1])
    data, out = os.path.join(sys.argv[2], "data"), sys.argv[3]
    os.makedirs(out, exist_ok=True)
    wiki = open(os.path.join(data, "wiki.test.raw"), encoding="utf-8").read()
    ids = tok.encode(wiki, add_special_tokens=True).ids
    shutil.copyfile(os.path.join(data, "wiki.test.raw"), os.path.join(out, "wiki.txt"))
    array.array("i", ids).tofile(open(os.path.join(out, "wiki.ids"), "wb"))
    open(os.path.join(out, "wiki.dec"), "wb").write(tok.decode(ids, skip_special_tokens=False).encode("utf-8"))
    c4 = open(os.path.join(data, "c4_validation_2k.txt"), encoding="utf-8").read()
    docs = c4.split("\n\n")
    enc = tok.encode_batch(docs, add_special_tokens=True)
    shutil.copyfile(os.path.join(data, "c4_validation_2k.txt"), os.path.join(out, "c4.txt"))
    array.array("i", [i for e in enc for i in e.ids]).tofile(open(os.path.join(out, "c4.ids"), "wb"))
    array.array("i", [len(e.ids) for e in enc]).tofile(open(os.path.join(out, "c4.lens"), "wb"))


if __name__ == "__main__":
    main()
