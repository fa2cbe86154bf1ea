// formats/outdir.h — an output directory that appears whole or not at all.
//
// Every file goes into a temporary sibling "OUT.pq-tmp-XXXXXX" (same
// filesystem, so the final step is a rename); commit fsyncs the directory,
// moves an existing OUT aside (only with force), renames the temporary
// directory to OUT, fsyncs the parent and only then deletes the old OUT. A
// failure or an interruption at any point leaves OUT as it was: absent, or
// the previous one.
#ifndef PQ_OUTDIR_H
#define PQ_OUTDIR_H

#include <stddef.h>

#include "common/status.h"

#define PQ_OUTDIR_PATH_CAP 4096

typedef struct {
    char final[PQ_OUTDIR_PATH_CAP];
    char tmp[PQ_OUTDIR_PATH_CAP];   // "" until created
    int committed;
} pq_outdir;

// Starts building `final`. An existing final without force is PQ_ERR_ARG;
// a parent that is missing, not a directory or not writable is PQ_ERR_IO
// naming final. On error nothing was created.
pq_status pq_outdir_begin(pq_outdir *d, const char *final, int force);

// The path of `name` inside the temporary directory.
pq_status pq_outdir_path(const pq_outdir *d, const char *name, char *out, size_t cap);

// Publishes the directory as described above. On error the temporary
// directory is still there (pq_outdir_abort removes it) and final is as it was.
pq_status pq_outdir_commit(pq_outdir *d);

// Removes the temporary directory and its contents unless committed. NULL-safe.
void pq_outdir_abort(pq_outdir *d);

// Resumable runs (pq quantize --method gptq --resume): an interrupted run's
// temporary directory stays behind, with a marker file in it (its journal)
// saying it can be continued.
//
// The first, by name, temporary directory of final ("final.pq-tmp-XXXXXX")
// holding a file named `marker`, into tmp; *found is 0 when there is none.
// PQ_ERR_IO if final's parent cannot be listed.
pq_status pq_outdir_find_leftover(const char *final, const char *marker, char *tmp, size_t cap, int *found);

// Continues building final in tmp, a temporary directory of final (as
// pq_outdir_find_leftover finds). An existing final without force is
// PQ_ERR_ARG. Commit and abort then work as for pq_outdir_begin.
pq_status pq_outdir_adopt(pq_outdir *d, const char *final, const char *tmp, int force);

#endif
