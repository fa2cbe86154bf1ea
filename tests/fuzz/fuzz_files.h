// tests/fuzz/fuzz_files.h — for fuzz targets whose parser reads files (a
// model directory, a shard index, a .zst): one scratch directory per
// process, and files written into it from the input. Header-only, static.
#ifndef PQ_FUZZ_FILES_H
#define PQ_FUZZ_FILES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fuzz_dir[256];

static void fuzz_rm_dir(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir);
    if (fuzz_dir[0] && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", fuzz_dir);
}

// The scratch directory (created on first use, removed at exit).
static const char *fuzz_scratch(void) {
    if (!fuzz_dir[0]) {
        snprintf(fuzz_dir, sizeof fuzz_dir, "%s/pq-fuzz.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(fuzz_dir)) abort();
        atexit(fuzz_rm_dir);
    }
    return fuzz_dir;
}

// scratch/name, in one of 4 rotating buffers (valid until the 4th next call
// of fuzz_path or fuzz_write: copy what must live longer).
static const char *fuzz_path(const char *name) {
    static char buf[4][512];
    static int slot;
    char *b = buf[slot++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", fuzz_scratch(), name);
    return b;
}

// Writes n bytes to scratch/name, replacing it; returns its path.
static const char *fuzz_write(const char *name, const void *data, size_t n) {
    const char *path = fuzz_path(name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) abort();
    return path;
}

#endif
