// Miss attribution inside one replica's KV cache (docs/design.md §7; the API is
// miss_attribution.h): what the admission lookup of each request saw, the U-blocks each running
// request still has to compute (the in-flight set), and the split of an admission's tokens into
// causes. Owned by the cache's state (kv_cache_state.h), which tells it what its requests look up,
// compute and free; reads the cache's shadow index, kept at the finest prefix-cacheable block U
// with its dead entries (what this replica ever computed).
#ifndef PREFIXSIM_SIM_KV_MISS_ATTRIBUTOR_H_
#define PREFIXSIM_SIM_KV_MISS_ATTRIBUTOR_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/miss_causes.h"
#include "sim/kv/block_hasher.h"
#include "sim/kv/shadow_index.h"

namespace prefixsim::kv {

struct ArrivalSighting;

class MissAttributor {
 public:
  // Not owned; both outlive the attributor.
  MissAttributor(const KvPlan* plan, const ShadowIndex* shadow) : plan_(plan), shadow_(shadow) {}

  const ShadowIndex& shadow() const { return *shadow_; }

  // A request took slot `slot` of the cache's request table.
  void OnAdded(uint32_t slot);
  // Its admission lookup: the hit at H (hit + alignment loss) and the leading U-blocks alive in
  // the shadow. The lookup writes the group that cut its first pass to *limiting_group(slot).
  void OnLookup(uint32_t slot, int64_t fine_hit, int64_t shadow_alive);
  int* limiting_group(uint32_t slot) { return &At(slot).limiting_group; }
  // At admission: the prompt's full U-blocks from `held` on are in flight until the request
  // computes them or frees its blocks. `fine` covers the prompt's U-blocks as far as it has hashes.
  void OnAdmitted(uint32_t slot, const HashPair* fine, int64_t num_fine, int64_t num_tokens,
                  int64_t held);
  // The request computed (or took as a hit) its U-blocks [from, to).
  void OnComputed(uint32_t slot, const HashPair* fine, int64_t from, int64_t to);
  // The request freed its blocks: what it had not computed is no longer in flight.
  void OnFreed(uint32_t slot, const HashPair* fine);

  // The causes of the admission whose lookup returned `hit` (miss_attribution.h AttributeMiss).
  // `checkpointed_hit(dense)` is the same lookup at H on what every group ever cached, and with
  // `dense` on what the retention interval dropped too (ever_cached_index.h); each is a whole
  // lookup, so it is asked only when a published prefix was missed. `tier_stored_end()` is where
  // the offload tiers' hit would end on everything they ever stored (-1: no tiers), asked only
  // when tokens were evicted, to split them into tier_evicted and tier_not_stored.
  MissAttribution Attribute(uint32_t slot, const HashPair* fine, int64_t num_fine,
                            int64_t num_tokens, const PrefixHit& hit,
                            const ArrivalSighting& sighting,
                            absl::FunctionRef<int64_t(bool)> checkpointed_hit,
                            absl::FunctionRef<int64_t()> tier_stored_end) const;

 private:
  // What attribution keeps per request: the U-blocks [in_flight_from, in_flight_to) it counted in
  // in_flight_, and what its last lookup saw.
  struct Record {
    int64_t in_flight_from = 0;
    int64_t in_flight_to = 0;
    int64_t fine_hit = 0;      // the lookup at H (hit + alignment loss)
    int64_t shadow_alive = 0;  // leading U-blocks alive in the shadow
    int limiting_group = 0;    // FindLongestCacheHit's limiting_group
  };
  // Prefix lengths in tokens at which the oracles' answers end, each at least the one before it
  // and at most the attributable cap: each cause takes the tokens between two of them, so the
  // causes add up to the request's tokens by construction.
  struct Thresholds {
    int64_t hit;             // the real lookup
    int64_t fine_hit;        // the same lookup at H instead of A
    int64_t checkpointed;    // ... on what every group ever cached (a cache that never evicted)
    int64_t dense;           // ... and on what the retention interval dropped
    int64_t published;       // the shadow's prefix some holder was allowed to publish
    int64_t shadow_hit;      // the shadow's hit: every computed U-block published, no round-down
    int64_t in_flight;       // ... and the U-blocks running requests are computing
    int64_t computed_here;   // ... and what this replica ever computed
    int64_t elsewhere;       // what another replica's lookup would have hit at arrival
    int64_t held_elsewhere;  // ... and what another replica held alive (its plan could not serve)
    int64_t fleet_known;     // what some replica had computed
  };

  Record& At(uint32_t slot) {
    if (slot >= records_.size()) records_.resize(slot + 1);
    return records_[slot];
  }
  const Record& At(uint32_t slot) const { return records_[slot]; }
  void LeaveInFlight(uint64_t hash);

  const KvPlan* plan_;
  const ShadowIndex* shadow_;
  std::vector<Record> records_;  // by request slot
  // The running requests' uncomputed U-blocks: hash -> how many requests.
  absl::flat_hash_map<uint64_t, int32_t> in_flight_;
};

}  // namespace prefixsim::kv

#endif  // PREFIXSIM_SIM_KV_MISS_ATTRIBUTOR_H_
