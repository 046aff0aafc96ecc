// Metrics collected during a replay (DESIGN §4.5): prefix-cache stats as vLLM records them
// (reference §12), latency percentiles, and the sliding-window hit rate of vLLM's log line.
#ifndef PREFIXSIM_SIM_ENGINE_METRICS_H_
#define PREFIXSIM_SIM_ENGINE_METRICS_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "prefixsim/engine.h"

namespace prefixsim {

// The q-th percentile (q in [0, 100]) with linear interpolation between closest ranks (numpy's
// default). Sorts *values. 0 for an empty input.
double Percentile(std::vector<double>* values, double q);

// mean / p50 / p90 / p99 / max of samples in nanoseconds, reported in milliseconds.
LatencySummary SummarizeLatencyNs(const std::vector<int64_t>& samples_ns);

// vLLM's CachingMetrics: Σhits / Σqueries over the most recent `max_requests` non-preempted
// admissions (reference §12; the 1000-request default is [inferred]).
class HitRateWindow {
 public:
  explicit HitRateWindow(int64_t max_requests) : max_requests_(max_requests) {}
  void Observe(int64_t queries, int64_t hits);
  int64_t queries() const { return queries_; }
  int64_t hits() const { return hits_; }
  double hit_rate() const {
    return queries_ > 0 ? static_cast<double>(hits_) / static_cast<double>(queries_) : 0.0;
  }

 private:
  int64_t max_requests_;
  std::deque<std::pair<int64_t, int64_t>> window_;
  int64_t queries_ = 0;
  int64_t hits_ = 0;
};

// Records one admission's lookup into vLLM's PrefixCacheStats (reference §12):
// `preempted` = request.num_preemptions > 0.
void RecordPrefixLookup(PrefixCacheStats* stats, bool preempted, int64_t queries, int64_t hits);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_ENGINE_METRICS_H_
