#include "sim/kv/single_type_manager.h"

#include <algorithm>

#include "sim/util/status_macros.h"

namespace prefixsim {
namespace kv {

SingleTypeManager::SingleTypeManager(const KvGroup& spec, int group_id, BlockPool* pool,
                                     const ManagerParams& p)
    : spec_(spec), group_id_(group_id), pool_(pool), params_(p), block_size_(spec.block_size) {
  PREFIXSIM_CHECK(block_size_ > 0);
  PREFIXSIM_CHECK(p.hash_block_size > 0 && p.hit_alignment > 0);
  // Every prefix-cacheable group's block is a whole number of hash chunks (docs/semantics.md §7
  // coordinator asserts); otherwise the coordinator reports it and caching stays off.
  ratio_ = block_size_ % p.hash_block_size == 0 ? block_size_ / p.hash_block_size : 0;
}

void SingleTypeManager::RemoveSkippedBlocks(absl::Span<GroupBlocks> run,
                                            int64_t num_computed) const {
  const int64_t skipped_blocks = NumSkippedBlocks(num_computed);
  if (skipped_blocks <= 0) return;
  for (GroupBlocks& g : run) {
    const int64_t skipped = std::min<int64_t>(skipped_blocks, g.blocks.size());
    // Backward, stopping at the first null: everything before it was removed earlier (§10.3).
    for (int64_t i = skipped - 1; i >= 0; --i) {
      const BlockId b = g.blocks[i];
      if (b == kNullBlock) break;
      g.blocks[i] = kNullBlock;
      pool_->Free(b);  // keeps its hash: the block (a state too) stays hittable until evicted
    }
  }
}

int64_t SingleTypeManager::NumBlocksToAllocate(absl::Span<const GroupBlocks> run,
                                               const std::vector<BlockId>* hits, int64_t need,
                                               int64_t /*main*/, int64_t total) const {
  const int64_t required = CeilDiv(need, block_size_);
  const int64_t skipped = NumSkippedTokens(total) / block_size_;
  int64_t n = 0;
  for (size_t k = 0; k < run.size(); ++k) {
    const std::vector<BlockId>* hit = hits != nullptr ? &hits[k] : nullptr;
    const int64_t held =
        static_cast<int64_t>(run[k].blocks.size()) + (hit ? static_cast<int64_t>(hit->size()) : 0);
    n += std::max<int64_t>(required - std::max(skipped, held), 0);
    if (hit == nullptr) continue;
    const bool cow = NeedsCopyOnWrite(*hit, total);
    for (size_t i = 0; i < hit->size(); ++i) {
      const BlockId b = (*hit)[i];
      if (cow && i + 1 == hit->size()) {
        ++n;  // the copy
      } else if (b != kNullBlock && pool_->ref(b) == 0) {
        ++n;  // leaves the free queue when touched
      }
    }
  }
  return n;
}

int64_t SingleTypeManager::AllocateNew(absl::Span<GroupBlocks> run, int64_t need, int64_t /*main*/,
                                       int64_t total) const {
  const int64_t required = CeilDiv(need, block_size_);
  const int64_t skipped = NumSkippedTokens(total) / block_size_;
  int64_t n = 0;
  for (GroupBlocks& g : run) {
    // [inferred] Positions the window has already passed get the null block, not a new one.
    if (static_cast<int64_t>(g.blocks.size()) < skipped) {
      g.blocks.resize(std::min(skipped, required), kNullBlock);
    }
    while (static_cast<int64_t>(g.blocks.size()) < required) {
      g.blocks.push_back(pool_->Allocate());
      ++n;
    }
  }
  return n;
}

int SingleTypeManager::NumRetainedBoundaries(const CacheRequest& request, int64_t shift,
                                             int64_t out[2]) const {
  const int64_t replay = std::max<int64_t>(0, request.prompt_tokens - (shift > 0 ? shift : 1));
  int n = 0;
  for (const int64_t b : {replay, request.shared_prefix_boundary}) {
    const int64_t aligned = RoundDown(b, params_.hit_alignment);
    if (aligned > 0) out[n++] = aligned;
  }
  return n;
}

int64_t SingleTypeManager::CacheBlocks(absl::Span<GroupBlocks> run, const HashPair* fine,
                                       int64_t limit, int64_t /*step_end*/,
                                       const CacheRequest& request) const {
  const int64_t limit_blocks = limit / block_size_;
  int64_t n = 0;
  for (size_t k = 0; k < run.size(); ++k) {
    GroupBlocks& g = run[k];
    const int group = group_id_ + static_cast<int>(k);
    const int64_t num_full = std::min<int64_t>(limit_blocks, g.blocks.size());
    for (int64_t i = g.num_cached; i < num_full; ++i) {
      const BlockId b = g.blocks[i];
      if (b == kNullBlock || pool_->is_cached(b)) continue;
      if (!Reachable(i, request, params_.retention_interval)) {
        if (params_.retention_interval && pool_->observes_retention_drops() &&
            Reachable(i, request, std::nullopt)) {
          pool_->NoteRetentionDropped(group, BlockHash(fine, i));
        }
        continue;
      }
      if (pool_->Cache(b, group, BlockHash(fine, i))) ++n;
    }
    g.num_cached = std::max(g.num_cached, num_full);
  }
  return n;
}

void SingleTypeManager::PrefetchPublishes(absl::Span<const GroupBlocks> run, const HashPair* fine,
                                          int64_t limit, int64_t /*step_end*/) const {
  const int64_t limit_blocks = limit / block_size_;
  for (size_t k = 0; k < run.size(); ++k) {
    const GroupBlocks& g = run[k];
    const int group = group_id_ + static_cast<int>(k);
    const int64_t num_full = std::min<int64_t>(limit_blocks, g.blocks.size());
    for (int64_t i = g.num_cached; i < num_full; ++i) {
      if (g.blocks[i] != kNullBlock) pool_->PrefetchPublish(g.blocks[i], group, BlockHash(fine, i));
    }
  }
}

bool SingleTypeManager::NeedsCopyOnWrite(const std::vector<BlockId>& hit,
                                         int64_t hit_tokens) const {
  return params_.partial_hits && !hit.empty() && hit.back() != kNullBlock &&
         hit_tokens % block_size_ != 0;
}

std::unique_ptr<SingleTypeManager> MakeManager(const KvGroup& spec, int group_id, BlockPool* pool,
                                               const ManagerParams& p) {
  switch (spec.kind) {
    case LayerKind::kFullAttention:
    case LayerKind::kMla:
      return std::make_unique<FullAttentionManager>(spec, group_id, pool, p);
    case LayerKind::kSlidingWindow:
      return std::make_unique<SlidingWindowManager>(spec, group_id, pool, p);
    case LayerKind::kChunkedLocal:
      return std::make_unique<ChunkedLocalManager>(spec, group_id, pool, p);
    case LayerKind::kMamba:
      return std::make_unique<MambaManager>(spec, group_id, pool, p);
  }
  PREFIXSIM_CHECK(false);
  return nullptr;
}

}  // namespace kv
}  // namespace prefixsim
