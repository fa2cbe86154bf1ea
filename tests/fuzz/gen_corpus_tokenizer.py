#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz/fuzz_tokenizer.c (stdlib only).

Small valid tokenizer.json files covering each supported part (byte-level
BPE with the GPT-2 / Llama 3 / Qwen2 split regexes, Digits, Metaspace,
the SentencePiece normalizer and decoders, added-token flags, templates,
both merge spellings) plus the stories260K fixture, and one file per
malformed case the loader must refuse. Run from the repository root with
../shared beside it; the files are committed, so this only needs rerunning
when cases are added.
"""
import json
import os

OUT = "tests/fuzz/corpus/fuzz_tokenizer"
FIXTURE = "../shared/fixtures/stories260K/tokenizer.json"
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")


def byte_alphabet():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def added(content, id, special=True, **kw):
    t = {"id": id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": not special, "special": special}
    t.update(kw)
    return t


def bytelevel(pre_tokenizer, ignore_merges=False, post=None, pairs=True):
    vocab = {"<|endoftext|>": 0}
    for c in byte_alphabet():
        vocab[c] = len(vocab)
    merges = []
    for a, b in [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a"), ("e", "r"), ("Ġ", "w"),
                 ("o", "r"), ("l", "d"), ("Ġw", "or"), ("Ġwor", "ld"), ("1", "2"), ("12", "3")]:
        vocab.setdefault(a + b, len(vocab))
        merges.append([a, b] if pairs else a + " " + b)
    vocab["Hello"] = len(vocab)  # reachable only through ignore_merges
    n = len(vocab)
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [added("<|endoftext|>", 0), added("<|mask|>", n, lstrip=True),
                             added("[rs]", n + 1, special=False, rstrip=True, normalized=False),
                             added("cat", n + 2, special=False, single_word=True)],
            "normalizer": None, "pre_tokenizer": pre_tokenizer, "post_processor": post,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges}}


def split(regex):
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}


def bl(prefix=False, regex=True):
    return {"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": True, "use_regex": regex}


def seq(*pts):
    return {"type": "Sequence", "pretokenizers": list(pts)}


def template(bos_id):
    return {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [bos_id], "tokens": ["<|endoftext|>"]}}}]}


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(FIXTURE) as f:
        fixture_text = f.read()
    fixture = json.loads(fixture_text)
    valid = {
        "gpt2": bytelevel(bl()),
        "gpt2_prefix_space_string_merges": bytelevel(bl(prefix=True), pairs=False),
        "llama3": bytelevel(seq(split(LLAMA3), bl(regex=False)), ignore_merges=True, post=template(0)),
        "qwen2": bytelevel(seq(split(QWEN2), bl(regex=False))),
        "gpt2_split_digits": bytelevel(seq({"type": "Digits", "individual_digits": True}, split(GPT2),
                                           bl(regex=False))),
    }
    sp_first = json.loads(fixture_text)
    sp_first["normalizer"] = None
    sp_first["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
    sp_always = json.loads(fixture_text)
    sp_always["normalizer"] = None
    sp_always["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True}
    sp_always["decoder"] = {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True}
    sp_always["model"]["merges"] = ["#version: 0.2"] + fixture["model"]["merges"]
    valid["sp_metaspace_first"] = sp_first
    valid["sp_metaspace_legacy"] = sp_always
    for name, j in valid.items():
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump(j, f, ensure_ascii=False, separators=(",", ":"))
    with open(os.path.join(OUT, "stories260K.json"), "w") as f:
        f.write(fixture_text)

    gpt2 = valid["gpt2"]

    def broken(edit):
        j = json.loads(json.dumps(gpt2))
        edit(j)
        return json.dumps(j, ensure_ascii=False, separators=(",", ":"))

    bad = {
        "bad_truncated": fixture_text[: len(fixture_text) // 2],
        "bad_empty": "",
        "bad_not_object": "[1, 2, 3]",
        "bad_unigram": broken(lambda j: j["model"].update(type="Unigram")),
        "bad_wordpiece": broken(lambda j: j["model"].update(type="WordPiece")),
        "bad_merge_unknown": broken(lambda j: j["model"]["merges"].append(["Ġ", "zzz"])),
        "bad_merge_string": broken(lambda j: j["model"].update(merges=["a b c"])),
        "bad_negative_id": broken(lambda j: j["model"]["vocab"].update({"neg": -1})),
        "bad_huge_id": broken(lambda j: j["model"]["vocab"].update({"huge": 1 << 40})),
        "nfc_normalizer": broken(lambda j: j.update(normalizer={"type": "NFC"})),  # supported since the corpus was made
        "bad_regex": broken(lambda j: j.update(pre_tokenizer=split(r"\w+"))),
        "bad_template": broken(lambda j: j.update(post_processor={"type": "TemplateProcessing", "single": [
            {"SpecialToken": {"id": "<nope>", "type_id": 0}}], "special_tokens": {}})),
        "bad_decoder": broken(lambda j: j.update(decoder={"type": "Strip", "content": "ab", "start": 1, "stop": 0})),
        "bad_added_not_list": broken(lambda j: j.update(added_tokens={"a": 1})),
    }
    for name, text in bad.items():
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
