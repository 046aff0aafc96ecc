// Full attention and MLA hit finding (reference §9.2): left to right; the chain guarantees that
// once block j misses, every later block misses too.
#include <algorithm>

#include "sim/kv/single_type_manager.h"

namespace prefixsim {
namespace kv {

int64_t FullAttentionManager::FindLongestHit(const HashPair* fine, int64_t num_fine,
                                             int64_t max_len, int64_t alignment, bool drop_eagle,
                                             absl::Span<const int> gids,
                                             std::vector<BlockId>* out) const {
  const int64_t nb = std::min(max_len / block_size_, num_fine / ratio_);
  for (size_t k = 0; k < gids.size(); ++k) out[k].resize(std::max<int64_t>(nb, 0));
  // Prefetch a few blocks ahead: the lookups are independent memory accesses.
  constexpr int64_t kAhead = 8;
  for (int64_t p = 0; p < std::min(kAhead, nb); ++p) {
    for (int g : gids) pool_->Prefetch(g, BlockHash(fine, p));
  }
  int64_t j = 0;
  while (j < nb) {
    if (j + kAhead < nb) {
      for (int g : gids) pool_->Prefetch(g, BlockHash(fine, j + kAhead));
    }
    if (!LookupAll(fine, j, gids, out)) break;
    ++j;
  }
  int64_t hit = j * block_size_;
  // EAGLE/MTP: the last matched unit is recomputed (reference §9.4).
  if (drop_eagle && hit > 0) hit -= std::min(alignment, block_size_);
  hit -= hit % alignment;
  const int64_t keep = CeilDiv(hit, block_size_);
  for (size_t k = 0; k < gids.size(); ++k) out[k].resize(keep);
  return hit;
}

}  // namespace kv
}  // namespace prefixsim
