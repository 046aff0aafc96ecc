// Internal: the built-in block-size policies and what they share.
#ifndef PREFIXSIM_SIM_PLAN_POLICIES_POLICIES_H_
#define PREFIXSIM_SIM_PLAN_POLICIES_POLICIES_H_

#include <memory>
#include <optional>
#include <vector>

#include "prefixsim/policy.h"
#include "sim/util/registry.h"

namespace prefixsim {

// The largest candidate whose page (candidate × per_token_bytes) fits the budget.
inline std::optional<int> LargestFitting(const std::vector<int>& candidates,
                                         int64_t per_token_bytes, int64_t page_budget) {
  std::optional<int> best;
  for (int c : candidates) {
    if (static_cast<int64_t>(c) * per_token_bytes <= page_budget && (!best || c > *best)) best = c;
  }
  return best;
}

std::unique_ptr<BlockSizePolicy> MakeOldPolicy();
std::unique_ptr<BlockSizePolicy> MakeNewPolicy();
std::unique_ptr<BlockSizePolicy> MakeNewDivisorOfPolicy();

// The built-in policies by name (sim/plan/policy_registry.cc; FindPolicy reads it).
const Registry<std::unique_ptr<BlockSizePolicy>>& PolicyRegistry();

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_PLAN_POLICIES_POLICIES_H_
