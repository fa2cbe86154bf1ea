#include "formats/outdir.h"

#include <dirent.h>
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

// final without trailing slashes into d->final; refuses an existing final without force.
static pq_status set_final(pq_outdir *d, const char *final, int force) {
    memset(d, 0, sizeof *d);
    size_t n = strlen(final);
    while (n > 1 && final[n - 1] == '/') n--; // "out/" names the directory "out"
    PQ_FAIL_IF(n == 0 || n + 32 >= sizeof d->final, PQ_ERR_ARG, "output path '%.200s' is empty or too long", final);
    memcpy(d->final, final, n);
    struct stat sb;
    PQ_FAIL_IF(lstat(d->final, &sb) == 0 && !force, PQ_ERR_ARG, "%s: already exists (--force replaces it)",
               d->final);
    return PQ_OK;
}

pq_status pq_outdir_begin(pq_outdir *d, const char *final, int force) {
    PQ_TRY(set_final(d, final, force));
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

pq_status pq_outdir_find_leftover(const char *final, const char *marker, char *tmp, size_t cap, int *found) {
    *found = 0;
    pq_outdir d;
    PQ_TRY(set_final(&d, final, 1));
    char parent[PQ_OUTDIR_PATH_CAP], prefix[PQ_OUTDIR_PATH_CAP], best[256] = "", path[2 * PQ_OUTDIR_PATH_CAP];
    PQ_TRY(pq_path_dir(parent, sizeof parent, d.final));
    const char *base = strrchr(d.final, '/') ? strrchr(d.final, '/') + 1 : d.final;
    snprintf(prefix, sizeof prefix, "%.4000s.pq-tmp-", base);
    DIR *dir = opendir(parent);
    PQ_FAIL_IF(!dir, PQ_ERR_IO, "%s: cannot list %s: %s", d.final, parent, strerror(errno));
    size_t plen = strlen(prefix);
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        if (strncmp(e->d_name, prefix, plen) != 0 || strlen(e->d_name) != plen + 6) continue;
        snprintf(path, sizeof path, "%s/%s/%s", parent, e->d_name, marker);
        if (pq_file_exists(path) && (!best[0] || strcmp(e->d_name, best) < 0))
            snprintf(best, sizeof best, "%s", e->d_name);
    }
    closedir(dir);
    if (!best[0]) return PQ_OK;
    PQ_TRY(pq_path_join(tmp, cap, parent, best));
    *found = 1;
    return PQ_OK;
}

pq_status pq_outdir_adopt(pq_outdir *d, const char *final, const char *tmp, int force) {
    PQ_TRY(set_final(d, final, force));
    PQ_FAIL_IF(strlen(tmp) >= sizeof d->tmp, PQ_ERR_ARG, "%s: path too long", tmp);
    PQ_FAIL_IF(!pq_dir_exists(tmp), PQ_ERR_IO, "%s: no such directory", tmp);
    snprintf(d->tmp, sizeof d->tmp, "%s", tmp);
    return PQ_OK;
}
