// Per-position acceptance: draft i (0-based) is accepted with probability rates[i], given that
// drafts 0..i-1 were accepted; the first rejection ends the run.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/spec/acceptance_model.h"

namespace prefixsim {
namespace {

class PerPositionAcceptance : public AcceptanceModel {
 public:
  explicit PerPositionAcceptance(const std::vector<double>& rates) {
    for (double r : rates) accept_.emplace_back(r);
  }
  std::string_view name() const override { return "per_position"; }
  int Sample(int num_drafts, Mt19937_64& rng) const override {
    const int limit = std::min(num_drafts, static_cast<int>(accept_.size()));
    return AcceptedRun(accept_.data(), /*stride=*/1, limit, rng);
  }

 private:
  std::vector<BernoulliThreshold> accept_;  // one per draft position
};

}  // namespace

absl::StatusOr<std::unique_ptr<AcceptanceModel>> NewPerPositionAcceptance(
    const AcceptanceConfig& config, int num_speculative_tokens) {
  if (static_cast<int>(config.rates.size()) < num_speculative_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "speculative.acceptance.rates: the per_position model needs one rate per draft position (",
        num_speculative_tokens, "), got ", config.rates.size()));
  }
  for (size_t i = 0; i < config.rates.size(); ++i) {
    if (!(config.rates[i] >= 0.0 && config.rates[i] <= 1.0)) {
      return absl::InvalidArgumentError(absl::StrCat("speculative.acceptance.rates[", i,
                                                     "]: ", config.rates[i], " is not in [0, 1]"));
    }
  }
  return std::make_unique<PerPositionAcceptance>(config.rates);
}

}  // namespace prefixsim
