// tests/test_status.c — common/status: the one-line error message. Paths
// are up to 4096 bytes and a message may name three of them (issue 10 item
// 12: the 1024-byte buffer cut a long path and the reason after it); a
// message longer than the buffer keeps its start and its end.
#include "common/status.h"
#include "tests/test.h"

static char *repeat(char c, size_t n) {
    char *s = malloc(n + 1);
    memset(s, c, n);
    s[n] = 0;
    return s;
}

int main(void) {
    char *a = repeat('a', 4095), *b = repeat('b', 4095), *c = repeat('c', 4095);
    pq_status s = PQ_FAIL(PQ_ERR_IO, "%s: cannot rename %s to %s: reason at the end", a, b, c);
    const char *e = pq_last_error();
    PQ_CHECK(s == PQ_ERR_IO && strstr(e, "tests/test_status.c:") == e && strstr(e, a) && strstr(e, b) && strstr(e, c) &&
                 strstr(e, "reason at the end") && !strstr(e, " ... "),
             "three 4095-byte paths and the reason fit whole (%zu bytes)", strlen(e));
    char *big = repeat('x', 40000);
    PQ_FAIL(PQ_ERR_FORMAT, "%s: start %s reason at the end", "path", big);
    e = pq_last_error();
    size_t n = strlen(e);
    PQ_CHECK(strstr(e, "tests/test_status.c:") == e && strstr(e, "path: start") && strstr(e, " ... ") &&
                 n >= 16000 && n < 16384 && strcmp(e + n - 17, "reason at the end") == 0,
             "a 40 KB message keeps its start and its end around ' ... ' (%zu bytes)", n);
    PQ_FAIL(PQ_ERR_FORMAT, "inner reason");
    pq_fail_context(PQ_ERR_FORMAT, "%s/config.json", a);
    e = pq_last_error();
    PQ_CHECK(strstr(e, "tests/test_status.c:") == e && strstr(e, a) && strstr(e, "/config.json: inner reason"),
             "a 4 KB context goes after file:line and before the reason");
    PQ_FAIL(PQ_ERR_FORMAT, "line one\nline two\r");
    PQ_CHECK(!strchr(pq_last_error(), '\n') && !strchr(pq_last_error(), '\r'), "the message is one line");
    free(a), free(b), free(c), free(big);
    return pq_test_done();
}
