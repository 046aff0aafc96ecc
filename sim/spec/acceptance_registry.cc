#include "absl/strings/str_cat.h"
#include "sim/spec/acceptance_model.h"
#include "sim/util/registry.h"

namespace prefixsim {
namespace {

const Registry<AcceptanceFactory>& AcceptanceModels() {
  static const auto* models = [] {
    auto* registry = new Registry<AcceptanceFactory>("acceptance model");
    // One line per acceptance model.
    registry->Add("geometric", &NewGeometricAcceptance)
        .Add("per_position", &NewPerPositionAcceptance)
        .Add("empirical", &NewEmpiricalAcceptance)
        .Add("trace", &NewTraceAcceptance);
    return registry;
  }();
  return *models;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AcceptanceModel>> NewAcceptanceModel(const AcceptanceConfig& config,
                                                                    int num_speculative_tokens) {
  if (num_speculative_tokens < 0) {
    return absl::InvalidArgumentError("speculative.num_speculative_tokens must be >= 0");
  }
  const AcceptanceFactory* factory = AcceptanceModels().Find(config.model);
  if (factory == nullptr) {
    return absl::NotFoundError(absl::StrCat("speculative.acceptance.model: ",
                                            AcceptanceModels().UnknownNameMessage(config.model)));
  }
  return (*factory)(config, num_speculative_tokens);
}

std::vector<std::string> RegisteredAcceptanceModels() { return AcceptanceModels().Names(); }

}  // namespace prefixsim
