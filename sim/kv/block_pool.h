// The block pool (docs/semantics.md §8.2): one shared pool of block ids for every KV cache group,
// the null block (id 0), reference counts, the free queue in vLLM's order, and the prefix index.
//
// Free queue: a ring of block ids in queue order, each free block's record holding its position,
// so the next blocks to allocate are known without chasing links (their records are loaded ahead)
// and taking a block out of the middle (a cache hit on a free block) is one store: its entry
// becomes a hole, skipped when the head reaches it; holes are squeezed out when the ring fills.
// The queue starts in id order; the blocks never allocated yet are not written into it but kept
// as a run [fresh_, num_blocks) at one place of the ring (fresh_position_), and get their record
// when first allocated, so a pool costs memory for the blocks it has used: a fleet of hundreds of
// replicas that each use a part of their pool stays small. Blocks whose count drops to 0 go to
// the FRONT when they carry no
// hash (reused first, LIFO) and to the BACK when they are cached (LRU by time of free).
// Allocation and eviction always take the head. Callers free a request's blocks tail first
// (KvCacheCoordinator::FreeAll does).
// [inferred: the one-by-one prepend of unhashed blocks (LIFO); it cannot change a hit rate.]
//
// Prefix index: key = hash XOR a per-group salt, mapped to the first of the blocks cached under
// that (hash, group) (duplicates are kept in an intrusive list, vLLM does not de-duplicate; a
// lookup returns the earliest cached one, like vLLM's dict order). Each cached block stores its
// full (hash, check, group) and the position of its index slot, and the slot a 32-bit tag of
// (check, group). Lookup verifies
// the key and the tag (96 bits), Cache verifies the full 128-bit pair and the group. A mismatch
// is a collision: it is counted (collisions()), a lookup treats it as a miss and Cache refuses to
// publish the block, so a collision can cost a hit but never produce a wrong one (a wrong hit
// needs a 64-bit and a 32-bit collision at once, ~2^-96 per pair of blocks).
#ifndef PREFIXSIM_SIM_KV_BLOCK_POOL_H_
#define PREFIXSIM_SIM_KV_BLOCK_POOL_H_

#include <array>
#include <cstdint>
#include <vector>

#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/kv_event_sink.h"
#include "sim/kv/block_hasher.h"
#include "sim/kv/prefix_index.h"
#include "sim/util/big_array.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace kv {

using BlockId = int32_t;
inline constexpr BlockId kNullBlock = 0;
inline constexpr BlockId kNoBlock = -1;

// Index keys: a block hash salted with its group, and a 32-bit verifier of (check, group).
constexpr uint64_t ComputeGroupSalt(int group) {
  uint64_t x = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(group + 1);
  x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ULL;
  return x ^ (x >> 29);
}
// Every publish, eviction and lookup salts a key: the salts of the first groups are a table.
inline constexpr int kSaltTableSize = 64;
inline constexpr auto kGroupSalts = [] {
  std::array<uint64_t, kSaltTableSize> t{};
  for (int g = 0; g < kSaltTableSize; ++g) t[g] = ComputeGroupSalt(g);
  return t;
}();
inline uint64_t GroupSalt(int group) {
  return static_cast<unsigned>(group) < kSaltTableSize ? kGroupSalts[group]
                                                       : ComputeGroupSalt(group);
}
inline uint32_t GroupTag(int group, const HashPair& h) {
  return static_cast<uint32_t>(h.check ^ (h.check >> 32) ^ GroupSalt(group));
}

// What hit finding reads (docs/semantics.md §9): a prefix index keyed by (group, block hash). It is
// the block pool's own index, or the fleet's index of every replica's cache kept by the pools'
// cache events (a router's view, fleet_index.h), read for one replica; the same finders run on
// both. Lookup returns a positive value (the pool: the first block cached under the key) or
// kNoBlock.
// Told of every block the pool evicts, with its group and hash, and of every block a sparse
// retention interval left unpublished that dense retention would have published: miss
// attribution's records of what a cache computed and lost (ever_cached_index.h, shadow_index.h).
class EvictionObserver {
 public:
  virtual ~EvictionObserver() = default;
  virtual void OnEvicted(int group, const HashPair& h) = 0;
  virtual void OnRetentionDropped(int /*group*/, const HashPair& /*h*/) {}
};

class HitIndex {
 public:
  HitIndex(const PrefixIndex* index, int64_t* collisions)
      : index_(index), collisions_(collisions) {}
  // `index`, then the `num_fallbacks` tables of `fallbacks` in order for the keys it has no entry
  // for (the pool's index and miss attribution's records of what it evicted and what a retention
  // interval dropped, ever_cached_index.h).
  HitIndex(const PrefixIndex* index, const PrefixIndex* const* fallbacks, int num_fallbacks,
           int64_t* collisions)
      : index_(index),
        fallbacks_(fallbacks),
        num_fallbacks_(num_fallbacks),
        collisions_(collisions) {}
  // The fleet's index read for one replica: an entry's value is a row of `replica_rows` (value
  // 1 + row, each row a bitset of the replicas holding the key), and a key counts as cached only
  // where `replica`'s bit is set.
  HitIndex(const PrefixIndex* index, int64_t* collisions, const uint64_t* replica_rows,
           int words_per_row, int replica)
      : index_(index),
        collisions_(collisions),
        rows_(replica_rows != nullptr ? replica_rows + replica / 64 : nullptr),
        words_per_row_(words_per_row),
        bit_(uint64_t{1} << (replica % 64)) {}

  BlockId Lookup(int group, const HashPair& h) const {
    const uint64_t key = h.hash ^ GroupSalt(group);
    const PrefixIndex::Slot* slot = index_->Find(key);
    for (int f = 0; slot == nullptr && f < num_fallbacks_; ++f) slot = fallbacks_[f]->Find(key);
    if (slot == nullptr) return kNoBlock;
    // The slot carries the verifier, so a hit reads one slot only. Equal key and tag mean equal
    // (hash, group) and 32 more bits of the check value.
    if (slot->tag != GroupTag(group, h)) {
      ++*collisions_;
      return kNoBlock;
    }
    if (rows_ != nullptr &&
        (rows_[static_cast<size_t>(slot->block - 1) * words_per_row_] & bit_) == 0) {
      return kNoBlock;
    }
    return slot->block;
  }
  // Hints the CPU to fetch the slot of (group, h) (lookups of a chain are independent).
  void Prefetch(int group, const HashPair& h) const { index_->Prefetch(h.hash ^ GroupSalt(group)); }

 private:
  const PrefixIndex* index_;
  const PrefixIndex* const* fallbacks_ = nullptr;
  int num_fallbacks_ = 0;
  int64_t* collisions_;
  const uint64_t* rows_ = nullptr;  // the replica's word of row 0
  size_t words_per_row_ = 0;
  uint64_t bit_ = 0;
};

class BlockPool {
 public:
  explicit BlockPool(int64_t num_blocks);

  int64_t num_blocks() const { return num_blocks_; }
  int64_t num_free() const { return num_free_; }

  // The pool's prefix index as hit finding reads it.
  HitIndex hit_index() const { return HitIndex(&index_, &collisions_); }
  // The block cached under (group, h), or kNoBlock.
  BlockId Lookup(int group, const HashPair& h) const { return hit_index().Lookup(group, h); }

  // `listener` receives a store event for every block published and a remove event for every
  // block whose hash is dropped (evicted or re-keyed), keyed like the index. Null: none. Not
  // owned.
  void set_listener(CacheEventListener* listener) { listener_ = listener; }

  // `sink` receives the same stores and removes with their group and full hash (an exporter of
  // vLLM's KV events, kv_event_sink.h). Null: none. Not owned.
  void set_event_sink(KvEventSink* sink) { event_sink_ = sink; }

  // `observer` is told of every block evicted. Null: none. Not owned.
  void set_eviction_observer(EvictionObserver* observer) { eviction_observer_ = observer; }
  // Whether anyone is told of the blocks a retention mask drops (NoteRetentionDropped).
  bool observes_retention_drops() const { return eviction_observer_ != nullptr; }
  // A group's caching left block `h` unpublished under the plan's retention interval, where
  // dense retention would have published it.
  void NoteRetentionDropped(int group, const HashPair& h) const {
    if (eviction_observer_ != nullptr) eviction_observer_->OnRetentionDropped(group, h);
  }
  // The pool's index, then `fallbacks` for the keys it has no entry for.
  HitIndex hit_index_with(const PrefixIndex* const* fallbacks, int num_fallbacks,
                          int64_t* collisions) const {
    return HitIndex(&index_, fallbacks, num_fallbacks, collisions);
  }
  KvEventSink* event_sink() const { return event_sink_; }

  // A cache hit takes a reference: a free block leaves the free queue.
  void Touch(BlockId b) {
    PREFIXSIM_DCHECK(b > 0 && b < num_blocks_);
    if (meta_[b].ref == 0) Unlink(b);
    ++meta_[b].ref;
  }

  // Pops the head of the free queue, evicting its hash if it has one; ref count 1.
  // REQUIRES: num_free() > 0.
  BlockId Allocate();

  // Drops one reference; at 0 the block rejoins the free queue (front if unhashed, back if
  // cached). The null block is ignored.
  void Free(BlockId b);

  // Publishes block b (in use, uncached) under (group, h). Returns false (and counts a
  // collision) if a different content already owns the key.
  bool Cache(BlockId b, int group, const HashPair& h);

  // Cache hints, no effect on state. The pool's tables are far larger than the CPU caches and
  // the operations of a step touch them at random places; issuing the loads of a batch first
  // (every group's publish, a request's frees) overlaps their misses.
  void PrefetchPublish(BlockId b, int group, const HashPair& h) const {
    __builtin_prefetch(&meta_[b]);
    const uint64_t key = h.hash ^ GroupSalt(group);
    index_.Prefetch(key);
  }
  void PrefetchFree(BlockId b) const { __builtin_prefetch(&meta_[b]); }

  // Drops the key of an in-use cached block so it can be re-keyed (a partial block that grew,
  // docs/semantics.md §8.2 cache_full_blocks "re-keyed"). Not an eviction.
  void Uncache(BlockId b);

  // Blocks [1, num_ever_allocated()) have been allocated at least once; the accessors below
  // REQUIRE such a block (the others have no record yet).
  int64_t num_ever_allocated() const { return fresh_; }
  bool is_cached(BlockId b) const { return meta_[b].group >= 0; }
  int32_t ref(BlockId b) const { return meta_[b].ref; }
  int cached_group(BlockId b) const { return meta_[b].group; }
  const HashPair& cached_hash(BlockId b) const { return meta_[b].hash; }
  int64_t evictions() const { return evictions_; }
  int64_t collisions() const { return collisions_; }
  int64_t num_cached_entries() const { return num_cached_; }
  // LRU clock for the shadow index (shadow_index.h): every cached block that rejoins the free
  // queue gets the next stamp; the horizon is the largest stamp evicted so far. A cached-free
  // block is still cached iff its stamp > horizon (cached blocks leave the queue in stamp order).
  int64_t free_clock() const { return free_clock_; }
  int64_t eviction_horizon() const { return eviction_horizon_; }

  // Free queue order, head first (tests and the invariant checker).
  std::vector<BlockId> FreeQueue() const;
  // Aborts unless the pool's own structures are consistent (queue links, counts, index).
  void CheckInvariants() const;

  static uint32_t Tag(int group, const HashPair& h) { return GroupTag(group, h); }

 private:
  static constexpr int64_t kNotQueued = INT64_MIN;
  static constexpr BlockId kHole = kNoBlock;
  void Unlink(BlockId b) {
    ring_[static_cast<uint64_t>(meta_[b].queue_position) & ring_mask_] = kHole;
    meta_[b].queue_position = kNotQueued;
    --num_free_;
  }
  // Rewrites the queue's entries without holes, in order, from ring_front_.
  void SqueezeRing();
  void PushBack(BlockId b);
  void PushFront(BlockId b);
  void Evict(BlockId b);
  void RemoveFromIndex(BlockId b);

  int64_t num_blocks_;
  // The never-allocated blocks [fresh_, num_blocks_): free, uncached, no record written yet. In
  // queue order they sit between the ring's entries before fresh_position_ (blocks freed to the
  // front) and those from it on (blocks freed to the back): ring_front_ <= fresh_position_ <=
  // ring_back_ while any remain.
  BlockId fresh_ = 1;
  int64_t fresh_position_ = 0;
  // One record per block, so that the operations on a cold block (an
  // eviction at the queue head, a free, a publish) touch one or two cache lines, not seven.
  struct Meta {
    HashPair hash;                        // valid while cached
    int64_t queue_position = kNotQueued;  // of a free block: its place in ring_ (not masked)
    int32_t ref = 0;
    int32_t group = -1;                                // -1: not cached
    BlockId dup_prev = kNoBlock, dup_next = kNoBlock;  // blocks cached under the same key
    int64_t free_stamp = 0;       // of a cached block: when it last rejoined the free queue
    int64_t index_position = -1;  // of the first block cached under its key: its index slot
  };
  BigArray<Meta> meta_;  // num_blocks entries, written from fresh_ on as blocks are first used
  // The free queue: entries [ring_front_, ring_back_) (positions grow without bound and are
  // masked into the ring), of which num_free_ are blocks and the rest holes.
  BigArray<BlockId> ring_;
  uint64_t ring_mask_ = 0;
  int64_t ring_front_ = 0, ring_back_ = 0;
  // key -> the first block cached under it. Evictions leave tombstones (the slot's position is
  // in the block's record), rebuilt away before an insert once entries plus tombstones fill half
  // of the table (PrefixIndex::NeedsRebuild). It starts small and doubles while entries fill a
  // quarter of it, up to index_full_capacity_ (>= 4 x num_blocks).
  PrefixIndex index_;
  size_t index_full_capacity_;
  int64_t num_free_ = 0;
  int64_t num_cached_ = 0;
  int64_t evictions_ = 0;
  int64_t free_clock_ = 0;
  int64_t eviction_horizon_ = 0;
  mutable int64_t collisions_ = 0;
  CacheEventListener* listener_ = nullptr;
  KvEventSink* event_sink_ = nullptr;
  EvictionObserver* eviction_observer_ = nullptr;
};

}  // namespace kv
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_KV_BLOCK_POOL_H_
