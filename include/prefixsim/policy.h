// Block-size policies: how a sliding-window layer picks its block size (docs/semantics.md §5).
#ifndef PREFIXSIM_POLICY_H_
#define PREFIXSIM_POLICY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

}  // namespace prefixsim

#endif  // PREFIXSIM_POLICY_H_
