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

size_t LatencySketch::Bucket(uint64_t v) {
  constexpr uint64_t kSub = uint64_t{1} << kSubBits;
  if (v < kSub) return static_cast<size_t>(v);
  const int e = 63 - __builtin_clzll(v);                   // 2^e <= v < 2^(e+1), e >= kSubBits
  const uint64_t mantissa = (v >> (e - kSubBits)) - kSub;  // in [0, kSub)
  return static_cast<size_t>((e - kSubBits + 1) * kSub + mantissa);
}

double LatencySketch::Midpoint(size_t bucket) {
  constexpr uint64_t kSub = uint64_t{1} << kSubBits;
  if (bucket < kSub) return static_cast<double>(bucket);
  const uint64_t e = bucket / kSub + kSubBits - 1;
  const uint64_t mantissa = bucket % kSub;
  const uint64_t width = uint64_t{1} << (e - kSubBits);
  const uint64_t lo = (kSub + mantissa) << (e - kSubBits);
  return static_cast<double>(lo) + static_cast<double>(width - 1) / 2.0;
}

void LatencySketch::Add(int64_t ns) {
  const uint64_t v = ns < 0 ? 0 : static_cast<uint64_t>(ns);
  const size_t b = Bucket(v);
  if (b >= counts_.size()) counts_.resize(b + 1, 0);
  counts_[b] += 1;
  count_ += 1;
  sum_ns_ += static_cast<double>(v);
  max_ns_ = std::max<int64_t>(max_ns_, static_cast<int64_t>(v));
}

void LatencySketch::Merge(const LatencySketch& other) {
  if (other.counts_.size() > counts_.size()) counts_.resize(other.counts_.size(), 0);
  for (size_t i = 0; i < other.counts_.size(); ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ns_ += other.sum_ns_;
  max_ns_ = std::max(max_ns_, other.max_ns_);
}

double LatencySketch::AtRank(int64_t r) const {
  int64_t seen = 0;
  for (size_t b = 0; b < counts_.size(); ++b) {
    seen += counts_[b];
    if (seen > r) return std::min(Midpoint(b), static_cast<double>(max_ns_));
  }
  return static_cast<double>(max_ns_);
}

double LatencySketch::PercentileNs(double q) const {
  if (count_ == 0) return 0.0;
  const double pos = (q / 100.0) * static_cast<double>(count_ - 1);
  const int64_t lo = static_cast<int64_t>(std::floor(pos));
  const int64_t hi = std::min<int64_t>(lo + 1, count_ - 1);
  const double frac = pos - static_cast<double>(lo);
  const double a = AtRank(lo), b = AtRank(hi);
  return a + (b - a) * frac;
}

LatencySummary LatencySketch::Summary() const {
  LatencySummary s;
  s.count = count_;
  if (count_ == 0) return s;
  s.mean_ms = sum_ns_ / static_cast<double>(count_) / 1e6;
  s.p50_ms = PercentileNs(50) / 1e6;
  s.p90_ms = PercentileNs(90) / 1e6;
  s.p99_ms = PercentileNs(99) / 1e6;
  s.max_ms = static_cast<double>(max_ns_) / 1e6;
  return s;
}

void AddReplayCounters(const ReplayResult& c, ReplayResult* r) {
  r->requests += c.requests;
  r->finished_requests += c.finished_requests;
  r->interrupted_requests += c.interrupted_requests;
  r->skipped_prompt_too_long += c.skipped_prompt_too_long;
  r->skipped_does_not_fit += c.skipped_does_not_fit;
  r->skipped_empty_prompt += c.skipped_empty_prompt;
  PrefixCacheStats& p = r->prefix_cache;
  p.requests += c.prefix_cache.requests;
  p.queries += c.prefix_cache.queries;
  p.hits += c.prefix_cache.hits;
  p.preempted_requests += c.prefix_cache.preempted_requests;
  p.preempted_queries += c.prefix_cache.preempted_queries;
  p.preempted_hits += c.prefix_cache.preempted_hits;
  r->alignment_loss_tokens += c.alignment_loss_tokens;
  r->preempted_alignment_loss_tokens += c.preempted_alignment_loss_tokens;
  r->unpublished_alignment_tokens += c.unpublished_alignment_tokens;
  r->lost_to_alignment_tokens += c.lost_to_alignment_tokens;
  for (const auto& [tokens, n] : c.lost_to_alignment_requests) {
    r->lost_to_alignment_requests[tokens] += n;
  }
  r->evicted_blocks += c.evicted_blocks;
  r->cached_blocks += c.cached_blocks;
  r->preemptions += c.preemptions;
  SpecDecodeStats& sd = r->spec_decode;
  sd.num_drafts += c.spec_decode.num_drafts;
  sd.draft_tokens += c.spec_decode.draft_tokens;
  sd.accepted_tokens += c.spec_decode.accepted_tokens;
  sd.accepted_per_position.resize(
      std::max(sd.accepted_per_position.size(), c.spec_decode.accepted_per_position.size()), 0);
  for (size_t i = 0; i < c.spec_decode.accepted_per_position.size(); ++i) {
    sd.accepted_per_position[i] += c.spec_decode.accepted_per_position[i];
  }
  r->num_steps += c.num_steps;
  r->prompt_tokens += c.prompt_tokens;
  r->output_tokens += c.output_tokens;
  r->computed_tokens += c.computed_tokens;
  r->max_running = std::max(r->max_running, c.max_running);
}

}  // namespace prefixsim
