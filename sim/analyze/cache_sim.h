// Idealized block caches for the capacity curve of `prefixsim analyze`: one cache of C blocks at
// the analysis granularity, no concurrency. A request's hit is its leading run of cached blocks,
// at most `max_hit_blocks` (the L-1 cap in blocks); then all its full blocks are inserted or
// touched. Partial last blocks are never inserted: under the L-1 cap they can never hit.
#ifndef PREFIXSIM_SIM_ANALYZE_CACHE_SIM_H_
#define PREFIXSIM_SIM_ANALYZE_CACHE_SIM_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace prefixsim::analyze_internal {

// The full blocks of every request, in trace order, as dense block ids (0 .. num_ids-1). Block j
// of a request sits at prefix position j (block ids are chained, so a block always has the same
// position).
struct BlockSequence {
  uint32_t num_ids = 0;
  std::vector<uint32_t> blocks;          // all requests' full blocks, concatenated
  std::vector<uint64_t> request_begin;   // size requests + 1: request r is [begin[r], begin[r+1])
  std::vector<uint32_t> max_hit_blocks;  // per request: floor((L-1) / block_tokens)

  void AddRequest(const std::vector<uint32_t>& full_blocks, uint32_t max_hit);
  size_t requests() const { return max_hit_blocks.size(); }
};

// Sum over requests of the hit blocks under LRU. Blocks of one request are touched together;
// among them the deeper ones are evicted first (as vLLM frees a request's blocks tail first).
int64_t SimulateLru(const BlockSequence& seq, int64_t capacity_blocks);

// Next use of every entry of seq.blocks: the index of the next request that holds the same
// block within its L-1 cap (where it could hit), or UINT32_MAX if none.
std::vector<uint32_t> ComputeNextUse(const BlockSequence& seq);

// Sum over requests of the hit blocks under the offline optimum (Belady): when the cache is full,
// the block whose next use is furthest in the future is evicted (ties: the deeper block), and a
// block that would itself be that victim is not inserted (bypass).
int64_t SimulateBelady(const BlockSequence& seq, const std::vector<uint32_t>& next_use,
                       int64_t capacity_blocks);

}  // namespace prefixsim::analyze_internal

#endif  // PREFIXSIM_SIM_ANALYZE_CACHE_SIM_H_
