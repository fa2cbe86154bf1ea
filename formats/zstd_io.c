// formats/zstd_io.c — streaming zstd compression and decompression of files.
#include "formats/zstd_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "formats/fileio.h"

#define PATH_CAP 4096

// Makes room for at least one more output byte, refusing to grow past
// max_bytes + 1 (one byte over the limit is how "too large" is noticed).
static pq_status grow(const char *path, uint8_t **buf, size_t *cap, size_t max_bytes) {
    size_t limit = max_bytes < SIZE_MAX ? max_bytes + 1 : SIZE_MAX;
    PQ_FAIL_IF(*cap >= limit, PQ_ERR_FORMAT, "%s: decompresses to more than %zu bytes", path, max_bytes);
    size_t first = (size_t)1 << 20;
    size_t ncap = *cap == 0 ? (limit < first ? limit : first) : *cap > limit / 2 ? limit : *cap * 2;
    uint8_t *nb = realloc(*buf, ncap);
    PQ_FAIL_IF(!nb, PQ_ERR_NOMEM, "%s: out of memory decompressing %zu bytes", path, ncap);
    *buf = nb;
    *cap = ncap;
    return PQ_OK;
}

pq_status pq_zstd_read_file(const char *path, size_t max_bytes, uint8_t **out, size_t *len,
                            uint64_t *disk_bytes) {
    *out = NULL;
    *len = 0;
    pq_status st = PQ_OK;
    uint8_t *buf = NULL, *in = NULL;
    size_t cap = 0, pos = 0, in_cap = ZSTD_DStreamInSize(), last = 1; // last: 0 at a frame's end
    uint64_t read_total = 0;
    ZSTD_DCtx *dctx = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    PQ_FAIL_IF(fd < 0, PQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    in = malloc(in_cap);
    dctx = ZSTD_createDCtx();
    PQ_CHECK_GOTO(!in || !dctx, st, PQ_ERR_NOMEM, "%s: out of memory for zstd buffers", path);
    for (;;) {
        ssize_t r = read(fd, in, in_cap);
        if (r < 0 && errno == EINTR) continue;
        PQ_CHECK_GOTO(r < 0, st, PQ_ERR_IO, "%s: read failed: %s", path, strerror(errno));
        if (r == 0) break;
        if (read_total == 0) {
            // size the output from the first frame's header when it says
            unsigned long long hint = ZSTD_getFrameContentSize(in, (size_t)r);
            if (hint != ZSTD_CONTENTSIZE_UNKNOWN && hint != ZSTD_CONTENTSIZE_ERROR) {
                PQ_CHECK_GOTO(hint > max_bytes, st, PQ_ERR_FORMAT,
                              "%s: zstd frame declares %llu bytes, more than the %zu allowed", path, hint,
                              max_bytes);
                cap = (size_t)hint + 1; // +1: a complete frame never leaves the buffer full
                buf = malloc(cap);
                PQ_CHECK_GOTO(!buf, st, PQ_ERR_NOMEM, "%s: out of memory for %llu decompressed bytes", path,
                              hint);
            }
        }
        read_total += (uint64_t)r;
        ZSTD_inBuffer ib = {in, (size_t)r, 0};
        for (;;) {
            if (pos == cap) PQ_TRY_GOTO(st, grow(path, &buf, &cap, max_bytes));
            ZSTD_outBuffer ob = {buf, cap, pos};
            last = ZSTD_decompressStream(dctx, &ob, &ib);
            PQ_CHECK_GOTO(ZSTD_isError(last), st, PQ_ERR_FORMAT, "%s: corrupt zstd data: %s", path,
                          ZSTD_getErrorName(last));
            pos = ob.pos;
            PQ_CHECK_GOTO(pos > max_bytes, st, PQ_ERR_FORMAT, "%s: decompresses to more than %zu bytes", path,
                          max_bytes);
            if (ib.pos == ib.size && (pos < cap || last == 0)) break;
        }
    }
    PQ_CHECK_GOTO(last != 0, st, PQ_ERR_FORMAT, "%s: truncated zstd data (the file ends inside a frame)", path);
    if (!buf) buf = malloc(1); // empty but valid stream (e.g. only skippable frames)
    PQ_CHECK_GOTO(!buf, st, PQ_ERR_NOMEM, "%s: out of memory", path);
    *out = buf;
    *len = pos;
    if (disk_bytes) *disk_bytes = read_total;
    buf = NULL;
done:
    free(buf);
    free(in);
    ZSTD_freeDCtx(dctx);
    close(fd);
    return st;
}

pq_status pq_zstd_compress_file(const char *src, const char *dst, int level) {
    PQ_FAIL_IF(level < 1 || level > ZSTD_maxCLevel(), PQ_ERR_ARG, "%s: zstd level %d not in 1..%d", dst, level,
               ZSTD_maxCLevel());
    char tmp[PATH_CAP];
    PQ_TRY(pq_tmp_path(tmp, sizeof tmp, dst));
    pq_status st = PQ_OK;
    size_t in_cap = ZSTD_CStreamInSize(), out_cap = ZSTD_CStreamOutSize();
    uint8_t *in = NULL, *outb = NULL;
    ZSTD_CCtx *cctx = NULL;
    int out = -1, fd = open(src, O_RDONLY | O_CLOEXEC);
    PQ_FAIL_IF(fd < 0, PQ_ERR_IO, "%s: cannot open: %s", src, strerror(errno));
    struct stat sb;
    PQ_CHECK_GOTO(fstat(fd, &sb) != 0, st, PQ_ERR_IO, "%s: cannot stat: %s", src, strerror(errno));
    in = malloc(in_cap);
    outb = malloc(out_cap);
    cctx = ZSTD_createCCtx();
    PQ_CHECK_GOTO(!in || !outb || !cctx, st, PQ_ERR_NOMEM, "%s: out of memory for zstd buffers", dst);
    size_t zr = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
    if (!ZSTD_isError(zr)) zr = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    if (!ZSTD_isError(zr)) zr = ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
    if (!ZSTD_isError(zr)) zr = ZSTD_CCtx_setPledgedSrcSize(cctx, (unsigned long long)sb.st_size);
    PQ_CHECK_GOTO(ZSTD_isError(zr), st, PQ_ERR_ARG, "%s: zstd setup failed: %s", dst, ZSTD_getErrorName(zr));
    out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    PQ_CHECK_GOTO(out < 0, st, PQ_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    for (;;) {
        ssize_t r = read(fd, in, in_cap);
        if (r < 0 && errno == EINTR) continue;
        PQ_CHECK_GOTO(r < 0, st, PQ_ERR_IO, "%s: read failed: %s", src, strerror(errno));
        ZSTD_EndDirective mode = r == 0 ? ZSTD_e_end : ZSTD_e_continue;
        ZSTD_inBuffer ib = {in, (size_t)r, 0};
        size_t remaining;
        do {
            ZSTD_outBuffer ob = {outb, out_cap, 0};
            remaining = ZSTD_compressStream2(cctx, &ob, &ib, mode);
            // "Src size is incorrect": src changed while it was being read
            PQ_CHECK_GOTO(ZSTD_isError(remaining), st, PQ_ERR_IO, "%s: zstd compression of %s failed: %s", dst,
                          src, ZSTD_getErrorName(remaining));
            PQ_TRY_GOTO(st, pq_fd_write_all(out, outb, ob.pos, tmp));
        } while (mode == ZSTD_e_end ? remaining != 0 : ib.pos < ib.size);
        if (r == 0) break;
    }
    st = pq_file_commit_tmp(out, tmp, dst);
    out = -1; // closed (and tmp removed on failure) by the commit
done:
    if (out >= 0) {
        close(out);
        unlink(tmp);
    }
    ZSTD_freeCCtx(cctx);
    free(in);
    free(outb);
    close(fd);
    return st;
}
