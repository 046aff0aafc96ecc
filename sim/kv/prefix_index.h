// The prefix index of the block pool: an open-addressing hash table with linear probing and
// backward-shift deletion, one 16-byte slot per entry (key, first block, verifier tag), so a
// lookup costs one cache line in the common case. Keys are already uniformly mixed 64-bit
// values. Capacity is fixed at construction (>= 2x the most entries it can hold: one per block).
#ifndef PREFIXSIM_SIM_KV_PREFIX_INDEX_H_
#define PREFIXSIM_SIM_KV_PREFIX_INDEX_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "prefixsim/status.h"
#include "sim/kv/big_array.h"

namespace prefixsim {
namespace kv {

class PrefixIndex {
 public:
  struct Slot {
    uint64_t key;
    int32_t block;  // -1: empty
    uint32_t tag;   // verifier (32 bits of the check value mixed with the group)
  };

  explicit PrefixIndex(int64_t max_entries) {
    uint64_t cap = 16;
    while (cap < static_cast<uint64_t>(max_entries) * 2) cap <<= 1;
    slots_ = BigArray<Slot>(cap, Slot{0, -1, 0});
    mask_ = cap - 1;
  }

  // The slot holding `key`, or nullptr.
  const Slot* Find(uint64_t key) const {
    for (uint64_t i = key & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.block < 0) return nullptr;
      if (s.key == key) return &s;
    }
  }
  Slot* Find(uint64_t key) { return const_cast<Slot*>(std::as_const(*this).Find(key)); }

  void Prefetch(uint64_t key) const { __builtin_prefetch(&slots_[key & mask_]); }

  // The slot holding `key`, or the empty slot where InsertAt would put it (one probe sequence
  // for a lookup followed by an insert).
  Slot* FindOrEmpty(uint64_t key) {
    for (uint64_t i = key & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.block < 0 || s.key == key) return &s;
    }
  }
  // Fills the empty slot returned by FindOrEmpty for `key`.
  void InsertAt(Slot* slot, uint64_t key, int32_t block, uint32_t tag) {
    PREFIXSIM_DCHECK(slot->block < 0 && size_ < slots_.size() / 2 + 1);
    *slot = Slot{key, block, tag};
    ++size_;
  }

  // Inserts a new key (REQUIRES: absent).
  void Insert(uint64_t key, int32_t block, uint32_t tag) {
    PREFIXSIM_DCHECK(size_ < slots_.size() / 2 + 1);
    uint64_t i = key & mask_;
    while (slots_[i].block >= 0) i = (i + 1) & mask_;
    slots_[i] = Slot{key, block, tag};
    ++size_;
  }

  // Removes the entry at `slot` (from Find), shifting later entries of its cluster back.
  void Erase(Slot* slot) {
    uint64_t i = static_cast<uint64_t>(slot - slots_.data());
    uint64_t j = i;
    while (true) {
      j = (j + 1) & mask_;
      if (slots_[j].block < 0) break;
      const uint64_t home = slots_[j].key & mask_;
      // Move j back to i unless its home lies cyclically in (i, j].
      const bool home_in_range = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (!home_in_range) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].block = -1;
    --size_;
  }

  size_t size() const { return size_; }

 private:
  BigArray<Slot> slots_;
  uint64_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace kv
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_KV_PREFIX_INDEX_H_
