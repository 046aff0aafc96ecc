// A mirror of a block pool's prefix index, kept only by the pool's cache events (store: a block
// was published under a key; remove: a block's key was dropped). It is what a KV-aware router
// holds per replica (NVIDIA Dynamo's KV router and llm-d's precise prefix-cache scorer index the
// block hashes each worker reports): the router never reads the replica's pool, yet the same
// finders (docs/semantics.md §9) run on the mirror and give the replica's own hit
// (index_mirror_test).
#ifndef PREFIXSIM_SIM_KV_INDEX_MIRROR_H_
#define PREFIXSIM_SIM_KV_INDEX_MIRROR_H_

#include <cstdint>

#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/status.h"
#include "sim/kv/block_pool.h"
#include "sim/kv/prefix_index.h"

namespace prefixsim {
namespace kv {

class IndexMirror final : public CacheEventListener {
 public:
  // `max_entries`: the most blocks the mirrored pool can cache at once (its num_blocks).
  explicit IndexMirror(int64_t max_entries) : index_(max_entries) {}

  // The pool keeps duplicates (several blocks under one key), so the mirror counts them: a key
  // is hittable while at least one block is cached under it.
  void OnBlockStored(uint64_t key, uint32_t tag) override {
    PrefixIndex::Slot* slot = index_.Find(key);
    if (slot == nullptr) {
      index_.Insert(key, 1, tag);
    } else {
      PREFIXSIM_CHECK(slot->tag == tag);  // the pool refuses a different content under a key
      ++slot->block;
    }
  }
  void OnBlockRemoved(uint64_t key) override {
    PrefixIndex::Slot* slot = index_.Find(key);
    PREFIXSIM_CHECK(slot != nullptr && slot->block > 0);  // a remove follows its store
    if (--slot->block == 0) index_.Erase(slot);
  }

  // Lookups return the number of blocks cached under the key (> 0) or kNoBlock.
  HitIndex hit_index() const { return HitIndex(&index_, &collisions_); }
  size_t num_keys() const { return index_.size(); }
  // The mirror's table, for the pool's prefetches (kv::AttachIndexMirror).
  const PrefixIndex& index() const { return index_; }

 private:
  PrefixIndex index_;  // Slot::block holds the count
  mutable int64_t collisions_ = 0;
};

}  // namespace kv
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_KV_INDEX_MIRROR_H_
