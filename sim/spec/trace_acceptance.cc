// Trace acceptance: accepted lengths come from the trace (Request::accepted_lengths, consumed
// by the engine in order). This model is the fallback for steps the trace does not cover: a
// geometric draw with rates[0] if given, otherwise no draft is accepted.
#include "absl/strings/str_cat.h"
#include "sim/spec/acceptance_model.h"

namespace prefixsim {
namespace {

class TraceFallbackAcceptance : public AcceptanceModel {
 public:
  explicit TraceFallbackAcceptance(double rate) : rate_(rate) {}
  std::string_view name() const override { return "trace"; }
  int Sample(int num_drafts, std::mt19937_64& rng) const override {
    int accepted = 0;
    while (accepted < num_drafts && UniformDouble(rng) < rate_) ++accepted;
    return accepted;
  }

 private:
  double rate_;
};

}  // namespace

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
  return std::make_unique<TraceFallbackAcceptance>(rate);
}

}  // namespace prefixsim
