#include "absl/strings/str_cat.h"
#include "sim/cost/cost_model.h"
#include "sim/util/registry.h"

namespace prefixsim {
namespace {

const Registry<CostModelFactory>& CostModels() {
  static const auto* models = [] {
    auto* registry = new Registry<CostModelFactory>("cost model");
    // One line per cost model.
    registry->Add("analytic", &NewAnalyticCostModel).Add("table", &NewTableCostModel);
    registry->Add("measured", &NewMeasuredCostModel);
    return registry;
  }();
  return *models;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CostModel>> NewCostModel(const CostModelConfig& config,
                                                        const CostModelContext& context) {
  const CostModelFactory* factory = CostModels().Find(config.kind);
  if (factory == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("cost_model.kind: ", CostModels().UnknownNameMessage(config.kind)));
  }
  return (*factory)(config, context);
}

std::vector<std::string> RegisteredCostModels() { return CostModels().Names(); }

}  // namespace prefixsim
