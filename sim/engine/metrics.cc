#include "sim/engine/metrics.h"

#include <algorithm>
#include <cmath>

namespace prefixsim {

double Percentile(std::vector<double>* values, double q) {
  if (values->empty()) return 0.0;
  std::sort(values->begin(), values->end());
  const double pos = (q / 100.0) * static_cast<double>(values->size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, values->size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return (*values)[lo] + ((*values)[hi] - (*values)[lo]) * frac;
}

LatencySummary SummarizeLatencyNs(const std::vector<int64_t>& samples_ns) {
  LatencySummary s;
  s.count = static_cast<int64_t>(samples_ns.size());
  if (samples_ns.empty()) return s;
  std::vector<double> ms;
  ms.reserve(samples_ns.size());
  double sum = 0;
  for (int64_t v : samples_ns) {
    ms.push_back(static_cast<double>(v) / 1e6);
    sum += ms.back();
  }
  s.mean_ms = sum / static_cast<double>(ms.size());
  s.p50_ms = Percentile(&ms, 50);
  s.p90_ms = Percentile(&ms, 90);
  s.p99_ms = Percentile(&ms, 99);
  s.max_ms = ms.back();
  return s;
}

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
