#!/usr/bin/env python3
"""Writes tests/data/regex_cases.jsonl: Python's re.match as the oracle for
formats/regex.c (read by tests/test_regex.c).

Usage: python3 tests/regex_oracle.py > tests/data/regex_cases.jsonl

Each line is [pattern, subject, result]: result 1 (re.match finds a match),
0 (it does not), "error" (re.compile refuses the pattern) or "unsupported"
(valid Python that pq refuses by name: lookaround, backreferences,
possessive quantifiers, inline flags, ...).
The cases: the patterns compressed-tensors ignore/targets lists use on
module names, hand-picked corners of the syntax, and random patterns over a
small alphabet (seeded, so the file is reproducible) on random subjects.
"""
import json
import random
import re
import sys

MODULES = ["lm_head", "model.layers.0.self_attn.q_proj", "model.layers.12.mlp.down_proj",
           "model.layers.3.mlp.gate", "model.layers.7.self_attn.o_proj", "model.embed_tokens",
           "vision_tower.blocks.0.attn", "model.layers.10.mlp.experts.3.up_proj", ""]
REAL = [r".*lm_head", r"lm_head", r".*self_attn.(k|q|v)_proj$", r"re:x", r"model.layers.[0-9]+.mlp.down_proj",
        r".*mlp\.gate$", r"vision_tower.*", r".*\.mlp\.down_proj$", r"model\.layers\.(1[0-9]|[2-9])\..*",
        r".*(q|k|v|o)_proj", r"(?:.*\.)?mlp\.(gate|up|down)_proj$", r".*\.experts\.\d+\.up_proj",
        r"model.layers.\d{1,2}.self_attn", r"^lm_head$", r"\Alm_head\Z", r".*\bq_proj\b", r"(?P<l>model)\.layers",
        r"[a-z_]+\.[^.]+\.\d+", r"model(?#comment)\.embed", r".*(?:gate|up)_proj", r".*_proj$|lm_head"]
CORNERS = ["a{2", "a{,2}", "a{2,}", "a{}", "a{,}", "x{0}", "[]a]", "[^]a]", "[a-]", "[-a]", "[a-c-e]", r"[\]]",
           r"[\d.]+", r"[^\w]", r"\W+", r"\S\s", r"\x41", r"\-", r"\/", r"a|b|", "|", "()", "(a*)*b", "(?:)*",
           r"\ba", r"a\B", r"\Z", "$", "^$", ".$", "b$", r"b\Z", "a*?b", "a+?", "a??", "a{2}?", "(a|ab)(c|bcd)",
           r"[\t\n]", r"\n", "é+", "[é-ü]", ".é", "[^é]"]
# Python refuses these
ERRORS = ["{2}", "*a", "a**", "a{2,1}", "^*", r"\b*", "a{1,2}{3}", "(a", "a)", "[a", r"\1", r"\q", "(?P=n)",
          r"[z-a]", r"[\d-z]", r"\x4", "(?P<1>a)", "a" + "+" * 40]
# Python accepts these; pq refuses them by name (outside the subset)
UNSUPPORTED = ["(?=a)", "(?!a)", "(?<=a)b", "(?<!a)b", "(?>a)", "(?i)a", "a*+", "a++", "a?+", "a{2}+", "(a)\\1",
               r"\N{DIGIT ONE}", r"\u0041", "(?(1)a|b)", "(?s).", r"\0"]


def oracle(p, s):
    if p in UNSUPPORTED:
        return "unsupported"
    try:
        r = re.compile(p)
    except (re.error, OverflowError):
        return "error"
    return 1 if r.match(s) else 0


def random_pattern(rng, depth=0):
    atoms = ["a", "b", ".", "[ab]", "[^a]", r"\d", r"\w", "1"]
    out = []
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        if r < 0.15 and depth < 3:
            out.append("(" + random_pattern(rng, depth + 1) + ")")
        elif r < 0.25 and depth < 3:
            out.append("(?:" + random_pattern(rng, depth + 1) + "|" + random_pattern(rng, depth + 1) + ")")
        else:
            out.append(rng.choice(atoms))
        q = rng.random()
        if q < 0.15:
            out.append(rng.choice(["*", "+", "?", "*?"]))
        elif q < 0.22:
            lo = rng.randint(0, 3)
            out.append(rng.choice(["{%d}" % lo, "{%d,}" % lo, "{%d,%d}" % (lo, lo + rng.randint(0, 2))]))
    s = "".join(out)
    if rng.random() < 0.1:
        s += "$"
    if rng.random() < 0.1:
        s = "^" + s
    return s


def main():
    rng = random.Random(20240610)
    cases = []
    for p in REAL:
        for m in MODULES:
            cases.append((p, m))
    for p in CORNERS + ERRORS + UNSUPPORTED:
        for s in (["", "a", "aa", "aaa", "ab", "ab\n", "a{}", "a{,}", "]", "-", "x", "A", "\t", "é", "aé", "éü", "1a"]
                  if p in CORNERS else ["a"]):
            cases.append((p, s))
    for _ in range(1000):
        p = random_pattern(rng)
        s = "".join(rng.choice("ab1 \n") for _ in range(rng.randint(0, 8)))
        cases.append((p, s))
    seen = set()
    for p, s in cases:
        if (p, s) in seen:
            continue
        seen.add((p, s))
        sys.stdout.write(json.dumps([p, s, oracle(p, s)], ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
