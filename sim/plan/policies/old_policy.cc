// Pre-#53007: a sliding-window layer starts from its backend's smallest kernel block and relies on
// page unification to scale it up (docs/semantics.md §5.1).
#include <algorithm>

#include "sim/plan/policies/policies.h"

namespace prefixsim {
namespace {

class OldPolicy : public BlockSizePolicy {
 public:
  std::string_view name() const override { return "old"; }
  std::string_view description() const override {
    return "pre-vLLM#53007: SWA layers take the backend's smallest kernel block; unify scales it";
  }
  int SlidingWindowBlockSize(const AttentionBackend& backend, int64_t per_token_bytes,
                             std::optional<int64_t> shared_page,
                             int primary_block_size) const override {
    std::vector<int> candidates;
    for (const auto& s : backend.kernel_block_sizes) {
      if (!s.multiple_of) candidates.push_back(s.value);
    }
    if (candidates.empty()) {
      // Only MultipleOf declarations: their bases, not their multiples.
      for (const auto& s : backend.kernel_block_sizes) candidates.push_back(s.value);
    }
    if (candidates.empty()) return primary_block_size;
    const int smallest = *std::min_element(candidates.begin(), candidates.end());
    const int64_t budget = shared_page.value_or(0);
    if (budget <= 0 || per_token_bytes <= 0) return smallest;
    return LargestFitting(candidates, per_token_bytes, budget).value_or(smallest);
  }
};

}  // namespace

std::unique_ptr<BlockSizePolicy> MakeOldPolicy() { return std::make_unique<OldPolicy>(); }

}  // namespace prefixsim
