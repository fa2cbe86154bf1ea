// formats/fileio.c — whole-file reads and crash-safe (tmp + fsync + rename) writes.
#include "formats/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_CAP 4096

pq_status pq_path_join(char *out, size_t cap, const char *dir, const char *name) {
    PQ_FAIL_IF(!out || !dir || !name, PQ_ERR_ARG, "pq_path_join: NULL argument");
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') dl--; // keep a lone "/" (the root)
    while (*name == '/') name++;
    int n;
    if (dl == 0)
        n = snprintf(out, cap, "%s", name);
    else if (dir[dl - 1] == '/')
        n = snprintf(out, cap, "/%s", name);
    else
        n = snprintf(out, cap, "%.*s/%s", (int)dl, dir, name);
    PQ_FAIL_IF(n < 0 || (size_t)n >= cap, PQ_ERR_ARG, "%s/%s: path longer than %zu bytes", dir, name,
               cap ? cap - 1 : 0);
    return PQ_OK;
}

pq_status pq_path_dir(char *out, size_t cap, const char *path) {
    const char *slash = strrchr(path, '/');
    int n;
    if (!slash)
        n = snprintf(out, cap, ".");
    else if (slash == path)
        n = snprintf(out, cap, "/");
    else
        n = snprintf(out, cap, "%.*s", (int)(slash - path), path);
    PQ_FAIL_IF(n < 0 || (size_t)n >= cap, PQ_ERR_ARG, "%s: directory name longer than %zu bytes", path,
               cap ? cap - 1 : 0);
    return PQ_OK;
}

pq_status pq_tmp_path(char *out, size_t cap, const char *path) {
    int n = snprintf(out, cap, "%s.tmp", path);
    PQ_FAIL_IF(n < 0 || (size_t)n >= cap, PQ_ERR_ARG, "%s: path too long for a temporary name", path);
    return PQ_OK;
}

int pq_file_exists(const char *path) {
    struct stat sb;
    return path && stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

int pq_dir_exists(const char *path) {
    struct stat sb;
    return path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int pq_path_exists(const char *path) {
    struct stat sb;
    return path && lstat(path, &sb) == 0;
}

static const char *kind_of(mode_t m) {
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" :
           S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

// Opens path non-blocking to look at it. A regular file's *fd is then made
// blocking; a FIFO's (when allowed) stays non-blocking, for read_input to
// wait on with poll() (a blocking open would wait for a writer that may
// already have come and gone).
static pq_status open_input(const char *path, int allow_fifo, int *fd) {
    *fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    PQ_FAIL_IF(*fd < 0, PQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    int flags;
    pq_status st = PQ_OK;
    if (fstat(*fd, &sb) != 0) st = PQ_FAIL(PQ_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (allow_fifo && S_ISFIFO(sb.st_mode)) return PQ_OK;
    else if (!S_ISREG(sb.st_mode)) st = PQ_FAIL(PQ_ERR_IO, "%s: is %s, not a regular file", path, kind_of(sb.st_mode));
    else if ((flags = fcntl(*fd, F_GETFL)) < 0 || fcntl(*fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        st = PQ_FAIL(PQ_ERR_IO, "%s: fcntl failed: %s", path, strerror(errno));
    if (st != PQ_OK) {
        close(*fd);
        *fd = -1;
    }
    return st;
}

pq_status pq_open_regular(const char *path, int *fd) {
    return open_input(path, 0, fd);
}

static pq_status read_input(const char *path, int allow_fifo, size_t max_bytes, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    pq_status st = PQ_OK;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int fd;
    PQ_TRY(open_input(path, allow_fifo, &fd));
    struct stat sb;
    PQ_CHECK_GOTO(fstat(fd, &sb) != 0, st, PQ_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    int fifo = S_ISFIFO(sb.st_mode);
    PQ_CHECK_GOTO((uint64_t)sb.st_size > max_bytes, st, PQ_ERR_IO, "%s: %lld bytes, more than the %zu allowed", path,
                  (long long)sb.st_size, max_bytes);
    // the size is a hint only (/proc files report 0, a file may grow): read to EOF
    cap = (size_t)sb.st_size + 2; // +2: the NUL and the EOF probe
    for (;;) {
        if (n + 1 >= cap) {
            size_t ncap = cap * 2;
            char *nb = realloc(buf, ncap);
            PQ_CHECK_GOTO(!nb, st, PQ_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, ncap);
            buf = nb;
            cap = ncap;
        } else if (!buf) {
            buf = malloc(cap);
            PQ_CHECK_GOTO(!buf, st, PQ_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, cap);
        }
        // a FIFO: wait for data or for its writer's end (Linux reports no
        // hang-up before a writer has opened it, so this also waits for one)
        if (fifo) {
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            int pr = poll(&pfd, 1, -1);
            if (pr < 0 && errno == EINTR) continue;
            PQ_CHECK_GOTO(pr < 0, st, PQ_ERR_IO, "%s: poll failed: %s", path, strerror(errno));
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && (errno == EINTR || (fifo && errno == EAGAIN))) continue;
        PQ_CHECK_GOTO(r < 0, st, PQ_ERR_IO, "%s: read failed: %s", path, strerror(errno));
        if (r == 0) break;
        n += (size_t)r;
        PQ_CHECK_GOTO(n > max_bytes, st, PQ_ERR_IO, "%s: more than the %zu bytes allowed", path, max_bytes);
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    buf = NULL;
done:
    free(buf);
    close(fd);
    return st;
}

pq_status pq_file_read(const char *path, size_t max_bytes, char **data, size_t *len) {
    return read_input(path, 0, max_bytes, data, len);
}

pq_status pq_text_read(const char *path, size_t max_bytes, char **data, size_t *len) {
    return read_input(path, 1, max_bytes, data, len);
}

pq_status pq_fd_write_all(int fd, const void *data, size_t len, const char *path) {
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        PQ_FAIL_IF(w < 0, PQ_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        PQ_FAIL_IF(w == 0, PQ_ERR_IO, "%s: write made no progress", path);
        p += w;
        len -= (size_t)w;
    }
    return PQ_OK;
}

pq_status pq_fd_pwrite_all(int fd, const void *data, size_t len, uint64_t off, const char *path) {
    const char *p = data;
    while (len > 0) {
        PQ_FAIL_IF(off > (uint64_t)INT64_MAX, PQ_ERR_IO, "%s: write offset %llu too large", path,
                   (unsigned long long)off);
        ssize_t w = pwrite(fd, p, len, (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        PQ_FAIL_IF(w < 0, PQ_ERR_IO, "%s: write of %zu bytes at offset %llu failed: %s", path, len,
                   (unsigned long long)off, strerror(errno));
        PQ_FAIL_IF(w == 0, PQ_ERR_IO, "%s: write made no progress", path);
        p += w;
        off += (uint64_t)w;
        len -= (size_t)w;
    }
    return PQ_OK;
}

pq_status pq_fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    PQ_FAIL_IF(fd < 0, PQ_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
    int rc = fsync(fd), err = errno;
    close(fd);
    // EINVAL: this file system cannot sync directories; nothing more to do
    PQ_FAIL_IF(rc != 0 && err != EINVAL, PQ_ERR_IO, "%s: fsync of directory failed: %s", dir, strerror(err));
    return PQ_OK;
}

pq_status pq_file_commit_tmp(int fd, const char *tmp, const char *final) {
    pq_status st = PQ_OK;
    char dir[PATH_CAP];
    if (fsync(fd) != 0) {
        st = PQ_FAIL(PQ_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        return st;
    }
    // close can report a deferred write error (NFS, quotas)
    PQ_CHECK_GOTO(close(fd) != 0, st, PQ_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
    PQ_CHECK_GOTO(rename(tmp, final) != 0, st, PQ_ERR_IO, "%s: cannot rename %s to it: %s", final, tmp,
                  strerror(errno));
    PQ_TRY(pq_path_dir(dir, sizeof dir, final));
    return pq_fsync_dir(dir);
done:
    unlink(tmp);
    return st;
}

pq_status pq_file_write_atomic(const char *path, const void *data, size_t len) {
    char tmp[PATH_CAP];
    PQ_TRY(pq_tmp_path(tmp, sizeof tmp, path));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    PQ_FAIL_IF(fd < 0, PQ_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    pq_status st = pq_fd_write_all(fd, data, len, tmp);
    if (st != PQ_OK) {
        close(fd);
        unlink(tmp);
        return st;
    }
    return pq_file_commit_tmp(fd, tmp, path);
}

pq_status pq_file_copy_atomic(const char *src, const char *dst) {
    char tmp[PATH_CAP];
    PQ_TRY(pq_tmp_path(tmp, sizeof tmp, dst));
    pq_status st = PQ_OK;
    enum { CHUNK = 1 << 20 };
    char *buf = NULL;
    int out = -1, in;
    PQ_TRY(pq_open_regular(src, &in));
    buf = malloc(CHUNK);
    PQ_CHECK_GOTO(!buf, st, PQ_ERR_NOMEM, "%s: out of memory for a copy buffer", src);
    out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    PQ_CHECK_GOTO(out < 0, st, PQ_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    for (;;) {
        ssize_t r = read(in, buf, CHUNK);
        if (r < 0 && errno == EINTR) continue;
        PQ_CHECK_GOTO(r < 0, st, PQ_ERR_IO, "%s: read failed: %s", src, strerror(errno));
        if (r == 0) break;
        PQ_TRY_GOTO(st, pq_fd_write_all(out, buf, (size_t)r, tmp));
    }
    st = pq_file_commit_tmp(out, tmp, dst);
    out = -1; // closed (and tmp removed on failure) by the commit
done:
    if (out >= 0) {
        close(out);
        unlink(tmp);
    }
    free(buf);
    close(in);
    return st;
}

pq_status pq_file_reopen_tmp(const char *tmp, const void *header, size_t n, uint64_t total, int *fd) {
    *fd = open(tmp, O_RDWR | O_CLOEXEC);
    PQ_FAIL_IF(*fd < 0, PQ_ERR_IO, "%s: cannot resume: %s", tmp, strerror(errno));
    pq_status s = PQ_OK;
    char *have = malloc(n);
    struct stat sb;
    PQ_CHECK_GOTO(!have, s, PQ_ERR_NOMEM, "%s: out of memory", tmp);
    PQ_CHECK_GOTO(fstat(*fd, &sb) != 0, s, PQ_ERR_IO, "%s: cannot stat: %s", tmp, strerror(errno));
    PQ_CHECK_GOTO((uint64_t)sb.st_size > total, s, PQ_ERR_FORMAT,
                  "%s: cannot resume: %lld bytes, more than the %llu declared", tmp, (long long)sb.st_size,
                  (unsigned long long)total);
    ssize_t r = (uint64_t)sb.st_size >= n ? pread(*fd, have, n, 0) : 0;
    PQ_CHECK_GOTO(r < 0, s, PQ_ERR_IO, "%s: read failed: %s", tmp, strerror(errno));
    PQ_CHECK_GOTO((size_t)r != n || memcmp(have, header, n) != 0, s, PQ_ERR_FORMAT,
                  "%s: cannot resume: its header differs from the declared tensors and metadata", tmp);
done:
    free(have);
    if (s != PQ_OK) {
        close(*fd);
        *fd = -1;
    }
    return s;
}
