// Power-of-two bins of a token count, with token-weighted hit sums: the prompt-length bins of the
// block-size cliff (`analyze`'s `cliff` table and the HTML report's cliff chart, docs/design.md
// §4.5). Bin 0 holds 0 tokens; bin k >= 1 holds [2^(k-1), 2^k - 1] tokens.
#ifndef PREFIXSIM_SIM_UTIL_LOG2_BINS_H_
#define PREFIXSIM_SIM_UTIL_LOG2_BINS_H_

#include <array>
#include <bit>
#include <cstdint>
#include <limits>

namespace prefixsim {

// The bin of a count: 0 for 0 (and negative counts), else its bit width.
inline int Log2Bin(int64_t tokens) {
  return tokens <= 0 ? 0 : std::bit_width(static_cast<uint64_t>(tokens));
}
// The smallest and the largest count of bin k (both inclusive).
inline int64_t Log2BinMin(int k) { return k <= 0 ? 0 : int64_t{1} << (k - 1); }
inline int64_t Log2BinMax(int k) {
  if (k <= 0) return 0;
  return k >= 63 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << k) - 1;
}

// Requests, prompt tokens and hit tokens per prompt-length bin.
struct Log2TokenBins {
  static constexpr int kBins = 64;
  std::array<int64_t, kBins> requests{};
  std::array<int64_t, kBins> prompt_tokens{};
  std::array<int64_t, kBins> hit_tokens{};

  void Add(int64_t prompt, int64_t hit) {
    const int k = Log2Bin(prompt);
    ++requests[k];
    prompt_tokens[k] += prompt;
    hit_tokens[k] += hit;
  }
  // The lowest and the highest bin that holds a request; first > last when none does.
  int First() const {
    for (int k = 0; k < kBins; ++k) {
      if (requests[k] > 0) return k;
    }
    return kBins;
  }
  int Last() const {
    for (int k = kBins - 1; k >= 0; --k) {
      if (requests[k] > 0) return k;
    }
    return -1;
  }
  // hit_tokens / prompt_tokens of bin k (token-weighted); 0 for a bin without prompt tokens.
  double HitFraction(int k) const {
    return prompt_tokens[k] > 0
               ? static_cast<double>(hit_tokens[k]) / static_cast<double>(prompt_tokens[k])
               : 0.0;
  }
};

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_UTIL_LOG2_BINS_H_
