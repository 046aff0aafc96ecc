#include "sim/sched/prefix_stats.h"

namespace prefixsim {

void HitRateWindow::Observe(int64_t queries, int64_t hits) {
  window_.emplace_back(queries, hits);
  queries_ += queries;
  hits_ += hits;
  while (max_requests_ > 0 && static_cast<int64_t>(window_.size()) > max_requests_) {
    queries_ -= window_.front().first;
    hits_ -= window_.front().second;
    window_.pop_front();
  }
}

void RecordPrefixLookup(PrefixCacheStats* stats, bool preempted, int64_t queries, int64_t hits) {
  if (preempted) {
    stats->preempted_requests += 1;
    stats->preempted_queries += queries;
    stats->preempted_hits += hits;
  } else {
    stats->requests += 1;
    stats->queries += queries;
    stats->hits += hits;
  }
}

}  // namespace prefixsim
