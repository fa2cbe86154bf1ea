#!/usr/bin/env python3
"""Generates formats/tokenizer/unicode_nfc_tables.h (the data of Unicode canonical
normalization, NFC and NFD) and its test vectors tests/data/nfc_vectors.txt,
both from Python's unicodedata.

    python3 tools/gen_nfc_tables.py           > formats/tokenizer/unicode_nfc_tables.h
    python3 tools/gen_nfc_tables.py --vectors > tests/data/nfc_vectors.txt

The Unicode version must equal that of formats/tokenizer/unicode_tables.h (from
tools/gen_unicode_tables.py); the script refuses to run otherwise.

Tables (Hangul syllables are left to the algorithm of Unicode section 3.12):
  - a two-stage trie mapping each code point to a property class: its
    canonical combining class and the flags HAS_DECOMP (a canonical
    decomposition), QC_NO (NFC_Quick_Check=No: never in NFC text) and
    QC_MAYBE (NFC_Quick_Check=Maybe: the second code point of a primary
    composite);
  - the full canonical decomposition (NFD) of every decomposable code point,
    as a sorted key array and offsets into one code point pool;
  - the composition pairs NFC recombines: (first, second) -> composite for
    every primary composite, i.e. every two-code-point canonical mapping that
    is not a composition exclusion nor a non-starter decomposition (exactly
    the composites c with NFC(c) == c).
"""
import re
import sys
import unicodedata

HAS_DECOMP, QC_NO, QC_MAYBE = 1, 2, 4
S_BASE, S_COUNT = 0xAC00, 11172
HANGUL_V = range(0x1161, 0x1176)
HANGUL_T = range(0x11A8, 0x11C3)
SHIFTS = range(4, 10)  # trie block sizes tried: 16 .. 512 code points

# Strings aimed at the corners of decomposition, reordering and composition.
TRICKY = [
    "", "abc", "e\u0301", "A\u030A", "\u212B", "\u2126", "\u212A", "\u00C5\u0301", "A\u030A\u0301",
    "\u1E0B\u0323", "q\u0307\u0323", "a\u0301\u0316", "a\u0316\u0301", "A\u0301\u0328", "a\u0308\u0304",
    "a\u0301\u0301", "a\u0308\u0301\u0308", "\u1E9B\u0323", "\u017F\u0323\u0307", "\u03B1\u0313\u0300\u0345",
    "\u1F83", "\u1FB7", "\u0344", "\u0340\u0341", "\u0374\u037E\u0387", "\u0F73\u0F75\u0F81", "\u0F71\u0F72",
    "\u0958\u0915\u093C", "\u2ADC\u2ADD\u0338", "\uFB1D\uFB2A", "\uF900\uFA10\U0002F800", "\U0001D15E\U0001D160",
    "\U0001D157\U0001D165", "\U00011099\U000110BA", "\U00011935\U00011930", "\u0B47\u0B3E", "\u0B47\u0301\u0B3E",
    "\u09C7\u09BE\u09C7\u09D7", "\u0DD9\u0DCA\u0DCF", "\u1025\u102E", "\u0CBF\u0CD5\u0CC6\u0CC2\u0CD5",
    "\u1100\u1161", "\u1100\u1161\u11A8", "\uAC00\u11A8", "\uAC01\u11A8", "\u1100\u1161\u0300\u11A8",
    "\u1100\u0300\u1161", "\u1112\u1175\u11C2", "\uD7A3\uD7A4", "\u1100\u1100\u1161\u1161", "\u1161\u11A8\u1100",
    "\u11A7\uAC00\u11A7", "\u1113\u1161\u1100\u1176", "\uD55C\uAD6D\uC5B4 \u1112\u1161\u11AB\u1100\u116E\u11A8",
    "\u0301abc", "\u0316\u0301\u0300", "x\u0300\u0315\u0300\u035C\u0300", "e\u0301\u0327", "c\u0327\u0301",
    "\u00E7\u0301", "\u1E08", "\u0041\u0338\u0328", "\u2260\u0338", "=\u0338<\u0338", "\u226F\u0338",
    "Ame\u0301lie cafe\u0301 nai\u0308ve re\u0301sume\u0301", "\u1EC7\u0065\u0323\u0302\u0065\u0302\u0323",
    "\u05D1\u05BC\u05BF\u05B0\u05B4", "\u0627\u0653\u0654\u0655", "\u0915\u094D\u093C", "\u0E40\u0E48\u0E49\u0E4D",
    "\u3099\u304B\u3099\u309A\u30CF\u309A", "\U0001F600\u0301\U0001F600", "\u00C0" * 3 + "\u0300" * 3,
    "a" + "\u0301\u0316\u0328\u0300\u0323" * 40, "\u05B0" * 5 + "\u0591" * 5 + "\u05B0" * 5,
]


def cps(s):
    return " ".join("%04X" % ord(c) for c in s)


def nfc(s):
    return unicodedata.normalize("NFC", s)


def nfd(s):
    return unicodedata.normalize("NFD", s)


def check_version():
    with open("formats/tokenizer/unicode_tables.h", encoding="utf-8") as f:
        m = re.search(r"Unicode (\d+\.\d+\.\d+)", f.read(400))
    if not m or m.group(1) != unicodedata.unidata_version:
        sys.exit("gen_nfc_tables: Python has Unicode %s but formats/tokenizer/unicode_tables.h has %s; use the same Python"
                 % (unicodedata.unidata_version, m.group(1) if m else "?"))


def code_points():
    return [cp for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]


def build():
    decomp, pairs, seconds, props = {}, {}, set(HANGUL_V) | set(HANGUL_T), {}
    for cp in code_points():
        c = chr(cp)
        if S_BASE <= cp < S_BASE + S_COUNT:
            continue
        m = unicodedata.decomposition(c)
        if m and not m.startswith("<"):
            decomp[cp] = [ord(x) for x in nfd(c)]
            parts = [int(x, 16) for x in m.split()]
            if len(parts) == 2 and nfc(c) == c:
                pairs[(parts[0], parts[1])] = cp
                seconds.add(parts[1])
    for cp in code_points():
        c = chr(cp)
        ccc = unicodedata.combining(c)
        flags = 0
        if cp in decomp or S_BASE <= cp < S_BASE + S_COUNT:
            flags |= HAS_DECOMP
        if nfc(c) != c:
            flags |= QC_NO
        if cp in seconds:
            flags |= QC_MAYBE
        if ccc or flags:
            props[cp] = (ccc, flags)
    # what the C code relies on: a starter whose NFC quick check is Yes
    # decomposes to a starter that composes with nothing before it (so a text
    # can be cut before it), composites are starters, classes fit in 8 bits
    for cp, (ccc, flags) in props.items():
        if ccc == 0 and not flags & (QC_NO | QC_MAYBE) and cp in decomp:
            first = decomp[cp][0]
            assert unicodedata.combining(chr(first)) == 0 and first not in seconds, hex(cp)
    assert all(unicodedata.combining(chr(c)) == 0 for c in pairs.values())
    assert max(unicodedata.combining(chr(cp)) for cp in props) < 256
    return decomp, pairs, props


def build_trie(props):
    """The smallest two-stage trie over [0, limit), limit a whole number of
    blocks past the last code point with a property (classes beyond are 0)."""
    classes = [(0, 0)] + sorted(set(props.values()))
    index = {p: i for i, p in enumerate(classes)}
    assert len(classes) <= 256
    values = bytearray(0x110000)
    for cp, p in props.items():
        values[cp] = index[p]
    best = None
    for shift in SHIFTS:
        size = 1 << shift
        limit = (max(props) >> shift) + 1 << shift
        blocks, stage1 = {}, []
        for b in range(0, limit, size):
            stage1.append(blocks.setdefault(bytes(values[b:b + size]), len(blocks)))
        if len(blocks) > 256:
            continue
        total = len(stage1) + len(blocks) * size
        if best is None or total < best[0]:
            best = (total, shift, limit, stage1, b"".join(sorted(blocks, key=blocks.get)))
    return classes, best


def write_array(out, ctype, name, items, fmt, width=120):
    out.write("static const %s %s[%d] = {\n" % (ctype, name, len(items)))
    line = "   "
    for v in items:
        item = fmt % v + ","
        if len(line) + 1 + len(item) > width:
            out.write(line + "\n")
            line = "   "
        line += (" " if line == "   " else "") + item
    out.write(line + "\n};\n\n")


def write_tables(out):
    decomp, pairs, props = build()
    classes, (_, shift, limit, stage1, stage2) = build_trie(props)
    keys = sorted(decomp)
    pool, offs = [], []
    for cp in keys:
        d = decomp[cp]
        assert 1 <= len(d) <= 4
        offs.append(len(pool) << 2 | (len(d) - 1))
        pool.extend(d)
    assert len(pool) < 1 << 14
    pkeys = sorted(pairs)
    size = (len(stage1) + len(stage2) + 2 * len(classes) + 4 * len(keys) + 2 * len(offs) + 4 * len(pool)
            + 8 * len(pkeys))
    out.write("// formats/tokenizer/unicode_nfc_tables.h — GENERATED by tools/gen_nfc_tables.py from\n")
    out.write("// Unicode %s (Python unicodedata); do not edit by hand. Included only by\n" % unicodedata.unidata_version)
    out.write("// formats/tokenizer/unicode_nfc.c. %d bytes of tables:\n" % size)
    out.write("//   class of cp = pq_nfc_stage2[pq_nfc_stage1[cp >> PQ_NFC_SHIFT] << PQ_NFC_SHIFT\n")
    out.write("//                               | (cp & ((1 << PQ_NFC_SHIFT) - 1))] for cp < PQ_NFC_LIMIT, else 0\n")
    out.write("//   pq_nfc_classes[class] = {canonical combining class, PQ_NFC_* flags}\n")
    out.write("//   NFD of a decomposable cp (not a Hangul syllable) = pq_nfc_pool[off >> 2 ..][0 .. (off & 3) + 1)\n")
    out.write("//     where off = pq_nfc_decomp_off[i] and pq_nfc_decomp_cp[i] == cp (sorted)\n")
    out.write("//   primary composite of (a, b) = pq_nfc_comp[i] & 0x1FFFFF where pq_nfc_comp[i] >> 21 == a << 21 | b\n")
    out.write("//     (pq_nfc_comp is sorted)\n")
    out.write("#ifndef PQ_UNICODE_NFC_TABLES_H\n#define PQ_UNICODE_NFC_TABLES_H\n\n#include <stdint.h>\n\n")
    out.write("#define PQ_NFC_SHIFT %d\n#define PQ_NFC_LIMIT 0x%X\n" % (shift, limit))
    out.write("enum { PQ_NFC_HAS_DECOMP = %d, PQ_NFC_QC_NO = %d, PQ_NFC_QC_MAYBE = %d };\n\n"
              % (HAS_DECOMP, QC_NO, QC_MAYBE))
    out.write("typedef struct { uint8_t ccc, flags; } pq_nfc_cls;\n\n")
    write_array(out, "pq_nfc_cls", "pq_nfc_classes", classes, "{%d,%d}")
    write_array(out, "uint8_t", "pq_nfc_stage1", stage1, "%d")
    write_array(out, "uint8_t", "pq_nfc_stage2", list(stage2), "%d")
    write_array(out, "uint32_t", "pq_nfc_decomp_cp", keys, "0x%X")
    write_array(out, "uint16_t", "pq_nfc_decomp_off", offs, "%d")
    write_array(out, "uint32_t", "pq_nfc_pool", pool, "0x%X")
    write_array(out, "uint64_t", "pq_nfc_comp", [(a << 21 | b) << 21 | pairs[(a, b)] for a, b in pkeys], "0x%X")
    out.write("#endif\n")


def fnv1a(data, h=0x811C9DC5):
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def write_vectors(out):
    out.write("# tests/data/nfc_vectors.txt — GENERATED by tools/gen_nfc_tables.py --vectors from\n")
    out.write("# Unicode %s (Python unicodedata); read by tests/test_unicode.c. Lines:\n" % unicodedata.unidata_version)
    out.write("#   cp X : NFC(X)          every code point whose NFC is not itself (all others map to themselves)\n")
    out.write("#   str S : NFC(S) : NFD(S)  strings at the corners of decomposition, reordering and composition\n")
    out.write("#   nfd B H                  H = FNV-1a 32 of the UTF-8 of NFD(cp) for cp in [B, B + 0x1000), no surrogates\n")
    out.write("# Code points are hex, space separated.\n")
    for cp in code_points():
        c = chr(cp)
        if nfc(c) != c:
            out.write("cp %04X : %s\n" % (cp, cps(nfc(c))))
    for s in TRICKY:
        out.write("str %s : %s : %s\n" % (cps(s), cps(nfc(s)), cps(nfd(s))))
    for b in range(0, 0x110000, 0x1000):
        h = 0x811C9DC5
        for cp in range(b, b + 0x1000):
            if not 0xD800 <= cp < 0xE000:
                h = fnv1a(nfd(chr(cp)).encode("utf-8"), h)
        out.write("nfd %X %08X\n" % (b, h))


def main():
    check_version()
    if sys.argv[1:] == ["--vectors"]:
        write_vectors(sys.stdout)
    elif not sys.argv[1:]:
        write_tables(sys.stdout)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
