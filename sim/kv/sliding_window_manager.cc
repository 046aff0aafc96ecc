// Sliding-window attention (docs/semantics.md §9.2, §10.2, §10.3).
#include <algorithm>

#include "sim/kv/single_type_manager.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace kv {

SlidingWindowManager::SlidingWindowManager(const KvGroup& spec, int group_id, BlockPool* pool,
                                           const ManagerParams& p)
    : SingleTypeManager(spec, group_id, pool, p) {
  PREFIXSIM_CHECK(spec.sliding_window > 0);
}

int64_t SlidingWindowManager::NeedBlocks(bool drop_eagle) const {
  return CeilDiv(spec_.sliding_window - 1, block_size_) + (drop_eagle ? 1 : 0);
}

int64_t SlidingWindowManager::NumSkippedTokens(int64_t num_computed) const {
  return std::max<int64_t>(0,
                           num_computed - spec_.sliding_window + 1 - params_.extra_retained_tokens);
}

// kv_cache_interface.py SlidingWindowSpec.max_admission_blocks_per_request (docs/semantics.md
// §2.3).
int64_t SlidingWindowManager::MaxAdmissionTokens(int64_t max_in_flight_tokens,
                                                 int64_t max_model_len) const {
  const int64_t span =
      std::min(spec_.sliding_window - 1 + params_.extra_retained_tokens + max_in_flight_tokens,
               max_model_len);
  return (CeilDiv(span, block_size_) + 1) * block_size_;
}

// vLLM's SlidingWindowManager.reachable_block_mask (docs/semantics.md §10.2): block i is published
// only if a hit can use it, i.e. it is among the `need` blocks before a checkpoint (one block later
// for an EAGLE group). Dense retention: before every A boundary (with need >= A/B, every block);
// N tokens: before every N boundary, and, as with 0, before the request's replay boundary and
// shared-prefix junction.
bool SlidingWindowManager::Reachable(int64_t i, const CacheRequest& request,
                                     const std::optional<int64_t>& retention) const {
  const int64_t alignment = params_.hit_alignment;
  if (alignment % block_size_ != 0) return true;
  const bool eagle = spec_.is_eagle_group;
  const int64_t need = NeedBlocks(eagle);
  const int64_t shift = eagle ? 1 : 0;
  const int64_t segment = retention ? *retention : alignment;
  if (segment > 0) {
    const int64_t per_segment = segment / block_size_;
    if (need >= per_segment) return true;
    if (i >= shift && (i - shift) % per_segment >= per_segment - need) return true;
  }
  if (!retention) return false;
  int64_t boundaries[2];
  const int n = NumRetainedBoundaries(request, /*shift=*/0, boundaries);
  for (int k = 0; k < n; ++k) {
    const int64_t end = boundaries[k] / block_size_ + shift;
    if (i >= end - need && i < end) return true;
  }
  return false;
}

int64_t SlidingWindowManager::FindLongestHit(const HitIndex& index, const HashPair* fine,
                                             int64_t num_fine, int64_t max_len, int64_t alignment,
                                             bool drop_eagle, absl::Span<const int> gids,
                                             std::vector<BlockId>* out) const {
  const int64_t nb = std::max<int64_t>(0, std::min(max_len / block_size_, num_fine / ratio_));
  const int64_t need = NeedBlocks(drop_eagle);
  const size_t ng = gids.size();
  for (size_t k = 0; k < ng; ++k) out[k].assign(nb, kNullBlock);
  int64_t run = 0;
  bool found = false;
  constexpr int64_t kAhead = 8;  // prefetch distance (the lookups are independent)
  for (int64_t p = nb - 1; p >= std::max<int64_t>(0, nb - kAhead); --p) {
    for (int g : gids) index.Prefetch(g, BlockHash(fine, p));
  }
  for (int64_t i = nb - 1; i >= 0; --i) {
    if (i >= kAhead) {
      for (int g : gids) index.Prefetch(g, BlockHash(fine, i - kAhead));
    }
    if (LookupAll(index, fine, i, gids, out)) {
      // A run must end on an A-boundary (one block past it with the EAGLE drop).
      if (run == 0 && block_size_ != alignment &&
          ((drop_eagle ? i : i + 1) * block_size_) % alignment != 0) {
        for (size_t k = 0; k < ng; ++k) out[k][i] = kNullBlock;
        continue;
      }
      ++run;
      if (run >= need) {
        for (size_t k = 0; k < ng; ++k) out[k].resize(i + run);
        found = true;
        break;
      }
    } else {
      for (size_t k = 0; k < ng; ++k) out[k][i] = kNullBlock;
      run = 0;
    }
  }
  if (!found) {
    // Only a run that starts at token 0 may be shorter than the window.
    for (size_t k = 0; k < ng; ++k) out[k].resize(run);
    while (block_size_ != alignment && !out[0].empty() &&
           (static_cast<int64_t>(out[0].size()) * block_size_) % alignment != 0) {
      for (size_t k = 0; k < ng; ++k) out[k].pop_back();
    }
  }
  if (drop_eagle && !out[0].empty()) {
    for (size_t k = 0; k < ng; ++k) out[k].pop_back();
    while (!out[0].empty() &&
           (static_cast<int64_t>(out[0].size()) * block_size_) % alignment != 0) {
      for (size_t k = 0; k < ng; ++k) out[k].pop_back();
    }
  }
  return static_cast<int64_t>(out[0].size()) * block_size_;
}

}  // namespace kv
}  // namespace prefixsim
