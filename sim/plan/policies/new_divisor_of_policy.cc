// Post-#53007 with the downstream "divisor_of" patch (docs/semantics.md §5.2, §15): keep the new
// policy's choice only when it is the primary block size itself; otherwise fall back to the old
// smallest kernel block, so int-only backends (FlashInfer) do not pad SWA pages heavily.
#include "sim/plan/policies/policies.h"

namespace prefixsim {
namespace {

class NewDivisorOfPolicy : public BlockSizePolicy {
 public:
  std::string_view name() const override { return "new_divisor_of"; }
  std::string_view description() const override {
    return "vLLM#53007 plus the divisor_of patch: the primary block size, else the old choice";
  }
  int SlidingWindowBlockSize(const AttentionBackend& backend, int64_t per_token_bytes,
                             std::optional<int64_t> shared_page,
                             int primary_block_size) const override {
    const int chosen =
        new_->SlidingWindowBlockSize(backend, per_token_bytes, shared_page, primary_block_size);
    if (chosen == primary_block_size) return chosen;
    return old_->SlidingWindowBlockSize(backend, per_token_bytes, shared_page, primary_block_size);
  }

 private:
  std::unique_ptr<BlockSizePolicy> new_ = MakeNewPolicy();
  std::unique_ptr<BlockSizePolicy> old_ = MakeOldPolicy();
};

}  // namespace

std::unique_ptr<BlockSizePolicy> MakeNewDivisorOfPolicy() {
  return std::make_unique<NewDivisorOfPolicy>();
}

}  // namespace prefixsim
