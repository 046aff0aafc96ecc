// Block-size policies: how a sliding-window layer picks its block size (docs/semantics.md §5).
#ifndef PREFIXSIM_POLICY_H_
#define PREFIXSIM_POLICY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "prefixsim/engine_config.h"

namespace prefixsim {

class BlockSizePolicy {
 public:
  virtual ~BlockSizePolicy() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  // Block size of a sliding-window layer. `per_token_bytes` > 0 is the layer's real KV bytes per
  // token; `shared_page` the skip-quant shared page, if any; `primary_block_size` the primary P.
  virtual int SlidingWindowBlockSize(const AttentionBackend& backend, int64_t per_token_bytes,
                                     std::optional<int64_t> shared_page,
                                     int primary_block_size) const = 0;
};

// The policy registered under `name`, or nullptr.
const BlockSizePolicy* FindPolicy(std::string_view name);
std::vector<std::string> RegisteredPolicyNames();

// A policy that gives every sliding-window layer `block_size` tokens whatever its backend prefers
// (page unification may still scale it, as it scales any policy's choice): what `prefixsim tune`
// tries, and what a policy file holds.
std::unique_ptr<BlockSizePolicy> MakeFixedSlidingWindowPolicy(std::string name, int block_size);

// Wherever a policy's name is accepted, a path ending in ".json" names a policy file instead:
// {"name": "...", "sliding_window_block_size": N} (docs/tune.md). Errors name the file, the line
// and the field.
bool IsPolicyFilePath(std::string_view name);
absl::StatusOr<std::unique_ptr<BlockSizePolicy>> LoadPolicyFile(std::string_view path);

}  // namespace prefixsim

#endif  // PREFIXSIM_POLICY_H_
