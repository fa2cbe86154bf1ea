// tests/test_regex.c — formats/regex against Python's re.match (the cases
// tests/regex_oracle.py wrote to tests/data/regex_cases.jsonl: the patterns
// of compressed-tensors ignore lists, syntax corners, Python's own errors,
// the constructs pq refuses by name, random patterns), and the patterns
// that make backtracking engines take exponential time or memory (issue 10
// item 6): each answers on a long text after a number of steps the
// matcher's design bounds by text x program, with no allocation.
#include <jansson.h>

#include "formats/regex.h"
#include "tests/test.h"

static void check_oracle(void) {
    const char *path = "tests/data/regex_cases.jsonl";
    FILE *f = fopen(path, "r");
    PQ_CHECK(f != NULL, "open %s", path);
    if (!f) return;
    char line[4096];
    int n = 0, bad = 0, by_kind[4] = {0}; // match, no match, error, unsupported
    while (fgets(line, sizeof line, f)) {
        json_error_t err;
        json_t *c = json_loads(line, 0, &err);
        const char *pat = json_string_value(json_array_get(c, 0)), *subj = json_string_value(json_array_get(c, 1));
        json_t *want = json_array_get(c, 2);
        if (!pat || !subj || !want) {
            PQ_CHECK(0, "%s line %d is a [pattern, subject, result] triple", path, n + 1);
            json_decref(c);
            bad++;
            continue;
        }
        size_t plen = json_string_length(json_array_get(c, 0)), slen = json_string_length(json_array_get(c, 1));
        pq_regex *re = NULL;
        pq_status st = pq_regex_compile(pat, plen, &re);
        int ok;
        if (json_is_string(want)) {
            int unsupported = strcmp(json_string_value(want), "unsupported") == 0;
            ok = st == PQ_ERR_FORMAT && !re && strstr(pq_last_error(), "regex \"") &&
                 (!unsupported || strstr(pq_last_error(), "not supported"));
            by_kind[2 + unsupported]++;
        } else {
            int m = st == PQ_OK ? pq_regex_match(re, subj, slen) : -1;
            ok = m == json_integer_value(want);
            by_kind[m == 1 ? 0 : 1]++;
        }
        if (!ok && bad++ < 20)
            printf("FAIL - re.match('%s', '%s'): Python says %s, pq %s (%s)\n", pat, subj,
                   json_is_string(want) ? json_string_value(want) : json_integer_value(want) ? "match" : "no match",
                   st != PQ_OK ? "refused" : pq_regex_match(re, subj, slen) ? "match" : "no match",
                   st != PQ_OK ? pq_last_error() : "");
        pq_regex_free(re);
        json_decref(c);
        n++;
    }
    fclose(f);
    if (bad > 20) pq_test_failures++;
    PQ_CHECK(bad == 0 && n > 1500 && by_kind[0] > 300 && by_kind[1] > 300 && by_kind[2] > 10 && by_kind[3] > 10,
             "%d cases agree with Python's re.match (%d match, %d no match, %d refused as Python does, %d refused "
             "as unsupported); %d differ", n, by_kind[0], by_kind[1], by_kind[2], by_kind[3], bad);
}

// Patterns that take a backtracking engine 2^n steps (or, for glibc's
// regcomp, gigabytes) on texts of n characters; here each is one pass.
static void check_no_blowup(void) {
    enum { N = 1 << 17 };
    char *a = malloc(N + 2);
    memset(a, 'a', N);
    a[N] = 'b', a[N + 1] = 0;
    static const struct { const char *pat; int want_a, want_ab; } cases[] = {
        {"(a+)+$", 1, 0},       {"(a|a)*c", 0, 0},      {"(a*)*b", 0, 1},        {"(a|aa)+$", 1, 0},
        {".*.*.*.*.*.*=", 0, 0}, {"(?:a?){40}a{40}", 1, 1}, {"((a+)*)+c", 0, 0}, {"(a{1,40}){1,40}b", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pq_regex *re = NULL;
        pq_status st = pq_regex_compile(cases[i].pat, strlen(cases[i].pat), &re);
        int m1 = st == PQ_OK ? pq_regex_match(re, a, N) : -1, m2 = st == PQ_OK ? pq_regex_match(re, a, N + 1) : -1;
        PQ_CHECK(m1 == cases[i].want_a && m2 == cases[i].want_ab,
                 "'%s' on %d x 'a' (+ 'b'): %d / %d as Python's re.match, in one pass (%s)", cases[i].pat, N, m1, m2,
                 st ? pq_last_error() : "ok");
        pq_regex_free(re);
    }
    free(a);
    // the pattern of issue 10 item 6: Python refuses it (multiple repeat);
    // glibc's regcomp accepted it and regexec took 13 GB
    char pat[64] = "a";
    memset(pat + 1, '+', 40);
    pat[41] = 0;
    pq_regex *re = NULL;
    pq_status st = pq_regex_compile(pat, strlen(pat), &re);
    PQ_CHECK(st == PQ_ERR_FORMAT && !re && strstr(pq_last_error(), "possessive quantifier is not supported"),
             "\"a\" + 40 x \"+\" refused at offset 2 (%s)", pq_last_error());
    // counted repetitions expand: the program is bounded, not the pattern
    const char *big[] = {"((a{100}){100}){100}", "a{20001}", "(?:(?:(?:x{30}){30}){30})?"};
    for (int i = 0; i < 3; i++) {
        st = pq_regex_compile(big[i], strlen(big[i]), &re);
        PQ_CHECK(st == PQ_ERR_FORMAT && !re && (strstr(pq_last_error(), "instructions") || strstr(pq_last_error(), "too large")),
                 "'%s' refused: bounded program (%s)", big[i], pq_last_error());
    }
    char deep[300];
    memset(deep, '(', 100);
    memset(deep + 100, ')', 100);
    deep[200] = 0;
    st = pq_regex_compile(deep, 200, &re);
    PQ_CHECK(st == PQ_ERR_FORMAT && strstr(pq_last_error(), "nested more than"), "100 nested groups refused (%s)",
             pq_last_error());
}

int main(void) {
    check_oracle();
    check_no_blowup();
    return pq_test_done();
}
