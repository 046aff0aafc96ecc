// One tier of offloaded KV blocks behind the GPU pool (docs/semantics.md §16): a CPU buffer or a
// storage tier, holding blocks by key, evicting least recently used first, and the link that
// moves bytes in and out of it. vLLM keeps the same parts in v1/kv_offload/ (the CPU manager,
// its LRU policy) and in the worker's transfer handlers.
#ifndef PREFIXSIM_SIM_KV_OFFLOAD_TIER_H_
#define PREFIXSIM_SIM_KV_OFFLOAD_TIER_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/types/span.h"
#include "prefixsim/kv_event_sink.h"

namespace prefixsim::kv {

// A link that carries one transfer at a time at a fixed rate. Concurrent transfers queue, so the
// last of them ends when a fair share of the same bandwidth would end it too.
class TransferLink {
 public:
  explicit TransferLink(double bytes_per_s) : bytes_per_s_(bytes_per_s) {}
  // A transfer of `bytes` that may start at `ready_ns`: when it ends.
  int64_t Transfer(int64_t bytes, int64_t ready_ns);

 private:
  double bytes_per_s_;
  int64_t free_at_ns_ = 0;
};

// One block a store writes: its key, what it costs the tier, and its name in KV events.
struct TierBlock {
  uint64_t key = 0;
  int64_t bytes = 0;
  uint64_t block_hash = 0;
  int32_t group = 0;
};

// The keys a tier has evicted, for miss attribution (a block it dropped against one it never
// stored), in two generations of `max_keys` / 2 keys each (0: no bound): when the current one is
// full the older is forgotten whole, which costs nothing per key (a queue of evictions forgotten
// one by one cost a seventh of a tiered replay). Plain hash sets of 8-byte keys rather than the
// pool's PrefixIndex: growing those mapped fresh pages whose clearing cost a fifth of the replay.
class EvictionRecord {
 public:
  explicit EvictionRecord(int64_t max_keys)
      : generation_keys_(max_keys > 0 ? std::max<int64_t>(1, max_keys / 2) : INT64_MAX) {}
  void Add(uint64_t key);
  bool Contains(uint64_t key) const { return current_.contains(key) || previous_.contains(key); }
  // Add(key) soon: a tier evicts its victims together, so their misses can overlap.
  void Prefetch(uint64_t key) const { current_.prefetch(key); }
  int64_t forgotten() const { return forgotten_; }

 private:
  int64_t generation_keys_;
  int64_t forgotten_ = 0;
  absl::flat_hash_set<uint64_t> current_, previous_;
};

// The keys of one tier, least recently used first. A key (a block hash and its group,
// OffloadKey) is usable once its write has landed (ready_ns), cannot be evicted while a load
// reads it (pinned), and costs `bytes` of the tier's capacity.
class OffloadTier {
 public:
  struct Counters {
    int64_t stored_blocks = 0;
    int64_t loaded_blocks = 0;
    int64_t evicted_blocks = 0;
    int64_t evicted_never_loaded = 0;  // writes that never paid off, evicted
    int64_t store_failures = 0;        // stores refused: no room that could be made
    int64_t peak_used_bytes = 0;
  };

  OffloadTier(std::string medium, int64_t capacity_bytes, double read_bytes_per_s,
              double write_bytes_per_s);

  const std::string& medium() const { return medium_; }
  int64_t capacity_bytes() const { return capacity_bytes_; }
  int64_t used_bytes() const { return used_bytes_; }
  int64_t size() const { return num_keys_; }

  enum class Presence { kAbsent, kPending, kReady };
  Presence Find(uint64_t key, int64_t now) const;
  bool Contains(uint64_t key) const { return EntryOf(key) != kNil; }
  // Whether a load now reads the key.
  bool Pinned(uint64_t key) const;

  // Moves the present keys to the most recent end, the last one first, so that the first key
  // (a request's first block) ends most recent and a prefix's tail is evicted before its head.
  void Touch(absl::Span<const uint64_t> keys);

  // Stores the blocks whose keys are not present, writes landing at `ready_ns`: all of them or
  // none. Makes room by evicting unpinned keys that are not among the blocks', least recent
  // first; if that cannot make enough, stores nothing, counts a failure and returns false. The
  // evictions and stores go to `sink` (null: none) as this tier's KV events.
  bool Store(absl::Span<const TierBlock> blocks, int64_t ready_ns, KvEventSink* sink = nullptr);

  // A load reads the key: pinned until Unpin, and counted.
  void Pin(uint64_t key);
  void Unpin(uint64_t key);
  // A key read by a load without a pin (a staged copy on its way through).
  void MarkLoaded(uint64_t key);

  TransferLink& read_link() { return read_link_; }
  TransferLink& write_link() { return write_link_; }
  const Counters& counters() const { return counters_; }
  // Stored keys still held that no load ever read.
  int64_t HeldNeverLoaded() const;

  // Remember evicted keys from now on, at most `max_keys` of them (0: all). Idempotent: a tier
  // that replicas share is asked once by each.
  void RememberEvictions(int64_t max_keys);
  // Whether the tier holds the key (ready or not) or remembers evicting it.
  bool EverHeld(uint64_t key) const {
    return Contains(key) || (evictions_ != nullptr && evictions_->Contains(key));
  }
  int64_t ForgottenEvictions() const { return evictions_ ? evictions_->forgotten() : 0; }

 private:
  struct Entry {
    uint64_t key = 0;
    int64_t bytes = 0;
    uint64_t block_hash = 0;
    int64_t ready_ns = 0;
    int32_t group = 0;
    int32_t pins = 0;
    bool loaded = false;
    bool protected_now = false;  // among the keys of the Store in progress
  };
  // An entry's place in the LRU list, apart from the rest of it: moving a key (Touch) and walking
  // from the oldest (Store) read these, a sixth of an entry, so more of them stay in cache.
  struct Links {
    uint32_t prev = kNil, next = kNil;  // towards older / newer
  };
  // The index, open addressing with linear probing: a lookup reads one slot, key and entry
  // together, where a general map reads its control bytes, its slot and then the entry.
  struct Slot {
    uint64_t key = 0;
    uint32_t entry = kNil;  // kNil: empty
  };
  static constexpr uint32_t kNil = UINT32_MAX;

  // The key's hash: its top bits pick the home slot, and a few bits more its filter bit.
  static uint64_t Mix(uint64_t key) { return key * 0x9E3779B97F4A7C15ULL; }
  size_t HomeSlot(uint64_t key) const { return static_cast<size_t>(Mix(key) >> slot_shift_); }
  uint64_t FilterBit(uint64_t key) const { return Mix(key) >> filter_shift_; }
  bool MaybeHeld(uint64_t key) const {
    const uint64_t bit = FilterBit(key);
    return ((filter_[bit >> 6] >> (bit & 63)) & 1) != 0;
  }
  uint32_t EntryOf(uint64_t key) const {
    if (!MaybeHeld(key)) return kNil;
    for (size_t i = HomeSlot(key);; i = (i + 1) & slot_mask_) {
      const Slot& s = slots_[i];
      if (s.entry == kNil) return kNil;
      if (s.key == key) return s.entry;
    }
  }
  // Asks for the key's slot ahead of its lookup, so that a loop over keys waits for several
  // slots at once rather than for each in turn.
  void Prefetch(uint64_t key) const { __builtin_prefetch(&slots_[HomeSlot(key)]); }
  // Adds the key for entry `e`, or leaves the index as it is and returns false if it holds it.
  bool Index(uint64_t key, uint32_t e);
  void Unindex(uint32_t e);
  void ResizeIndex(size_t num_slots);
  void RebuildFilter();

  void Unlink(uint32_t e);
  void LinkNewest(uint32_t e);
  void Evict(uint32_t e, KvEventSink* sink);

  std::string medium_;
  int64_t capacity_bytes_;
  int64_t used_bytes_ = 0;
  std::vector<Slot> slots_;  // a power of two of them, at most half full
  size_t slot_mask_ = 0;
  int slot_shift_ = 64;
  int64_t num_keys_ = 0;
  // Most lookups are of keys the tier does not hold (Touch looks up every key of a request),
  // and a probe of the index, larger than the caches and with a branch on what it finds, costs a
  // miss and a misprediction each. A bit per hash, 16 bits per slot, is set for every key held
  // (and for keys evicted since the last rebuild): a clear bit answers most of those lookups
  // from a table that stays in cache, with a branch that predicts well.
  static constexpr int kFilterBitsPerSlotLog2 = 4;
  std::vector<uint64_t> filter_;
  int filter_shift_ = 64;
  int64_t filter_stale_ = 0;  // keys evicted since the last rebuild, their bits maybe still set
  std::vector<Entry> entries_;
  std::vector<Links> links_;  // by entry
  std::vector<uint32_t> free_entries_;
  uint32_t oldest_ = kNil, newest_ = kNil;
  TransferLink read_link_, write_link_;
  Counters counters_;
  std::vector<uint32_t> flagged_, victims_;    // Store's scratch
  std::unique_ptr<EvictionRecord> evictions_;  // null unless RememberEvictions
};

// The bounded lookup counter behind vLLM's store_threshold: how often each key was looked up,
// forgetting the least recently counted key beyond `max_keys` (vLLM's max_tracker_size).
class LookupTracker {
 public:
  explicit LookupTracker(int64_t max_keys) : max_keys_(max_keys) {}
  void Count(uint64_t key);
  int64_t Lookups(uint64_t key) const;

 private:
  int64_t max_keys_;
  int64_t clock_ = 0;
  absl::flat_hash_map<uint64_t, std::pair<int64_t, int64_t>> counts_;  // key -> (count, last)
  std::deque<std::pair<uint64_t, int64_t>> order_;  // (key, stamp) in counting order
};

}  // namespace prefixsim::kv

#endif  // PREFIXSIM_SIM_KV_OFFLOAD_TIER_H_
