// Geometric acceptance: each draft is accepted with the same probability `rate`, independently
// of position, until the first rejection (the usual i.i.d. model of speculative decoding).
#include "absl/strings/str_cat.h"
#include "sim/spec/acceptance_model.h"

namespace prefixsim {
namespace {

class GeometricAcceptance : public AcceptanceModel {
 public:
  explicit GeometricAcceptance(double rate) : rate_(rate) {}
  std::string_view name() const override { return "geometric"; }
  int Sample(int num_drafts, std::mt19937_64& rng) const override {
    int accepted = 0;
    while (accepted < num_drafts && UniformDouble(rng) < rate_) ++accepted;
    return accepted;
  }

 private:
  double rate_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<AcceptanceModel>> NewGeometricAcceptance(
    const AcceptanceConfig& config, int /*num_speculative_tokens*/) {
  if (config.rates.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculative.acceptance.rates: the geometric model takes one rate, got ",
                     config.rates.size()));
  }
  const double rate = config.rates[0];
  if (!(rate >= 0.0 && rate <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculative.acceptance.rates[0]: ", rate, " is not in [0, 1]"));
  }
  return std::make_unique<GeometricAcceptance>(rate);
}

}  // namespace prefixsim
