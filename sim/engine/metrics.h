// Metrics of a replay (docs/design.md §4.5): latency percentiles and sketches, and the merge of
// replicas' counters. The prefix-cache statistics the scheduler keeps are in
// sim/sched/prefix_stats.h.
#ifndef PREFIXSIM_SIM_ENGINE_METRICS_H_
#define PREFIXSIM_SIM_ENGINE_METRICS_H_

#include <cstdint>
#include <vector>

#include "prefixsim/engine.h"

namespace prefixsim {

// The q-th percentile (q in [0, 100]) with linear interpolation between closest ranks (numpy's
// default). Sorts *values. 0 for an empty input.
double Percentile(std::vector<double>* values, double q);

// mean / p50 / p90 / p99 / max of samples in nanoseconds, reported in milliseconds.
LatencySummary SummarizeLatencyNs(const std::vector<int64_t>& samples_ns);

// Latency samples in bounded memory: a log-linear histogram of non-negative nanosecond values
// (HdrHistogram's layout, integers only, so results are the same on every machine). Values below
// 2^kSubBits are exact; above, a value falls in a bucket [lo, lo + 2^(e - kSubBits)) with
// lo >= 2^e, whose midpoint is reported, so a quantile read from the sketch is within
// 2^-(kSubBits+1) = 0.39% (relative) of a sample at the same rank. Percentiles interpolate
// between closest ranks as Percentile() does; count, mean and max are exact. Memory: at most
// 64 x 2^kSubBits counters, allocated as values need them, whatever the number of samples.
class LatencySketch {
 public:
  static constexpr int kSubBits = 7;
  void Add(int64_t ns);
  void Merge(const LatencySketch& other);
  int64_t count() const { return count_; }
  // The q-th percentile (q in [0, 100]) of the samples, within the relative error above.
  double PercentileNs(double q) const;
  // mean / p50 / p90 / p99 / max, reported in milliseconds.
  LatencySummary Summary() const;

 private:
  static size_t Bucket(uint64_t v);
  static double Midpoint(size_t bucket);
  // The value at rank r (0-based) of the sorted samples, as the sketch knows it.
  double AtRank(int64_t r) const;

  std::vector<int64_t> counts_;
  int64_t count_ = 0;
  double sum_ns_ = 0;  // exact below 2^53 ns in total, ~104 days
  int64_t max_ns_ = 0;
};

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_ENGINE_METRICS_H_
