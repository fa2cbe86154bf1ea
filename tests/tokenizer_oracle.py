#!/usr/bin/env python3
"""The Hugging Face tokenizers library as the oracle for pq's tokenizer.

Usage: tokenizer_oracle.py SHARED OUTDIR

Trains a GPT-2 style byte-level BPE tokenizer on SHARED/data/c4_validation_2k.txt,
derives variants of it (Llama 3 and Qwen2 split regexes, Qwen2 with its NFC
normalizer, ignore_merges, Digits, add_prefix_space, a BOS template) and of
the stories260K fixture
(Metaspace pre-tokenizer), saves each as OUTDIR/<name>.json, encodes texts
with the library and writes, for each case, the text, the ids (int32 LE) and
the library's decoding of the ids. OUTDIR/manifest.tsv lists the cases:
    name  tokenizer.json  text  ids  decoded  add_special
which `test_tokenizer --oracle OUTDIR/manifest.tsv` compares with pq.
"""
import array
import json
import os
import random
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
         r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Short texts aimed at the corners of the split patterns, the byte-level
# alphabet, added tokens and the SentencePiece normalizer.
EDGE = [
    "Hello world",
    " Hello  world ",
    "   leading spaces and trailing   ",
    "\n\nstarts with newlines\n",
    "a\r\nb\r\n\r\n  c\n \n\td\t\t e",
    "it's I'm you're we've they'll he'd IT'S I'M YOU'RE 'll 'LL 'Ll 'ſ 'x '",
    "x'ſx x'Sx x'LLx x'lLx x'Rex x'\u212ax x'ßx don'T",
    "numbers 1 12 123 1234 12345 3.14159 1,000,000 -42 +7 0x1F",
    "unicode: naïve café résumé Ünïcödé ß ﬁ Ωμέγα Привет мир",
    "cjk: 日本語のテキスト 中文文本 한국어 텍스트",
    "emoji: 😀😃 👍🏽 👨‍👩‍👧 🇫🇷 ❤️",
    "digits: ١٢٣٤٥ ²³ ⅫⅫ ½ ١a٢",
    "spaces:\u00a0nbsp\u3000ideo\u2000en\u2003em \u0085nel \u180emvs \u200bzw \ufeffbom \u2028ls",
    "punct!!! ... ?!? (parens) [brackets] {braces} <angle> \"quotes\" “curly” — – -",
    "mixed\tTABS\tand  \n  NEWLINES \r\r\n\n\n",
    "<|endoftext|>first token special",
    "between<|endoftext|>tokens<|endoftext|><|endoftext|> end<|endoftext|>",
    "mask: a <|mask|> b   <|mask|>c\n<|mask|>",
    "rstrip: [rs]   after [rs]\n\nnext[rs]",
    "single word: cat concat cats cat. _cat cat_ (cat) cat",
    "<s>literal specials</s> <unk> in text",
    "▁literal▁meta▁space ▁ ▁▁",
    "x",
    " ",
    "\n",
    "",
    "a" * 300 + " " + "ab" * 200,
    "Once upon a time, there was a little girl named Lily.\n\nShe liked to play.",
    "control\x01chars\x7f\x00nul",
]


# Text for the NFC normalizer: decomposed accents, marks out of canonical
# order, singletons, exclusions, Hangul jamo and syllables. Only code points
# assigned by Unicode 9.0, the version of the library's normalization tables
# (pq's are 14.0; they agree on such text).
NFC_EDGE = [
    "Ame\u0301lie, cafe\u0301, nai\u0308ve, re\u0301sume\u0301, Ange\u0300le, Zo\u00eb, A\u030Angstr\u00f6m",
    "\u212B \u2126 \u212A \u00C5\u0301 A\u030A\u0301 a\u0308\u0304 q\u0307\u0323 \u1E0B\u0323 a\u0301\u0316 e\u0301\u0327",
    "Vie\u0323\u0302t Nam: Tie\u0302\u0301ng Vie\u0323\u0302t co\u0301 da\u0302\u0301u, \u1EC7 e\u0323\u0302 e\u0302\u0323",
    "\u1112\u1161\u11AB\u1100\u116E\u11A8\u110B\u1165 \uD55C\uAD6D\uC5B4 \u1100\u1161\u11A8 \uAC00\u11A8 \u1100\u1161\u0300\u11A8",
    "\u1161\u11A8 \u11A7\uAC00 \u1100\u1100\u1161\u1161 \u1112\u1175\u11C2 \uD7A3",
    "\u0958\u0915\u093C \u2ADC \u0F73\u0F75\u0F81 \u0344 \u0340\u0341 \u0374\u037E\u0387 \uF900\uFA10 \U0001D15E",
    "\u0B47\u0B3E \u09C7\u09BE \u0DD9\u0DCA\u0DCF \u1025\u102E \u0CBF\u0CD5 \U00011099\U000110BA",
    "\u05D1\u05BC\u05B0 \u05E9\u05C1\u05B8 \u05B8\u05BC \u0627\u0653 \u0627\u0654\u0655 \u304B\u3099 \u30CF\u309A",
    "\u0301 leading mark, \u03B1\u0313\u0300\u0345 \u1F83 \u1FB7 \u017F\u0323\u0307 \u1E9B\u0323",
    "<|endoftext|>e\u0301<|mask|>\u0301 cafe\u0301<|endoftext|>\u0301",
]
NFC_POOL = ("aeoAEO \u00C5\u00E9\u212B\u2126\u0300\u0301\u0302\u0308\u0304\u0316\u0323\u0327\u0328\u031B"
            "\u0345\u0344\u0340\u035C\u0315\u05B0\u05BC\u0591\u0B47\u0B3E\u0DD9\u0DCA\u0DCF\u1100\u1112"
            "\u1161\u1175\u11A8\u11C2\uAC00\uAC01\uD7A3\u0958\u093C\u0915\u0F71\u0F72\u0F73\u1E0B\u03B1"
            "\u0313\u1F80\u3099\u304B\uF900\u0338=\u2260")


def nfc_mix(n, seed=1):
    rng = random.Random(seed)
    return "".join(rng.choice(NFC_POOL) for _ in range(n))


def read_text(path, limit=None):
    with open(path, "rb") as f:
        data = f.read()
    if limit is not None:
        data = data[:limit]
    return data.decode("utf-8")


def train_bytelevel(c4):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    trainer = trainers.BpeTrainer(vocab_size=6000, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(c4.split("\n\n"), trainer)
    tok.add_special_tokens([AddedToken("<|mask|>", lstrip=True, special=True)])
    tok.add_tokens([AddedToken("[rs]", rstrip=True, normalized=False), AddedToken("cat", single_word=True)])
    return tok


def variant(base, edit):
    j = json.loads(base.to_str())
    edit(j)
    return Tokenizer.from_str(json.dumps(j))


def pretok_json(pt):
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pt
    return json.loads(t.to_str())["pre_tokenizer"]


def main():
    shared, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    data = os.path.join(shared, "data")
    c4 = read_text(os.path.join(data, "c4_validation_2k.txt"))
    wiki = read_text(os.path.join(data, "wiki.test.raw"))
    stories = read_text(os.path.join(data, "tinystories_val_prefix.txt"))

    gpt2 = train_bytelevel(c4)
    eot = gpt2.token_to_id("<|endoftext|>")

    def llama3(j):
        j["pre_tokenizer"] = pretok_json(pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)]))
        j["model"]["ignore_merges"] = True
        j["post_processor"] = {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [eot], "tokens": ["<|endoftext|>"]}}}]}

    def qwen2(j):
        j["pre_tokenizer"] = pretok_json(pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]))

    def qwen2_nfc(j):
        qwen2(j)
        j["normalizer"] = {"type": "NFC"}

    def digits(j):
        j["pre_tokenizer"] = pretok_json(pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]))

    def prefix(j):
        j["pre_tokenizer"] = pretok_json(pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=False), pre_tokenizers.ByteLevel(add_prefix_space=True)]))

    fixture = Tokenizer.from_file(os.path.join(shared, "fixtures/stories260K/tokenizer.json"))

    def meta_first(j):
        j["normalizer"] = None
        j["pre_tokenizer"] = pretok_json(pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False))

    def meta_always(j):
        j["normalizer"] = None
        j["pre_tokenizer"] = pretok_json(pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True))
        j["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}

    tokenizers = {
        "gpt2": gpt2,
        "llama3": variant(gpt2, llama3),
        "qwen2": variant(gpt2, qwen2),
        "qwen2_nfc": variant(gpt2, qwen2_nfc),
        "digits": variant(gpt2, digits),
        "prefix": variant(gpt2, prefix),
        "sp": fixture,
        "sp_meta_first": variant(fixture, meta_first),
        "sp_meta_always": variant(fixture, meta_always),
    }
    big = {"gpt2": ["wiki", "stories"], "llama3": ["wiki", "stories", "c4"], "qwen2": ["wiki"],
           "qwen2_nfc": ["wiki", "c4", "nfc_mix"], "digits": ["wiki"]}
    texts = {"wiki": wiki, "stories": stories, "c4": c4, "nfc_mix": nfc_mix(50000)}

    rows = []
    for name, tok in tokenizers.items():
        tpath = os.path.join(out, name + ".json")
        tok.save(tpath)
        cases = [("edge%02d" % i, t, 0) for i, t in enumerate(EDGE)]
        cases += [("edge%02d+bos" % i, EDGE[i], 1) for i in (0, 14, 24)]
        cases += [("nfc%02d" % i, t, 0) for i, t in enumerate(NFC_EDGE)]
        cases += [(t, texts[t], 0) for t in big.get(name, [])]
        for cname, text, special in cases:
            base = os.path.join(out, "%s.%s" % (name, cname))
            ids = tok.encode(text, add_special_tokens=bool(special)).ids
            with open(base + ".txt", "wb") as f:
                f.write(text.encode("utf-8"))
            with open(base + ".ids", "wb") as f:
                f.write(array.array("i", ids).tobytes())
            with open(base + ".dec", "wb") as f:
                f.write(tok.decode(ids, skip_special_tokens=False).encode("utf-8"))
            rows.append("\t".join([name + "/" + cname, tpath, base + ".txt", base + ".ids", base + ".dec", str(special)]))
    with open(os.path.join(out, "manifest.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
