#include "sim/engine/metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string_view>

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

namespace {

void MergeCounter(int64_t* into, int64_t from, ReplayResult::CounterMerge merge) {
  *into = merge == ReplayResult::CounterMerge::kMax ? std::max(*into, from) : *into + from;
}
void MergeCounter(PrefixCacheStats* into, const PrefixCacheStats& from,
                  ReplayResult::CounterMerge /*sum*/) {
  into->Merge(from);
}
void MergeCounter(SpecDecodeStats* into, const SpecDecodeStats& from,
                  ReplayResult::CounterMerge /*sum*/) {
  into->Merge(from);
}
void MergeCounter(OffloadStats* into, const OffloadStats& from,
                  ReplayResult::CounterMerge /*sum*/) {
  into->Merge(from);
}
void MergeCounter(MissCauseStats* into, const MissCauseStats& from,
                  ReplayResult::CounterMerge /*sum*/) {
  into->Merge(from);
}
void MergeCounter(std::map<int64_t, int64_t>* into, const std::map<int64_t, int64_t>& from,
                  ReplayResult::CounterMerge /*sum*/) {
  for (const auto& [key, n] : from) (*into)[key] += n;
}

}  // namespace

void OffloadTierStats::Merge(const OffloadTierStats& o) {
  if (medium.empty()) medium = o.medium;
  capacity_bytes += o.capacity_bytes;
  capacity_blocks += o.capacity_blocks;
  hit_tokens += o.hit_tokens;
  loaded_blocks += o.loaded_blocks;
  loaded_bytes += o.loaded_bytes;
  stored_blocks += o.stored_blocks;
  stored_bytes += o.stored_bytes;
  evicted_blocks += o.evicted_blocks;
  never_loaded_blocks += o.never_loaded_blocks;
  store_failures += o.store_failures;
  peak_used_bytes += o.peak_used_bytes;  // each replica's own tier: peaks add up at most
}

void OffloadStats::Merge(const OffloadStats& o) {
  enabled = enabled || o.enabled;
  gpu_hit_tokens += o.gpu_hit_tokens;
  loads += o.loads;
  load_wait_ns += o.load_wait_ns;
  deferred_lookups += o.deferred_lookups;
  stores_skipped += o.stores_skipped;
  if (tiers.size() < o.tiers.size()) tiers.resize(o.tiers.size());
  for (size_t i = 0; i < o.tiers.size(); ++i) tiers[i].Merge(o.tiers[i]);
}

void ReplayResult::MergeCounters(const ReplayResult& other) {
  ForEachMergedCounter([&](std::string_view /*name*/, auto field, CounterMerge merge) {
    MergeCounter(&(this->*field), other.*field, merge);
  });
}

}  // namespace prefixsim
