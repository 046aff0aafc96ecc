// What one replica's groups have ever cached, for miss attribution (docs/design.md §7): the block
// pool's index, and a record of every (group, block hash) key the pool evicted. The same hit
// finders that read the pool's index read the two, so the lookup on them is the hit the plan's
// own caching rules would give a cache that never evicted: the prefix a hybrid plan checkpointed
// in every group. What lies between the real hit and that prefix was lost to memory (`evicted`);
// what lies beyond it the plan never cached (`not_checkpointed`). Only evictions write to the
// record, so a pool that never fills pays nothing.
//
// Memory stays bounded: the record keeps two generations of `generation_keys` newly evicted keys
// each, in two tables; when the current one is full, the older is dropped whole and a new one
// begins (a forgotten key reads as never cached, so its tokens fall back to `not_checkpointed`).
// The shadow index keeps a U-block alive for about one turnover of the pool, so one to two pools'
// worth of recent evictions cover what attribution asks.
#ifndef PREFIXSIM_SIM_KV_EVER_CACHED_INDEX_H_
#define PREFIXSIM_SIM_KV_EVER_CACHED_INDEX_H_

#include <cstdint>

#include "sim/kv/block_pool.h"
#include "sim/kv/prefix_index.h"

namespace prefixsim::kv {

class EverCachedIndex final : public EvictionObserver {
 public:
  // `pool` (not owned) outlives the record.
  EverCachedIndex(const BlockPool* pool, int64_t generation_keys);

  // The pool evicted its block under `key` (hash ^ group salt) with verifier `tag`.
  void Add(uint64_t key, uint32_t tag);
  void OnEvicted(int group, const HashPair& h) override {
    Add(h.hash ^ GroupSalt(group), GroupTag(group, h));
  }

  // The pool's index and the record, as the hit finders read them.
  HitIndex hit_index() const { return pool_->hit_index_with(&current_, &previous_, &collisions_); }

  int64_t size() const { return static_cast<int64_t>(current_.size() + previous_.size()); }
  int64_t forgotten() const { return forgotten_; }

 private:
  const BlockPool* pool_;
  int64_t generation_keys_;
  // Dropping a generation is dropping a table: no pass over the keys, no tombstones.
  PrefixIndex current_, previous_;
  int64_t forgotten_ = 0;
  mutable int64_t collisions_ = 0;
};

}  // namespace prefixsim::kv

#endif  // PREFIXSIM_SIM_KV_EVER_CACHED_INDEX_H_
