// Mamba in align mode (docs/semantics.md §9.2, §10.1, §10.3), kept simple:
//  * the block table is indexed like an attention table (block i = state after (i+1)·B tokens);
//    only the running state block and, until the next step, the previous one are real, the rest
//    null; under speculative decoding the table ends with num_speculative_blocks more blocks, the
//    states of the draft positions (vLLM keeps the running state at len - 1 - k);
//  * a step that ends exactly on a block boundary leaves the state for that boundary in the
//    block, which is then cached (subject to the hybrid round-down to S and A-alignment);
//  * a hit is the last cached state whose boundary is A-aligned; never an EAGLE drop.
// With partial hits (A = H < B), states are also cached at H boundaries inside a block, under
// the fine hash, and a hit may end there; a cached state block is never written again: a step
// that continues in it gets a fresh block (the checkpoint / copy-on-write of §10.1).
// A hit on a state published in the current step waits a step. The state at a boundary crossed
// by accepted drafts is cached by KvCacheState (reference notes §2).
#include <algorithm>

#include "sim/kv/single_type_manager.h"

namespace prefixsim {
namespace kv {

int64_t MambaManager::FindLongestHit(const HitIndex& index, const HashPair* fine, int64_t num_fine,
                                     int64_t max_len, int64_t alignment, bool /*drop_eagle*/,
                                     absl::Span<const int> gids, std::vector<BlockId>* out) const {
  if (params_.partial_hits && alignment < block_size_) {
    const int64_t h = params_.hash_block_size;
    for (int64_t f = std::min(max_len / h, num_fine) - 1; f >= 0; --f) {
      const int64_t end = (f + 1) * h;
      if (end % alignment != 0) continue;
      const int64_t idx = CeilDiv(end, block_size_) - 1;
      bool all = true;
      for (size_t k = 0; k < gids.size() && all; ++k) {
        const BlockId b = index.Lookup(gids[k], fine[f]);
        if (b == kNoBlock) {
          all = false;
        } else {
          out[k].assign(idx + 1, kNullBlock);
          out[k][idx] = b;
        }
      }
      if (all) return end;
    }
    for (size_t k = 0; k < gids.size(); ++k) out[k].clear();
    return 0;
  }
  const int64_t nb = std::max<int64_t>(0, std::min(max_len / block_size_, num_fine / ratio_));
  for (size_t k = 0; k < gids.size(); ++k) out[k].assign(nb, kNullBlock);
  for (int64_t i = nb - 1; i >= 0; --i) {
    if (((i + 1) * block_size_) % alignment != 0) continue;
    if (LookupAll(index, fine, i, gids, out)) {
      for (size_t k = 0; k < gids.size(); ++k) out[k].resize(i + 1);
      return (i + 1) * block_size_;
    }
    for (size_t k = 0; k < gids.size(); ++k) out[k][i] = kNullBlock;
  }
  for (size_t k = 0; k < gids.size(); ++k) out[k].clear();
  return 0;
}

void MambaManager::RemoveSkippedBlocks(absl::Span<GroupBlocks> run, int64_t num_computed) const {
  const int64_t skipped = NumSkippedBlocks(num_computed);
  for (GroupBlocks& g : run) {
    const int64_t end = std::min<int64_t>(skipped, StateBlocks(g));
    // Last first, as the generic removal; [0, num_released) is null already.
    for (int64_t i = end - 1; i >= g.num_released; --i) {
      const BlockId b = g.blocks[i];
      if (b == kNullBlock) continue;
      g.blocks[i] = kNullBlock;
      pool_->Free(b);  // keeps its hash: a cached state stays hittable until evicted
    }
    g.num_released = static_cast<int32_t>(std::max<int64_t>(g.num_released, end));
  }
}

int64_t MambaManager::NumBlocksToAllocate(absl::Span<const GroupBlocks> run,
                                          const std::vector<BlockId>* hits, int64_t /*need*/,
                                          int64_t main, int64_t total) const {
  // Lookahead tokens are ignored in align mode (docs/semantics.md §10.1).
  const int64_t r = CeilDiv(main, block_size_) - 1;
  int64_t n = 0;
  for (size_t k = 0; k < run.size(); ++k) {
    const GroupBlocks& g = run[k];
    const std::vector<BlockId>* hit = hits != nullptr ? &hits[k] : nullptr;
    // A hit on a state published in this very step is refused with more blocks than the pool has,
    // so the request waits a step (MambaManager.get_num_blocks_to_allocate).
    if (hit != nullptr && !hit->empty() && hit->back() != kNullBlock &&
        std::find(cached_this_step_.begin(), cached_this_step_.end(), hit->back()) !=
            cached_this_step_.end()) {
      return pool_->num_blocks() + 1;
    }
    const int64_t held = StateBlocks(g) + (hit ? static_cast<int64_t>(hit->size()) : 0);
    int64_t need_state = r >= held ? 1 : 0;
    if (r >= 0 && r == held - 1 && main > total) {
      const BlockId last = (hit && !hit->empty()) ? hit->back() : g.blocks[held - 1];
      if (last != kNullBlock && pool_->is_cached(last))
        need_state = 1;  // never write a cached state
    }
    // The first allocation also takes the speculative state blocks; later ones reuse them.
    if (need_state > 0 && g.num_speculative < spec_.num_speculative_blocks) {
      need_state += spec_.num_speculative_blocks - g.num_speculative;
    }
    n += need_state;
    if (hit != nullptr) {
      for (BlockId b : *hit) {
        if (b != kNullBlock && pool_->ref(b) == 0) ++n;
      }
    }
  }
  return n;
}

int64_t MambaManager::AllocateNew(absl::Span<GroupBlocks> run, int64_t /*need*/, int64_t main,
                                  int64_t total) const {
  const int64_t r = CeilDiv(main, block_size_) - 1;
  const int ks = spec_.num_speculative_blocks;
  int64_t n = 0;
  for (GroupBlocks& g : run) {
    const int64_t size = StateBlocks(g);
    if (r >= 0 && r == size - 1 && main > total) {
      const BlockId old = g.blocks[r];
      if (old != kNullBlock && pool_->is_cached(old)) {
        // The state continues from a cached state: write it into a fresh block.
        g.blocks[r] = pool_->Allocate();
        pool_->Free(old);
        ++n;
        n += ReserveSpeculativeBlocks(g, ks);
        continue;
      }
    }
    if (r < size) continue;
    // The running state moves to block r (vLLM's allocate_new_blocks in align mode): the first
    // speculative block becomes it and one new block joins the speculative ones at the end, or,
    // on the first allocation, a new block holds it and the speculative blocks are taken.
    std::vector<BlockId> speculative(g.blocks.end() - g.num_speculative, g.blocks.end());
    g.blocks.resize(size);
    g.num_speculative = 0;
    g.blocks.resize(r, kNullBlock);
    if (speculative.empty()) {
      g.blocks.push_back(pool_->Allocate());
      ++n;
      n += ReserveSpeculativeBlocks(g, ks);
    } else {
      g.blocks.insert(g.blocks.end(), speculative.begin(), speculative.end());
      g.blocks.push_back(pool_->Allocate());
      ++n;
      g.num_speculative = static_cast<int32_t>(speculative.size());
    }
  }
  return n;
}

int64_t MambaManager::ReserveSpeculativeBlocks(GroupBlocks& g, int count) const {
  const int64_t missing = count - g.num_speculative;
  for (int64_t i = 0; i < missing; ++i) g.blocks.push_back(pool_->Allocate());
  g.num_speculative = count;
  return std::max<int64_t>(missing, 0);
}

const HashPair* MambaManager::StateToPublish(const HashPair* fine, int64_t limit, int64_t step_end,
                                             int64_t* index) const {
  const int64_t unit = params_.partial_hits ? params_.hash_block_size : block_size_;
  if (step_end <= 0 || step_end % unit != 0 || step_end > limit ||
      step_end % params_.hit_alignment != 0) {
    return nullptr;
  }
  *index = CeilDiv(step_end, block_size_) - 1;
  return step_end % block_size_ == 0 ? &BlockHash(fine, *index)
                                     : &fine[step_end / params_.hash_block_size - 1];
}

void MambaManager::PrefetchPublishes(absl::Span<const GroupBlocks> run, const HashPair* fine,
                                     int64_t limit, int64_t step_end) const {
  int64_t i;
  const HashPair* h = StateToPublish(fine, limit, step_end, &i);
  if (h == nullptr) return;
  for (size_t k = 0; k < run.size(); ++k) {
    const GroupBlocks& g = run[k];
    if (i < StateBlocks(g) && g.blocks[i] != kNullBlock) {
      pool_->PrefetchPublish(g.blocks[i], group_id_ + static_cast<int>(k), *h);
    }
  }
}

// vLLM's MambaManager.reachable_block_mask (docs/semantics.md §10.2): dense retention keeps every
// state a step ends on; N tokens keeps those at multiples of N and, as 0 does, the one at the
// request's replay boundary and at its shared-prefix junction (floored to A).
bool MambaManager::RetainsStateAt(int64_t position, const CacheRequest& request) const {
  const std::optional<int64_t>& retention = params_.retention_interval;
  if (!retention) return true;
  if (*retention > 0 && (*retention <= block_size_ || position % *retention == 0)) return true;
  int64_t boundaries[2];
  const int n = NumRetainedBoundaries(request, params_.replay_boundary_shift, boundaries);
  for (int k = 0; k < n; ++k) {
    if (position == boundaries[k]) return true;
  }
  return false;
}

int64_t MambaManager::CacheBlocks(absl::Span<GroupBlocks> run, const HashPair* fine, int64_t limit,
                                  int64_t step_end, const CacheRequest& request) const {
  int64_t i = 0;
  const HashPair* h = StateToPublish(fine, limit, step_end, &i);
  // Dense retention keeps every state a step ends on: one the interval drops is recorded.
  const bool dropped = h != nullptr && !RetainsStateAt(step_end, request);
  const int64_t limit_blocks = limit / block_size_;
  int64_t n = 0;
  for (size_t k = 0; k < run.size(); ++k) {
    GroupBlocks& g = run[k];
    if (dropped && i < StateBlocks(g) && g.blocks[i] != kNullBlock &&
        !pool_->is_cached(g.blocks[i])) {
      pool_->NoteRetentionDropped(group_id_ + static_cast<int>(k), *h);
    }
    if (h != nullptr && !dropped && i < StateBlocks(g)) {
      const BlockId b = g.blocks[i];
      if (b != kNullBlock && !pool_->is_cached(b) &&
          pool_->Cache(b, group_id_ + static_cast<int>(k), *h)) {
        cached_this_step_.push_back(b);
        ++n;
      }
    }
    g.num_cached = std::max(g.num_cached, limit_blocks);
  }
  return n;
}

}  // namespace kv
}  // namespace prefixsim
