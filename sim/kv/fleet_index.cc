#include "sim/kv/fleet_index.h"

#include <algorithm>

#include "prefixsim/status.h"

namespace prefixsim {
namespace kv {

namespace {
constexpr int64_t kInitialKeys = 1024;
}  // namespace

FleetIndex::FleetIndex(int num_replicas)
    : num_replicas_(num_replicas), words_((num_replicas + 63) / 64), table_(kInitialKeys) {
  PREFIXSIM_CHECK(num_replicas >= 1);
}

void FleetIndex::Store(int replica, uint64_t key, uint32_t tag) {
  PREFIXSIM_DCHECK(replica >= 0 && replica < num_replicas_);
  const uint64_t bit = uint64_t{1} << (replica % 64);
  PrefixIndex::Slot* slot = table_.Find(key);
  if (slot == nullptr) {
    if ((table_.size() + 1) * 2 > table_.capacity()) table_.Grow();
    int32_t row;
    if (!free_rows_.empty()) {
      row = free_rows_.back();
      free_rows_.pop_back();
    } else {
      row = static_cast<int32_t>(rows_.size() / words_);
      rows_.resize(rows_.size() + words_, 0);
    }
    rows_[static_cast<size_t>(row) * words_ + replica / 64] = bit;
    table_.Insert(key, row + 1, tag);
    return;
  }
  if (slot->tag != tag) {
    ++collisions_;
    return;
  }
  uint64_t& word = Row(*slot)[replica / 64];
  if ((word & bit) == 0) {
    word |= bit;
  } else {
    ++extra_[{key, replica}];
  }
}

bool FleetIndex::Remove(int replica, uint64_t key) {
  PREFIXSIM_DCHECK(replica >= 0 && replica < num_replicas_);
  const uint64_t bit = uint64_t{1} << (replica % 64);
  PrefixIndex::Slot* slot = table_.Find(key);
  if (slot == nullptr) return false;
  uint64_t* row = Row(*slot);
  uint64_t& word = row[replica / 64];
  if ((word & bit) == 0) return false;
  if (!extra_.empty()) {
    auto it = extra_.find(std::pair<uint64_t, int>{key, replica});
    if (it != extra_.end()) {
      if (--it->second == 0) extra_.erase(it);
      return true;
    }
  }
  word &= ~bit;
  if (word == 0 &&
      (words_ == 1 || std::all_of(row, row + words_, [](uint64_t w) { return w == 0; }))) {
    free_rows_.push_back(slot->block - 1);
    table_.Erase(slot);
  }
  return true;
}

void FleetIndex::Erase(uint64_t key) {
  PrefixIndex::Slot* slot = table_.Find(key);
  if (slot == nullptr) return;
  if (!extra_.empty()) {
    for (int r = 0; r < num_replicas_; ++r) extra_.erase(std::pair<uint64_t, int>{key, r});
  }
  uint64_t* row = Row(*slot);
  std::fill(row, row + words_, 0);
  free_rows_.push_back(slot->block - 1);
  table_.Erase(slot);
}

bool FleetIndex::Holds(int replica, uint64_t key) const {
  const PrefixIndex::Slot* slot = table_.Find(key);
  return slot != nullptr && (Row(*slot)[replica / 64] & (uint64_t{1} << (replica % 64))) != 0;
}

}  // namespace kv
}  // namespace prefixsim
