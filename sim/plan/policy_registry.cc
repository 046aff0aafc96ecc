#include <memory>
#include <vector>

#include "prefixsim/policy.h"
#include "sim/plan/policies/policies.h"

namespace prefixsim {
namespace {

const std::vector<std::unique_ptr<BlockSizePolicy>>& Policies() {
  static const auto* policies = [] {
    auto* list = new std::vector<std::unique_ptr<BlockSizePolicy>>();
    // One line per policy.
    list->push_back(MakeOldPolicy());
    list->push_back(MakeNewPolicy());
    list->push_back(MakeNewDivisorOfPolicy());
    return list;
  }();
  return *policies;
}

}  // namespace

const BlockSizePolicy* FindPolicy(std::string_view name) {
  for (const auto& p : Policies()) {
    if (p->name() == name) return p.get();
  }
  return nullptr;
}

std::vector<std::string> RegisteredPolicyNames() {
  std::vector<std::string> names;
  for (const auto& p : Policies()) names.emplace_back(p->name());
  return names;
}

}  // namespace prefixsim
