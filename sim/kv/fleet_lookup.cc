// The fleet's lookups over all its replicas at once, and the index they read (fleet_index.h,
// routing.h). Why each trick is exact:
// - One table for the whole fleet (FleetIndex): a key's row of replicas is kept only by the
//   replicas' store/remove events, counting repeated stores, so hit_index(r) answers exactly what
//   replica r's own prefix index would (docs/semantics.md §9 finders run on either).
// - One walk for every replica (FindLongestCacheHits, FindLongestHits, PeekPrimaryOverlaps): the
//   lookups of one prompt on different replicas differ only in which replicas hold each block; the
//   first lookup of the fixed point (full attention's, §9.3) has the same arguments for every
//   replica, and the chained hashes mean a replica missing block j misses every later block, so
//   walking the blocks once while the replicas still holding the run drop out gives each replica
//   the run its own walk would.
// - Prefetching (the table's slots a few blocks ahead, then the row their slot names) only moves
//   loads earlier; it cannot change what is read.
// With one_walk off, each replica is looked up on its own (the reference the tests compare with:
// ReplayTuning::fleet_one_walk, FleetTest.OneWalkChangesNoReport).
#include <algorithm>

#include "absl/container/inlined_vector.h"
#include "sim/kv/coordinator.h"
#include "sim/kv/fleet_index.h"
#include "sim/kv/kv_cache_state.h"
#include "sim/kv/routing.h"
#include "sim/kv/single_type_manager.h"
#include "sim/util/status_macros.h"

namespace prefixsim::kv {
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

void KvCacheCoordinator::FindLongestCacheHits(const FleetIndex& index, const HashPair* fine,
                                              int64_t num_fine, int64_t max_hit, int64_t alignment,
                                              std::vector<BlockId>* out, int64_t* hits) {
  const int n = index.num_replicas();
  std::fill(hits, hits + n, 0);
  if (max_hit <= 0 || spec_groups_.empty()) return;
  if (partial_hits_ || !spec_groups_[0].full_attention) {
    for (int r = 0; r < n; ++r) {
      hits[r] = FindLongestCacheHit(index.hit_index(r), fine, num_fine, max_hit, alignment, out);
    }
    return;
  }
  // What FindLongestCacheHit tests first, for every replica at once: only the replicas holding
  // full attention's first block can hit.
  const SpecGroup& fa = spec_groups_[0];
  if (max_hit < fa.block_size || num_fine < fa.block_size / hash_block_size_) return;
  const uint64_t* first = index.Holders(fa.gids[0], fa.manager->BlockHash(fine, 0));
  if (first == nullptr) return;
  // Full attention's own lookup, the first of the fixed point (with the whole budget, §9.3), is
  // the same for every replica: one walk for all of them.
  replica_hits_.resize(n);
  static_cast<const FullAttentionManager*>(fa.manager)
      ->FindLongestHits(index, fine, num_fine, max_hit, alignment, fa.eagle, fa.gids, first,
                        replica_hits_.data());
  for (int w = 0; w < index.words(); ++w) {
    for (uint64_t bits = first[w]; bits != 0; bits &= bits - 1) {
      const int r = w * 64 + __builtin_ctzll(bits);
      hits[r] = unitary() ? replica_hits_[r]
                          : Reconcile(index.hit_index(r), fine, num_fine, max_hit, alignment,
                                      replica_hits_[r], out, nullptr, nullptr);
    }
  }
}

void FullAttentionManager::FindLongestHits(const FleetIndex& index, const HashPair* fine,
                                           int64_t num_fine, int64_t max_len, int64_t alignment,
                                           bool drop_eagle, absl::Span<const int> gids,
                                           const uint64_t* replicas, int64_t* hits) const {
  PREFIXSIM_DCHECK(!params_.partial_hits);
  const int words = index.words();
  const int64_t nb = std::min(max_len / block_size_, num_fine / ratio_);
  absl::InlinedVector<uint64_t, 4> alive(replicas, replicas + words);
  // A replica leaving the walk at block j has a run of j blocks.
  auto leave = [&](uint64_t left, int w, int64_t blocks) {
    for (; left != 0; left &= left - 1) {
      hits[w * 64 + __builtin_ctzll(left)] =
          TrimmedHit(blocks * block_size_, block_size_, alignment, drop_eagle);
    }
  };
  constexpr int64_t kAhead = 8;
  const PrefixIndex& table = index.table();
  for (int64_t p = 0; p < std::min(kAhead, nb); ++p) {
    for (int g : gids) table.Prefetch(BlockHash(fine, p).hash ^ GroupSalt(g));
  }
  absl::InlinedVector<uint64_t, 4> kept(words);
  bool any = true;
  int64_t j = 0;
  for (; j < nb && any; ++j) {
    if (j + kAhead < nb) {
      for (int g : gids) table.Prefetch(BlockHash(fine, j + kAhead).hash ^ GroupSalt(g));
    }
    // The row of replicas is a second, dependent access: its slot, fetched since, names it.
    if (j + kAhead / 2 < nb) {
      for (int g : gids) index.PrefetchRow(BlockHash(fine, j + kAhead / 2).hash ^ GroupSalt(g));
    }
    const HashPair& h = BlockHash(fine, j);
    std::copy(alive.begin(), alive.end(), kept.begin());
    for (int g : gids) {
      const uint64_t* holders = index.Holders(g, h);
      for (int w = 0; w < words; ++w) kept[w] = holders != nullptr ? kept[w] & holders[w] : 0;
      if (holders == nullptr) break;
    }
    any = false;
    for (int w = 0; w < words; ++w) {
      leave(alive[w] & ~kept[w], w, j);
      alive[w] = kept[w];
      any |= kept[w] != 0;
    }
  }
  for (int w = 0; w < words; ++w) leave(alive[w], w, j);
}

void PeekPromptHits(KvCacheManager& any_replica, const Request& request,
                    const std::vector<HashPair>& hashes, const FleetIndex& index,
                    std::vector<int64_t>* hits, bool one_walk) {
  const int n = index.num_replicas();
  hits->assign(n, 0);
  KvCacheState& m = *any_replica.impl();
  const int64_t max_hit = request.prompt_tokens - 1;  // as the admission lookup (§9.1)
  if (!m.caching() || max_hit <= 0) return;
  if (!one_walk) {
    for (int r = 0; r < n; ++r) {
      const HitIndex replica = index.hit_index(r);
      (*hits)[r] = PeekPromptHit(any_replica, request, hashes, &replica);
    }
    return;
  }
  KvCacheCoordinator& coord = m.coordinator();
  const int64_t nf =
      std::min<int64_t>(static_cast<int64_t>(hashes.size()), max_hit / coord.hash_block_size());
  coord.FindLongestCacheHits(index, hashes.data(), nf, max_hit, coord.hit_alignment(),
                             m.lookup_scratch(), hits->data());
}

void PeekPrimaryOverlaps(const KvCacheManager& any_replica, const Request& request,
                         const std::vector<HashPair>& hashes, const FleetIndex& index,
                         std::vector<int64_t>* overlaps, bool one_walk) {
  overlaps->assign(index.num_replicas(), 0);
  if (!one_walk) {
    for (int r = 0; r < index.num_replicas(); ++r) {
      const HitIndex replica = index.hit_index(r);
      (*overlaps)[r] = PeekPrimaryOverlap(any_replica, request, hashes, &replica);
    }
    return;
  }
  const KvCacheState& m = *any_replica.impl();
  const int g = m.coordinator().primary_group();
  if (!m.caching() || g < 0) return;
  const SingleTypeManager& group = m.coordinator().manager(g);
  const int64_t ratio = group.block_size() / m.coordinator().hash_block_size();
  const int64_t nb = static_cast<int64_t>(hashes.size()) / ratio;
  // `alive`: the replicas holding every block so far; a replica leaving at block j holds j.
  std::vector<uint64_t> alive(index.words(), ~uint64_t{0});
  bool any = true;
  for (int64_t j = 0; j < nb && any; ++j) {
    const uint64_t* holders = index.Holders(g, group.BlockHash(hashes.data(), j));
    const int64_t run = std::min(j * group.block_size(), request.prompt_tokens);
    any = false;
    for (int w = 0; w < index.words(); ++w) {
      const uint64_t kept = holders != nullptr ? alive[w] & holders[w] : 0;
      for (uint64_t left = alive[w] & ~kept; left != 0; left &= left - 1) {
        const int r = w * 64 + __builtin_ctzll(left);
        if (r < index.num_replicas()) (*overlaps)[r] = run;
      }
      alive[w] = kept;
      any |= kept != 0;
    }
  }
  if (!any) return;
  const int64_t run = std::min(nb * group.block_size(), request.prompt_tokens);
  for (int w = 0; w < index.words(); ++w) {
    for (uint64_t left = alive[w]; left != 0; left &= left - 1) {
      const int r = w * 64 + __builtin_ctzll(left);
      if (r < index.num_replicas()) (*overlaps)[r] = run;
    }
  }
}

void AttachCacheListener(KvCacheManager& manager, CacheEventListener* listener) {
  manager.impl()->pool().set_listener(listener);
}

}  // namespace prefixsim::kv
