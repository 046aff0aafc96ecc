// The prefix index of the block pool: an open-addressing hash table with linear probing, one
// 16-byte slot per entry (key, first block, verifier tag), so a lookup costs one cache line in
// the common case. Keys are already uniformly mixed 64-bit values. Capacity is fixed at
// construction, or doubled by Grow. Two ways to delete, not to be mixed: backward-shift Erase
// (the fleet's index), or tombstones at a stable position (EraseAt; the block pool, which evicts
// from the head of its free queue at random keys and must not wait for the slot's cache miss).
#ifndef PREFIXSIM_SIM_KV_PREFIX_INDEX_H_
#define PREFIXSIM_SIM_KV_PREFIX_INDEX_H_

#include <cstdint>
#include <utility>

#include "sim/util/big_array.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace kv {

class PrefixIndex {
 public:
  struct Slot {
    uint64_t key;
    int32_t block;  // > 0: an entry; kEmpty; kTombstone (an entry erased by EraseAt)
    uint32_t tag;   // verifier (32 bits of the check value mixed with the group)
  };
  // An empty slot is all zero bytes, so a table fresh from the kernel needs no fill. Entries
  // hold a positive value: the pool's blocks (the null block 0 is never cached) or the fleet
  // index's rows.
  static constexpr int32_t kEmpty = 0;
  static constexpr int32_t kTombstone = -1;

  // Capacity: a power of two >= `headroom` x `max_entries` (CapacityFor). With EraseAt (tombstones)
  // the table is rebuilt when entries plus tombstones pass half of it, so headroom 4 leaves at
  // least max_entries tombstones between rebuilds. (Three quarters halves the rebuilds of a 1 TiB
  // pool but made the 16-replica fleet benchmark slower, 245 -> 253 ms, medians of 7 interleaved
  // rounds: longer probe runs in its fuller tables.)
  explicit PrefixIndex(int64_t max_entries, int headroom = 2) {
    const size_t cap = CapacityFor(max_entries, headroom);
    slots_ = BigArray<Slot>(cap, Slot{0, kEmpty, 0});
    mask_ = cap - 1;
  }
  static size_t CapacityFor(int64_t max_entries, int headroom) {
    uint64_t cap = 16;
    while (cap < static_cast<uint64_t>(max_entries) * static_cast<uint64_t>(headroom)) cap <<= 1;
    return cap;
  }

  // The slot holding `key`, or nullptr.
  const Slot* Find(uint64_t key) const {
    for (uint64_t i = key & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key && s.block > 0) return &s;
      if (s.block == kEmpty) return nullptr;
    }
  }
  Slot* Find(uint64_t key) { return const_cast<Slot*>(std::as_const(*this).Find(key)); }

  void Prefetch(uint64_t key) const { __builtin_prefetch(&slots_[key & mask_]); }

  // The slot holding `key`, or the slot where InsertAt would put it (the first tombstone or
  // empty slot of its probe sequence): one probe sequence for a lookup followed by an insert.
  Slot* FindOrEmpty(uint64_t key) {
    Slot* reuse = nullptr;
    for (uint64_t i = key & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == key && s.block > 0) return &s;
      if (s.block == kEmpty) return reuse != nullptr ? reuse : &s;
      if (s.block == kTombstone && reuse == nullptr) reuse = &s;
    }
  }
  // Fills the free slot returned by FindOrEmpty for `key`.
  void InsertAt(Slot* slot, uint64_t key, int32_t block, uint32_t tag) {
    PREFIXSIM_DCHECK(slot->block <= 0 && block > 0 && size_ + tombstones_ < slots_.size() - 1);
    if (slot->block == kTombstone) --tombstones_;
    *slot = Slot{key, block, tag};
    ++size_;
  }

  // Inserts a new key (REQUIRES: absent).
  void Insert(uint64_t key, int32_t block, uint32_t tag) {
    InsertAt(FindOrEmpty(key), key, block, tag);
  }

  // Removes the entry at `slot` (from Find), shifting later entries of its cluster back, so
  // that no slot moves except these. REQUIRES: no tombstones (the two ways do not mix).
  void Erase(Slot* slot) {
    PREFIXSIM_DCHECK(tombstones_ == 0);
    uint64_t i = static_cast<uint64_t>(slot - slots_.data());
    uint64_t j = i;
    while (true) {
      j = (j + 1) & mask_;
      if (slots_[j].block <= 0) break;
      const uint64_t home = slots_[j].key & mask_;
      // Move j back to i unless its home lies cyclically in (i, j].
      const bool home_in_range = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (!home_in_range) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].block = kEmpty;
    --size_;
  }

  // Stable positions: with tombstones, an entry stays in its slot until Rebuild, so its owner
  // can keep the position and erase or update it by a store alone (no probe, no read of the
  // slot's cache line: the miss does not stall the caller).
  uint64_t position(const Slot* slot) const { return static_cast<uint64_t>(slot - slots_.data()); }
  const Slot& at(uint64_t position) const { return slots_[position]; }
  void SetBlockAt(uint64_t position, int32_t block) { slots_[position].block = block; }
  void EraseAt(uint64_t position) {
    slots_[position].block = kTombstone;
    --size_;
    ++tombstones_;
  }
  // True when entries plus tombstones fill half the table: Rebuild before the next insert.
  bool NeedsRebuild() const { return (size_ + tombstones_) * 2 >= slots_.size(); }
  // Clears the tombstones in place: every entry moves back to the first empty slot from its
  // home, and `moved(block, new_position)` is called for each entry that moved (the others keep
  // their positions). No buffer, no random access: an entry only moves back inside its own probe
  // run. Two passes over the table: the tombstones become empty slots (a store to every slot, no
  // branch on its kind, which is random), then the entries away from their home slot, a few,
  // move back (one pass branching on each slot's kind took 10.6 ms for the three rebuilds of a
  // 1 TiB Kimi-K3 replay, these two 9.0 ms). The second pass starts after a slot that was
  // empty before the first, so that no probe run wraps into it; every slot between an entry's
  // home and its slot has then been passed already (a run has no empty slot), and holds an entry
  // or is empty.
  template <typename Moved>
  void Rebuild(Moved moved) {
    uint64_t start = 0;
    while (slots_[start].block != kEmpty) ++start;  // one exists: the table is never full
    Slot* const slots = slots_.data();
    const uint64_t capacity = mask_ + 1;
    for (uint64_t i = 0; i < capacity; ++i) {
      const int32_t b = slots[i].block;
      slots[i].block = b == kTombstone ? kEmpty : b;
    }
    for (uint64_t n = 1; n <= capacity; ++n) {
      const uint64_t i = (start + n) & mask_;
      const Slot& s = slots[i];
      if (s.block <= 0 || (s.key & mask_) == i) continue;  // empty, or at home
      uint64_t q = s.key & mask_;
      while (q != i && slots[q].block > 0) q = (q + 1) & mask_;
      if (q == i) continue;
      slots[q] = s;
      slots[i].block = kEmpty;
      moved(slots[q].block, q);
    }
    tombstones_ = 0;
  }

  // Doubles the capacity, re-inserting every entry and dropping the tombstones; `moved(block,
  // new_position)` is called for every entry (all positions change). For tables that grow with
  // their entries instead of being sized for the most they can hold: the fleet's index, whose
  // keys are the union of the replicas' caches, and a pool's index, which starts small so that
  // a pool costs memory for what it caches.
  template <typename Moved>
  void Grow(Moved moved) {
    BigArray<Slot> old(slots_.size() * 2, Slot{0, kEmpty, 0});
    std::swap(old, slots_);
    mask_ = slots_.size() - 1;
    size_ = 0;
    tombstones_ = 0;
    for (size_t i = 0; i < old.size(); ++i) {
      if (old[i].block <= 0) continue;
      Slot* slot = FindOrEmpty(old[i].key);
      InsertAt(slot, old[i].key, old[i].block, old[i].tag);
      moved(old[i].block, position(slot));
    }
  }
  void Grow() {
    Grow([](int32_t, uint64_t) {});
  }

  size_t size() const { return size_; }
  size_t tombstones() const { return tombstones_; }
  size_t capacity() const { return slots_.size(); }

 private:
  BigArray<Slot> slots_;
  uint64_t mask_ = 0;
  size_t size_ = 0;
  size_t tombstones_ = 0;
};

}  // namespace kv
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_KV_PREFIX_INDEX_H_
