// What one replica's groups have ever cached, for miss attribution (docs/design.md §7): every
// (group, block hash) key the block pool published, kept after the pool evicted it. The same hit
// finders that read the pool's index read this one, so the lookup on it is the hit the plan's own
// caching rules would give a cache that never evicted: the prefix a hybrid plan checkpointed in
// every group. What lies between the real hit and that prefix was lost to memory (`evicted`);
// what lies beyond it the plan never cached (`not_checkpointed`).
//
// Memory stays bounded: the record works in generations of `generation_keys` new keys; at the
// end of one, keys neither published during the last two generations nor still cached by the
// pool are forgotten (a forgotten key reads as never cached, so its tokens fall back to
// `not_checkpointed`). The shadow index only keeps a U-block alive for about one turnover of the
// pool, so a record of two pools' worth of recent keys covers what attribution asks.
#ifndef PREFIXSIM_SIM_KV_EVER_CACHED_INDEX_H_
#define PREFIXSIM_SIM_KV_EVER_CACHED_INDEX_H_

#include <cstdint>

#include "sim/kv/block_pool.h"
#include "sim/kv/prefix_index.h"

namespace prefixsim::kv {

class EverCachedIndex {
 public:
  // `pool` (not owned) is asked, when a generation ends, which keys it still caches.
  EverCachedIndex(const BlockPool* pool, int64_t generation_keys);

  // The pool published a block under `key` (hash ^ group salt) with verifier `tag`.
  void Add(uint64_t key, uint32_t tag);

  // The record as the hit finders read it.
  HitIndex hit_index() const { return HitIndex(&index_, &collisions_); }

  int64_t size() const { return static_cast<int64_t>(index_.size()); }
  int64_t forgotten() const { return forgotten_; }

 private:
  // Ends the current generation: forgets what the last two did not publish and the pool no
  // longer caches.
  void Age();

  const BlockPool* pool_;
  int64_t generation_keys_;
  // The entries' values are the generation that last published them (>= 1), so that a stale
  // entry is found by one pass over the table.
  PrefixIndex index_;
  int32_t generation_ = 1;
  int64_t added_this_generation_ = 0;
  int64_t forgotten_ = 0;
  mutable int64_t collisions_ = 0;
};

}  // namespace prefixsim::kv

#endif  // PREFIXSIM_SIM_KV_EVER_CACHED_INDEX_H_
