// Why a request missed, per admission (docs/design.md §7): the oracles the causes are defined by
// and the split of an admission's tokens into causes (include/prefixsim/miss_causes.h). Defined in
// miss_attributor.cc; what it keeps per replica is a MissAttributor (miss_attributor.h).
//
// A manager with attribution on keeps its shadow index (shadow_index.h) at the finest
// prefix-cacheable block U whatever A is, with its dead entries (what this replica ever
// computed), and the U-blocks each running request still has to compute (the in-flight set). A
// fleet asks the other replicas' shadows what they computed and hold when a request arrives.
#ifndef PREFIXSIM_SIM_KV_MISS_ATTRIBUTION_H_
#define PREFIXSIM_SIM_KV_MISS_ATTRIBUTION_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/miss_causes.h"
#include "prefixsim/request.h"
#include "sim/kv/block_hasher.h"

namespace prefixsim {
namespace kv {

// What the rest of the fleet held when a request arrived, for the replica the router chose.
// Token counts are multiples of U, before any EAGLE drop.
struct ArrivalSighting {
  int64_t fleet_known_tokens = 0;  // the longest prefix some replica had computed
  int64_t elsewhere_tokens = 0;    // the longest prefix alive on another replica than the chosen
  // The longest hit another replica's own lookup (aligned, published: what a router could have
  // had) gave at arrival, in tokens after its EAGLE drop; and that replica (the lowest index on a
  // tie), or -1.
  int64_t routable_tokens = 0;
  int elsewhere_replica = -1;
  // Fleets: the hit the best replica's lookup would have given at arrival minus the chosen
  // replica's (the router's regret; 0 for one replica).
  int64_t routing_regret_tokens = 0;
};

// Turns attribution on for `manager`. No effect without prefix caching. Its record of the
// U-blocks it computed and no longer holds keeps, past `max_record_blocks` (0: no bound), only
// the most recently dropped (ShadowIndex::KeepComputed): a forgotten block reads as never
// computed there, which can only move tokens out of `evicted` (into `elsewhere` when another
// replica holds them, or `compulsory`); ForgottenComputedBlocks says how many there were.
// REQUIRES: no request added yet.
// `shadow_may_read_pool` false keeps the shadow's own copy of the cache even where the pool is
// that cache (ShadowIndex::ReadPool; tests compare the two).
void EnableMissAttribution(KvCacheManager& manager, int64_t max_record_blocks = 0,
                           bool shadow_may_read_pool = true);
bool MissAttributionEnabled(const KvCacheManager& manager);
int64_t ForgottenComputedBlocks(const KvCacheManager& manager);
// What the record costs per U-block at most, about (a 16-byte slot and its control byte, in a
// hash map between 7/16 and 7/8 full), to turn a memory budget into max_record_blocks.
inline constexpr int64_t kRecordBytesPerBlock = 32;

// At an arrival, after the router chose `chosen` of `replicas` (all with attribution on, the
// same plan): what the others had computed and held. Asks each other replica for one or two
// U-blocks, and walks the cache of only those that computed more of the prompt than the chosen
// one. `hashes` is scratch.
// REQUIRES: no replica runs (their caches are read).
ArrivalSighting SightAtArrival(const std::vector<KvCacheManager*>& replicas, int chosen,
                               const Request& request, std::vector<HashPair>* hashes);

// The fleet's lookups at arrival (`hits_at_arrival`, one per replica, the router's exact view):
// the best other replica than `chosen` becomes the sighting's routable hit and elsewhere_replica.
void SetRoutableHits(const std::vector<int64_t>& hits_at_arrival, int chosen,
                     ArrivalSighting* sighting);

// The causes of an admission: call between GetComputedBlocks(request), which returned `hit`, and
// the AllocateSlots that admits it. Reads the cache only. REQUIRES: MissAttributionEnabled.
// With offload tiers, `hit` is the whole hit (the GPU's and the tiers'), and `tier_stored_end`
// is OffloadingConnector::StoredEnd (called only when tokens were evicted).
MissAttribution AttributeMiss(KvCacheManager& manager, KvRequestHandle request,
                              const PrefixHit& hit, const ArrivalSighting& sighting);
MissAttribution AttributeMiss(KvCacheManager& manager, KvRequestHandle request,
                              const PrefixHit& hit, const ArrivalSighting& sighting,
                              absl::FunctionRef<int64_t()> tier_stored_end);

}  // namespace kv
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_KV_MISS_ATTRIBUTION_H_
