// formats/inspect.h — what `pq inspect` reports about a model directory or
// a safetensors file (single, sharded, .zst), as one library call: the
// architecture and parameter count from config.json, the quantization of a
// compressed-tensors checkpoint, every tensor in natural name order
// ("layers.2" before "layers.10"), the bytes per dtype, and each file's
// size on disk and uncompressed (with the size of a "<file>.zst" written
// next to an uncompressed one, as pq quantize --zstd does).
#ifndef PQ_INSPECT_H
#define PQ_INSPECT_H

#include "formats/config.h"
#include "formats/packed.h"
#include "formats/safetensors.h"

typedef struct {
    const char *path;             // borrowed from the report's pq_st
    unsigned long long disk, raw; // bytes on disk, bytes of the safetensors stream
    unsigned long long zst;       // "<path>.zst" next to an uncompressed file, 0 if none
} pq_inspect_file;

typedef struct {
    int has_config;               // a directory with a config.json
    pq_config cfg;                //   its contents
    long long params;             //   pq_config_param_count
    pq_packed_info quant;         //   quant.quantized: its quantization_config
    pq_st *st;                    // the tensors (owned)
    int *order;                   // [pq_st_count(st)] tensor indices in natural name order (owned)
    long long total_bytes, total_elems;
    long long dtype_bytes[PQ_DT_COUNT];
    pq_inspect_file *files;       // [pq_st_file_count(st)] (owned)
} pq_inspect_report;

// Opens path and fills r. Errors are those of the readers (a bad
// config.json, quantization_config or safetensors file, named); on error r
// holds nothing. Free with pq_inspect_free.
pq_status pq_inspect(const char *path, pq_inspect_report *r);
void pq_inspect_free(pq_inspect_report *r); // NULL-safe; leaves it zeroed

// Natural order of names: runs of digits compare by their value, the rest
// byte by byte ("a.2.b" < "a.10.b"); equal values with other spellings
// ("a.02" and "a.2") fall back to byte order. <0, 0, >0 as strcmp.
int pq_natural_cmp(const char *a, const char *b);

#endif
