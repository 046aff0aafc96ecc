// The fleet's index of its replicas' caches: one table from key (group, block hash) to the set of
// replicas holding a block under it, kept only by the replicas' store/remove events
// (CacheEventListener). It is what a KV-aware router holds (NVIDIA Dynamo's KV router and llm-d's
// precise prefix-cache scorer index the block hashes every worker reports, per worker): the
// router never reads a replica's pool, yet the replica's own finders (docs/semantics.md §9) run on
// it through hit_index(replica) and give that replica's hit (router_view_test). One table for the
// whole fleet, not one per replica: the replicas' lookups of one prompt probe the same slots, so
// after the first replica they hit the CPU's caches, and a key cached on every replica is stored
// once.
#ifndef PREFIXSIM_SIM_KV_FLEET_INDEX_H_
#define PREFIXSIM_SIM_KV_FLEET_INDEX_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "sim/kv/block_pool.h"
#include "sim/kv/prefix_index.h"

namespace prefixsim {
namespace kv {

class FleetIndex {
 public:
  explicit FleetIndex(int num_replicas);

  // `replica` published a block under `key`. A pool may hold several blocks under one key
  // (vLLM does not de-duplicate), so each store is counted and the key stays cached for the
  // replica until as many removes have come.
  void Store(int replica, uint64_t key, uint32_t tag);
  // `replica` dropped a block's key. Returns false, changing nothing, when the index holds no
  // store of the replica under the key: a view that loses events (a lost store, then its
  // remove) sees this; an exact feed never does.
  bool Remove(int replica, uint64_t key);

  // Drops `key` for every replica.
  void Erase(uint64_t key);

  // Lookups for one replica (docs/semantics.md §9 finders read this).
  HitIndex hit_index(int replica) const {
    return HitIndex(&table_, &collisions_, rows_.data(), words_, replica);
  }
  // Hints the CPU to fetch the row of replicas of `key`, if its slot names one (a slot fetched
  // since Prefetch: the row is a second access that depends on it).
  void PrefetchRow(uint64_t key) const {
    const PrefixIndex::Slot* slot = table_.Find(key);
    if (slot != nullptr) __builtin_prefetch(Row(*slot));
  }
  // Whether `replica` holds a block under `key`.
  bool Holds(int replica, uint64_t key) const;
  // The replicas holding a block under (group, h): a bitset of words() words, bit i for replica
  // i; null when none does (or a collision, counted: the key holds another content).
  const uint64_t* Holders(int group, const HashPair& h) const {
    const PrefixIndex::Slot* slot = table_.Find(h.hash ^ GroupSalt(group));
    if (slot == nullptr) return nullptr;
    if (slot->tag != GroupTag(group, h)) {
      ++collisions_;
      return nullptr;
    }
    return Row(*slot);
  }
  int words() const { return words_; }
  int num_replicas() const { return num_replicas_; }
  // The table, for the pools' prefetches of the slots their events will touch.
  const PrefixIndex& table() const { return table_; }
  size_t num_keys() const { return table_.size(); }
  // Stores and lookups whose tag differed from the key's (a 64-bit key collision between two
  // contents): ignored, so the replica's block is not seen (a missed hit at worst).
  int64_t collisions() const { return collisions_; }

 private:
  uint64_t* Row(const PrefixIndex::Slot& slot) {
    return &rows_[static_cast<size_t>(slot.block - 1) * words_];
  }
  const uint64_t* Row(const PrefixIndex::Slot& slot) const {
    return &rows_[static_cast<size_t>(slot.block - 1) * words_];
  }

  int num_replicas_;
  int words_;                   // 64-bit words per row
  PrefixIndex table_;           // key -> 1 + row
  std::vector<uint64_t> rows_;  // row r: words_ words, bit i = replica i holds the key
  std::vector<int32_t> free_rows_;
  // Stores beyond the first of one replica under one key: (key, replica) -> count. Rare (two
  // requests computing the same block at once).
  absl::flat_hash_map<std::pair<uint64_t, int>, int32_t> extra_;
  mutable int64_t collisions_ = 0;
};

}  // namespace kv
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_KV_FLEET_INDEX_H_
