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

struct pq_zstd_reader {
    char *path;
    int fd;
    ZSTD_DCtx *dctx;
    uint8_t *in;
    ZSTD_inBuffer ib;  // the compressed bytes read and not yet consumed
    size_t in_cap;
    size_t last;       // ZSTD_decompressStream's last result: 0 at a frame's end
    int eof;           // the file has no more bytes
    uint64_t disk, declared, file_bytes;
};

// Reads the next compressed chunk (at EOF sets r->eof).
static pq_status refill(pq_zstd_reader *r) {
    for (;;) {
        ssize_t n = read(r->fd, r->in, r->in_cap);
        if (n < 0 && errno == EINTR) continue;
        PQ_FAIL_IF(n < 0, PQ_ERR_IO, "%s: read failed: %s", r->path, strerror(errno));
        r->ib = (ZSTD_inBuffer){r->in, (size_t)n, 0};
        r->disk += (uint64_t)n;
        r->eof = n == 0;
        return PQ_OK;
    }
}

void pq_zstd_reader_free(pq_zstd_reader *r) {
    if (!r) return;
    if (r->fd >= 0) close(r->fd);
    ZSTD_freeDCtx(r->dctx);
    free(r->in);
    free(r->path);
    free(r);
}

pq_status pq_zstd_reader_open(const char *path, pq_zstd_reader **out) {
    *out = NULL;
    pq_zstd_reader *r = calloc(1, sizeof *r);
    PQ_FAIL_IF(!r, PQ_ERR_NOMEM, "%s: out of memory", path);
    r->fd = -1;
    r->last = 1;
    r->in_cap = ZSTD_DStreamInSize();
    r->path = strdup(path);
    r->in = malloc(r->in_cap);
    r->dctx = ZSTD_createDCtx();
    pq_status st = PQ_OK;
    PQ_CHECK_GOTO(!r->path || !r->in || !r->dctx, st, PQ_ERR_NOMEM, "%s: out of memory for zstd buffers", path);
    PQ_TRY_GOTO(st, pq_open_regular(path, &r->fd));
    struct stat sb;
    PQ_CHECK_GOTO(fstat(r->fd, &sb) != 0, st, PQ_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    r->file_bytes = (uint64_t)sb.st_size;
    PQ_TRY_GOTO(st, refill(r));
    unsigned long long d = ZSTD_getFrameContentSize(r->in, r->ib.size);
    r->declared = d == ZSTD_CONTENTSIZE_UNKNOWN || d == ZSTD_CONTENTSIZE_ERROR ? UINT64_MAX : d;
    *out = r;
    return PQ_OK;
done:
    pq_zstd_reader_free(r);
    return st;
}

uint64_t pq_zstd_reader_declared(const pq_zstd_reader *r) { return r->declared; }
uint64_t pq_zstd_reader_disk_bytes(const pq_zstd_reader *r) { return r->disk; }
uint64_t pq_zstd_reader_file_bytes(const pq_zstd_reader *r) { return r->file_bytes; }

pq_status pq_zstd_reader_read(pq_zstd_reader *r, void *buf, size_t n, size_t *got) {
    ZSTD_outBuffer ob = {buf, n, 0};
    *got = 0;
    while (ob.pos < n) {
        if (r->ib.pos == r->ib.size) {
            if (r->eof) break;
            PQ_TRY(refill(r));
            if (r->eof) break;
        }
        r->last = ZSTD_decompressStream(r->dctx, &ob, &r->ib);
        PQ_FAIL_IF(ZSTD_isError(r->last), PQ_ERR_FORMAT, "%s: corrupt zstd data: %s", r->path,
                   ZSTD_getErrorName(r->last));
    }
    *got = ob.pos;
    PQ_FAIL_IF(ob.pos < n && r->last != 0, PQ_ERR_FORMAT, "%s: truncated zstd data (the file ends inside a frame)",
               r->path);
    return PQ_OK;
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
    int out = -1, fd;
    PQ_TRY(pq_open_regular(src, &fd));
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
