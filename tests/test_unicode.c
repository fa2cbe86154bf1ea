// tests/test_unicode.c — formats/tokenizer/unicode_nfc.c (NFC, NFD) against Python's
// unicodedata, through the vectors tools/gen_nfc_tables.py --vectors wrote to
// tests/data/nfc_vectors.txt: every code point on its own, strings at the
// corners of the algorithm, and per-block hashes of NFD; then properties on
// random strings (idempotence, NFC and NFD agree), the fast path, speed on
// MB-sized text and bad input.
#include "formats/tokenizer/unicode.h"
#include "tests/test.h"

#define VECTORS "tests/data/nfc_vectors.txt"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)(n > 0 ? n : 0) + 1);
    size_t got = buf ? fread(buf, 1, (size_t)(n > 0 ? n : 0), f) : 0;
    fclose(f);
    if (!buf || (long)got != n) {
        free(buf);
        return NULL;
    }
    buf[got] = 0;
    *len = got;
    return buf;
}

// Parses hex code points up to ':' or the end of the line into UTF-8 (out
// is reset); *p is left after the ':' (or at the line's end).
static void parse_cps(char **p, pq_tbuf *out) {
    out->len = 0;
    char *s = *p;
    for (;;) {
        while (*s == ' ') s++;
        if (*s == ':') {
            s++;
            break;
        }
        if (*s == '\n' || *s == 0) break;
        char c[4];
        unsigned long cp = strtoul(s, &s, 16);
        pq_tbuf_append(out, c, (size_t)pq_utf8_encode((uint32_t)cp, c));
    }
    *p = s;
}

static int same(const pq_tbuf *a, const pq_tbuf *b) {
    return a->len == b->len && (a->len == 0 || memcmp(a->p, b->p, a->len) == 0);
}

static void print_cps(const char *what, const pq_tbuf *t) {
    printf("    %s:", what);
    for (size_t i = 0; i < t->len;) {
        uint32_t cp = 0;
        int k = pq_utf8_next(t->p + i, t->len - i, &cp);
        printf(" %04X", (unsigned)cp);
        i += (size_t)(k > 0 ? k : 1);
    }
    printf("\n");
}

static uint32_t fnv1a(uint32_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x01000193u;
    return h;
}

typedef struct {
    uint32_t cp;
    char *line; // the expected NFC, as hex after the ':'
} cp_vec;

static void test_vectors(void) {
    size_t len = 0;
    char *text = read_file(VECTORS, &len);
    if (!text) {
        PQ_CHECK(0, "%s readable", VECTORS);
        return;
    }
    cp_vec *cps = malloc(sizeof *cps * (len / 8 + 1));
    size_t ncp = 0, nstr = 0, nstr_ok = 0, nblk = 0, nblk_ok = 0;
    pq_tbuf in = {0}, want = {0}, want_d = {0}, got = {0};
    for (char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        char *p = line;
        if (strncmp(line, "cp ", 3) == 0) {
            cps[ncp].cp = (uint32_t)strtoul(line + 3, &p, 16);
            cps[ncp++].line = strchr(p, ':') + 1;
        } else if (strncmp(line, "str ", 4) == 0) {
            p += 4;
            parse_cps(&p, &in);
            parse_cps(&p, &want);
            parse_cps(&p, &want_d);
            got.len = 0;
            int ok = pq_uni_nfc(in.p, in.len, &got) == PQ_OK && same(&got, &want);
            if (!ok) print_cps("NFC of", &in), print_cps("pq", &got), print_cps("want", &want);
            got.len = 0;
            int ok_d = pq_uni_nfd(in.p, in.len, &got) == PQ_OK && same(&got, &want_d);
            if (!ok_d) print_cps("NFD of", &in), print_cps("pq", &got), print_cps("want", &want_d);
            nstr++;
            nstr_ok += ok && ok_d;
        } else if (strncmp(line, "nfd ", 4) == 0) {
            uint32_t base = (uint32_t)strtoul(line + 4, &p, 16), h = 0x811C9DC5u;
            uint32_t want_h = (uint32_t)strtoul(p, NULL, 16);
            for (uint32_t cp = base; cp < base + 0x1000; cp++) {
                if (cp >= 0xD800 && cp < 0xE000) continue;
                char c[4];
                got.len = 0;
                pq_uni_nfd(c, (size_t)pq_utf8_encode(cp, c), &got);
                h = fnv1a(h, got.p, got.len);
            }
            if (h != want_h) printf("    NFD of U+%04X..U+%04X: hash %08X, want %08X\n", base, base + 0xFFF, h, want_h);
            nblk++;
            nblk_ok += h == want_h;
        }
    }
    PQ_CHECK(nstr > 50 && nstr_ok == nstr, "NFC and NFD of %zu tricky strings equal Python's (%zu equal)", nstr, nstr_ok);
    PQ_CHECK(nblk == 272 && nblk_ok == nblk, "NFD of every code point equals Python's (%zu of %zu blocks of 4096)",
             nblk_ok, nblk);

    // NFC of every code point: itself, or what the "cp" lines say
    size_t k = 0, changed = 0, bad = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        if (cp >= 0xD800 && cp < 0xE000) continue;
        char c[4];
        int n = pq_utf8_encode(cp, c);
        if (k < ncp && cps[k].cp == cp) {
            char *p = cps[k++].line;
            parse_cps(&p, &want);
            changed++;
        } else {
            want.len = 0;
            pq_tbuf_append(&want, c, (size_t)n);
        }
        got.len = 0;
        if (pq_uni_nfc(c, (size_t)n, &got) != PQ_OK || !same(&got, &want)) {
            if (bad++ < 5) printf("    NFC of U+%04X differs\n", cp);
        }
    }
    PQ_CHECK(ncp > 1000 && changed == ncp && bad == 0,
             "NFC of every code point equals Python's (%zu change, %zu differ)", changed, bad);
    pq_tbuf_free(&in);
    pq_tbuf_free(&want);
    pq_tbuf_free(&want_d);
    pq_tbuf_free(&got);
    free(cps);
    free(text);
}

// Random strings over code points that interact: starters that compose,
// combining marks of many classes, Hangul jamo and syllables, singletons,
// exclusions, ASCII.
static void test_properties(void) {
    static const uint32_t pool[] = {
        'a', 'A', 'e', 'o', 'u', ' ', 0xC5, 0xE9, 0x212B, 0x2126, 0x0300, 0x0301, 0x0302, 0x0308, 0x0304, 0x0316,
        0x0323, 0x0327, 0x0328, 0x031B, 0x0345, 0x0344, 0x0340, 0x035C, 0x0315, 0x05B0, 0x05BC, 0x0591, 0x0B47,
        0x0B3E, 0x0B57, 0x0DD9, 0x0DCA, 0x0DCF, 0x1100, 0x1112, 0x1161, 0x1175, 0x11A8, 0x11C2, 0xAC00, 0xAC01,
        0xD7A3, 0x0958, 0x093C, 0x0915, 0x0F71, 0x0F72, 0x0F73, 0x0F80, 0x1E0B, 0x1E9B, 0x03B1, 0x0313, 0x1F80,
        0x3099, 0x304B, 0x1D15E, 0x1D165, 0x11099, 0x110BA, 0xF900, 0x2ADC, 0x0338, 0x003D, 0x2260,
    };
    pq_test_seed();
    pq_tbuf in = {0}, a = {0}, b = {0}, c = {0}, d = {0};
    int ok = 1, iter;
    for (iter = 0; iter < 20000 && ok; iter++) {
        in.len = 0;
        size_t n = pq_test_u64() % 24;
        for (size_t i = 0; i < n; i++) {
            char u[4];
            pq_tbuf_append(&in, u, (size_t)pq_utf8_encode(pool[pq_test_u64() % (sizeof pool / sizeof pool[0])], u));
        }
        a.len = b.len = c.len = d.len = 0;
        ok = pq_uni_nfc(in.p, in.len, &a) == PQ_OK && pq_uni_nfc(a.p, a.len, &b) == PQ_OK && same(&a, &b) &&
             pq_uni_nfd(in.p, in.len, &c) == PQ_OK && pq_uni_nfd(a.p, a.len, &d) == PQ_OK && same(&c, &d);
        b.len = d.len = 0;
        ok = ok && pq_uni_nfc(c.p, c.len, &b) == PQ_OK && same(&a, &b) && pq_uni_nfd(c.p, c.len, &d) == PQ_OK &&
             same(&c, &d);
        if (!ok) print_cps("input", &in), print_cps("NFC", &a), print_cps("NFD", &c);
    }
    PQ_CHECK(ok, "%d random strings: NFC and NFD idempotent, NFC(NFD(x)) == NFC(x), NFD(NFC(x)) == NFD(x)", iter);
    pq_tbuf_free(&in);
    pq_tbuf_free(&a);
    pq_tbuf_free(&b);
    pq_tbuf_free(&c);
    pq_tbuf_free(&d);
}

// NFC of a large input succeeds; its speed is printed, not bounded (no test
// depends on the machine's speed): a quadratic path on 1M combining marks
// would take the suite past CI's limit
static void check_speed(const char *what, const char *s, size_t n) {
    pq_tbuf out = {0};
    double t0 = now_s();
    pq_status st = pq_uni_nfc(s, n, &out);
    double dt = now_s() - t0;
    PQ_CHECK(st == PQ_OK, "NFC of %s (%zu bytes) in %.3f s (%.0f MB/s)", what, n, dt, n / 1e6 / dt);
    pq_tbuf_free(&out);
}

static void test_text(void) {
    // c4 holds a few decomposed accents and Hebrew points out of order
    size_t len = 0;
    char *c4 = read_file(pq_test_path("data/c4_validation_2k.txt"), &len);
    if (!c4) {
        PQ_CHECK(0, "c4_validation_2k.txt readable");
        return;
    }
    pq_tbuf a = {0}, b = {0};
    int ok = pq_uni_nfc(c4, len, &a) == PQ_OK && a.len == len - 11 && pq_uni_nfc(a.p, a.len, &b) == PQ_OK && same(&a, &b);
    PQ_CHECK(ok, "NFC of c4_validation_2k.txt: 11 bytes shorter (as Python's), idempotent (%zu -> %zu bytes)", len, a.len);
    // the timing bounds are loose (shared machines) but catch a quadratic path
    check_speed("c4_validation_2k.txt", c4, len);
    // all non-ASCII: Hangul syllables (a cheap copy) and decomposed Hangul (all composed)
    a.len = b.len = 0;
    for (uint32_t i = 0; a.len < (4 << 20); i++) {
        char u[4];
        pq_tbuf_append(&a, u, (size_t)pq_utf8_encode(0xAC00 + i % 11172, u));
        pq_tbuf_append(&b, u, (size_t)pq_utf8_encode(0x1100 + i % 19, u));
        pq_tbuf_append(&b, u, (size_t)pq_utf8_encode(0x1161 + i % 21, u));
    }
    check_speed("Hangul syllables", a.p, a.len);
    check_speed("conjoining Hangul jamo", b.p, b.len);
    // one starter and a million combining marks of mixed classes: one piece to sort
    a.len = 0;
    pq_tbuf_append(&a, "a", 1);
    static const char marks[][3] = {"\xCC\x81", "\xCC\x96", "\xCC\xA8", "\xCD\x85", "\xCC\x9B"};
    for (int i = 0; i < 1000000; i++) pq_tbuf_append(&a, marks[i % 5], 2);
    check_speed("'a' and 1M combining marks", a.p, a.len);
    free(c4);
    pq_tbuf_free(&a);
    pq_tbuf_free(&b);
}

static void test_fast_path_and_errors(void) {
    pq_tbuf out = {0};
    pq_tbuf_append(&out, "keep", 4);
    const char ascii[] = "plain ASCII text, caf\xC3\xA9, \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 and \xE2\x84\xA6hm";
    int ok = pq_uni_nfc(ascii, 19, &out) == PQ_OK && out.len == 23 && memcmp(out.p, "keepplain ASCII text", 20) == 0;
    PQ_CHECK(ok, "NFC appends to what the buffer holds");
    out.len = 0;
    ok = pq_uni_nfc(ascii, sizeof ascii - 1, &out) == PQ_OK && out.len == sizeof ascii - 2 &&
         memcmp(out.p, ascii, sizeof ascii - 6) == 0 && memcmp(out.p + sizeof ascii - 6, "\xCE\xA9hm", 4) == 0;
    PQ_CHECK(ok, "NFC keeps precomposed text and Hangul syllables and maps U+2126 OHM SIGN to U+03A9");
    out.len = 0;
    ok = pq_uni_nfd(ascii, sizeof ascii - 1, &out) == PQ_OK && out.len == sizeof ascii - 1 + 15; // as Python's
    PQ_CHECK(ok, "NFD decomposes \xC3\xA9, the three Hangul syllables and U+2126 (%zu bytes)", out.len);
    out.len = 0;
    ok = pq_uni_nfc("", 0, &out) == PQ_OK && out.len == 0 && pq_uni_nfd("", 0, &out) == PQ_OK && out.len == 0;
    PQ_CHECK(ok, "NFC and NFD of the empty text are empty");

    static const struct {
        const char *s;
        size_t n, off;
    } bad[] = {{"ab\xC3", 3, 2}, {"e\xCC\x81\xFF", 4, 3}, {"\xED\xA0\x80", 3, 0}, {"x\xC0\xAF", 3, 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        out.len = 0;
        pq_tbuf_append(&out, "keep", 4);
        char needle[32];
        snprintf(needle, sizeof needle, "byte offset %zu", bad[i].off);
        int refused = pq_uni_nfc(bad[i].s, bad[i].n, &out) == PQ_ERR_FORMAT && out.len == 4 &&
                      strstr(pq_last_error(), needle) && pq_uni_nfd(bad[i].s, bad[i].n, &out) == PQ_ERR_FORMAT &&
                      out.len == 4;
        PQ_CHECK(refused, "invalid UTF-8 #%zu: format error naming %s, buffer unchanged (%s)", i, needle, pq_last_error());
    }
    pq_tbuf_free(&out);
}

int main(void) {
    test_vectors();
    test_properties();
    test_fast_path_and_errors();
    test_text();
    return pq_test_done();
}
