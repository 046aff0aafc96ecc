#include "sim/kv/ever_cached_index.h"

#include <algorithm>
#include <utility>

namespace prefixsim::kv {

// The tables start small and double at half full (PrefixIndex::Grow), so memory follows the keys
// kept.
EverCachedIndex::EverCachedIndex(const BlockPool* pool, int64_t generation_keys)
    : pool_(pool),
      generation_keys_(std::max<int64_t>(1024, generation_keys)),
      current_(1024),
      previous_(1024) {}

void EverCachedIndex::Add(uint64_t key, uint32_t tag) {
  PrefixIndex::Slot* slot = current_.FindOrEmpty(key);
  if (slot->block > 0) {
    slot->tag = tag;  // a new content under an old key: the newest is what was cached last
    return;
  }
  if (static_cast<int64_t>(current_.size()) >= generation_keys_) {
    forgotten_ += static_cast<int64_t>(previous_.size());
    previous_ = std::move(current_);
    current_ = PrefixIndex(1024);
    slot = current_.FindOrEmpty(key);
  } else if ((current_.size() + 2) * 2 >= current_.capacity()) {
    current_.Grow();
    slot = current_.FindOrEmpty(key);
  }
  current_.InsertAt(slot, key, 1, tag);
}

}  // namespace prefixsim::kv
