// The request: the one value type that crosses from a trace reader to the engine.
#ifndef PREFIXSIM_REQUEST_H_
#define PREFIXSIM_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

namespace prefixsim {

// A run of token content. Traces name content in two ways, and a request mixes them freely:
//  * literal tokens (token-level traces): `content_id == kLiteralContent`, and the tokens are
//    Request::literal_tokens[offset, offset + length);
//  * virtual content (hash-id traces, generated outputs): tokens [offset, offset + length) of the
//    content stream named `content_id`. The same (content_id, offset) is the same token
//    wherever it appears, so a trace block id expands to identical content at any block size.
// Readers keep segments canonical: adjacent virtual segments of one content_id with contiguous
// offsets are merged, so equal content always has one representation.
struct ContentSegment {
  static constexpr uint64_t kLiteralContent = 0;
  uint64_t content_id = kLiteralContent;
  uint32_t offset = 0;
  uint32_t length = 0;
};

// The chained hash of one chunk of a request's tokens (vLLM's block hash chain).
struct ChunkHash {
  uint64_t hash = 0;   // index key (before mixing in the group id)
  uint64_t check = 0;  // independent verifier
  bool operator==(const ChunkHash& o) const { return hash == o.hash && check == o.check; }
};

// A prompt's chunk hashes, computed ahead of the engine (KvCacheManager::PrepareRequest, run by
// the read-ahead thread) so that the simulation thread need not. Readers leave it empty.
struct PromptHashes {
  int64_t chunk_tokens = 0;       // H the hashes were computed at; 0: none
  std::vector<ChunkHash> hashes;  // chunks [0, hashes.size()) of chunk_tokens tokens
  int64_t next_segment = 0;       // where the hasher stopped (its cursor, to resume)
  uint32_t next_offset_in_segment = 0;
};

struct Request {
  uint64_t id = 0;            // position in the trace, from 0
  int64_t arrival_ns = 0;     // simulated arrival time
  int64_t prompt_tokens = 0;  // == sum of prompt segment lengths
  int64_t output_tokens = 0;  // tokens to generate
  // Prompt content, covering exactly prompt_tokens tokens.
  std::vector<ContentSegment> prompt;
  // Known output content (e.g. output_token_ids), covering at most output_tokens tokens; the
  // engine generates unique content for the rest.
  std::vector<ContentSegment> output;
  std::vector<uint32_t> literal_tokens;  // storage for literal segments
  // Namespace for prefix hashing (cache_salt, LoRA name): requests with different namespaces
  // never share cached blocks. 0 means none.
  uint64_t namespace_key = 0;
  std::string session_id;  // conversation / chat id if the trace has one
  // Accepted draft tokens per verification step, if the trace carries them (acceptance "trace").
  std::vector<int32_t> accepted_lengths;
  // Not from the trace: work done ahead for the engine (see PromptHashes).
  PromptHashes prompt_hashes;
};

}  // namespace prefixsim

#endif  // PREFIXSIM_REQUEST_H_
