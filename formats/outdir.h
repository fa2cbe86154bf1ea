// formats/outdir.h — the output protocol every pq command that writes uses:
// an output (a directory, or one file) appears whole or not at all, never
// over an input of the run, never over something it did not mean to replace.
//
//  1. Begin. FINAL may not exist (lstat: a dangling symlink exists) unless
//     force; with force it may not be an input of the run nor a directory
//     holding one (compared by device and inode, the input's real path
//     walked up to /), and a file output never replaces a directory.
//     Everything is built in a new temporary sibling "FINAL.pq-tmp-XXXXXX"
//     (same file system: the last step is a rename), created under another
//     name, locked (flock, held until the end) and only then renamed to its
//     pq-tmp name, so a pq-tmp directory that is not locked belongs to a run
//     that died: such leftovers are removed (and counted, for a note),
//     except a resumable one (it holds the spec's resume marker: a journal).
//     The temporary directory is registered with common/cleanup.h, so a
//     signal (tools/ installs the handlers) removes it too.
//  2. Commit. The directory (or the file in it) is fsync'd and renamed onto
//     FINAL atomically against whatever appeared there meanwhile: without
//     force renameat2(RENAME_NOREPLACE), so a FINAL made by another run or
//     a user is never replaced (PQ_ERR_ARG); with force RENAME_EXCHANGE
//     after checking FINAL again (not an input, the kind it had), then the
//     old FINAL, now at the temporary name, is removed. The parent is
//     fsync'd. (A file system without renameat2 gets the same checks made
//     just before a plain rename.)
//  3. Abort (any error before commit): the temporary directory is removed,
//     unless the run keeps it for a later resume.
#ifndef PQ_OUTDIR_H
#define PQ_OUTDIR_H

#include <stddef.h>

#include "common/status.h"

#define PQ_OUTDIR_PATH_CAP 4096

typedef struct {
    const char *final;            // the output path
    int file;                     // one file (built as <tmp>/<basename of final>), else a directory
    int force;                    // replace an existing FINAL (never an input; a file never a directory)
    const char *const *inputs;    // paths the run reads (files or directories): FINAL may not be one
    int n_inputs;                 //   nor a directory holding one; borrowed until commit
    const char *resume_marker;    // a file name marking a resumable temporary directory, or NULL
} pq_outdir_spec;

typedef struct {
    pq_outdir_spec spec;
    char final[PQ_OUTDIR_PATH_CAP];
    char tmp[PQ_OUTDIR_PATH_CAP];    // the temporary directory, "" until created or adopted
    int lock_fd;                     // flock held on tmp, -1 if none
    int cleanup;                     // its common/cleanup.h handle, -1 if none
    int kept;                        // left in place by abort (resumable)
    int committed;
    int removed;                     // stale temporary directories of dead runs removed at begin
    char removed_first[PQ_OUTDIR_PATH_CAP];
} pq_outdir;

// Starts a new output as above. Errors: FINAL exists without force, is an
// input or holds one, is a directory for a file output (PQ_ERR_ARG naming
// it); its parent is missing or not writable (PQ_ERR_IO naming FINAL). On
// error nothing was created (stale leftovers may have been removed).
pq_status pq_outdir_begin(pq_outdir *d, const pq_outdir_spec *s);

// Resumable runs: the first temporary directory of FINAL holding the resume
// marker into tmp (*found 0: none); stale ones without it are removed as
// begin does (counted in d). PQ_ERR_IO if FINAL's parent cannot be listed.
pq_status pq_outdir_find_leftover(pq_outdir *d, const pq_outdir_spec *s, char *tmp, size_t cap, int *found);

// Continues building FINAL in tmp (a leftover found above): checks FINAL as
// begin does and locks tmp; a tmp another process holds is PQ_ERR_ARG
// ("another pq is writing it"). Commit, abort and keep work as after begin.
pq_status pq_outdir_adopt(pq_outdir *d, const pq_outdir_spec *s, const char *tmp);

// The path of `name` inside the temporary directory.
pq_status pq_outdir_path(const pq_outdir *d, const char *name, char *out, size_t cap);

// A file output: the path to write, which commit renames onto FINAL.
pq_status pq_outdir_file(const pq_outdir *d, char *out, size_t cap);

// Publishes the output as above. On error the temporary directory is still
// there (abort removes it) and FINAL is as it was.
pq_status pq_outdir_commit(pq_outdir *d);

// From now on abort leaves the temporary directory (a resumable run's), and
// a signal does too, printing `line` (what to do with it). NULL: not any
// more (abort and a signal remove it again).
void pq_outdir_keep(pq_outdir *d, const char *line);

// Removes the temporary directory unless committed or kept; releases the
// lock. NULL-safe; safe to call twice.
void pq_outdir_abort(pq_outdir *d);

#endif
