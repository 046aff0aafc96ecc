// The 64-bit Mersenne Twister (Matsumoto and Nishimura's MT19937-64): the same generator, seeding
// and output stream as std::mt19937_64, which the engine documents as its random source (so
// reports do not change), with a state refill written so the compiler vectorizes it. The
// acceptance draws of a speculative-decoding replay read ~3.5 M values from it; libstdc++'s scalar
// refill was ~5% of such a replay. tests/spec/mt19937_64_test.cc checks the stream against the
// standard library's.
#ifndef PREFIXSIM_SIM_SPEC_MT19937_64_H_
#define PREFIXSIM_SIM_SPEC_MT19937_64_H_

#include <cstddef>
#include <cstdint>
#include <limits>

namespace prefixsim {

class Mt19937_64 {
 public:
  using result_type = uint64_t;
  static constexpr size_t kStateSize = 312;
  static constexpr uint64_t kDefaultSeed = 5489;

  explicit Mt19937_64(uint64_t seed = kDefaultSeed) { Seed(seed); }

  void Seed(uint64_t seed) {
    state_[0] = seed;
    for (size_t i = 1; i < kStateSize; ++i) {
      const uint64_t prev = state_[i - 1];
      state_[i] = 6364136223846793005ULL * (prev ^ (prev >> 62)) + i;
    }
    next_ = kStateSize;
  }

  uint64_t operator()() {
    if (next_ >= kStateSize) Refill();
    return Temper(state_[next_++]);
  }

  // Looking ahead without consuming, for callers that decide how many values they use from the
  // values themselves (the acceptance draws): Peek(i) is the value the (i+1)-th next call
  // returns, and Skip(n) consumes n values as n calls would, within the buffered() values left
  // before the next refill.
  size_t buffered() const { return kStateSize - next_; }
  // REQUIRES: i < buffered().
  uint64_t Peek(size_t i) const { return Temper(state_[next_ + i]); }
  // REQUIRES: n <= buffered().
  void Skip(size_t n) { next_ += n; }

  void Discard(uint64_t n) {
    for (; n > 0; --n) (*this)();
  }

  static constexpr uint64_t min() { return 0; }
  static constexpr uint64_t max() { return std::numeric_limits<uint64_t>::max(); }

 private:
  static constexpr size_t kShift = 156;  // the recurrence's middle word
  static uint64_t Temper(uint64_t z) {
    z ^= (z >> 29) & 0x5555555555555555ULL;
    z ^= (z << 17) & 0x71d67fffeda60000ULL;
    z ^= (z << 37) & 0xfff7eee000000000ULL;
    z ^= z >> 43;
    return z;
  }
  // Regenerates all 312 words. Each loop is free of dependencies within a vector's width (the
  // words read are either still old, i + 1 and i + kShift, or were written at least 156 words
  // earlier), and the conditional XOR is a mask, so both loops vectorize.
  [[gnu::noinline]] void Refill() {
    constexpr uint64_t kUpper = ~uint64_t{0} << 31, kLower = ~kUpper;
    constexpr uint64_t kMatrix = 0xb5026f5aa96619e9ULL;
    uint64_t* s = state_;
    for (size_t i = 0; i < kStateSize - kShift; ++i) {
      const uint64_t x = (s[i] & kUpper) | (s[i + 1] & kLower);
      s[i] = s[i + kShift] ^ (x >> 1) ^ ((0 - (x & 1)) & kMatrix);
    }
    for (size_t i = kStateSize - kShift; i < kStateSize - 1; ++i) {
      const uint64_t x = (s[i] & kUpper) | (s[i + 1] & kLower);
      s[i] = s[i - (kStateSize - kShift)] ^ (x >> 1) ^ ((0 - (x & 1)) & kMatrix);
    }
    const uint64_t x = (s[kStateSize - 1] & kUpper) | (s[0] & kLower);
    s[kStateSize - 1] = s[kShift - 1] ^ (x >> 1) ^ ((0 - (x & 1)) & kMatrix);
    next_ = 0;
  }

  uint64_t state_[kStateSize];
  size_t next_ = kStateSize;
};

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_SPEC_MT19937_64_H_
