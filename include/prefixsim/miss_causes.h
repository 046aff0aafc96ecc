// Why a request missed (docs/design.md §7): every admission's tokens split into causes that add
// up exactly to the tokens it looked up (the prompt, or prompt + outputs after a preemption).
#ifndef PREFIXSIM_MISS_CAUSES_H_
#define PREFIXSIM_MISS_CAUSES_H_

#include <array>
#include <cstdint>
#include <string_view>

#include "prefixsim/model.h"

namespace prefixsim {

// In the order the attribution assigns them: each cause takes the tokens past the previous one's
// end, up to its own (docs/design.md §7 has the exact definitions).
enum class MissCause : uint8_t {
  kHit,              // the real hit
  kAlignment,        // cached in every group at its own block, cut back to the hit alignment A
  kNotCheckpointed,  // computed on this replica, but a group never cached it there
  kSparseRetention,  // ... because the retention interval dropped it (dense retention keeps it)
  kInFlight,         // being computed by another request on this replica, not yet computed
  kEvicted,          // computed before and cached since, no copy left
  kElsewhere,        // cached on another replica when the request arrived (a routing miss)
  kCompulsory,       // no replica had computed it when the request arrived
  kTail,             // no lookup rule lets it hit: the L-1 cap, the partial last block
};
inline constexpr int kNumMissCauses = 9;

// "hit", "alignment", "not_checkpointed", "sparse_retention", "in_flight", "evicted",
// "elsewhere", "compulsory", "tail".
std::string_view MissCauseName(MissCause cause);

// What broke the chain of evicted tokens: the kind of the group whose own lookup came back
// shortest on this replica (LayerKind's order), or another replica's eviction.
enum class EvictionBreaker : uint8_t {
  kFullAttention,
  kMla,
  kSlidingWindow,
  kChunkedLocal,
  kMamba,
  kOtherReplica,
};
inline constexpr int kNumEvictionBreakers = 6;
static_assert(static_cast<int>(EvictionBreaker::kFullAttention) ==
                      static_cast<int>(LayerKind::kFullAttention) &&
                  static_cast<int>(EvictionBreaker::kMla) == static_cast<int>(LayerKind::kMla) &&
                  static_cast<int>(EvictionBreaker::kSlidingWindow) ==
                      static_cast<int>(LayerKind::kSlidingWindow) &&
                  static_cast<int>(EvictionBreaker::kChunkedLocal) ==
                      static_cast<int>(LayerKind::kChunkedLocal) &&
                  static_cast<int>(EvictionBreaker::kMamba) == static_cast<int>(LayerKind::kMamba),
              "EvictionBreaker lists LayerKind's kinds in LayerKind's order");
// The breaker a group of `kind` stands for.
inline EvictionBreaker BreakerOfKind(LayerKind kind) {
  return static_cast<EvictionBreaker>(static_cast<int>(kind));
}
// LayerKindName's names, and "other_replica".
std::string_view EvictionBreakerName(EvictionBreaker breaker);

// One admission.
struct MissAttribution {
  std::array<int64_t, kNumMissCauses> tokens{};  // by MissCause; sums to the tokens looked up
  // Of tokens[kEvicted], those only other replicas had computed (all their copies gone); the
  // rest broke on this replica at a group of kind evicted_by.
  int64_t evicted_on_other_replicas = 0;
  EvictionBreaker evicted_by = EvictionBreaker::kFullAttention;
  int elsewhere_replica = -1;  // the replica that held the prefix, when tokens[kElsewhere] > 0
  // With offload tiers, of tokens[kEvicted] (both 0 without tiers): those some tier had stored
  // and has dropped since (its capacity), and those no tier ever stored (prompt-only storing,
  // store_threshold, refused stores, blocks a group no longer held). Tokens a tier served are
  // hits. A tier's block still being written or loaded loses no tokens: the lookup waits for it
  // (OffloadStats::deferred_lookups).
  int64_t tier_evicted = 0;
  int64_t tier_not_stored = 0;

  int64_t total() const;
  int64_t of(MissCause cause) const { return tokens[static_cast<int>(cause)]; }
  // The cause with the most tokens other than hit and tail (the earlier one on a tie); when the
  // request lost nothing but the tail, kHit if it hit and kTail if not.
  MissCause main_cause() const;
};

// Totals over admissions: first admissions and re-admissions after a preemption apart.
struct MissCauseStats {
  struct Totals {
    int64_t admissions = 0;
    std::array<int64_t, kNumMissCauses> tokens{};
    std::array<int64_t, kNumMissCauses> requests{};  // admissions with tokens of that cause
    std::array<int64_t, kNumEvictionBreakers> evicted_tokens_by{};
    int64_t tier_evicted_tokens = 0;     // MissAttribution::tier_evicted, summed
    int64_t tier_not_stored_tokens = 0;  // MissAttribution::tier_not_stored, summed
    void Add(const MissAttribution& a);
    void Merge(const Totals& other);
    int64_t total_tokens() const;
  };
  bool enabled = false;  // the replay attributed its admissions (prefix caching on)
  bool tiers = false;    // ... with offload tiers (the tier split of `evicted` is meaningful)
  Totals first;          // first admissions
  Totals preempted;      // re-admissions after a preemption
  // Computed U-blocks the replicas' records forgot to stay within
  // ReplayOptions::miss_record_bytes: when > 0, some `evicted` tokens (computed long before,
  // then lost) count as `elsewhere` (another replica holds them) or `compulsory`; no other
  // figure changes.
  int64_t forgotten_blocks = 0;
  // Keys the offload tiers' records of their evictions forgot, within the same bound: tokens whose
  // keys were stored then and dropped count as tier_not_stored rather than tier_evicted.
  int64_t forgotten_tier_keys = 0;

  void Merge(const MissCauseStats& other) {
    enabled = enabled || other.enabled;
    tiers = tiers || other.tiers;
    forgotten_tier_keys += other.forgotten_tier_keys;
    first.Merge(other.first);
    preempted.Merge(other.preempted);
    forgotten_blocks += other.forgotten_blocks;
  }
};

}  // namespace prefixsim

#endif  // PREFIXSIM_MISS_CAUSES_H_
