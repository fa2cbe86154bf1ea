// The GPT-2 byte-to-unicode alphabet and the split regexes of byte-level
// tokenizers, as hand-written scanners that return what Oniguruma's leftmost,
// backtracking match of each pattern returns.
#include <string.h>

#include "formats/tokenizer/pretok.h"

static const char RE_GPT2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char RE_LLAMA3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
                                " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_QWEN2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
                               " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

int pq_split_pattern_of(const char *regex) {
    if (strcmp(regex, RE_GPT2) == 0) return PQ_SPLIT_GPT2;
    if (strcmp(regex, RE_LLAMA3) == 0) return PQ_SPLIT_LLAMA3;
    if (strcmp(regex, RE_QWEN2) == 0) return PQ_SPLIT_QWEN2;
    return -1;
}

const char *pq_split_pattern_regex(pq_split_pattern pat) {
    return pat == PQ_SPLIT_LLAMA3 ? RE_LLAMA3 : pat == PQ_SPLIT_QWEN2 ? RE_QWEN2 : RE_GPT2;
}

// ---- byte <-> unicode ------------------------------------------------------
// Bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves; the other
// 68 bytes, in increasing order, become U+0100, U+0101, ...

static int printable(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

static uint32_t byte_to_cp(unsigned b) {
    if (printable(b)) return b;
    if (b <= 0x20) return 0x100 + b;
    if (b <= 0xA0) return 0x100 + 33 + (b - 0x7F);
    return 0x100 + 67; // 0xAD
}

int pq_bytelevel_byte(uint32_t cp) {
    if (cp < 0x100) return printable(cp) ? (int)cp : -1;
    if (cp < 0x100 + 33) return (int)(cp - 0x100);
    if (cp < 0x100 + 67) return (int)(0x7F + cp - 0x100 - 33);
    return cp == 0x100 + 67 ? 0xAD : -1;
}

pq_status pq_bytelevel_map(const char *s, size_t n, pq_tbuf *out) {
    PQ_TRY(pq_tbuf_reserve(out, 2 * n));
    for (size_t i = 0; i < n; i++)
        out->len += (size_t)pq_utf8_encode(byte_to_cp((unsigned char)s[i]), out->p + out->len);
    return PQ_OK;
}

// ---- the scanners ------------------------------------------------------------

#define OTHER 16 // [^\s\p{L}\p{N}]

typedef struct {
    const char *s;
    size_t n;
} text;

// The class of the character at i (OTHER when it is none of L, N, \s) and its length.
static unsigned cls_at(text t, size_t i, size_t *len) {
    unsigned char c = (unsigned char)t.s[i];
    uint32_t cp = c;
    int k = c < 0x80 ? 1 : pq_utf8_next(t.s + i, t.n - i, &cp);
    if (k < 0) { // invalid: one byte of punctuation
        *len = 1;
        return OTHER;
    }
    *len = (size_t)k;
    unsigned m = pq_uni_class(cp) & (PQ_UNI_L | PQ_UNI_N | PQ_UNI_SPACE);
    return m ? m : OTHER;
}

// The end of the run of characters of class mask starting at i.
static size_t run_end(text t, size_t i, unsigned mask) {
    size_t len;
    while (i < t.n && (cls_at(t, i, &len) & mask)) i += len;
    return i;
}

// \s+(?!\S)|\s+ at 0, where the first character is whitespace: the run,
// less its last character when something other than whitespace follows.
static size_t match_spaces(text t) {
    size_t i = 0, last = 0, len;
    while (i < t.n && (cls_at(t, i, &len) & PQ_UNI_SPACE)) {
        last = i;
        i += len;
    }
    return i == t.n || last == 0 ? i : last;
}

// 's|'t|'re|'ve|'m|'ll|'d, case-insensitively for the Llama 3 pattern
// (where "ſ", U+017F, folds to "s"). Returns the match length or 0.
static size_t match_contraction(text t, int icase) {
    if (t.n < 2 || t.s[0] != '\'') return 0;
    char c1 = t.s[1], c2 = t.n > 2 ? t.s[2] : 0;
    if (icase) {
        if (t.n > 2 && (unsigned char)c1 == 0xC5 && (unsigned char)c2 == 0xBF) return 3; // 'ſ
        if (c1 >= 'A' && c1 <= 'Z') c1 = (char)(c1 - 'A' + 'a');
        if (c2 >= 'A' && c2 <= 'Z') c2 = (char)(c2 - 'A' + 'a');
    }
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
}

static size_t match_gpt2(text t) {
    size_t k = match_contraction(t, 0), len0, len1;
    if (k) return k;
    unsigned c0 = cls_at(t, 0, &len0);
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': the optional space, then a run of one class
    size_t p = t.s[0] == ' ' && t.n > 1 ? 1 : 0;
    unsigned cp = p ? cls_at(t, 1, &len1) : c0;
    if (cp & (PQ_UNI_L | PQ_UNI_N)) return run_end(t, p, cp & PQ_UNI_L ? PQ_UNI_L : PQ_UNI_N);
    if (cp == OTHER) return run_end(t, p, OTHER);
    return match_spaces(t); // the first character is whitespace
}

static size_t match_llama3(text t, int max_digits) {
    size_t k = match_contraction(t, 1), len0, len1;
    if (k) return k;
    unsigned c0 = cls_at(t, 0, &len0);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (c0 & PQ_UNI_L) return run_end(t, 0, PQ_UNI_L);
    if (!(c0 & PQ_UNI_N) && t.s[0] != '\r' && t.s[0] != '\n' && len0 < t.n &&
        (cls_at(t, len0, &len1) & PQ_UNI_L))
        return run_end(t, len0, PQ_UNI_L);
    // \p{N}{1,3} (Qwen2: \p{N})
    if (c0 & PQ_UNI_N) {
        size_t i = 0;
        for (int d = 0; d < max_digits && i < t.n && (cls_at(t, i, &len1) & PQ_UNI_N); d++) i += len1;
        return i;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    size_t p = t.s[0] == ' ' && t.n > 1 ? 1 : 0;
    if ((p ? cls_at(t, 1, &len1) : c0) == OTHER) {
        size_t i = run_end(t, p, OTHER);
        while (i < t.n && (t.s[i] == '\r' || t.s[i] == '\n')) i++;
        return i;
    }
    // \s*[\r\n]+ : the whitespace run up to and including its last CR or LF
    size_t i = 0, end = 0;
    while (i < t.n && (cls_at(t, i, &len1) & PQ_UNI_SPACE)) {
        if (t.s[i] == '\r' || t.s[i] == '\n') end = i + 1;
        i += len1;
    }
    if (end) return end;
    return match_spaces(t);
}

size_t pq_split_match(pq_split_pattern pat, const char *s, size_t n) {
    text t = {s, n};
    switch (pat) {
    case PQ_SPLIT_GPT2: return match_gpt2(t);
    case PQ_SPLIT_LLAMA3: return match_llama3(t, 3);
    case PQ_SPLIT_QWEN2: return match_llama3(t, 1);
    }
    return 1;
}
