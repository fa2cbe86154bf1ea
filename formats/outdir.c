#include "formats/outdir.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/fileio.h"

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb, (void)type, (void)ftw;
    remove(path);
    return 0;
}

// rm -rf path (best effort).
static void remove_tree(const char *path) { nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

pq_status pq_outdir_begin(pq_outdir *d, const char *final, int force) {
    memset(d, 0, sizeof *d);
    size_t n = strlen(final);
    while (n > 1 && final[n - 1] == '/') n--; // "out/" names the directory "out"
    PQ_FAIL_IF(n == 0 || n + 32 >= sizeof d->final, PQ_ERR_ARG, "output path '%.200s' is empty or too long", final);
    memcpy(d->final, final, n);
    struct stat sb;
    PQ_FAIL_IF(lstat(d->final, &sb) == 0 && !force, PQ_ERR_ARG, "%s: already exists (--force replaces it)",
               d->final);
    snprintf(d->tmp, sizeof d->tmp, "%.4000s.pq-tmp-XXXXXX", d->final); // fits: n + 32 < cap
    if (!mkdtemp(d->tmp)) {
        int e = errno;
        d->tmp[0] = '\0';
        return PQ_FAIL(PQ_ERR_IO, "%s: cannot create the output directory next to it: %s", d->final, strerror(e));
    }
    mode_t mask = umask(0); // mkdtemp makes it 0700; give it the mode mkdir would
    umask(mask);
    chmod(d->tmp, 0777 & ~mask);
    return PQ_OK;
}

pq_status pq_outdir_path(const pq_outdir *d, const char *name, char *out, size_t cap) {
    return pq_path_join(out, cap, d->tmp, name);
}

pq_status pq_outdir_commit(pq_outdir *d) {
    char parent[PQ_OUTDIR_PATH_CAP], old[PQ_OUTDIR_PATH_CAP + 16];
    PQ_TRY(pq_fsync_dir(d->tmp));
    PQ_TRY(pq_path_dir(parent, sizeof parent, d->final));
    struct stat sb;
    old[0] = '\0';
    if (lstat(d->final, &sb) == 0) { // --force: move the previous one aside first
        snprintf(old, sizeof old, "%s.pq-old-%s", d->final, d->tmp + strlen(d->tmp) - 6);
        PQ_FAIL_IF(rename(d->final, old) != 0, PQ_ERR_IO, "%s: cannot move the existing output aside: %s",
                   d->final, strerror(errno));
    }
    if (rename(d->tmp, d->final) != 0) {
        int e = errno;
        if (old[0]) rename(old, d->final);
        return PQ_FAIL(PQ_ERR_IO, "%s: cannot rename %s into place: %s", d->final, d->tmp, strerror(e));
    }
    d->committed = 1;
    pq_status s = pq_fsync_dir(parent);
    if (old[0]) remove_tree(old);
    return s;
}

void pq_outdir_abort(pq_outdir *d) {
    if (!d || d->committed || !d->tmp[0]) return;
    remove_tree(d->tmp);
    d->tmp[0] = '\0';
}
