// The replay's generator must be std::mt19937_64 value for value: seeded results of every replay
// (and the golden files) depend on its stream (include/prefixsim/engine.h, Determinism).
#include "sim/spec/mt19937_64.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace prefixsim {
namespace {

TEST(Mt19937_64Test, SameStreamAsTheStandardLibrary) {
  // Several refills each (312 values per refill), seeds at the edges of the seed range.
  for (uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{42}, uint64_t{5489},
                        uint64_t{0x9e3779b97f4a7c15}, ~uint64_t{0}}) {
    std::mt19937_64 expected(seed);
    Mt19937_64 actual(seed);
    for (int i = 0; i < 100000; ++i) {
      ASSERT_EQ(actual(), expected()) << "seed " << seed << ", value " << i;
    }
  }
}

TEST(Mt19937_64Test, DefaultSeedReseedAndDiscard) {
  std::mt19937_64 expected;
  Mt19937_64 actual;
  EXPECT_EQ(actual(), expected());
  // The standard's check value: the 10000th output of a default-constructed generator.
  std::mt19937_64 reference;
  reference.discard(9999);
  Mt19937_64 ours;
  ours.Discard(9999);
  EXPECT_EQ(ours(), reference());
  EXPECT_EQ(Mt19937_64()(), std::mt19937_64()());
  ours.Seed(7);
  expected.seed(7);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(ours(), expected());
  EXPECT_EQ(Mt19937_64::min(), 0u);
  EXPECT_EQ(Mt19937_64::max(), ~uint64_t{0});
}

TEST(Mt19937_64Test, KnownValue) {
  // C++ [rand.predef]: the 10000th consecutive invocation of a default-constructed
  // mt19937_64 produces 9981545732273789042.
  Mt19937_64 g;
  g.Discard(9999);
  EXPECT_EQ(g(), uint64_t{9981545732273789042ULL});
}

// Peek(i) is the value of the (i+1)-th next call and Skip(n) consumes n values, up to a refill.
TEST(Mt19937_64Test, PeekAndSkipFollowTheStream) {
  std::mt19937_64 expected(9);
  Mt19937_64 g(9);
  g();  // the first refill
  expected();
  while (g.buffered() > 0) {
    const size_t n = std::min<size_t>(g.buffered(), 1 + g.buffered() % 5);
    std::vector<uint64_t> next;
    for (size_t i = 0; i < n; ++i) next.push_back(expected());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(g.Peek(i), next[i]);
    g.Skip(n);
  }
  EXPECT_EQ(g(), expected());  // refilled as if every value had been drawn
}

}  // namespace
}  // namespace prefixsim
