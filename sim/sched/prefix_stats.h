// The prefix-cache statistics the scheduler keeps as it admits requests (docs/design.md §4.5,
// docs/semantics.md §12). Below the engine's metrics (sim/engine/metrics.h), which the reports
// read, so that the scheduler depends on nothing above it.
#ifndef PREFIXSIM_SIM_SCHED_PREFIX_STATS_H_
#define PREFIXSIM_SIM_SCHED_PREFIX_STATS_H_

#include <cstdint>
#include <deque>
#include <utility>

#include "prefixsim/engine.h"

namespace prefixsim {

// vLLM's CachingMetrics: Σhits / Σqueries over the most recent `max_requests` non-preempted
// admissions (docs/semantics.md §12; the 1000-request default is [inferred]).
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

// Records one admission's lookup into vLLM's PrefixCacheStats (docs/semantics.md §12):
// `preempted` = request.num_preemptions > 0.
void RecordPrefixLookup(PrefixCacheStats* stats, bool preempted, int64_t queries, int64_t hits);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_SCHED_PREFIX_STATS_H_
