// Sliding-window attention (docs/semantics.md §9.2, §10.2, §10.3).
#include <algorithm>

#include "prefixsim/status.h"
#include "sim/kv/single_type_manager.h"

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

// Dense retention (docs/semantics.md §10.2): block i is published only if it lies among the last
// `need` blocks before some A-boundary (one block later for an EAGLE group), since no hit can use
// it otherwise. With need >= A/B every block is published. [inferred: the EAGLE shift.]
bool SlidingWindowManager::Reachable(int64_t i) const {
  const int64_t alignment = params_.hit_alignment;
  if (block_size_ == alignment || alignment % block_size_ != 0) return true;
  const int64_t per_segment = alignment / block_size_;
  const int64_t need = NeedBlocks(spec_.is_eagle_group);
  if (need >= per_segment) return true;
  const int64_t pos = spec_.is_eagle_group ? i - 1 : i;
  const int64_t in_segment = ((pos % per_segment) + per_segment) % per_segment;
  return in_segment >= per_segment - need;
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
