#include <memory>
#include <utility>

#include "prefixsim/policy.h"
#include "sim/plan/policies/policies.h"

namespace prefixsim {

const Registry<std::unique_ptr<BlockSizePolicy>>& PolicyRegistry() {
  static const auto* policies = [] {
    auto* registry = new Registry<std::unique_ptr<BlockSizePolicy>>("policy");
    auto add = [registry](std::unique_ptr<BlockSizePolicy> policy) {
      std::string name(policy->name());
      registry->Add(std::move(name), std::move(policy));
    };
    // One line per policy.
    add(MakeOldPolicy());
    add(MakeNewPolicy());
    add(MakeNewDivisorOfPolicy());
    return registry;
  }();
  return *policies;
}

const BlockSizePolicy* FindPolicy(std::string_view name) {
  const std::unique_ptr<BlockSizePolicy>* policy = PolicyRegistry().Find(name);
  return policy == nullptr ? nullptr : policy->get();
}

std::vector<std::string> RegisteredPolicyNames() { return PolicyRegistry().Names(); }

}  // namespace prefixsim
