// Trace acceptance: accepted lengths come from the trace (Request::accepted_lengths, consumed
// by the engine in order). This model is the fallback for steps the trace does not cover: a
// geometric draw with rates[0] if given, otherwise no draft is accepted.
#include "absl/strings/str_cat.h"
#include "sim/spec/acceptance_model.h"

namespace prefixsim {

absl::StatusOr<std::unique_ptr<AcceptanceModel>> NewTraceAcceptance(
    const AcceptanceConfig& config, int /*num_speculative_tokens*/) {
  double rate = 0.0;
  if (!config.rates.empty()) {
    rate = config.rates[0];
    if (!(rate >= 0.0 && rate <= 1.0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("speculative.acceptance.rates[0]: ", rate, " is not in [0, 1]"));
    }
  }
  return MakeIidAcceptance(rate, "trace");
}

}  // namespace prefixsim
