// SHA-256 (formats/sha256.h) against the FIPS 180-4 / NIST example vectors,
// fed whole and in uneven pieces; with the SHA extensions where the CPU has
// them, and again under PQ_ISA=scalar (the portable rounds).
#include <stdlib.h>
#include <string.h>

#include "formats/sha256.h"
#include "kernels/cpu.h"
#include "tests/test.h"

// The hash of msg fed in pieces of at most `piece` bytes (0: whole).
static void hash(const void *msg, size_t len, size_t piece, char hex[65]) {
    pq_sha256 h;
    pq_sha256_init(&h);
    const unsigned char *p = msg;
    while (len > 0) {
        size_t k = piece && piece < len ? piece : len;
        pq_sha256_update(&h, p, k);
        p += k, len -= k;
    }
    pq_sha256_hex(&h, hex);
}

static void check_vector(const char *what, const void *msg, size_t len, const char *want) {
    static const size_t pieces[] = {0, 1, 63, 64, 65, 1000};
    int bad = 0;
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        char got[65];
        hash(msg, len, pieces[i], got);
        bad += strcmp(got, want) != 0;
    }
    PQ_CHECK(bad == 0, "sha256 %s (%s), whole and in pieces of 1, 63, 64, 65, 1000 bytes", what,
             pq_cpu_sha() ? "SHA extensions" : "portable");
}

int main(int argc, char **argv) {
    pq_test_seed();
    check_vector("\"\"", "", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    check_vector("\"abc\"", "abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    check_vector("448-bit message", m448, strlen(m448),
                 "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    check_vector("896-bit message", m896, strlen(m896),
                 "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    size_t n = 1000000;
    char *a = malloc(n);
    memset(a, 'a', n);
    check_vector("one million 'a'", a, n, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(a);
    if (!getenv("PQ_ISA") && pq_cpu_sha()) pq_test_rerun_with_isa("sha256", "scalar", NULL);
    return pq_test_done();
}
