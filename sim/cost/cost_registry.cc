#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/cost/cost_model.h"

namespace prefixsim {
namespace {

struct Entry {
  std::string_view name;
  CostModelFactory factory;
};

// One line per cost model.
constexpr Entry kRegistry[] = {
    {"analytic", &NewAnalyticCostModel},
    {"table", &NewTableCostModel},
};

}  // namespace

absl::StatusOr<std::unique_ptr<CostModel>> NewCostModel(const CostModelConfig& config,
                                                        const CostModelContext& context) {
  for (const Entry& e : kRegistry) {
    if (e.name == config.kind) return e.factory(config, context);
  }
  return absl::NotFoundError(
      absl::StrCat("cost_model.kind: unknown cost model \"", config.kind,
                   "\"; registered: ", absl::StrJoin(RegisteredCostModels(), ", ")));
}

std::vector<std::string> RegisteredCostModels() {
  std::vector<std::string> names;
  for (const Entry& e : kRegistry) names.emplace_back(e.name);
  return names;
}

}  // namespace prefixsim
