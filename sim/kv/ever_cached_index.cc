#include "sim/kv/ever_cached_index.h"

#include <algorithm>
#include <utility>

namespace prefixsim::kv {

// The tables start small and double at half full (PrefixIndex::Grow), so memory follows the keys
// kept.
EverCachedIndex::EverCachedIndex(const BlockPool* pool, int64_t generation_keys)
    : pool_(pool),
      generation_keys_(std::max<int64_t>(1024, generation_keys)),
      fallbacks_{&evicted_.current, &evicted_.previous, &dropped_.current, &dropped_.previous} {}

HitIndex EverCachedIndex::hit_index() const {
  return pool_->hit_index_with(fallbacks_.data(), 2, &collisions_);
}

HitIndex EverCachedIndex::dense_hit_index() const {
  return pool_->hit_index_with(fallbacks_.data(), 4, &collisions_);
}

void EverCachedIndex::Generations::Add(uint64_t key, uint32_t tag, int64_t generation_keys) {
  PrefixIndex::Slot* slot = current.FindOrEmpty(key);
  if (slot->block > 0) {
    slot->tag = tag;  // a new content under an old key: the newest is what was cached last
    return;
  }
  if (static_cast<int64_t>(current.size()) >= generation_keys) {
    forgotten += static_cast<int64_t>(previous.size());
    previous = std::move(current);
    current = PrefixIndex(1024);
    slot = current.FindOrEmpty(key);
  } else if ((current.size() + 2) * 2 >= current.capacity()) {
    current.Grow();
    slot = current.FindOrEmpty(key);
  }
  current.InsertAt(slot, key, 1, tag);
}

}  // namespace prefixsim::kv
