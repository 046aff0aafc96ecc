// Chained block hashes at the hash granularity H (docs/semantics.md §8.1).
//
// Every full H-token chunk of a request's tokens (prompt, then accepted outputs) gets one chained
// hash: hash_i = F(hash_{i-1}, canonical content of chunk i), with the request's namespace key
// (cache_salt / LoRA) folded into chunk 0 only, as vLLM puts cache_salt into the first block's
// extra keys; the chain carries it into every later hash. Coarser groups (B = k·H) read
// hashes[(j+1)·k − 1], the last fine hash inside their block (docs/semantics.md §8.1).
//
// The canonical content of a chunk is a list of pieces: a maximal run of literal tokens (hashed
// token by token, whatever segments they came from), or a maximal run of virtual content
// (content_id, offset, length) where adjacent segments of one content_id with contiguous offsets
// are merged. So a chunk of hash-id content costs O(segments), not O(tokens), and equal content
// always hashes equally.
//
// Collisions: every chunk carries two independent 64-bit values (`hash`, the index key, and
// `check`, a second chain with other constants and seed). The block pool stores both with each
// cached block and verifies both on every hit and every insert (see block_pool.h), so a 64-bit
// collision of `hash` is detected, counted, and handled as a miss; a silent wrong hit needs a
// simultaneous collision of both 64-bit chains (probability ~2^-128 per pair).
#ifndef PREFIXSIM_SIM_KV_BLOCK_HASHER_H_
#define PREFIXSIM_SIM_KV_BLOCK_HASHER_H_

#include <cstdint>
#include <vector>

#include "prefixsim/request.h"

namespace prefixsim {
namespace kv {

using HashPair = ChunkHash;

// Where the hasher stopped in a request's content stream.
struct HashCursor {
  int64_t segment = 0;         // index into the virtual list prompt ++ output ++ generated
  uint32_t offset_in_seg = 0;  // tokens of that segment already consumed
  int64_t tokens = 0;          // tokens hashed so far (a multiple of H)
};

// Content id of the generated (unknown) outputs of a request: never 0 (0 is literal content).
uint64_t GeneratedContentId(uint64_t request_id);

// Appends chained hashes to `hashes` until it holds `num_chunks` hashes of `chunk_tokens` tokens
// each. REQUIRES: hashes->size() == cursor->tokens / chunk_tokens; the request's content covers
// the tokens (outputs beyond Request::output are generated content, unbounded).
void ExtendBlockHashes(const Request& request, int64_t chunk_tokens, int64_t num_chunks,
                       HashCursor* cursor, std::vector<HashPair>* hashes);

}  // namespace kv
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_KV_BLOCK_HASHER_H_
