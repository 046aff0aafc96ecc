// The public miss-cause types (include/prefixsim/miss_causes.h); the attribution itself is in
// miss_attributor.cc and miss_attribution.h.
#include "prefixsim/miss_causes.h"

namespace prefixsim {

std::string_view MissCauseName(MissCause cause) {
  switch (cause) {
    case MissCause::kHit:
      return "hit";
    case MissCause::kAlignment:
      return "alignment";
    case MissCause::kNotCheckpointed:
      return "not_checkpointed";
    case MissCause::kSparseRetention:
      return "sparse_retention";
    case MissCause::kInFlight:
      return "in_flight";
    case MissCause::kEvicted:
      return "evicted";
    case MissCause::kElsewhere:
      return "elsewhere";
    case MissCause::kCompulsory:
      return "compulsory";
    case MissCause::kTail:
      return "tail";
  }
  return "?";
}

std::string_view EvictionBreakerName(EvictionBreaker breaker) {
  switch (breaker) {
    case EvictionBreaker::kFullAttention:
      return "full_attention";
    case EvictionBreaker::kMla:
      return "mla";
    case EvictionBreaker::kSlidingWindow:
      return "sliding_window";
    case EvictionBreaker::kChunkedLocal:
      return "chunked_local";
    case EvictionBreaker::kMamba:
      return "mamba";
    case EvictionBreaker::kOtherReplica:
      return "other_replica";
  }
  return "?";
}

int64_t MissAttribution::total() const {
  int64_t sum = 0;
  for (int64_t t : tokens) sum += t;
  return sum;
}

MissCause MissAttribution::main_cause() const {
  MissCause best = of(MissCause::kHit) > 0 ? MissCause::kHit : MissCause::kTail;
  int64_t most = 0;
  for (int c = static_cast<int>(MissCause::kAlignment); c < static_cast<int>(MissCause::kTail);
       ++c) {
    if (tokens[c] > most) {
      most = tokens[c];
      best = static_cast<MissCause>(c);
    }
  }
  return best;
}

void MissCauseStats::Totals::Add(const MissAttribution& a) {
  ++admissions;
  for (int c = 0; c < kNumMissCauses; ++c) {
    tokens[c] += a.tokens[c];
    if (a.tokens[c] > 0) ++requests[c];
  }
  const int64_t here = a.of(MissCause::kEvicted) - a.evicted_on_other_replicas;
  if (here > 0) evicted_tokens_by[static_cast<int>(a.evicted_by)] += here;
  evicted_tokens_by[static_cast<int>(EvictionBreaker::kOtherReplica)] +=
      a.evicted_on_other_replicas;
  tier_evicted_tokens += a.tier_evicted;
  tier_not_stored_tokens += a.tier_not_stored;
}

void MissCauseStats::Totals::Merge(const Totals& other) {
  admissions += other.admissions;
  for (int c = 0; c < kNumMissCauses; ++c) {
    tokens[c] += other.tokens[c];
    requests[c] += other.requests[c];
  }
  for (int b = 0; b < kNumEvictionBreakers; ++b) evicted_tokens_by[b] += other.evicted_tokens_by[b];
  tier_evicted_tokens += other.tier_evicted_tokens;
  tier_not_stored_tokens += other.tier_not_stored_tokens;
}

int64_t MissCauseStats::Totals::total_tokens() const {
  int64_t sum = 0;
  for (int64_t t : tokens) sum += t;
  return sum;
}

}  // namespace prefixsim
