// Full attention and MLA hit finding (docs/semantics.md §9.2): left to right; the chain guarantees
// that once block j misses, every later block misses too. With partial hits (A = H < B), a second
// phase probes the H boundaries inside the first missing block for a partially registered
// block (docs/semantics.md §8.2 cache_partial_block).
#include <algorithm>

#include "absl/container/inlined_vector.h"
#include "sim/kv/single_type_manager.h"

namespace prefixsim {
namespace kv {
int64_t FullAttentionManager::FindLongestHit(const HitIndex& index, const HashPair* fine,
                                             int64_t num_fine, int64_t max_len, int64_t alignment,
                                             bool drop_eagle, absl::Span<const int> gids,
                                             std::vector<BlockId>* out) const {
  const int64_t nb = std::min(max_len / block_size_, num_fine / ratio_);
  const bool fine_grained =
      params_.partial_hits && alignment < block_size_ && block_size_ % alignment == 0 && ratio_ > 1;
  for (size_t k = 0; k < gids.size(); ++k) out[k].resize(std::max<int64_t>(nb, 0) + 1);
  // Prefetch a few blocks ahead: the lookups are independent memory accesses.
  constexpr int64_t kAhead = 8;
  for (int64_t p = 0; p < std::min(kAhead, nb); ++p) {
    for (int g : gids) index.Prefetch(g, BlockHash(fine, p));
  }
  int64_t j = 0;
  while (j < nb) {
    if (j + kAhead < nb) {
      for (int g : gids) index.Prefetch(g, BlockHash(fine, j + kAhead));
    }
    if (!LookupAll(index, fine, j, gids, out)) break;
    ++j;
  }
  int64_t hit = j * block_size_;
  if (fine_grained) {
    // Phase 2: H boundaries strictly inside block j, high to low (A == H in this mode).
    const int64_t hi =
        std::min({(j + 1) * ratio_ - 2, max_len / params_.hash_block_size - 1, num_fine - 1});
    for (int64_t f = hi; f >= j * ratio_; --f) {
      bool all = true;
      for (size_t k = 0; k < gids.size() && all; ++k) {
        const BlockId b = index.Lookup(gids[k], fine[f]);
        if (b == kNoBlock) {
          all = false;
        } else {
          out[k][j] = b;
        }
      }
      if (all) {
        hit = (f + 1) * params_.hash_block_size;
        break;
      }
    }
  }
  hit = TrimmedHit(hit, block_size_, alignment, drop_eagle);
  const int64_t keep = CeilDiv(hit, block_size_);
  for (size_t k = 0; k < gids.size(); ++k) out[k].resize(keep);
  return hit;
}

int64_t FullAttentionManager::CacheBlocks(absl::Span<GroupBlocks> run, const HashPair* fine,
                                          int64_t limit, int64_t step_end,
                                          const CacheRequest& request) const {
  if (!params_.partial_hits || ratio_ <= 1) {
    return SingleTypeManager::CacheBlocks(run, fine, limit, step_end, request);
  }
  int64_t n = 0;
  for (size_t k = 0; k < run.size(); ++k) {
    n += CachePartial(&run[k], group_id_ + static_cast<int>(k), fine, limit);
  }
  return n;
}

int64_t FullAttentionManager::CachePartial(GroupBlocks* g, int group, const HashPair* fine,
                                           int64_t limit) const {
  const int64_t size = static_cast<int64_t>(g->blocks.size());
  const int64_t num_full = std::min<int64_t>(limit / block_size_, size);
  int64_t n = 0;
  for (int64_t i = g->num_cached; i < num_full; ++i) {
    const BlockId b = g->blocks[i];
    if (b == kNullBlock) continue;
    const HashPair& h = BlockHash(fine, i);
    if (pool_->is_cached(b)) {
      if (pool_->cached_hash(b) == h) continue;
      pool_->Uncache(b);  // a partial entry that is now full: re-key it
    }
    if (pool_->Cache(b, group, h)) ++n;
  }
  g->num_cached = std::max(g->num_cached, num_full);
  // [inferred] The tail block is registered under its last H boundary at every caching call
  // (the reference names the prompt's last H boundary; later boundaries re-key it).
  const int64_t f = limit / params_.hash_block_size - 1;
  if (num_full < size && f >= 0 && (f + 1) * params_.hash_block_size > num_full * block_size_) {
    const BlockId b = g->blocks[num_full];
    if (b != kNullBlock) {
      if (pool_->is_cached(b)) {
        if (pool_->cached_hash(b) == fine[f]) return n;
        pool_->Uncache(b);
      }
      if (pool_->Cache(b, group, fine[f])) ++n;
    }
  }
  return n;
}

}  // namespace kv
}  // namespace prefixsim
