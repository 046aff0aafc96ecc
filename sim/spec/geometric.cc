// Geometric acceptance: each draft is accepted with the same probability `rate`, independently
// of position, until the first rejection (the usual i.i.d. model of speculative decoding).
#include "absl/strings/str_cat.h"
#include "sim/spec/acceptance_model.h"

namespace prefixsim {
namespace {

class IidAcceptance : public AcceptanceModel {
 public:
  IidAcceptance(double rate, std::string_view name) : accept_(rate), name_(name) {}
  std::string_view name() const override { return name_; }
  int Sample(int num_drafts, Mt19937_64& rng) const override {
    return AcceptedRun(&accept_, /*stride=*/0, num_drafts, rng);
  }

 private:
  BernoulliThreshold accept_;
  std::string_view name_;
};

}  // namespace

std::unique_ptr<AcceptanceModel> MakeIidAcceptance(double rate, std::string_view name) {
  return std::make_unique<IidAcceptance>(rate, name);
}

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
  return MakeIidAcceptance(rate, "geometric");
}

}  // namespace prefixsim
