#include "sim/kv/ever_cached_index.h"

#include <algorithm>
#include <utility>

namespace prefixsim::kv {

// The table starts small and doubles at half full (PrefixIndex::Grow), so memory follows the
// keys kept: at most the current generation's, the two before it and those the pool still
// caches.
EverCachedIndex::EverCachedIndex(const BlockPool* pool, int64_t generation_keys)
    : pool_(pool), generation_keys_(std::max<int64_t>(1024, generation_keys)), index_(1024) {}

void EverCachedIndex::Add(uint64_t key, uint32_t tag) {
  PrefixIndex::Slot* slot = index_.FindOrEmpty(key);
  if (slot->block > 0) {
    slot->block = generation_;
    slot->tag = tag;  // a new content under an old key: the newest is what a lookup would find
    return;
  }
  if ((index_.size() + 2) * 2 >= index_.capacity()) {
    index_.Grow();
    slot = index_.FindOrEmpty(key);
  }
  index_.InsertAt(slot, key, generation_, tag);
  if (++added_this_generation_ >= generation_keys_) Age();
}

void EverCachedIndex::Age() {
  // Re-inserting the survivors into a fresh table drops the others without tombstones; once per
  // generation, so O(1) per key added.
  auto kept = [&](const PrefixIndex::Slot& s) {
    return s.block > 0 && (s.block >= generation_ - 1 || pool_->HasKey(s.key));
  };
  int64_t survivors = 0;
  for (size_t i = 0; i < index_.capacity(); ++i) survivors += kept(index_.at(i)) ? 1 : 0;
  PrefixIndex next(std::max<int64_t>(1024, survivors));
  for (size_t i = 0; i < index_.capacity(); ++i) {
    const PrefixIndex::Slot& s = index_.at(i);
    if (kept(s)) next.Insert(s.key, s.block, s.tag);
  }
  forgotten_ += static_cast<int64_t>(index_.size()) - survivors;
  index_ = std::move(next);
  ++generation_;
  added_this_generation_ = 0;
}

}  // namespace prefixsim::kv
