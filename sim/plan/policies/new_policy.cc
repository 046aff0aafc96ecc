// Post-#53007: a sliding-window layer starts from the primary block size when the page budget
// allows, so the scheduler LCM stays at the primary size and unify pads instead of scaling
// (docs/semantics.md §5.2).
#include <algorithm>

#include "sim/plan/policies/policies.h"

namespace prefixsim {
namespace {

class NewPolicy : public BlockSizePolicy {
 public:
  std::string_view name() const override { return "new"; }
  std::string_view description() const override {
    return "vLLM#53007: SWA layers take the largest kernel block within the primary page budget";
  }
  int SlidingWindowBlockSize(const AttentionBackend& backend, int64_t per_token_bytes,
                             std::optional<int64_t> shared_page,
                             int primary_block_size) const override {
    const int64_t budget = shared_page && *shared_page > 0
                               ? *shared_page
                               : per_token_bytes * static_cast<int64_t>(primary_block_size);
    const int64_t max_block = per_token_bytes > 0 ? budget / per_token_bytes : 0;
    std::vector<int> candidates;
    for (const auto& s : backend.kernel_block_sizes) {
      if (!s.multiple_of) candidates.push_back(s.value);
    }
    for (const auto& s : backend.kernel_block_sizes) {
      if (s.multiple_of) {
        // The largest multiple of the base within the budget, never below the base itself.
        candidates.push_back(
            static_cast<int>(std::max<int64_t>(s.value, (max_block / s.value) * s.value)));
      }
    }
    if (candidates.empty()) return primary_block_size;
    const int smallest = *std::min_element(candidates.begin(), candidates.end());
    return LargestFitting(candidates, per_token_bytes, budget).value_or(smallest);
  }
};

}  // namespace

std::unique_ptr<BlockSizePolicy> MakeNewPolicy() { return std::make_unique<NewPolicy>(); }

}  // namespace prefixsim
