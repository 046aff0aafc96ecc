#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/spec/acceptance_model.h"

namespace prefixsim {
namespace {

struct Entry {
  std::string_view name;
  AcceptanceFactory factory;
};

// One line per acceptance model.
constexpr Entry kRegistry[] = {
    {"geometric", &NewGeometricAcceptance},
    {"per_position", &NewPerPositionAcceptance},
    {"empirical", &NewEmpiricalAcceptance},
    {"trace", &NewTraceAcceptance},
};

}  // namespace

absl::StatusOr<std::unique_ptr<AcceptanceModel>> NewAcceptanceModel(const AcceptanceConfig& config,
                                                                    int num_speculative_tokens) {
  if (num_speculative_tokens < 0) {
    return absl::InvalidArgumentError("speculative.num_speculative_tokens must be >= 0");
  }
  for (const Entry& e : kRegistry) {
    if (e.name == config.model) return e.factory(config, num_speculative_tokens);
  }
  return absl::NotFoundError(
      absl::StrCat("speculative.acceptance.model: unknown model \"", config.model,
                   "\"; registered: ", absl::StrJoin(RegisteredAcceptanceModels(), ", ")));
}

std::vector<std::string> RegisteredAcceptanceModels() {
  std::vector<std::string> names;
  for (const Entry& e : kRegistry) names.emplace_back(e.name);
  return names;
}

}  // namespace prefixsim
