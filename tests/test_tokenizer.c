// tests/test_tokenizer.c — formats/tokenizer against the stories260K goldens,
// hand-checked corner cases, and bad input.
//
//   build/tests/test_tokenizer                    the unit and golden tests
//   build/tests/test_tokenizer --oracle MANIFEST  compares pq with the Hugging
//       Face tokenizers library on the cases tests/tokenizer_oracle.py wrote
//       (run by tests/cli/test_tokenizer_oracle.sh)
#include <jansson.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "formats/tokenizer/pretok.h"
#include "formats/tokenizer/tok_added.h"
#include "formats/tokenizer/tokenizer.h"
#include "tests/lib/tok_expect.h"
#include "tests/test.h"

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

// Index of the first difference of two id arrays (n if equal up to n).
static size_t first_diff(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    size_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

static void report_diff(const pq_tokenizer *tok, const int32_t *got, size_t ng, const int32_t *want, size_t nw) {
    size_t i = first_diff(got, ng, want, nw);
    printf("    %zu ids vs %zu expected; first difference at index %zu:", ng, nw, i);
    for (size_t k = i >= 3 ? i - 3 : 0; k < i + 4 && k < nw; k++) {
        const char *p = pq_tok_piece(tok, want[k]);
        printf(" %s[%d '%s']", k == i ? ">" : "", (int)want[k], p ? p : "?");
    }
    printf("\n    pq:");
    for (size_t k = i >= 3 ? i - 3 : 0; k < i + 4 && k < ng; k++) {
        const char *p = pq_tok_piece(tok, got[k]);
        printf(" %s[%d '%s']", k == i ? ">" : "", (int)got[k], p ? p : "?");
    }
    printf("\n");
}

// ---- a tiny safetensors reader (I32 tensors only), local to this test ----------

typedef struct {
    char *file;
    size_t len;
    json_t *header;
} st_file;

static int st_open(const char *path, st_file *f) {
    memset(f, 0, sizeof *f);
    f->file = read_file(path, &f->len);
    if (!f->file || f->len < 8) return 0;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | (unsigned char)f->file[i];
    if (hlen > f->len - 8) return 0;
    f->header = json_loadb(f->file + 8, (size_t)hlen, 0, NULL);
    return f->header != NULL;
}

// The I32 tensor called name as a pointer into the file (NULL if absent).
static const int32_t *st_i32(const st_file *f, const char *name, size_t *n) {
    json_t *t = json_object_get(f->header, name);
    const char *dtype = json_string_value(json_object_get(t, "dtype"));
    json_t *off = json_object_get(t, "data_offsets");
    if (!dtype || strcmp(dtype, "I32") != 0 || json_array_size(off) != 2) return NULL;
    size_t base = 8 + (size_t)((unsigned char)f->file[0] | (unsigned char)f->file[1] << 8 |
                               (unsigned char)f->file[2] << 16 | (size_t)(unsigned char)f->file[3] << 24);
    size_t a = (size_t)json_integer_value(json_array_get(off, 0)), b = (size_t)json_integer_value(json_array_get(off, 1));
    if (b < a || base + b > f->len || (b - a) % 4) return NULL;
    *n = (b - a) / 4;
    return (const int32_t *)(f->file + base + a);
}

static void st_close(st_file *f) {
    json_decref(f->header);
    free(f->file);
}

// ---- the fixture -----------------------------------------------------------------

static void test_golden_prompts(const pq_tokenizer *tok) {
    PQ_CHECK(pq_tok_vocab_size(tok) == 512 && pq_tok_bos(tok) == 1 && pq_tok_eos(tok) == 2 && pq_tok_adds_bos(tok),
             "fixture: vocab 512, BOS 1, EOS 2, adds BOS (vocab %d bos %d eos %d)", pq_tok_vocab_size(tok),
             pq_tok_bos(tok), pq_tok_eos(tok));
    json_t *g = json_load_file(pq_test_path("fixtures/stories260K/golden/golden.json"), 0, NULL);
    json_t *prompts = json_object_get(g, "prompts");
    PQ_CHECK(json_array_size(prompts) == 4, "golden.json lists 4 prompts");
    for (size_t p = 0; p < json_array_size(prompts); p++) {
        json_t *pr = json_array_get(prompts, p), *want = json_object_get(pr, "token_ids");
        json_t *pieces = json_object_get(pr, "token_pieces");
        const char *text = json_string_value(json_object_get(pr, "text"));
        int32_t *ids = NULL;
        size_t n = 0;
        pq_status st = pq_tok_encode(tok, text, strlen(text), 1, &ids, &n);
        int same = st == PQ_OK && n == json_array_size(want), same_pieces = same;
        for (size_t i = 0; same && i < n; i++) {
            same = ids[i] == json_integer_value(json_array_get(want, i));
            const char *pc = pq_tok_piece(tok, ids[i]);
            same_pieces = same_pieces && pc && strcmp(pc, json_string_value(json_array_get(pieces, i))) == 0;
        }
        PQ_CHECK(same, "golden prompt%zu: %zu ids with BOS equal golden.json (%s)", p, n, pq_last_error());
        PQ_CHECK(same_pieces, "golden prompt%zu: pieces equal golden.json", p);
        char *back = NULL;
        size_t blen = 0;
        st = pq_tok_decode(tok, ids, n, 1, &back, &blen);
        PQ_CHECK(st == PQ_OK && blen == strlen(text) && strcmp(back, text) == 0, "golden prompt%zu: decode gives the text back",
                 p);
        free(back);
        free(ids);
    }
    json_decref(g);
}

static void check_stream(const pq_tokenizer *tok, const st_file *sf, const char *tensor, const char *text_rel,
                         size_t limit) {
    size_t tlen = 0, nwant = 0, n = 0;
    char *text = read_file(pq_test_path(text_rel), &tlen);
    const int32_t *want = st_i32(sf, tensor, &nwant);
    if (!text || !want) {
        PQ_CHECK(0, "%s: text and %s readable", text_rel, tensor);
        free(text);
        return;
    }
    if (tlen > limit) tlen = limit;
    int32_t *ids = NULL;
    double t0 = now_s();
    pq_status st = pq_tok_encode(tok, text, tlen, 0, &ids, &n);
    double dt = now_s() - t0;
    int same = st == PQ_OK && n == nwant && memcmp(ids, want, n * sizeof *ids) == 0;
    PQ_CHECK(same, "%s (%zu bytes): %zu ids equal %s (%.3f s)", text_rel, tlen, n, tensor, dt);
    if (!same && st == PQ_OK) report_diff(tok, ids, n, want, nwant);
    char *back = NULL;
    size_t blen = 0;
    st = pq_tok_decode(tok, ids, n, 0, &back, &blen);
    PQ_CHECK(st == PQ_OK && blen == tlen && memcmp(back, text, tlen) == 0, "%s: decode(encode(text)) == text", text_rel);
    free(back);
    free(ids);
    free(text);
}

static void test_ppl_streams(const pq_tokenizer *tok) {
    st_file sf;
    if (!st_open(pq_test_path("fixtures/stories260K/golden/ppl_tokens.safetensors"), &sf)) {
        PQ_CHECK(0, "ppl_tokens.safetensors readable");
        st_close(&sf);
        return;
    }
    check_stream(tok, &sf, "tinystories_val_prefix.tokens", "data/tinystories_val_prefix.txt", SIZE_MAX);
    check_stream(tok, &sf, "wiki_test_raw_first_200000_bytes.tokens", "data/wiki.test.raw", 200000);
    st_close(&sf);
}

static void test_speed(const pq_tokenizer *tok) {
    size_t len = 0, n = 0;
    char *text = read_file(pq_test_path("data/c4_validation_2k.txt"), &len);
    if (!text) {
        PQ_CHECK(0, "c4_validation_2k.txt readable");
        return;
    }
    int32_t *ids = NULL;
    double t0 = now_s();
    pq_status st = pq_tok_encode(tok, text, len, 0, &ids, &n);
    double dt = now_s() - t0;
    // the README's independent tokenizers agree on this count; the time is
    // printed, not bounded (no test depends on the machine's speed): a
    // quadratic merge loop on the 4 MB word would take the suite past CI's limit
    PQ_CHECK(st == PQ_OK && n == 2583532,
             "c4_validation_2k.txt (%zu bytes, one 4 MB word): %zu ids (2583532 expected) in %.2f s", len, n, dt);
    free(ids);
    free(text);
}

// ---- small models: unk, fuse_unk, byte_fallback, ignore_merges ----------------
// The expected ids were produced by the tokenizers library (0.23) from the
// same JSON.

static const char *small_json(char *buf, size_t cap, const char *unk, int fuse, int byte_fallback, int ignore) {
    snprintf(buf, cap,
             "{\"version\":\"1.0\",\"added_tokens\":[],\"normalizer\":null,\"pre_tokenizer\":null,"
             "\"post_processor\":null,\"decoder\":null,\"model\":{\"type\":\"BPE\",\"dropout\":null,"
             "\"unk_token\":%s,\"fuse_unk\":%s,\"byte_fallback\":%s,\"ignore_merges\":%s,"
             "\"vocab\":{\"<unk>\":0,\"a\":1,\"b\":2,\"c\":3,\"ab\":4,\"bc\":5,\"abc\":6,\"<0xC3>\":7,\"x\":8,\" \":9},"
             "\"merges\":[[\"b\",\"c\"],[\"a\",\"b\"],[\"a\",\"b\"]]}}",
             unk, fuse ? "true" : "false", byte_fallback ? "true" : "false", ignore ? "true" : "false");
    return buf;
}

static void test_small_models(void) {
    static const char *texts[] = {"abc", "aabcc", "ayzb", "yz", "\xC3\xA9\x61", "abc\xC3\xA9", "abc abc"}; // \x61: a
    static const struct {
        const char *name, *unk;
        int fuse, byte_fallback, ignore;
        int32_t want[7][5];
        size_t n[7];
    } cases[] = {
        {"unk, fuse_unk", "\"<unk>\"", 1, 0, 0,
         {{1, 5}, {1, 1, 5, 3}, {1, 0, 2}, {0}, {0, 1}, {1, 5, 0}, {1, 5, 9, 1, 5}}, {2, 4, 3, 1, 2, 3, 5}},
        {"unk, no fuse_unk", "\"<unk>\"", 0, 0, 0,
         {{1, 5}, {1, 1, 5, 3}, {1, 0, 0, 2}, {0, 0}, {0, 1}, {1, 5, 0}, {1, 5, 9, 1, 5}}, {2, 4, 4, 2, 2, 3, 5}},
        {"no unk_token (unknown characters dropped)", "null", 0, 0, 0,
         {{1, 5}, {1, 1, 5, 3}, {4}, {0}, {1}, {1, 5}, {1, 5, 9, 1, 5}}, {2, 4, 1, 0, 1, 2, 5}},
        {"byte_fallback with a missing <0xA9> piece", "\"<unk>\"", 0, 1, 0,
         {{1, 5}, {1, 1, 5, 3}, {1, 0, 0, 2}, {0, 0}, {0, 1}, {1, 5, 0}, {1, 5, 9, 1, 5}}, {2, 4, 4, 2, 2, 3, 5}},
        {"ignore_merges", "null", 0, 0, 1,
         {{6}, {1, 1, 5, 3}, {4}, {0}, {1}, {1, 5}, {1, 5, 9, 1, 5}}, {1, 4, 1, 0, 1, 2, 5}},
    };
    char json[1024];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        small_json(json, sizeof json, cases[c].unk, cases[c].fuse, cases[c].byte_fallback, cases[c].ignore);
        pq_tokenizer *tok = NULL;
        pq_status st = pq_tok_load_json(json, strlen(json), NULL, 0, "small", &tok);
        int ok = st == PQ_OK;
        for (size_t t = 0; ok && t < 7; t++) {
            ok = pq_test_encodes_to(tok, texts[t], cases[c].want[t], cases[c].n[t]);
            if (!ok) printf("    text %zu differs\n", t);
        }
        PQ_CHECK(ok, "small model, %s: ids equal the library's (%s)", cases[c].name, st == PQ_OK ? "" : pq_last_error());
        pq_tok_free(tok);
    }
    // an unk_token that is not in the vocabulary fails when it is needed
    pq_tokenizer *tok = NULL;
    small_json(json, sizeof json, "\"<missing>\"", 0, 0, 0);
    int32_t *ids = NULL;
    size_t n = 0;
    pq_status st = pq_tok_load_json(json, strlen(json), NULL, 0, "small", &tok);
    int known = st == PQ_OK && pq_test_encodes_to(tok, "abc", (const int32_t[]){1, 5}, 2);
    st = st == PQ_OK ? pq_tok_encode(tok, "ayb", 3, 0, &ids, &n) : st;
    PQ_CHECK(known && st == PQ_ERR_FORMAT && strstr(pq_last_error(), "<missing>"),
             "an unk_token missing from the vocabulary fails only when needed (%s)", pq_last_error());
    free(ids);
    pq_tok_free(tok);
}

// ---- Unicode normalizers ---------------------------------------------------------
// One piece per character, so the ids spell out the normalized text. The
// expected ids were produced by the tokenizers library (0.23) from the same
// JSON: NFC composes (e+U+0301 -> U+00E9, A+U+030A and U+212B -> U+00C5,
// jamo -> U+AC00, U+2126 -> U+03A9), NFD decomposes, both apply inside a
// Sequence, and a normalized added token matches either spelling.

static void test_unicode_normalizers(void) {
    static const char text[] = "e\xCC\x81 A\xCC\x8A \xE2\x84\xAB \xE1\x84\x80\xE1\x85\xA1 e\xCC\x81\xCC\x81 \xE2\x84\xA6 "
                               "<e\xCC\x81> <\xC3\xA9>";
    static const struct {
        const char *name, *normalizer;
        int added;
        int32_t want[27];
        size_t n;
    } cases[] = {
        {"NFC", "{\"type\":\"NFC\"}", 0, {3, 6, 5, 6, 5, 6, 7, 6, 3, 4, 6, 13, 6, 0, 3, 0, 6, 0, 3, 0}, 20},
        {"NFD", "{\"type\":\"NFD\"}", 0,
         {2, 4, 6, 10, 11, 6, 10, 11, 6, 8, 9, 6, 2, 4, 4, 6, 13, 6, 0, 2, 4, 0, 6, 0, 2, 4, 0}, 27},
        {"Sequence[NFC, Prepend]", "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},"
         "{\"type\":\"Prepend\",\"prepend\":\"\xE2\x96\x81\"}]}", 0,
         {15, 3, 6, 5, 6, 5, 6, 7, 6, 3, 4, 6, 13, 6, 0, 3, 0, 6, 0, 3, 0}, 21},
        {"NFC with a normalized added token", "{\"type\":\"NFC\"}", 1,
         {3, 6, 5, 6, 5, 6, 7, 6, 3, 4, 6, 13, 6, 14, 6, 14}, 16},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"added_tokens\":[%s],\"normalizer\":%s,\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\","
                 "\"vocab\":{\"<unk>\":0,\"a\":1,\"e\":2,\"\xC3\xA9\":3,\"\xCC\x81\":4,\"\xC3\x85\":5,\" \":6,"
                 "\"\xEA\xB0\x80\":7,\"\xE1\x84\x80\":8,\"\xE1\x85\xA1\":9,\"A\":10,\"\xCC\x8A\":11,\"\xE2\x84\xA6\":12,"
                 "\"\xCE\xA9\":13,\"<e\xCC\x81>\":14,\"\xE2\x96\x81\":15},\"merges\":[]}}",
                 cases[c].added ? "{\"id\":14,\"content\":\"<e\xCC\x81>\",\"special\":false,\"normalized\":true}" : "",
                 cases[c].normalizer);
        pq_tokenizer *tok = NULL;
        pq_status st = pq_tok_load_json(json, strlen(json), NULL, 0, "unicode", &tok);
        PQ_CHECK(st == PQ_OK && pq_test_encodes_to(tok, text, cases[c].want, cases[c].n), "normalizer %s: ids equal the library's (%s)",
                 cases[c].name, st == PQ_OK ? "" : pq_last_error());
        pq_tok_free(tok);
    }
}

// tokenizer_config.json's add_bos_token / add_eos_token override the template
static void test_config_override(void) {
    size_t len = 0;
    char *json = read_file(pq_test_path("fixtures/stories260K/tokenizer.json"), &len);
    const char *cfg = "{\"add_bos_token\": false, \"add_eos_token\": true, \"eos_token\": {\"content\": \"</s>\"}}";
    pq_tokenizer *tok = NULL;
    pq_status st = json ? pq_tok_load_json(json, len, cfg, strlen(cfg), "stories260K", &tok) : PQ_ERR_IO;
    int ok = st == PQ_OK && !pq_tok_adds_bos(tok) && pq_tok_bos(tok) == 1 && pq_tok_eos(tok) == 2 &&
             pq_test_encodes_to(tok, "Once upon a time", (const int32_t[]){403, 407, 261, 378}, 4);
    int32_t *ids = NULL;
    size_t n = 0;
    ok = ok && pq_tok_encode(tok, "Once upon a time", 16, 1, &ids, &n) == PQ_OK && n == 5 && ids[0] == 403 && ids[4] == 2;
    PQ_CHECK(ok, "tokenizer_config.json add_bos_token=false, add_eos_token=true: 'Once upon a time' + </s> (%s)",
             st == PQ_OK ? "" : pq_last_error());
    free(ids);
    pq_tok_free(tok);
    const char *bad = "{\"add_eos_token\": true, \"eos_token\": \"<nope>\"}";
    st = json ? pq_tok_load_json(json, len, bad, strlen(bad), "stories260K", &tok) : PQ_ERR_IO;
    PQ_CHECK(st == PQ_ERR_FORMAT && strstr(pq_last_error(), "eos_token"), "add_eos_token with an unknown eos_token is refused (%s)",
             pq_last_error());
    free(json);
}

// ---- the split scanners, against the library's pre_tokenize_str ----------------

static void check_split(pq_split_pattern pat, const char *name, const char *text, const char *const *want, size_t nwant) {
    size_t n = strlen(text), i = 0, k = 0;
    int ok = 1;
    while (i < n && ok) {
        size_t m = pq_split_match(pat, text + i, n - i);
        ok = k < nwant && m == strlen(want[k]) && memcmp(text + i, want[k], m) == 0;
        if (!ok) printf("    piece %zu: got '%.*s'\n", k, (int)m, text + i);
        i += m;
        k++;
    }
    PQ_CHECK(ok && k == nwant, "%s split: %zu pieces as the library splits them", name, k);
}

static void test_splits(void) {
    const char *text = "He's  12345 na\xC3\xAFve!!\n\n  x\r\n\ty 'LL \xC5\xBF '\xC5\xBF  ";
    const char *gpt2[] = {"He", "'s", " ", " 12345", " na\xC3\xAFve", "!!", "\n\n ", " x", "\r\n", "\t", "y", " '", "LL",
                          " \xC5\xBF", " '", "\xC5\xBF", "  "};
    const char *llama3[] = {"He", "'s", " ", " ", "123", "45", " na\xC3\xAFve", "!!\n\n", " ", " x", "\r\n", "\ty", " '",
                            "LL", " \xC5\xBF", " '", "\xC5\xBF", "  "};
    check_split(PQ_SPLIT_GPT2, "GPT-2", text, gpt2, sizeof gpt2 / sizeof gpt2[0]);
    check_split(PQ_SPLIT_LLAMA3, "Llama 3", text, llama3, sizeof llama3 / sizeof llama3[0]);
    const char *fold[] = {"x", "'\xC5\xBF", "x", "'S", "x", "'LL", "x", "'Kx"}; // (?i): U+017F folds to s
    check_split(PQ_SPLIT_LLAMA3, "Llama 3 case folding", "x'\xC5\xBFx'Sx'LLx'Kx", fold, 8);
    int round = 1;
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        pq_tbuf t = {0};
        uint32_t cp = 0;
        round = round && pq_bytelevel_map(&c, 1, &t) == PQ_OK && pq_utf8_next(t.p, t.len, &cp) == (int)t.len &&
                pq_bytelevel_byte(cp) == b;
        pq_tbuf_free(&t);
    }
    PQ_CHECK(round && pq_bytelevel_byte(' ') == -1 && pq_bytelevel_byte(0x120) == ' ',
             "byte-level alphabet: all 256 bytes map and map back; ' ' is U+0120");
}

// The Split pre-tokenizer has no regex engine to attack: only the GPT-2,
// Llama 3 and Qwen2 patterns are accepted (by their exact source; any other
// regex is refused) and run as hand-written scanners, each match a scan of
// at most its own length plus one whitespace run. Adversarial texts for
// backtracking engines (long whitespace runs ended by non-space, CR/LF
// interleavings, long runs of one class) must split into pieces covering
// the text exactly, in a child limited to 30 s of CPU time (a scanner that
// rescanned would need hours for these 4 MB texts).
static void split_adversarial(void) {
    enum { N = 4 << 20 };
    char *t = malloc(N);
    const char *kinds[] = {"spaces then x", "\\n + spaces, repeated", "\\r\\n\\t mix", "one letter run", "digits",
                           "punctuation + CR"};
    int ok = 1;
    for (int k = 0; k < 6 && ok; k++) {
        for (size_t i = 0; i < N; i++)
            t[i] = k == 0 ? ' ' : k == 1 ? (i % 1000 == 0 ? '\n' : ' ') : k == 2 ? "\r\n\t "[i % 4] : k == 3 ? 'a'
                 : k == 4 ? (char)('0' + i % 10) : (i % 97 ? '!' : '\r');
        t[N - 1] = 'x';
        for (int pat = 0; pat < 3 && ok; pat++) {
            size_t pos = 0, pieces = 0;
            while (pos < N) {
                size_t m = pq_split_match((pq_split_pattern)pat, t + pos, N - pos);
                if (m == 0 || m > N - pos) break;
                pos += m, pieces++;
            }
            ok = pos == N;
            if (!ok) printf("    %s, pattern %d: the pieces stop at byte %zu of %d\n", kinds[k], pat, pos, N);
        }
    }
    free(t);
    PQ_CHECK(ok, "GPT-2 / Llama 3 / Qwen2 splits of six adversarial 4 MB texts cover them exactly");
}

static void test_split_bounded(void) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {30, 30};
        setrlimit(RLIMIT_CPU, &rl);
        split_adversarial();
        fflush(stdout);
        _exit(pq_test_failures ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status)) PQ_CHECK(0, "adversarial splits did not finish in 30 s of CPU time");
    else if (WEXITSTATUS(status)) pq_test_failures++;
}

// ---- bad input --------------------------------------------------------------------

static pq_status load_str(const char *json, pq_tokenizer **tok) {
    return pq_tok_load_json(json, strlen(json), NULL, 0, "bad.json", tok);
}

static void check_refused(const char *what, const char *json, pq_status want, const char *needle) {
    pq_tokenizer *tok = NULL;
    pq_status st = load_str(json, &tok);
    PQ_CHECK(st == want && tok == NULL && strstr(pq_last_error(), needle) && strstr(pq_last_error(), "bad.json"),
             "%s: refused with '%s' (%s)", what, needle, pq_last_error());
    pq_tok_free(tok);
}

#define MODEL_FIELD(body) "\"model\":{" body "}"
#define MODEL(body) "{" MODEL_FIELD(body) "}"
#define VOCAB "\"vocab\":{\"a\":0,\"b\":1,\"ab\":2}"

static void test_bad_input(const pq_tokenizer *fixture) {
    pq_tokenizer *tok = NULL;
    pq_status st = pq_tok_load("/nonexistent/model", &tok);
    PQ_CHECK(st == PQ_ERR_IO && tok == NULL && strstr(pq_last_error(), "/nonexistent/model/tokenizer.json"),
             "missing tokenizer.json: I/O error naming the path (%s)", pq_last_error());
    check_refused("malformed JSON", "{\"model\": {\"type\": \"BPE\",", PQ_ERR_FORMAT, "invalid JSON");
    check_refused("Unigram model", MODEL("\"type\":\"Unigram\",\"vocab\":[]"), PQ_ERR_FORMAT, "Unigram");
    check_refused("WordPiece model", MODEL("\"type\":\"WordPiece\",\"vocab\":{}"), PQ_ERR_FORMAT, "WordPiece");
    check_refused("merge naming an unknown token", MODEL("\"type\":\"BPE\"," VOCAB ",\"merges\":[\"a zz\"]"),
                  PQ_ERR_FORMAT, "'zz'");
    check_refused("merge whose result is not in the vocabulary", MODEL("\"type\":\"BPE\"," VOCAB ",\"merges\":[\"b a\"]"),
                  PQ_ERR_FORMAT, "'ba'");
    check_refused("merge string with two spaces", MODEL("\"type\":\"BPE\"," VOCAB ",\"merges\":[\"a b c\"]"),
                  PQ_ERR_FORMAT, "merges[0]");
    check_refused("negative id", MODEL("\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]"), PQ_ERR_FORMAT, "out of range");
    check_refused("BPE dropout", MODEL("\"type\":\"BPE\",\"dropout\":0.1," VOCAB ",\"merges\":[]"), PQ_ERR_FORMAT, "dropout");
    check_refused("NFKC normalizer", "{\"normalizer\":{\"type\":\"NFKC\"}," MODEL_FIELD("\"type\":\"BPE\"," VOCAB ",\"merges\":[]") "}",
                  PQ_ERR_FORMAT, "'NFKC'");
    check_refused("unknown split regex",
                  "{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\w+\"},\"behavior\":\"Isolated\","
                  "\"invert\":false}," MODEL_FIELD("\"type\":\"BPE\"," VOCAB ",\"merges\":[]") "}",
                  PQ_ERR_FORMAT, "unsupported regex");
    check_refused("unknown pre-tokenizer", "{\"pre_tokenizer\":{\"type\":\"Whitespace\"}," MODEL_FIELD("\"type\":\"BPE\"," VOCAB ",\"merges\":[]") "}",
                  PQ_ERR_FORMAT, "'Whitespace'");
    check_refused("unknown decoder", "{\"decoder\":{\"type\":\"WordPiece\"}," MODEL_FIELD("\"type\":\"BPE\"," VOCAB ",\"merges\":[]") "}",
                  PQ_ERR_FORMAT, "'WordPiece'");
    check_refused("unknown post-processor", "{\"post_processor\":{\"type\":\"BertProcessing\"}," MODEL_FIELD("\"type\":\"BPE\"," VOCAB ",\"merges\":[]") "}",
                  PQ_ERR_FORMAT, "'BertProcessing'");

    const char bad[] = "Hello\xC3(world";
    int32_t *ids = NULL;
    size_t n = 0;
    st = pq_tok_encode(fixture, bad, sizeof bad - 1, 1, &ids, &n);
    PQ_CHECK(st == PQ_ERR_FORMAT && ids == NULL && strstr(pq_last_error(), "byte offset 5"),
             "invalid UTF-8 text: format error naming the offset (%s)", pq_last_error());
    const char surrogate[] = "ab\xED\xA0\x80";
    st = pq_tok_encode(fixture, surrogate, sizeof surrogate - 1, 0, &ids, &n);
    PQ_CHECK(st == PQ_ERR_FORMAT && strstr(pq_last_error(), "byte offset 2"), "a UTF-8 encoded surrogate is refused (%s)",
             pq_last_error());
    char *text = NULL;
    size_t len = 0;
    st = pq_tok_decode(fixture, (const int32_t[]){1, 512}, 2, 0, &text, &len);
    PQ_CHECK(st == PQ_ERR_ARG && text == NULL && strstr(pq_last_error(), "512"), "decode of id 512: argument error (%s)",
             pq_last_error());
    st = pq_tok_encode(fixture, "", 0, 1, &ids, &n);
    PQ_CHECK(st == PQ_OK && n == 1 && ids[0] == 1, "empty text with BOS: [1]");
    free(ids);
    // bytes that are not UTF-8, spelled with byte-fallback pieces, decode to U+FFFD each
    st = pq_tok_decode(fixture, (const int32_t[]){3 + 0xC3, 3 + 0x28, 320}, 3, 0, &text, &len);
    PQ_CHECK(st == PQ_OK && strcmp(text, "\xEF\xBF\xBD\xEF\xBF\xBD H") == 0, "decode of <0xC3><0x28>: two U+FFFD ('%s')",
             text ? text : "");
    free(text);
}

// ---- issue 10 item 8: expansion and added tokens at scale -------------------------

static void test_normalizer_bound(void) {
    // 40 x Replace "a" -> "aa": 2^40 bytes for the text "a"
    size_t cap = 8192, n = 0;
    char *json = malloc(cap);
    n += (size_t)snprintf(json + n, cap - n, "{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[");
    for (int i = 0; i < 40; i++)
        n += (size_t)snprintf(json + n, cap - n, "%s{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"},\"content\":\"aa\"}",
                              i ? "," : "");
    n += (size_t)snprintf(json + n, cap - n, "]},\"added_tokens\":[%%s]," MODEL_FIELD("\"type\":\"BPE\"," VOCAB
                          ",\"merges\":[\"a b\"]") "}");
    char *doc = malloc(cap + 256);
    snprintf(doc, cap + 256, json, "");
    pq_tokenizer *tok = NULL;
    pq_status st = load_str(doc, &tok);
    int32_t *ids = NULL;
    size_t nid = 0;
    pq_status enc = st == PQ_OK ? pq_tok_encode(tok, "ba", 2, 0, &ids, &nid) : st;
    PQ_CHECK(st == PQ_OK && enc == PQ_ERR_FORMAT && !ids && strstr(pq_last_error(), "Replace 'a' -> 'aa'") &&
                 strstr(pq_last_error(), "more than 16x"),
             "40 chained Replace a -> aa: encoding 'ba' refused before the text doubles past 16x (%s)", pq_last_error());
    PQ_CHECK(st == PQ_OK && pq_tok_encode(tok, "bbb", 3, 0, &ids, &nid) == PQ_OK && nid == 3,
             "... text without an 'a' still encodes");
    free(ids);
    pq_tok_free(tok);
    // a normalized added token holding an 'a' is normalized at load
    snprintf(doc, cap + 256, json, "{\"id\":3,\"content\":\"xa\",\"special\":false,\"normalized\":true}");
    tok = NULL;
    st = load_str(doc, &tok);
    PQ_CHECK(st == PQ_ERR_FORMAT && !tok && strstr(pq_last_error(), "bad.json") && strstr(pq_last_error(), "expand"),
             "... and refuses to load with a normalized added token 'xa' (%s)", pq_last_error());
    free(doc);
    free(json);
}

// Leftmost-longest matching, the library's rule, by brute force: at the
// first position where some pattern starts, the longest (first added on a
// tie); then again after it.
static size_t brute_split(char pats[][6], int npat, const char *s, size_t n, size_t *starts, int *which) {
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        int best = -1;
        size_t blen = 0;
        for (int p = 0; p < npat; p++) {
            size_t l = strlen(pats[p]);
            if (l > blen && l <= n - i && memcmp(s + i, pats[p], l) == 0) best = p, blen = l;
        }
        if (best < 0) {
            i++;
            continue;
        }
        starts[k] = i, which[k++] = best;
        i += blen;
    }
    return k;
}

static void many_added_tokens(void);

static void test_added_matching(void) {
    pq_test_seed();
    int bad = 0, cases = 0, matches = 0;
    for (int round = 0; round < 400; round++) {
        char pats[24][6];
        pq_added_token toks[24];
        int npat = 1 + (int)(pq_test_u64() % 24);
        pq_added_matcher *m = NULL;
        pq_added_matcher_new(&m);
        for (int p = 0; p < npat; p++) {
            size_t l = 1 + pq_test_u64() % 5;
            for (size_t j = 0; j < l; j++) pats[p][j] = "abc"[pq_test_u64() % 3];
            pats[p][l] = 0;
            toks[p] = (pq_added_token){.content = pats[p], .len = l, .id = p};
            pq_added_matcher_add(m, pats[p], l, &toks[p]);
        }
        pq_added_matcher_finish(m);
        for (int t = 0; t < 10; t++, cases++) {
            char text[200];
            size_t n = pq_test_u64() % sizeof text;
            for (size_t j = 0; j < n; j++) text[j] = "abcd"[pq_test_u64() % 4];
            size_t starts[200];
            int which[200];
            size_t k = brute_split(pats, npat, text, n, starts, which), got = 0;
            pq_added_segs segs = {0};
            int ok = pq_added_split(m, text, n, &segs) == PQ_OK;
            for (size_t i = 0; ok && i < segs.n; i++) {
                if (segs.p[i].id < 0) continue;
                // the first added of identical patterns stands for them all
                int w = which[got];
                for (int p = 0; p < w; p++)
                    if (!strcmp(pats[p], pats[w])) w = p;
                ok = got < k && segs.p[i].start == starts[got] && segs.p[i].id == w;
                got++;
            }
            matches += (int)k;
            if (!(ok && got == k) && bad++ < 3) printf("    round %d: %zu of %zu matches agree\n", round, got, k);
            pq_added_segs_free(&segs);
        }
        pq_added_matcher_free(m);
    }
    PQ_CHECK(bad == 0 && matches > 1000, "added-token split == brute-force leftmost-longest on %d random texts (%d "
             "matches, patterns over {a,b,c} with shared prefixes and suffixes)", cases, matches);

    // 100,000 added tokens sharing a prefix: each load and split step is
    // constant time (at 1f138d6, 32,000 of them took 10-14 s to load -- 100,000
    // about 100 s -- and every '<' in the text cost a comparison with each of
    // them). Run in a child limited to 30 s of CPU time: linear code needs ~1.
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {30, 30};
        setrlimit(RLIMIT_CPU, &rl);
        many_added_tokens();
        fflush(stdout);
        _exit(pq_test_failures ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status) || !WIFEXITED(status)) {
        PQ_CHECK(0, "100000 added tokens: the load and split did not finish in 30 s of CPU time (signal %d)",
                 WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    } else if (WEXITSTATUS(status) != 0) {
        pq_test_failures++; // the child printed its FAIL line
    }
}

static void many_added_tokens(void) {
    enum { N = 100000 };
    size_t cap = (size_t)N * 80 + 4096, n = 0;
    char *json = malloc(cap);
    n += (size_t)snprintf(json + n, cap - n, "{\"added_tokens\":[");
    for (int i = 0; i < N; i++)
        n += (size_t)snprintf(json + n, cap - n, "%s{\"id\":%d,\"content\":\"<tok_%06d>\",\"special\":true}", i ? "," : "",
                              3 + i, i);
    snprintf(json + n, cap - n, "]," MODEL_FIELD("\"type\":\"BPE\",\"vocab\":{\"<\":0,\"t\":1,\"o\":2,\"k\":3,\"_\":4,"
             "\"0\":5,\"1\":6,\"2\":7,\"3\":8,\"4\":9,\"5\":10,\"6\":11,\"7\":12,\"8\":13,\"9\":14,\">\":15,\" \":16},"
             "\"merges\":[]") "}");
    pq_tokenizer *tok = NULL;
    pq_status st = load_str(json, &tok);
    PQ_CHECK(st == PQ_OK && pq_tok_vocab_size(tok) == 17 + N && strcmp(pq_tok_piece(tok, 17 + 4242), "<tok_004242>") == 0,
             "%d added tokens load with their ids (%s)", N, st ? pq_last_error() : "ok");
    // text: every 7th token whole, each followed by a near miss that is not one
    size_t tcap = (size_t)N / 7 * 40 + 16, tn = 0;
    char *text = malloc(tcap);
    int whole = 0;
    for (int i = 0; i < N; i += 7, whole++)
        tn += (size_t)snprintf(text + tn, tcap - tn, "<tok_%06d> <tok_%05d ", i, i % 100000 / 10);
    int32_t *ids = NULL;
    size_t nid = 0;
    st = tok ? pq_tok_encode(tok, text, tn, 0, &ids, &nid) : st;
    int found = 0, in_order = 1;
    for (size_t i = 0; st == PQ_OK && i < nid; i++)
        if (ids[i] >= 17) in_order &= ids[i] == 17 + 7 * found++;
    PQ_CHECK(st == PQ_OK && found == whole && in_order, "a %zu-byte text with %d of them among near misses: %d found, "
             "in order (%s)", tn, whole, found, st ? pq_last_error() : "ok");
    free(ids);
    free(text);
    pq_tok_free(tok);
    free(json);
}

// tokenizer_config.json and added-token flags of the wrong JSON type were
// read as absent; a special token the config names but the vocabulary lacks
// was ignored; a decoder Replace chain grew without bound.
static void test_config_types(void) {
    static const struct { const char *cfg, *needle, *what; } bad[] = {
        {"{\"bos_token\":5}", "\"bos_token\" must be a string", "bos_token as a number"},
        {"{\"add_bos_token\":\"true\"}", "\"add_bos_token\" must be true, false or null", "add_bos_token as a string"},
        {"{\"eos_token\":{\"content\":\"<nope>\"}}", "eos_token '<nope>' is not in the vocabulary", "an unknown eos_token"},
    };
    const char *json = MODEL("\"type\":\"BPE\"," VOCAB ",\"merges\":[\"a b\"]");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pq_tokenizer *tok = NULL;
        pq_status st = pq_tok_load_json(json, strlen(json), bad[i].cfg, strlen(bad[i].cfg), "bad.json", &tok);
        PQ_CHECK(st == PQ_ERR_FORMAT && !tok && strstr(pq_last_error(), bad[i].needle), "tokenizer_config.json: %s "
                 "refused (%s)", bad[i].what, st ? pq_last_error() : "accepted");
        pq_tok_free(tok);
    }
    // found by fuzz_tokenizer_config: a config naming another BOS than the template prepends
    {
        const char *tpl = "{\"added_tokens\":[{\"id\":3,\"content\":\"<s>\",\"special\":true},{\"id\":4,\"content\":"
                          "\"</s>\",\"special\":true}],\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":["
                          "{\"SpecialToken\":{\"id\":\"<s>\"}},{\"Sequence\":{\"id\":\"A\"}}],\"special_tokens\":{\"<s>\":"
                          "{\"ids\":[3]}}}," MODEL_FIELD("\"type\":\"BPE\"," VOCAB ",\"merges\":[]") "}";
        const char *cfg = "{\"bos_token\":{\"content\":\"</s>\"}}";
        pq_tokenizer *t2 = NULL;
        pq_status s2 = pq_tok_load_json(tpl, strlen(tpl), cfg, strlen(cfg), "bad.json", &t2);
        PQ_CHECK(s2 == PQ_ERR_FORMAT && !t2 && strstr(pq_last_error(), "bos_token is id 4, but the post_processor "
                 "prepends id 3"), "bos_token other than the template's BOS refused (%s)", pq_last_error());
        cfg = "{\"bos_token\":\"</s>\",\"add_bos_token\":true}";
        s2 = pq_tok_load_json(tpl, strlen(tpl), cfg, strlen(cfg), "ok.json", &t2);
        PQ_CHECK(s2 == PQ_OK && pq_tok_bos(t2) == 4 && pq_tok_adds_bos(t2), "... unless add_bos_token rebuilds it (%s)",
                 s2 ? pq_last_error() : "ok");
        pq_tok_free(t2);
    }
    check_refused("an added token with \"special\": \"yes\"",
                  "{\"added_tokens\":[{\"id\":3,\"content\":\"<s>\",\"special\":\"yes\"}]," MODEL_FIELD("\"type\":\"BPE\","
                  VOCAB ",\"merges\":[]") "}", PQ_ERR_FORMAT, "added_tokens[0].special must be true or false");
    size_t cap = 8192, n = 0;
    char *doc = malloc(cap);
    n += (size_t)snprintf(doc + n, cap - n, "{\"decoder\":{\"type\":\"Sequence\",\"decoders\":[");
    for (int i = 0; i < 40; i++)
        n += (size_t)snprintf(doc + n, cap - n, "%s{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"},\"content\":\"aa\"}",
                              i ? "," : "");
    snprintf(doc + n, cap - n, "]}," MODEL_FIELD("\"type\":\"BPE\"," VOCAB ",\"merges\":[\"a b\"]") "}");
    pq_tokenizer *tok = NULL;
    char *text = NULL;
    size_t len = 0;
    pq_status st = load_str(doc, &tok);
    pq_status dec = st == PQ_OK ? pq_tok_decode(tok, (const int32_t[]){0, 2}, 2, 0, &text, &len) : st;
    PQ_CHECK(dec == PQ_ERR_FORMAT && !text && strstr(pq_last_error(), "decoder step") &&
                 strstr(pq_last_error(), "expand without bound"),
             "40 chained decoder Replace a -> aa: decoding refused past 16x (%s)", pq_last_error());
    pq_tok_free(tok);
    free(doc);
}

// ---- the oracle mode -------------------------------------------------------------

static int run_oracle(const char *manifest) {
    FILE *f = fopen(manifest, "r");
    if (!f) {
        printf("FAIL - oracle: cannot open %s\n", manifest);
        return 1;
    }
    char line[8192];
    size_t total = 0;
    int cases = 0, lineno = 0;
    double secs = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *field[6];
        int nf = 0;
        for (char *p = strtok(line, "\t\n"); p && nf < 6; p = strtok(NULL, "\t\n")) field[nf++] = p;
        if (nf != 6) { // a line the manifest writer did not mean is a broken manifest, not nothing
            PQ_CHECK(0, "oracle: %s line %d has %d tab-separated fields, not 6", manifest, lineno, nf);
            continue;
        }
        size_t tlen = 0, ilen = 0, dlen = 0, n = 0;
        char *text = read_file(field[2], &tlen), *want = read_file(field[3], &ilen), *dec = read_file(field[4], &dlen);
        pq_tokenizer *tok = NULL;
        pq_status st = PQ_OK;
        if (!text || !want || !dec || ilen % 4) {
            // an input that cannot be read compares nothing: a failure, not "0 ids equal"
            PQ_CHECK(0, "oracle %s: read %s (text), %s (ids), %s (decoded)", field[0], field[2], field[3], field[4]);
            goto next;
        }
        st = pq_tok_load_files(field[1], NULL, &tok);
        if (st != PQ_OK) {
            PQ_CHECK(0, "oracle %s: load %s: %s", field[0], field[1], pq_last_error());
            goto next;
        }
        int32_t *ids = NULL;
        double t0 = now_s();
        st = pq_tok_encode(tok, text, tlen, atoi(field[5]), &ids, &n);
        secs += now_s() - t0;
        const int32_t *w = (const int32_t *)want;
        int same = st == PQ_OK && n * 4 == ilen && (n == 0 || memcmp(ids, w, ilen) == 0);
        PQ_CHECK(same, "oracle %s: %zu ids equal the library's (%s)", field[0], n, st == PQ_OK ? "" : pq_last_error());
        if (!same && st == PQ_OK) report_diff(tok, ids, n, w, ilen / 4);
        char *back = NULL;
        size_t blen = 0;
        st = pq_tok_decode(tok, w, ilen / 4, 0, &back, &blen);
        PQ_CHECK(st == PQ_OK && blen == dlen && memcmp(back, dec, dlen) == 0, "oracle %s: decode equals the library's",
                 field[0]);
        if (st == PQ_OK && (blen != dlen || memcmp(back, dec, dlen) != 0))
            printf("    pq '%.200s'\n    hf '%.200s'\n", back, dec);
        total += n;
        cases++;
        free(back);
        free(ids);
    next:
        free(text);
        free(want);
        free(dec);
        pq_tok_free(tok);
    }
    fclose(f);
    PQ_CHECK(cases > 0 && total > 0, "oracle: %d cases, %zu ids compared (pq encode time %.2f s)", cases, total, secs);
    return pq_test_done();
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--oracle") == 0) return run_oracle(argv[2]);
    pq_tokenizer *tok = NULL;
    pq_status st = pq_tok_load(pq_test_path("fixtures/stories260K"), &tok);
    PQ_CHECK(st == PQ_OK, "load the stories260K tokenizer (%s)", pq_last_error());
    if (tok) {
        test_golden_prompts(tok);
        test_ppl_streams(tok);
        test_speed(tok);
        test_bad_input(tok);
    }
    pq_tok_free(tok);
    test_small_models();
    test_unicode_normalizers();
    test_config_override();
    test_splits();
    test_split_bounded();
    test_normalizer_bound();
    test_config_types();
    test_added_matching();
    return pq_test_done();
}
