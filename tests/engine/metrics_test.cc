// Metrics: percentiles, the prefix-cache stats split (docs/semantics.md §12) and the logged window.
#include "sim/engine/metrics.h"

#include <gtest/gtest.h>

#include <random>

#include "sim/sched/prefix_stats.h"

namespace prefixsim {
namespace {

TEST(PercentileTest, LinearInterpolationLikeNumpy) {
  std::vector<double> v = {4, 1, 3, 2, 5};
  EXPECT_DOUBLE_EQ(Percentile(&v, 50), 3.0);
  EXPECT_DOUBLE_EQ(Percentile(&v, 0), 1.0);
  EXPECT_DOUBLE_EQ(Percentile(&v, 100), 5.0);
  EXPECT_DOUBLE_EQ(Percentile(&v, 90), 4.6);  // numpy.percentile([1..5], 90) = 4.6
  std::vector<double> two = {10, 20};
  EXPECT_DOUBLE_EQ(Percentile(&two, 99), 19.9);
  std::vector<double> empty;
  EXPECT_DOUBLE_EQ(Percentile(&empty, 50), 0.0);
}

TEST(LatencySummaryTest, NanosecondsToMilliseconds) {
  const LatencySummary s = SummarizeLatencyNs({1'000'000, 3'000'000, 2'000'000});
  EXPECT_EQ(s.count, 3);
  EXPECT_DOUBLE_EQ(s.mean_ms, 2.0);
  EXPECT_DOUBLE_EQ(s.p50_ms, 2.0);
  EXPECT_DOUBLE_EQ(s.max_ms, 3.0);
  EXPECT_EQ(SummarizeLatencyNs({}).count, 0);
}

// docs/semantics.md §12: re-admissions of preempted requests go to preempted_*; the rate uses only
// the non-preempted fields.
TEST(PrefixCacheStatsTest, PreemptedLookupsAreSeparate) {
  PrefixCacheStats s;
  RecordPrefixLookup(&s, false, 1000, 512);
  RecordPrefixLookup(&s, false, 500, 0);
  RecordPrefixLookup(&s, true, 1200, 1024);
  EXPECT_EQ(s.requests, 2);
  EXPECT_EQ(s.queries, 1500);
  EXPECT_EQ(s.hits, 512);
  EXPECT_EQ(s.preempted_requests, 1);
  EXPECT_EQ(s.preempted_queries, 1200);
  EXPECT_EQ(s.preempted_hits, 1024);
  EXPECT_DOUBLE_EQ(s.hit_rate(), 512.0 / 1500.0);
  EXPECT_DOUBLE_EQ(PrefixCacheStats{}.hit_rate(), 0.0);
}

// docs/semantics.md §12: CachingMetrics reports Σhits/Σqueries over the most recent requests.
TEST(HitRateWindowTest, KeepsOnlyTheLastRequests) {
  HitRateWindow w(2);
  w.Observe(100, 100);
  EXPECT_DOUBLE_EQ(w.hit_rate(), 1.0);
  w.Observe(100, 0);
  EXPECT_DOUBLE_EQ(w.hit_rate(), 0.5);
  w.Observe(300, 0);  // the first one leaves the window
  EXPECT_DOUBLE_EQ(w.hit_rate(), 0.0);
  w.Observe(100, 100);
  EXPECT_DOUBLE_EQ(w.hit_rate(), 0.25);
}

TEST(SpecDecodeStatsTest, MeanAcceptanceLengthIsOnePlusAcceptedPerDraft) {
  SpecDecodeStats s;
  EXPECT_DOUBLE_EQ(s.mean_acceptance_length(), 1.0);
  s.num_drafts = 4;
  s.draft_tokens = 12;
  s.accepted_tokens = 6;
  EXPECT_DOUBLE_EQ(s.mean_acceptance_length(), 2.5);
  EXPECT_DOUBLE_EQ(s.acceptance_rate(), 0.5);
}

}  // namespace
}  // namespace prefixsim

namespace prefixsim {
namespace {

// The sketch's percentiles are within 2^-(kSubBits+1) (0.39%) of the exact ones (issue 15:
// bounded memory with a stated relative error); count, mean and max are exact.
TEST(LatencySketchTest, PercentilesWithinTheStatedRelativeError) {
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> dist(18.0, 2.0);  // ~65 ms median, heavy tail
  LatencySketch sketch;
  std::vector<int64_t> samples;
  for (int i = 0; i < 20000; ++i) {
    const int64_t v = static_cast<int64_t>(dist(rng));
    samples.push_back(v);
    sketch.Add(v);
  }
  const LatencySummary exact = SummarizeLatencyNs(samples);
  const LatencySummary approx = sketch.Summary();
  const double bound = 1.0 / (1 << (LatencySketch::kSubBits + 1));
  EXPECT_EQ(approx.count, exact.count);
  EXPECT_NEAR(approx.mean_ms, exact.mean_ms, 1e-9 * exact.mean_ms);
  EXPECT_DOUBLE_EQ(approx.max_ms, exact.max_ms);
  EXPECT_NEAR(approx.p50_ms, exact.p50_ms, bound * exact.p50_ms);
  EXPECT_NEAR(approx.p90_ms, exact.p90_ms, bound * exact.p90_ms);
  EXPECT_NEAR(approx.p99_ms, exact.p99_ms, bound * exact.p99_ms);
  EXPECT_NE(approx.p99_ms, exact.p99_ms);  // it is a sketch, not a copy
}

TEST(LatencySketchTest, SmallValuesAreExactAndMergeEqualsOneSketch) {
  LatencySketch a, b, all;
  for (int64_t v = 0; v < 100; ++v) {
    (v % 2 ? a : b).Add(v);
    all.Add(v);
  }
  EXPECT_DOUBLE_EQ(all.PercentileNs(50), 49.5);
  EXPECT_DOUBLE_EQ(all.PercentileNs(0), 0.0);
  EXPECT_DOUBLE_EQ(all.PercentileNs(100), 99.0);
  a.Merge(b);
  EXPECT_EQ(a.count(), 100);
  for (double q : {1.0, 50.0, 90.0, 99.0}) EXPECT_DOUBLE_EQ(a.PercentileNs(q), all.PercentileNs(q));
  LatencySketch empty;
  EXPECT_EQ(empty.Summary().count, 0);
  EXPECT_EQ(empty.PercentileNs(50), 0.0);
}

}  // namespace
}  // namespace prefixsim
