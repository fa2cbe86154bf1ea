// formats/tokenizer/bpe.h — the BPE model of a tokenizer.json: vocabulary, ranked
// merges, and the merge algorithm of the Hugging Face tokenizers library
// (models/bpe/word.rs merge_all), in O(n log n) for a word of n symbols: a
// linked list of symbols and a priority queue of candidate pairs keyed (rank,
// position) -- the word's initial pairs radix-sorted once, the pairs merges
// create in a min-heap -- with stale entries dropped when popped. Internal
// to formats/.
#ifndef PQ_BPE_H
#define PQ_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

// The largest token id pq accepts (real vocabularies are below 2^18).
#define PQ_BPE_MAX_ID ((1 << 22) - 1)

typedef struct pq_bpe pq_bpe;

// A growable array of token ids. Zero-initialise; free(v.p) when done.
typedef struct {
    int32_t *p;
    size_t n, cap;
} pq_ivec;

pq_status pq_ivec_push(pq_ivec *v, int32_t id);

// Per-call scratch memory for pq_bpe_encode_word (zero-initialise, reuse
// across words, release with pq_bpe_scratch_free). It also remembers the ids
// of recent short words (a direct-mapped cache, as the library keeps one):
// a word seen again is not merged again.
typedef struct {
    void *sym, *init, *heap, *cache;
    size_t sym_cap, heap_cap;
} pq_bpe_scratch;

void pq_bpe_scratch_free(pq_bpe_scratch *s);

// An empty model (no pieces, no merges, all options off).
pq_status pq_bpe_new(pq_bpe **out);
void pq_bpe_free(pq_bpe *b); // NULL-safe

// Adds vocabulary entry piece -> id (0 <= id <= PQ_BPE_MAX_ID). A piece given
// twice keeps the last id, as a JSON object does.
pq_status pq_bpe_add_piece(pq_bpe *b, const char *piece, size_t len, int32_t id);

// Adds the next merge (its rank is the number of merges added before it):
// left + right -> the piece left||right. PQ_ERR_FORMAT naming the piece when
// left, right or their concatenation is not in the vocabulary. A pair given
// twice keeps the later rank, as the tokenizers library does.
pq_status pq_bpe_add_merge(pq_bpe *b, const char *left, size_t llen, const char *right, size_t rlen);

// Options from the model section of tokenizer.json, set after the pieces
// were added. unk_token may be NULL (no unk: unknown characters are dropped);
// one that is not in the vocabulary fails encoding when it is needed, as in
// the library. byte_fallback uses the pieces <0x00>..<0xFF> that exist.
pq_status pq_bpe_set_options(pq_bpe *b, int byte_fallback, int fuse_unk, int ignore_merges, const char *unk_token);

// The id of piece, or -1.
int32_t pq_bpe_lookup(const pq_bpe *b, const char *piece, size_t len);
// The piece of id (NUL-terminated, borrowed, valid while b lives), or NULL;
// *len its length.
const char *pq_bpe_piece(const pq_bpe *b, int32_t id, size_t *len);
// 1 + the largest id in the vocabulary (0 when empty).
int32_t pq_bpe_vocab_size(const pq_bpe *b);
// The number of distinct pieces.
size_t pq_bpe_n_pieces(const pq_bpe *b);

// Tokenizes one pre-token word (valid UTF-8, len > 0) and appends its ids to
// out: characters missing from the vocabulary become <0xXX> byte pieces
// (byte_fallback) or unk (fused when fuse_unk), or are dropped when the model
// has neither, exactly as the library does.
pq_status pq_bpe_encode_word(const pq_bpe *b, const char *word, size_t len, pq_bpe_scratch *s, pq_ivec *out);

#endif
