// What the fleet's routers ask of a replica's KV cache (sim/fleet/routers): lookups that register
// nothing and touch no block, on the cache or on a router's index of it (fleet_index.h), and the
// cache's store/remove events that keep such an index. Defined in routing.cc (one replica) and
// fleet_lookup.cc (every replica at once).
#ifndef PREFIXSIM_SIM_KV_ROUTING_H_
#define PREFIXSIM_SIM_KV_ROUTING_H_

#include <cstdint>
#include <vector>

#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/request.h"
#include "sim/kv/block_hasher.h"
#include "sim/kv/block_pool.h"
#include "sim/kv/fleet_index.h"

namespace prefixsim {
namespace kv {

// The prompt's block hashes at the plan's hash granularity H (equal for every manager of the same
// plan, so one chain serves a whole fleet). Takes Request::prompt_hashes where PrepareRequest
// left them.
void HashPrompt(const KvCacheManager& manager, const Request& request,
                std::vector<HashPair>* hashes);

// The hit (tokens) that the admission lookup (docs/semantics.md §9: the fixed point, the alignment
// to A, max_hit = prompt - 1) would give this prompt now, without registering it or touching a
// block; with `index`, the same lookup on that index (a router's view of the cache) instead of on
// the cache. 0 without prefix caching.
int64_t PeekPromptHit(KvCacheManager& manager, const Request& request,
                      const std::vector<HashPair>& hashes, const HitIndex* index = nullptr);

// PeekPromptHit for every replica of a fleet, read on the fleet's index: (*hits)[r] is what
// replica r's lookup would give. One coordinator serves all (the replicas run one plan), and
// walks full attention's blocks once for all the replicas
// (KvCacheCoordinator::FindLongestCacheHits); `one_walk` false looks each replica up on its own
// (the reference, fleet_lookup.cc).
void PeekPromptHits(KvCacheManager& any_replica, const Request& request,
                    const std::vector<HashPair>& hashes, const FleetIndex& index,
                    std::vector<int64_t>* hits, bool one_walk = true);

// What a hybrid-unaware router counts: the longest run of the primary group's blocks cached from
// the start, in tokens, with no other group, no alignment to A and no max_hit cap (on `index`
// if given). 0 without prefix caching.
int64_t PeekPrimaryOverlap(const KvCacheManager& manager, const Request& request,
                           const std::vector<HashPair>& hashes, const HitIndex* index = nullptr);

// PeekPrimaryOverlap for every replica, in one walk over the prompt's blocks on the fleet's
// index: the replicas still holding the run drop out one by one (`one_walk` false: one lookup
// per replica).
void PeekPrimaryOverlaps(const KvCacheManager& any_replica, const Request& request,
                         const std::vector<HashPair>& hashes, const FleetIndex& index,
                         std::vector<int64_t>* overlaps, bool one_walk = true);

// Sends the cache's store/remove events to `listener` from now on (null: none). Not owned; it
// must outlive the manager or be detached first.
void AttachCacheListener(KvCacheManager& manager, CacheEventListener* listener);

}  // namespace kv
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_KV_ROUTING_H_
