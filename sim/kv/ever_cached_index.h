// What one replica's groups have ever cached, for miss attribution (docs/design.md §7): the block
// pool's index, and a record of every (group, block hash) key the pool evicted. The same hit
// finders that read the pool's index read the two, so the lookup on them is the hit the plan's
// own caching rules would give a cache that never evicted: the prefix a hybrid plan checkpointed
// in every group. What lies between the real hit and that prefix was lost to memory (`evicted`);
// what lies beyond it the plan never cached. A second record keeps the keys a sparse retention
// interval left unpublished where dense retention would have published them: the lookup on all
// three is the prefix dense retention would have checkpointed, and what lies between the two
// lookups the retention interval dropped (`sparse_retention`); what lies beyond, no retention
// caches (`not_checkpointed`). Only evictions and mask drops write to the records, so a pool that
// never fills under dense retention pays nothing.
//
// Memory stays bounded: each record keeps two generations of `generation_keys` new keys each, in
// two tables; when the current one is full, the older is dropped whole and a new one begins (a
// forgotten key reads as never cached, so its tokens fall back to the next cause out).
// The shadow index keeps a U-block alive for about one turnover of the pool, so one to two pools'
// worth of recent keys cover what attribution asks.
#ifndef PREFIXSIM_SIM_KV_EVER_CACHED_INDEX_H_
#define PREFIXSIM_SIM_KV_EVER_CACHED_INDEX_H_

#include <array>
#include <cstdint>

#include "sim/kv/block_pool.h"
#include "sim/kv/prefix_index.h"

namespace prefixsim::kv {

class EverCachedIndex final : public EvictionObserver {
 public:
  // `pool` (not owned) outlives the record.
  EverCachedIndex(const BlockPool* pool, int64_t generation_keys);
  EverCachedIndex(const EverCachedIndex&) = delete;  // fallbacks_ points into it
  EverCachedIndex& operator=(const EverCachedIndex&) = delete;

  // The pool evicted its block under `key` (hash ^ group salt) with verifier `tag`.
  void Add(uint64_t key, uint32_t tag) { evicted_.Add(key, tag, generation_keys_); }
  void OnEvicted(int group, const HashPair& h) override {
    Add(h.hash ^ GroupSalt(group), GroupTag(group, h));
  }
  void OnRetentionDropped(int group, const HashPair& h) override {
    dropped_.Add(h.hash ^ GroupSalt(group), GroupTag(group, h), generation_keys_);
  }

  // The pool's index and the record of evictions, as the hit finders read them.
  HitIndex hit_index() const;
  // ... and the record of what the retention interval dropped: dense retention's cache.
  HitIndex dense_hit_index() const;

  int64_t size() const { return evicted_.size() + dropped_.size(); }
  int64_t forgotten() const { return evicted_.forgotten + dropped_.forgotten; }

 private:
  struct Generations {
    Generations() : current(1024), previous(1024) {}
    void Add(uint64_t key, uint32_t tag, int64_t generation_keys);
    int64_t size() const { return static_cast<int64_t>(current.size() + previous.size()); }
    // Dropping a generation is dropping a table: no pass over the keys, no tombstones.
    PrefixIndex current, previous;
    int64_t forgotten = 0;
  };

  const BlockPool* pool_;
  int64_t generation_keys_;
  Generations evicted_, dropped_;
  std::array<const PrefixIndex*, 4> fallbacks_;
  mutable int64_t collisions_ = 0;
};

}  // namespace prefixsim::kv

#endif  // PREFIXSIM_SIM_KV_EVER_CACHED_INDEX_H_
