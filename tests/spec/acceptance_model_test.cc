// Acceptance models of speculative decoding (docs/semantics.md §11 "Speculative decoding"): every
// registered model, the statistics of each, and the configuration errors.
#include "sim/spec/acceptance_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace prefixsim {
namespace {

AcceptanceConfig Config(std::string model, std::vector<double> rates,
                        std::vector<double> histogram = {}) {
  AcceptanceConfig c;
  c.model = std::move(model);
  c.rates = std::move(rates);
  c.histogram = std::move(histogram);
  return c;
}

// Contract over every registered model: results in [0, num_drafts], reproducible per seed.
TEST(AcceptanceContractTest, EveryRegisteredModelStaysInRangeAndIsSeeded) {
  for (const std::string& name : RegisteredAcceptanceModels()) {
    AcceptanceConfig c = Config(name, {0.7, 0.6, 0.5}, {1, 1, 1, 1});
    if (name == "geometric" || name == "trace") c.rates = {0.7};
    auto model = NewAcceptanceModel(c, 3);
    ASSERT_TRUE(model.ok()) << name << ": " << model.status();
    EXPECT_EQ((*model)->name(), name);
    Mt19937_64 a(42), b(42);
    for (int i = 0; i < 2000; ++i) {
      const int n = i % 4;
      const int x = (*model)->Sample(n, a);
      EXPECT_GE(x, 0);
      EXPECT_LE(x, n) << name;
      EXPECT_EQ(x, (*model)->Sample(n, b)) << name;
    }
  }
}

TEST(AcceptanceTest, GeometricMeanMatchesClosedForm) {
  auto model = NewAcceptanceModel(Config("geometric", {0.6}), 3);
  ASSERT_TRUE(model.ok());
  Mt19937_64 rng(1);
  const int n = 200000;
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += (*model)->Sample(3, rng);
  // E[accepted] = p + p^2 + p^3.
  const double expected = 0.6 + 0.36 + 0.216;
  EXPECT_NEAR(sum / n, expected, 0.01);
}

TEST(AcceptanceTest, GeometricExtremes) {
  Mt19937_64 rng(3);
  auto all = NewAcceptanceModel(Config("geometric", {1.0}), 4);
  auto none = NewAcceptanceModel(Config("geometric", {0.0}), 4);
  ASSERT_TRUE(all.ok() && none.ok());
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ((*all)->Sample(4, rng), 4);
    EXPECT_EQ((*all)->Sample(2, rng), 2);
    EXPECT_EQ((*none)->Sample(4, rng), 0);
  }
}

TEST(AcceptanceTest, PerPositionFrequencies) {
  auto model = NewAcceptanceModel(Config("per_position", {0.8, 0.5, 0.25}), 3);
  ASSERT_TRUE(model.ok());
  Mt19937_64 rng(7);
  const int n = 200000;
  int reach[4] = {0, 0, 0, 0};
  for (int i = 0; i < n; ++i) {
    const int a = (*model)->Sample(3, rng);
    for (int j = 0; j <= a; ++j) reach[j]++;
  }
  EXPECT_NEAR(reach[1] / double(n), 0.8, 0.01);
  EXPECT_NEAR(reach[2] / double(n), 0.8 * 0.5, 0.01);
  EXPECT_NEAR(reach[3] / double(n), 0.8 * 0.5 * 0.25, 0.01);
}

TEST(AcceptanceTest, EmpiricalFollowsHistogramAndCapsAtDrafts) {
  auto model = NewAcceptanceModel(Config("empirical", {}, {0, 0, 1, 3}), 3);
  ASSERT_TRUE(model.ok());
  Mt19937_64 rng(9);
  const int n = 100000;
  int count[4] = {0, 0, 0, 0};
  for (int i = 0; i < n; ++i) count[(*model)->Sample(3, rng)]++;
  EXPECT_EQ(count[0], 0);
  EXPECT_EQ(count[1], 0);
  EXPECT_NEAR(count[2] / double(n), 0.25, 0.01);
  EXPECT_NEAR(count[3] / double(n), 0.75, 0.01);
  for (int i = 0; i < 100; ++i) EXPECT_EQ((*model)->Sample(1, rng), 1);
}

TEST(AcceptanceTest, TraceFallbackWithoutRatesAcceptsNothing) {
  auto model = NewAcceptanceModel(Config("trace", {}), 3);
  ASSERT_TRUE(model.ok());
  Mt19937_64 rng(1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ((*model)->Sample(3, rng), 0);
}

TEST(AcceptanceTest, ConfigurationErrors) {
  EXPECT_EQ(NewAcceptanceModel(Config("nope", {0.5}), 3).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(NewAcceptanceModel(Config("geometric", {}), 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NewAcceptanceModel(Config("geometric", {1.5}), 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NewAcceptanceModel(Config("per_position", {0.5, 0.5}), 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NewAcceptanceModel(Config("per_position", {0.5, -0.1, 0.5}), 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NewAcceptanceModel(Config("empirical", {}, {1, 1, 1}), 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NewAcceptanceModel(Config("empirical", {}, {0, 0, 0, 0}), 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NewAcceptanceModel(Config("empirical", {}, {1, -1, 1, 1}), 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto unknown = NewAcceptanceModel(Config("nope", {}), 3);
  EXPECT_NE(std::string(unknown.status().message()).find("geometric"), std::string::npos);
}

TEST(AcceptanceTest, UniformDoubleInUnitInterval) {
  Mt19937_64 rng(5);
  for (int i = 0; i < 10000; ++i) {
    const double u = UniformDouble(rng);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

// The integer draw must give exactly the answers of the floating-point comparison it replaced on
// the same stream (the seeded results of every replay depend on it), including the rates at and
// next to the representable edges of 53-bit uniforms.
TEST(AcceptanceTest, BernoulliThresholdMatchesUniformDoubleComparison) {
  std::vector<double> rates = {0.0,
                               1.0,
                               0.5,
                               0.8,
                               0.6,
                               0.4,
                               1.0 / 3.0,
                               0x1.0p-53,
                               0x1.8p-53,
                               std::nextafter(1.0, 0.0),
                               std::nextafter(0.5, 1.0),
                               std::nextafter(0.5, 0.0),
                               1e-300};
  Mt19937_64 pick(11);
  for (int i = 0; i < 200; ++i) rates.push_back(UniformDouble(pick));
  for (double p : rates) {
    const BernoulliThreshold accept(p);
    Mt19937_64 a(p > 0.3 ? 7 : 8), b(p > 0.3 ? 7 : 8);
    for (int i = 0; i < 2000; ++i) {
      ASSERT_EQ(accept.Draw(a), UniformDouble(b) < p) << "p=" << p << " draw " << i;
    }
  }
  // The 53-bit values next to each threshold decide the same way as their doubles.
  for (double p : rates) {
    const uint64_t t = BernoulliThreshold(p).threshold();
    for (uint64_t k : {t - 2, t - 1, t, t + 1, uint64_t{0}, (uint64_t{1} << 53) - 1}) {
      if (k >= (uint64_t{1} << 53)) continue;
      EXPECT_EQ(k < t, static_cast<double>(k) * 0x1.0p-53 < p) << "p=" << p << " k=" << k;
    }
  }
}

// AcceptedRun decides a verification from all its draws at once where they are buffered. It must
// give the run of drawing one by one, and consume the same values (every later draw of the replay
// depends on it): checked on rates from 0 to 1, up to past its at-once limit of 8 drafts, across
// the generator's refills (where it falls back to drawing one by one), i.i.d. and per position.
TEST(AcceptanceTest, AcceptedRunIsTheRunOfDrawingOneByOne) {
  Mt19937_64 pick(3);
  for (int trial = 0; trial < 300; ++trial) {
    const int k = 1 + trial % 10;
    std::vector<BernoulliThreshold> accept;
    for (int i = 0; i < k; ++i) {
      const double u = UniformDouble(pick);
      accept.emplace_back(trial % 7 == 0 ? 1.0 : trial % 11 == 0 ? 0.0 : u);
    }
    const size_t stride = trial % 3 == 0 ? 0 : 1;
    Mt19937_64 a(trial), b(trial);
    for (int v = 0; v < 500; ++v) {
      const int limit = static_cast<int>((pick() % (k + 1)));
      int expected = 0;
      while (expected < limit && accept[expected * stride].Draw(b)) ++expected;
      ASSERT_EQ(AcceptedRun(accept.data(), stride, limit, a), expected)
          << "trial " << trial << " verification " << v;
    }
    ASSERT_EQ(a(), b()) << "trial " << trial << ": a different number of values consumed";
  }
}

}  // namespace
}  // namespace prefixsim
