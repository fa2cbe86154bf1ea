// Replays a fuzz target's corpus as an ordinary test: every file in the
// directory given on the command line is passed to LLVMFuzzerTestOneInput.
// A crash, an unreadable input or an empty corpus fails the run; otherwise
// one "ok" line reports the count.
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]); return 2; }
    DIR *d = opendir(argv[1]);
    if (!d) { printf("FAIL - corpus %s: cannot open\n", argv[1]); return 1; }
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
        FILE *f = fopen(path, "rb");
        long len = -1;
        if (f && fseek(f, 0, SEEK_END) == 0) len = ftell(f);
        uint8_t *buf = len >= 0 ? malloc(len > 0 ? (size_t)len : 1) : NULL;
        size_t got = buf && fseek(f, 0, SEEK_SET) == 0 ? fread(buf, 1, (size_t)len, f) : 0;
        if (f) fclose(f);
        if (!buf || got != (size_t)len) { // an input that cannot be read is a failure, not a skip
            printf("FAIL - corpus input %s cannot be read\n", path);
            free(buf);
            closedir(d);
            return 1;
        }
        LLVMFuzzerTestOneInput(buf, got);
        free(buf);
        n++;
    }
    closedir(d);
    printf("%s - replayed %d corpus inputs from %s\n", n > 0 ? "ok" : "FAIL", n, argv[1]);
    return n > 0 ? 0 : 1;
}
