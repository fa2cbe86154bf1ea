// common/cleanup.h — what a process must still do when a signal ends it:
// remove the temporary outputs it was building, and say which mapped file
// a bus error came from.
//
// The library registers what it creates and maps (formats/outdir.c its
// temporary directories, formats/safetensors.c its mappings) and never
// installs a signal handler; tools/ does (tools/cli.c), and its handlers
// call the async-signal-safe functions marked below. The registry is fixed
// size (no allocation): a path that does not fit, or a full registry, is
// simply not registered (the run goes on without that safety net).
#ifndef PQ_CLEANUP_H
#define PQ_CLEANUP_H

#include <stddef.h>

#define PQ_CLEANUP_MAX_PATHS 32
#define PQ_CLEANUP_MAX_MAPS 1024

// Registers a temporary directory (of files only) to remove if a signal
// ends the process. Returns a handle >= 0, or -1 when it is not registered.
int pq_cleanup_add(const char *dir);

// The directory is gone or has become final: forget it. -1 is a no-op.
void pq_cleanup_drop(int handle);

// On a signal, keep the directory (a resumable run's) instead of removing
// it, and print `line` (copied; one line, without the newline) on stderr.
void pq_cleanup_keep(int handle, const char *line);

// Registers a file mapped at [addr, addr + len) and its path (borrowed: it
// must stay valid until the mapping is dropped). Returns a handle or -1.
int pq_cleanup_add_map(const void *addr, size_t len, const char *path);
void pq_cleanup_drop_map(int handle); // -1 is a no-op

// Async-signal-safe: the path of the registered mapping holding addr, or NULL.
const char *pq_cleanup_map_path(const void *addr);

// Async-signal-safe: removes every registered directory (its files, then
// the directory), or prints the line of a kept one. Safe to call twice.
void pq_cleanup_run(void);

#endif
