// formats/outdir.c — the output protocol (see outdir.h).
#include "formats/outdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "formats/fileio.h"

#define SUFFIX_LEN 6 // the XXXXXX of mkdtemp

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb, (void)type, (void)ftw;
    remove(path);
    return 0;
}

// rm -rf path (best effort; a symlink is removed, not followed).
static void remove_tree(const char *path) { nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

// ---- FINAL against the inputs ------------------------------------------------------

// Whether the object (dev, ino) is input `in` or a directory on its real path.
static int holds_input(dev_t dev, ino_t ino, const char *in) {
    char real[PATH_MAX];
    if (!realpath(in, real)) return 0; // an input that does not exist is reported where it is read
    for (;;) {
        struct stat sb;
        if (stat(real, &sb) == 0 && sb.st_dev == dev && sb.st_ino == ino) return 1;
        char *slash = strrchr(real, '/');
        if (!slash || slash == real) break;
        *slash = '\0';
    }
    struct stat root;
    return stat("/", &root) == 0 && root.st_dev == dev && root.st_ino == ino;
}

// FINAL as it is now, checked for replacing it: *exists; PQ_ERR_ARG if it
// may not be replaced (without force; an input or a directory holding one;
// a directory for a file output).
static pq_status check_final(const pq_outdir *d, int *exists) {
    struct stat sb;
    *exists = lstat(d->final, &sb) == 0;
    if (!*exists) return PQ_OK;
    PQ_FAIL_IF(d->spec.file && S_ISDIR(sb.st_mode), PQ_ERR_ARG, "%s: is a directory; the output is a file (give "
               "a file's path)", d->final);
    PQ_FAIL_IF(!d->spec.force, PQ_ERR_ARG, "%s: already exists (--force replaces it)", d->final);
    for (int i = 0; i < d->spec.n_inputs; i++)
        PQ_FAIL_IF(d->spec.inputs[i] && holds_input(sb.st_dev, sb.st_ino, d->spec.inputs[i]), PQ_ERR_ARG,
                   "%s: %s %s, an input of this run; pq never replaces its own inputs, even with --force (choose "
                   "another output)", d->final, S_ISDIR(sb.st_mode) ? "is or holds" : "is", d->spec.inputs[i]);
    return PQ_OK;
}

// FINAL without trailing slashes into d->final, then checked.
static pq_status set_final(pq_outdir *d, const pq_outdir_spec *s) {
    memset(d, 0, sizeof *d);
    d->lock_fd = d->cleanup = -1;
    d->spec = *s;
    size_t n = strlen(s->final);
    while (n > 1 && s->final[n - 1] == '/') n--; // "out/" names the directory "out"
    PQ_FAIL_IF(n == 0 || n + 32 >= sizeof d->final, PQ_ERR_ARG, "output path '%.200s' is empty or too long", s->final);
    memcpy(d->final, s->final, n);
    PQ_FAIL_IF(s->file && n < strlen(s->final), PQ_ERR_ARG, "%s: names a directory; the output is a file", s->final);
    int exists;
    return check_final(d, &exists);
}

// ---- the temporary directory ------------------------------------------------------

// Locks an open directory for this run; 0 if another process holds it.
static int lock_fd(int fd) { return flock(fd, LOCK_EX | LOCK_NB) == 0; }

// Lists FINAL's temporary directories: each one that is not locked (its run
// died) and holds no resume marker is removed and counted; the first (by
// name) holding the marker goes into found (when found is not NULL).
static pq_status scan(pq_outdir *d, const char *marker, char *found, size_t cap) {
    char parent[PQ_OUTDIR_PATH_CAP], prefix[PQ_OUTDIR_PATH_CAP], best[NAME_MAX + 1] = "";
    char path[2 * PQ_OUTDIR_PATH_CAP + 16];
    PQ_TRY(pq_path_dir(parent, sizeof parent, d->final));
    snprintf(prefix, sizeof prefix, "%.4000s.pq-tmp-", base_name(d->final));
    DIR *dir = opendir(parent);
    if (!dir && (errno == ENOENT || errno == ENOTDIR)) return PQ_OK; // no leftovers; creating FINAL will fail
    PQ_FAIL_IF(!dir, PQ_ERR_IO, "%s: cannot list %s: %s", d->final, parent, strerror(errno));
    size_t plen = strlen(prefix);
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        if (strncmp(e->d_name, prefix, plen) != 0 || strlen(e->d_name) != plen + SUFFIX_LEN) continue;
        snprintf(path, sizeof path, "%s/%s/%s", parent, e->d_name, marker ? marker : "");
        if (marker && pq_file_exists(path)) {
            if (!best[0] || strcmp(e->d_name, best) < 0) snprintf(best, sizeof best, "%s", e->d_name);
            continue;
        }
        snprintf(path, sizeof path, "%s/%s", parent, e->d_name);
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) continue;
        if (lock_fd(fd)) { // nobody holds it: its run died
            remove_tree(path);
            if (!d->removed++) snprintf(d->removed_first, sizeof d->removed_first, "%.4000s", path);
        }
        close(fd);
    }
    closedir(dir);
    if (found && best[0]) PQ_TRY(pq_path_join(found, cap, parent, best));
    return PQ_OK;
}

pq_status pq_outdir_begin(pq_outdir *d, const pq_outdir_spec *s) {
    PQ_TRY(set_final(d, s));
    PQ_TRY(scan(d, s->resume_marker, NULL, 0));
    char fresh[PQ_OUTDIR_PATH_CAP];
    snprintf(fresh, sizeof fresh, "%.4000s.pq-new-XXXXXX", d->final); // fits: n + 32 < cap
    PQ_FAIL_IF(!mkdtemp(fresh), PQ_ERR_IO, "%s: cannot create the output directory next to it: %s", d->final,
               strerror(errno));
    d->cleanup = pq_cleanup_add(fresh);
    d->lock_fd = open(fresh, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int locked = d->lock_fd >= 0 && lock_fd(d->lock_fd), e = errno;
    snprintf(d->tmp, sizeof d->tmp, "%.4000s.pq-tmp-%s", d->final, fresh + strlen(fresh) - SUFFIX_LEN);
    if (!locked || rename(fresh, d->tmp) != 0) {
        e = locked ? errno : e;
        d->tmp[0] = '\0';
        rmdir(fresh);
        pq_outdir_abort(d);
        return PQ_FAIL(PQ_ERR_IO, "%s: cannot set up the temporary directory %s: %s", d->final, fresh, strerror(e));
    }
    pq_cleanup_drop(d->cleanup);
    d->cleanup = pq_cleanup_add(d->tmp);
    mode_t mask = umask(0); // mkdtemp makes it 0700; give it the mode mkdir would
    umask(mask);
    chmod(d->tmp, 0777 & ~mask);
    return PQ_OK;
}

pq_status pq_outdir_find_leftover(pq_outdir *d, const pq_outdir_spec *s, char *tmp, size_t cap, int *found) {
    PQ_TRY(set_final(d, s));
    tmp[0] = '\0';
    PQ_TRY(scan(d, s->resume_marker, tmp, cap));
    *found = tmp[0] != '\0';
    return PQ_OK;
}

pq_status pq_outdir_adopt(pq_outdir *d, const pq_outdir_spec *s, const char *tmp) {
    int removed = d->removed;
    char first[PQ_OUTDIR_PATH_CAP];
    snprintf(first, sizeof first, "%s", d->removed_first);
    PQ_TRY(set_final(d, s));
    d->removed = removed;
    snprintf(d->removed_first, sizeof d->removed_first, "%s", first);
    PQ_FAIL_IF(strlen(tmp) >= sizeof d->tmp, PQ_ERR_ARG, "%s: path too long", tmp);
    d->lock_fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    PQ_FAIL_IF(d->lock_fd < 0, PQ_ERR_IO, "%s: cannot open: %s", tmp, strerror(errno));
    if (!lock_fd(d->lock_fd)) {
        close(d->lock_fd);
        d->lock_fd = -1;
        return PQ_FAIL(PQ_ERR_ARG, "%s: another pq is writing it (%s is locked)", d->final, tmp);
    }
    snprintf(d->tmp, sizeof d->tmp, "%s", tmp);
    d->cleanup = pq_cleanup_add(d->tmp);
    return PQ_OK;
}

pq_status pq_outdir_path(const pq_outdir *d, const char *name, char *out, size_t cap) {
    return pq_path_join(out, cap, d->tmp, name);
}

pq_status pq_outdir_file(const pq_outdir *d, char *out, size_t cap) {
    return pq_path_join(out, cap, d->tmp, base_name(d->final));
}

// ---- commit ---------------------------------------------------------------------------

// rename(src, dst) with renameat2 flags; -1 with errno EINVAL / ENOSYS where
// the file system has no renameat2.
static int rename2(const char *src, const char *dst, unsigned flags) {
    return renameat2(AT_FDCWD, src, AT_FDCWD, dst, flags);
}

// The same checks just before a plain rename, where renameat2 is missing.
static pq_status rename_fallback(pq_outdir *d, const char *src) {
    char old[PQ_OUTDIR_PATH_CAP + 16];
    int exists;
    PQ_TRY(check_final(d, &exists));
    if (exists) { // --force: move the previous one aside first
        snprintf(old, sizeof old, "%s.pq-old-%s", d->final, d->tmp + strlen(d->tmp) - SUFFIX_LEN);
        PQ_FAIL_IF(rename(d->final, old) != 0, PQ_ERR_IO, "%s: cannot move the existing output aside: %s",
                   d->final, strerror(errno));
    }
    if (rename(src, d->final) != 0) {
        int e = errno;
        if (exists) rename(old, d->final);
        return PQ_FAIL(PQ_ERR_IO, "%s: cannot rename %s into place: %s", d->final, src, strerror(e));
    }
    if (exists) remove_tree(old);
    return PQ_OK;
}

// src onto FINAL: without force only if nothing is there; with force
// exchanged with what is there (checked again), which is then removed.
static pq_status publish(pq_outdir *d, const char *src) {
    for (int tries = 0; tries < 2; tries++) {
        int exists;
        struct stat sb;
        PQ_FAIL_IF(!d->spec.force && lstat(d->final, &sb) == 0, PQ_ERR_ARG, "%s: appeared while pq was writing it; "
                   "not replaced (--force replaces it)", d->final);
        PQ_TRY(check_final(d, &exists));
        unsigned flags = exists ? RENAME_EXCHANGE : RENAME_NOREPLACE;
        if (rename2(src, d->final, flags) == 0) {
            if (exists) remove_tree(src); // the previous FINAL, now at src
            return PQ_OK;
        }
        if (errno == EINVAL || errno == ENOSYS) return rename_fallback(d, src);
        // appeared (NOREPLACE) or vanished (EXCHANGE) since check_final: look again
        PQ_FAIL_IF(errno != EEXIST && errno != ENOENT, PQ_ERR_IO, "%s: cannot rename %s into place: %s", d->final, src,
                   strerror(errno));
    }
    return PQ_FAIL(PQ_ERR_ARG, "%s: appeared while pq was writing it; not replaced (--force replaces it)", d->final);
}

pq_status pq_outdir_commit(pq_outdir *d) {
    char parent[PQ_OUTDIR_PATH_CAP], src[PQ_OUTDIR_PATH_CAP];
    PQ_TRY(pq_fsync_dir(d->tmp));
    PQ_TRY(pq_path_dir(parent, sizeof parent, d->final));
    if (d->spec.file) PQ_TRY(pq_outdir_file(d, src, sizeof src));
    else snprintf(src, sizeof src, "%s", d->tmp);
    PQ_TRY(publish(d, src));
    d->committed = 1;
    pq_cleanup_drop(d->cleanup);
    d->cleanup = -1;
    if (d->spec.file) remove_tree(d->tmp); // empty, or the previous FINAL
    if (d->lock_fd >= 0) close(d->lock_fd);
    d->lock_fd = -1;
    return pq_fsync_dir(parent);
}

void pq_outdir_keep(pq_outdir *d, const char *line) {
    d->kept = line != NULL;
    if (line) pq_cleanup_keep(d->cleanup, line);
    else if (d->cleanup >= 0) pq_cleanup_drop(d->cleanup), d->cleanup = pq_cleanup_add(d->tmp);
}

void pq_outdir_abort(pq_outdir *d) {
    if (!d) return;
    if (!d->committed && !d->kept && d->tmp[0]) remove_tree(d->tmp);
    pq_cleanup_drop(d->cleanup); // a kept directory's line was for a signal during the run
    d->cleanup = -1;
    if (d->lock_fd >= 0) close(d->lock_fd);
    d->lock_fd = -1;
    d->tmp[0] = '\0';
}
