// common/version.h — the pq release, printed by `pq version` and recorded in
// the provenance of every checkpoint pq writes.
#ifndef PQ_VERSION_H
#define PQ_VERSION_H

#define PQ_VERSION "0.1.0"

#endif
