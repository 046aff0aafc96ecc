#include "sim/kv/shadow_index.h"

#include <algorithm>

#include "prefixsim/status.h"

namespace prefixsim {
namespace kv {

ShadowIndex::ShadowIndex(const BlockPool* pool, int64_t unit, int64_t hash_block_size,
                         bool drop_eagle)
    : pool_(pool),
      unit_(unit),
      ratio_(hash_block_size > 0 ? unit / hash_block_size : 0),
      drop_eagle_(drop_eagle) {
  PREFIXSIM_CHECK(pool != nullptr && unit > 0 && hash_block_size > 0);
  PREFIXSIM_CHECK(unit % hash_block_size == 0);
}

int64_t ShadowIndex::Lookup(const HashPair* fine, int64_t num_fine, int64_t max_hit) const {
  const int64_t limit = std::min(max_hit / unit_, num_fine / ratio_);
  int64_t j = 0;
  for (; j < limit; ++j) {
    const HashPair& h = BlockHash(fine, j);
    auto it = map_.find(h.hash);
    if (it == map_.end() || it->second.check != h.check || !Alive(it->second)) break;
  }
  if (drop_eagle_ && j > 0) --j;
  return j * unit_;
}

void ShadowIndex::Hold(const HashPair* fine, int64_t num_fine, int64_t num_blocks, int64_t* held) {
  num_blocks = std::min(num_blocks, num_fine / ratio_);
  for (int64_t j = *held; j < num_blocks; ++j) {
    const HashPair& h = BlockHash(fine, j);
    auto [it, inserted] = map_.try_emplace(h.hash);
    Entry& e = it->second;
    if (inserted) {
      e.check = h.check;
    } else if (e.check != h.check) {
      // A 64-bit collision: the rest of this request's chain stays out of the shadow.
      ++collisions_;
      return;
    }
    ++e.refs;
    *held = j + 1;
  }
  MaybeSweep();
}

void ShadowIndex::Release(const HashPair* fine, int64_t* held) {
  const int64_t stamp = pool_->free_clock();
  for (int64_t j = 0; j < *held; ++j) {
    auto it = map_.find(BlockHash(fine, j).hash);
    PREFIXSIM_CHECK(it != map_.end() && it->second.refs > 0);
    if (--it->second.refs == 0) it->second.stamp = stamp;
  }
  *held = 0;
}

void ShadowIndex::MaybeSweep() {
  if (map_.size() < next_sweep_) return;
  absl::erase_if(map_, [this](const auto& kv) { return !Alive(kv.second); });
  next_sweep_ = std::max<size_t>(4096, 2 * map_.size());
}

}  // namespace kv
}  // namespace prefixsim
