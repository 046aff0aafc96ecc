// Acceptance models for speculative decoding: how many of the drafts scheduled in one
// verification step the target model accepts (docs/semantics.md §11 "Speculative decoding"). A
// model is one file in sim/spec/ plus one registration line in sim/spec/acceptance_registry.cc.
#ifndef PREFIXSIM_SIM_SPEC_ACCEPTANCE_MODEL_H_
#define PREFIXSIM_SIM_SPEC_ACCEPTANCE_MODEL_H_

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "prefixsim/engine_config.h"
#include "sim/spec/mt19937_64.h"

namespace prefixsim {

// A uniform double in [0, 1) from 53 random bits: the same on every platform (unlike
// std::uniform_real_distribution, whose algorithm is implementation-defined).
inline double UniformDouble(Mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// A Bernoulli(p) draw that reads the same 53 bits as `UniformDouble(rng) < p` and gives the same
// answer, as an integer comparison: k · 2^-53 < p exactly when k < ceil(p · 2^53), since scaling
// by a power of two is exact. It saves the conversion on the per-draft hot path.
class BernoulliThreshold {
 public:
  // REQUIRES: 0 <= p <= 1.
  explicit BernoulliThreshold(double p)
      : threshold_(p >= 1.0   ? uint64_t{1} << 53
                   : p <= 0.0 ? 0
                              : static_cast<uint64_t>(std::ceil(std::ldexp(p, 53)))) {}
  bool Draw(Mt19937_64& rng) const { return (rng() >> 11) < threshold_; }
  uint64_t threshold() const { return threshold_; }

 private:
  uint64_t threshold_;
};

// The accepted run of one verification of `limit` drafts: draft i is accepted with probability
// accept[i] given that drafts 0..i-1 were (accept[i * stride]; stride 0 for i.i.d. drafts), the
// first rejection ends the run, and each draft tried consumes one value of `rng`, exactly as
// drawing one by one. Where the values are buffered, all `limit` comparisons are made at once and
// the run read off the bits: the outcome is random, so a branch on each draw is unpredictable
// (in `perf`, about half of the loop version's samples landed just after its branches).
inline int AcceptedRun(const BernoulliThreshold* accept, size_t stride, int limit,
                       Mt19937_64& rng) {
  constexpr int kMaxAtOnce = 8;  // more drafts than this: most comparisons would go unused
  if (limit > 0 && limit <= kMaxAtOnce && static_cast<size_t>(limit) <= rng.buffered()) {
    uint32_t accepted_bits = 0;
    for (int i = 0; i < limit; ++i) {
      accepted_bits |= static_cast<uint32_t>((rng.Peek(i) >> 11) < accept[i * stride].threshold())
                       << i;
    }
    const int accepted = std::countr_one(accepted_bits);  // <= limit: bit `limit` is 0
    rng.Skip(static_cast<size_t>(std::min(accepted + 1, limit)));
    return accepted;
  }
  int accepted = 0;
  while (accepted < limit && accept[accepted * stride].Draw(rng)) ++accepted;
  return accepted;
}

class AcceptanceModel {
 public:
  virtual ~AcceptanceModel() = default;
  virtual std::string_view name() const = 0;
  // Accepted drafts among `num_drafts` (<= the configured num_speculative_tokens) verified
  // together. Returns a value in [0, num_drafts]. Draws only from `rng`.
  virtual int Sample(int num_drafts, Mt19937_64& rng) const = 0;
};

using AcceptanceFactory = absl::StatusOr<std::unique_ptr<AcceptanceModel>> (*)(
    const AcceptanceConfig& config, int num_speculative_tokens);

// Factories, one per file.
// i.i.d. acceptance with probability `rate`, reported under `name` (geometric.cc).
std::unique_ptr<AcceptanceModel> MakeIidAcceptance(double rate, std::string_view name);
absl::StatusOr<std::unique_ptr<AcceptanceModel>> NewGeometricAcceptance(
    const AcceptanceConfig& config, int num_speculative_tokens);
absl::StatusOr<std::unique_ptr<AcceptanceModel>> NewPerPositionAcceptance(
    const AcceptanceConfig& config, int num_speculative_tokens);
absl::StatusOr<std::unique_ptr<AcceptanceModel>> NewEmpiricalAcceptance(
    const AcceptanceConfig& config, int num_speculative_tokens);
absl::StatusOr<std::unique_ptr<AcceptanceModel>> NewTraceAcceptance(const AcceptanceConfig& config,
                                                                    int num_speculative_tokens);

// The model registered under config.model (NotFound names the registered ones), configured for
// k = num_speculative_tokens drafts (InvalidArgument for bad rates or histograms).
absl::StatusOr<std::unique_ptr<AcceptanceModel>> NewAcceptanceModel(const AcceptanceConfig& config,
                                                                    int num_speculative_tokens);
std::vector<std::string> RegisteredAcceptanceModels();

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_SPEC_ACCEPTANCE_MODEL_H_
