// Metrics: percentiles, the prefix-cache stats split (reference §12) and the logged window.
#include "sim/engine/metrics.h"

#include <gtest/gtest.h>

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

// Reference §12: re-admissions of preempted requests go to preempted_*; the rate uses only the
// non-preempted fields.
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

// Reference §12: CachingMetrics reports Σhits/Σqueries over the most recent requests.
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
