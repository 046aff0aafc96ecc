#include "sim/kv/shadow_index.h"

#include <algorithm>

#include "sim/util/prefix_run.h"
#include "sim/util/status_macros.h"

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

int64_t ShadowIndex::AliveBlocks(const HashPair* fine, int64_t num_fine, int64_t max_blocks) const {
  const int64_t limit = std::min(max_blocks, num_fine / ratio_);
  int64_t j = 0;
  if (reads_pool()) {
    const HitIndex index = pool_->hit_index();
    for (; j < limit; ++j) {
      if (j + kPrefetchAhead < limit)
        index.Prefetch(pool_group_, BlockHash(fine, j + kPrefetchAhead));
      if (index.Lookup(pool_group_, BlockHash(fine, j)) == kNoBlock) break;
    }
    return j;
  }
  for (; j < limit; ++j) {
    const HashPair& h = BlockHash(fine, j);
    auto it = map_.find(h.hash);
    if (it == map_.end() || it->second.check != h.check || !Alive(it->second)) break;
  }
  return j;
}

void ShadowIndex::Hold(const HashPair* fine, int64_t num_fine, int64_t num_blocks,
                       int64_t publishable_blocks, int64_t* held, int64_t* marked) {
  num_blocks = std::min(num_blocks, num_fine / ratio_);
  if (reads_pool()) {  // the pool publishes every block the request holds
    *held = std::max(*held, num_blocks);
    *marked = *held;
    return;
  }
  // Blocks held by an earlier call that the caching rule lets the request publish only now (its
  // computed tokens crossed an S boundary); the new blocks are marked as they are taken, so a
  // unitary plan's blocks are each found once.
  for (int64_t j = *marked; j < std::min(publishable_blocks, *held); ++j) {
    auto it = map_.find(BlockHash(fine, j).hash);
    PREFIXSIM_DCHECK(it != map_.end());
    it->second.published = true;
  }
  // What this cache computed is a prefix of the request's blocks: past the first block it never
  // held, none can be retired, and the probes of the (large, cold) record stop.
  bool may_be_retired = keep_computed_;
  for (int64_t j = *held; j < num_blocks; ++j) {
    const HashPair& h = BlockHash(fine, j);
    auto [it, inserted] = map_.try_emplace(h.hash);
    Entry& e = it->second;
    if (inserted) {
      const uint64_t* retired = may_be_retired ? FindRetired(h.hash) : nullptr;
      if (retired != nullptr) {
        // A retired check that differs from this one (in its 63 bits) is a collision below.
        e.check = RetiredMatches(*retired, h.check) ? h.check : *retired;
        e.published = (*retired & 1) != 0;
      } else {
        e.check = h.check;
        may_be_retired = false;
      }
    }
    if (e.check != h.check) {
      // A 64-bit collision: the rest of this request's chain stays out of the shadow.
      ++collisions_;
      break;
    }
    ++e.refs;
    e.published = e.published || j < publishable_blocks;
    *held = j + 1;
  }
  *marked = std::max(*marked, std::min(publishable_blocks, *held));
  MaybeSweep();
}

int64_t ShadowIndex::FirstUnpublished(const HashPair* fine, int64_t from, int64_t to) const {
  if (reads_pool()) return to;
  for (int64_t j = from; j < to; ++j) {
    auto it = map_.find(BlockHash(fine, j).hash);
    if (it == map_.end() || !it->second.published) return j;
  }
  return to;
}

void ShadowIndex::Release(const HashPair* fine, int64_t* held, int64_t clock_before_free) {
  // The request's own cached blocks, freed just now tail first, got the stamps
  // (clock_before_free, clock]: its shadow blocks take stamps spread over the same range in the
  // same order (the tail oldest, the first block newest), so each lives as long as the real
  // block freed with it; with one group and every block published that is exact. A request
  // that published nothing gets the stamp the next freed cached block will get: its shadow
  // blocks are younger than every block freed before and die when that one is evicted.
  if (reads_pool()) {
    *held = 0;
    return;
  }
  const int64_t clock = pool_->free_clock();
  const int64_t freed = clock - clock_before_free;
  const int64_t n = *held;
  for (int64_t j = 0; j < n; ++j) {
    auto it = map_.find(BlockHash(fine, j).hash);
    PREFIXSIM_CHECK(it != map_.end() && it->second.refs > 0);
    if (--it->second.refs > 0) continue;
    it->second.stamp = freed > 0
                           ? clock_before_free + std::max<int64_t>(1, ((n - j) * freed + n - 1) / n)
                           : clock + 1;
  }
  *held = 0;
}

int64_t ShadowIndex::ComputedBlocks(const HashPair* fine, int64_t num_fine, int64_t from,
                                    int64_t max_blocks) const {
  PREFIXSIM_DCHECK(keep_computed_);
  // What a cache computed is a prefix of the request's blocks (Hold takes them from the first).
  return PrefixRunEnd(from, std::min(max_blocks, num_fine / ratio_),
                      [&](int64_t j) { return HasComputed(fine, j); });
}

bool ShadowIndex::HasComputed(const HashPair* fine, int64_t j) const {
  PREFIXSIM_DCHECK(keep_computed_);
  const HashPair& h = BlockHash(fine, j);
  if (reads_pool()) return InPool(fine, j) || pool_record_.Contains(h);
  if (auto it = map_.find(h.hash); it != map_.end()) return it->second.check == h.check;
  const uint64_t* retired = FindRetired(h.hash);
  return retired != nullptr && RetiredMatches(*retired, h.check);
}

const uint64_t* ShadowIndex::FindRetired(uint64_t hash) const {
  if (auto it = retired_.find(hash); it != retired_.end()) return &it->second;
  if (retired_before_.empty()) return nullptr;
  auto it = retired_before_.find(hash);
  return it != retired_before_.end() ? &it->second : nullptr;
}

void ShadowIndex::MaybeSweep() {
  if (map_.size() < next_sweep_) return;
  absl::erase_if(map_, [this](const auto& kv) {
    if (Alive(kv.second)) return false;
    if (keep_computed_) {
      retired_.insert_or_assign(kv.first, Retire(kv.second));
      if (!retired_before_.empty()) retired_before_.erase(kv.first);
    }
    return true;
  });
  // Two generations, so that bounding the record costs nothing per block: the older one is
  // dropped whole when the newer one fills half the bound.
  if (max_retired_ > 0 && static_cast<int64_t>(retired_.size()) >= max_retired_ / 2) {
    forgotten_ += static_cast<int64_t>(retired_before_.size());
    retired_before_ = std::move(retired_);
    retired_.clear();
  }
  next_sweep_ = std::max<size_t>(4096, 2 * map_.size());
}

void ShadowIndex::OnEvicted(int group, const HashPair& h) {
  if (group == pool_group_ && keep_computed_) pool_record_.Add(h);
}

}  // namespace kv
}  // namespace prefixsim
