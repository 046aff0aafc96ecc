// Empirical acceptance: a histogram of accepted lengths. histogram[j] is the weight of accepting
// exactly j drafts (j = 0..k) when all k are verified. When fewer drafts are verified (the token
// budget cut the step), the draw is capped at that number: the first n drafts are accepted
// whenever at least n of k would have been.
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/spec/acceptance_model.h"

namespace prefixsim {
namespace {

class EmpiricalAcceptance : public AcceptanceModel {
 public:
  explicit EmpiricalAcceptance(std::vector<double> cumulative)
      : cumulative_(std::move(cumulative)) {}
  std::string_view name() const override { return "empirical"; }
  int Sample(int num_drafts, Mt19937_64& rng) const override {
    const double u = UniformDouble(rng) * cumulative_.back();
    int j = 0;
    while (j + 1 < static_cast<int>(cumulative_.size()) && u >= cumulative_[j]) ++j;
    return j < num_drafts ? j : num_drafts;
  }

 private:
  std::vector<double> cumulative_;  // cumulative weights of 0..k accepted
};

}  // namespace

absl::StatusOr<std::unique_ptr<AcceptanceModel>> NewEmpiricalAcceptance(
    const AcceptanceConfig& config, int num_speculative_tokens) {
  const size_t want = static_cast<size_t>(num_speculative_tokens) + 1;
  if (config.histogram.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "speculative.acceptance.histogram: the empirical model needs num_speculative_tokens + 1 = ",
        want, " weights (accepting 0..k drafts), got ", config.histogram.size()));
  }
  std::vector<double> cumulative;
  double sum = 0;
  for (size_t i = 0; i < config.histogram.size(); ++i) {
    const double w = config.histogram[i];
    if (!(w >= 0.0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("speculative.acceptance.histogram[", i, "]: ", w, " is negative"));
    }
    sum += w;
    cumulative.push_back(sum);
  }
  if (!(sum > 0.0)) {
    return absl::InvalidArgumentError("speculative.acceptance.histogram: all weights are zero");
  }
  return std::make_unique<EmpiricalAcceptance>(std::move(cumulative));
}

}  // namespace prefixsim
