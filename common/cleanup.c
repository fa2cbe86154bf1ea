// common/cleanup.c — the registry of temporary outputs and mappings (see
// cleanup.h). Entries are claimed with an atomic compare-and-swap and
// published with a release store of their state, so a signal handler on any
// thread sees either a whole entry or none.
#include "common/cleanup.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { FREE, CLAIMED, ACTIVE, KEPT };

#define PATH_CAP 4096
#define LINE_CAP 1024

static struct {
    int state;
    char path[PATH_CAP];
    char line[LINE_CAP];
} paths[PQ_CLEANUP_MAX_PATHS];

static struct {
    int state;
    uintptr_t lo, hi;
    const char *path;
} maps[PQ_CLEANUP_MAX_MAPS];

static int claim(int *state) {
    int want = FREE;
    return __atomic_compare_exchange_n(state, &want, CLAIMED, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

int pq_cleanup_add(const char *dir) {
    size_t n = strlen(dir);
    if (n >= PATH_CAP) return -1;
    for (int i = 0; i < PQ_CLEANUP_MAX_PATHS; i++) {
        if (!claim(&paths[i].state)) continue;
        memcpy(paths[i].path, dir, n + 1);
        paths[i].line[0] = '\0';
        __atomic_store_n(&paths[i].state, ACTIVE, __ATOMIC_RELEASE);
        return i;
    }
    return -1;
}

void pq_cleanup_drop(int handle) {
    if (handle >= 0 && handle < PQ_CLEANUP_MAX_PATHS) __atomic_store_n(&paths[handle].state, FREE, __ATOMIC_RELEASE);
}

void pq_cleanup_keep(int handle, const char *line) {
    if (handle < 0 || handle >= PQ_CLEANUP_MAX_PATHS) return;
    __atomic_store_n(&paths[handle].state, CLAIMED, __ATOMIC_RELEASE); // not seen while the line changes
    size_t n = strlen(line);
    n = n < LINE_CAP - 1 ? n : LINE_CAP - 1;
    memcpy(paths[handle].line, line, n);
    paths[handle].line[n] = '\0';
    __atomic_store_n(&paths[handle].state, KEPT, __ATOMIC_RELEASE);
}

int pq_cleanup_add_map(const void *addr, size_t len, const char *path) {
    for (int i = 0; i < PQ_CLEANUP_MAX_MAPS; i++) {
        if (!claim(&maps[i].state)) continue;
        maps[i].lo = (uintptr_t)addr, maps[i].hi = (uintptr_t)addr + len, maps[i].path = path;
        __atomic_store_n(&maps[i].state, ACTIVE, __ATOMIC_RELEASE);
        return i;
    }
    return -1;
}

void pq_cleanup_drop_map(int handle) {
    if (handle >= 0 && handle < PQ_CLEANUP_MAX_MAPS) __atomic_store_n(&maps[handle].state, FREE, __ATOMIC_RELEASE);
}

const char *pq_cleanup_map_path(const void *addr) {
    uintptr_t a = (uintptr_t)addr;
    for (int i = 0; i < PQ_CLEANUP_MAX_MAPS; i++)
        if (__atomic_load_n(&maps[i].state, __ATOMIC_ACQUIRE) == ACTIVE && a >= maps[i].lo && a < maps[i].hi)
            return maps[i].path;
    return NULL;
}

// Removes dir's entries and dir itself with system calls only (async-signal-safe).
static void remove_flat_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[4096];
        for (;;) {
            long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
            if (n <= 0) break;
            for (long off = 0; off < n;) {
                const struct dirent64 *e = (const struct dirent64 *)(buf + off);
                off += e->d_reclen;
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
                if (unlinkat(fd, e->d_name, 0) != 0) unlinkat(fd, e->d_name, AT_REMOVEDIR);
            }
        }
        close(fd);
    }
    rmdir(dir);
}

void pq_cleanup_run(void) {
    for (int i = 0; i < PQ_CLEANUP_MAX_PATHS; i++) {
        int st = __atomic_load_n(&paths[i].state, __ATOMIC_ACQUIRE);
        if (st == ACTIVE) {
            remove_flat_dir(paths[i].path);
        } else if (st == KEPT && paths[i].line[0]) {
            ssize_t w = write(2, paths[i].line, strlen(paths[i].line));
            w = write(2, "\n", 1);
            (void)w;
        }
        if (st == ACTIVE || st == KEPT) __atomic_store_n(&paths[i].state, FREE, __ATOMIC_RELEASE);
    }
}
