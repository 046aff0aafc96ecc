// What a router asks of one replica's KV cache (routing.h): the prompt's hashes and lookups that
// register nothing. The fleet-wide ones are in fleet_lookup.cc.
#include "sim/kv/routing.h"

#include <algorithm>

#include "sim/kv/kv_cache_state.h"

namespace prefixsim::kv {

void HashPrompt(const KvCacheManager& manager, const Request& request,
                std::vector<HashPair>* hashes) {
  const KvCacheState& m = *manager.impl();
  hashes->clear();
  const int64_t h = m.coordinator().hash_block_size();
  HashCursor cursor;
  m.AdoptPromptHashes(request, hashes, &cursor);
  ExtendBlockHashes(request, h, request.prompt_tokens / h, &cursor, hashes);
}

int64_t PeekPromptHit(KvCacheManager& manager, const Request& request,
                      const std::vector<HashPair>& hashes, const HitIndex* index) {
  KvCacheState& m = *manager.impl();
  if (!m.caching()) return 0;
  const int64_t max_hit = request.prompt_tokens - 1;  // docs/semantics.md §9.1
  if (max_hit <= 0) return 0;
  KvCacheCoordinator& coord = m.coordinator();
  const int64_t nf =
      std::min<int64_t>(static_cast<int64_t>(hashes.size()), max_hit / coord.hash_block_size());
  return coord.FindLongestCacheHit(index != nullptr ? *index : m.pool().hit_index(), hashes.data(),
                                   nf, max_hit, coord.hit_alignment(), m.lookup_scratch());
}

int64_t PeekPrimaryOverlap(const KvCacheManager& manager, const Request& request,
                           const std::vector<HashPair>& hashes, const HitIndex* index_or_null) {
  const KvCacheState& m = *manager.impl();
  const int g = m.coordinator().primary_group();
  if (!m.caching() || g < 0) return 0;
  const HitIndex index = index_or_null != nullptr ? *index_or_null : m.pool().hit_index();
  const SingleTypeManager& group = m.coordinator().manager(g);
  const int64_t ratio = group.block_size() / m.coordinator().hash_block_size();
  const int64_t nb = static_cast<int64_t>(hashes.size()) / ratio;
  int64_t j = 0;
  while (j < nb && index.Lookup(g, group.BlockHash(hashes.data(), j)) != kNoBlock) ++j;
  return std::min(j * group.block_size(), request.prompt_tokens);
}

}  // namespace prefixsim::kv
