// Chunked local attention (docs/semantics.md §9.2, §10.3): tokens before the current chunk are
// never attended to, so their blocks are null ("computed"); scan left to right from the chunk
// start.
#include <algorithm>

#include "sim/kv/single_type_manager.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace kv {

int64_t ChunkedLocalManager::NumSkippedTokens(int64_t num_computed) const {
  return RoundDown(num_computed, spec_.attention_chunk_size);
}

// ChunkedLocalAttentionSpec.max_admission_blocks_per_request (docs/semantics.md §2.3).
int64_t ChunkedLocalManager::MaxAdmissionTokens(int64_t max_in_flight_tokens,
                                                int64_t max_model_len) const {
  const int64_t span = std::min(spec_.attention_chunk_size + max_in_flight_tokens, max_model_len);
  return CeilDiv(span, block_size_) * block_size_;
}

int64_t ChunkedLocalManager::FindLongestHit(const HitIndex& index, const HashPair* fine,
                                            int64_t num_fine, int64_t max_len, int64_t alignment,
                                            bool /*drop_eagle*/, absl::Span<const int> gids,
                                            std::vector<BlockId>* out) const {
  PREFIXSIM_CHECK(spec_.attention_chunk_size > 0);
  const int64_t nb = std::max<int64_t>(0, std::min(max_len / block_size_, num_fine / ratio_));
  const int64_t start = std::min(RoundDown(max_len, spec_.attention_chunk_size) / block_size_, nb);
  for (size_t k = 0; k < gids.size(); ++k) out[k].assign(nb, kNullBlock);
  int64_t j = start;
  while (j < nb && LookupAll(index, fine, j, gids, out)) ++j;
  int64_t hit = j * block_size_;
  // vLLM requires B == A here; align anyway so a hybrid hit stays a multiple of A.
  hit -= hit % alignment;
  const int64_t keep = CeilDiv(hit, block_size_);
  for (size_t k = 0; k < gids.size(); ++k) out[k].resize(keep);
  return hit;
}

}  // namespace kv
}  // namespace prefixsim
