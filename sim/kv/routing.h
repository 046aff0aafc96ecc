// What the fleet's routers ask of a replica's KV cache (sim/fleet/routers): lookups that register
// nothing and touch no block, and a mirror of the cache's index fed by its events. Defined in
// kv_cache_manager.cc.
#ifndef PREFIXSIM_SIM_KV_ROUTING_H_
#define PREFIXSIM_SIM_KV_ROUTING_H_

#include <cstdint>
#include <vector>

#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/request.h"
#include "sim/kv/block_hasher.h"

namespace prefixsim {
namespace kv {

class IndexMirror;

// The prompt's block hashes at the plan's hash granularity H (equal for every manager of the same
// plan, so one chain serves a whole fleet). Takes Request::prompt_hashes where PrepareRequest
// left them.
void HashPrompt(const KvCacheManager& manager, const Request& request,
                std::vector<HashPair>* hashes);

// The hit (tokens) that the admission lookup (docs/semantics.md §9: the fixed point, the alignment
// to A, max_hit = prompt - 1) would give this prompt now, without registering it or touching a
// block; with `mirror`, the same lookup on that mirror of the cache instead of on the cache. 0
// without prefix caching.
int64_t PeekPromptHit(KvCacheManager& manager, const Request& request,
                      const std::vector<HashPair>& hashes, const IndexMirror* mirror = nullptr);

// What a hybrid-unaware router counts: the longest run of the primary group's blocks cached from
// the start, in tokens, with no other group, no alignment to A and no max_hit cap (on `mirror`
// if given). 0 without prefix caching.
int64_t PeekPrimaryOverlap(const KvCacheManager& manager, const Request& request,
                           const std::vector<HashPair>& hashes,
                           const IndexMirror* mirror = nullptr);

// Feeds `mirror` with the cache's store/remove events from now on (null: none); the pool also
// prefetches the mirror's slots where it prefetches its own. Not owned; it must outlive the
// manager or be detached first.
void AttachIndexMirror(KvCacheManager& manager, IndexMirror* mirror);

}  // namespace kv
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_KV_ROUTING_H_
