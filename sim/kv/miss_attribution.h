// Why a request missed, per admission (docs/design.md §7): the oracles the causes are defined by
// and the split of an admission's tokens into causes (include/prefixsim/miss_causes.h). Defined
// in kv_cache_manager.cc, where a manager's state is.
//
// A manager with attribution on keeps its shadow index (shadow_index.h) at the finest
// prefix-cacheable block U whatever A is, with its dead entries (what this replica ever
// computed), the U-blocks each running request still has to compute (the in-flight set), and in
// a fleet records every U-block it computes in a ComputeHistory shared by the replicas.
#ifndef PREFIXSIM_SIM_KV_MISS_ATTRIBUTION_H_
#define PREFIXSIM_SIM_KV_MISS_ATTRIBUTION_H_

#include <cstdint>
#include <vector>

#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/miss_causes.h"
#include "prefixsim/request.h"
#include "sim/kv/block_hasher.h"
#include "sim/kv/compute_history.h"

namespace prefixsim {
namespace kv {

// What the rest of the fleet held when a request arrived, for the replica the router chose.
// Token counts are multiples of U, before any EAGLE drop.
struct ArrivalSighting {
  int64_t fleet_known_tokens = 0;  // the longest prefix some replica had computed
  int64_t elsewhere_tokens = 0;    // the longest prefix alive on another replica than the chosen
  int elsewhere_replica = -1;      // that replica (the lowest index on a tie), or -1
  // Fleets: the hit the best replica's lookup would have given at arrival minus the chosen
  // replica's (the router's regret; 0 for one replica).
  int64_t routing_regret_tokens = 0;
};

// Turns attribution on for `manager`, replica `replica` of the fleet whose `history` it shares
// (not owned; it must outlive the manager). `history` null: a single engine (its shadow index
// answers what it computed). No effect without prefix caching. REQUIRES: no request added yet.
void EnableMissAttribution(KvCacheManager& manager, ComputeHistory* history, int replica);
bool MissAttributionEnabled(const KvCacheManager& manager);

// At an arrival, after the router chose `chosen` of `replicas` (all with attribution on, sharing
// `history`): what the others held. Cheap when the chosen replica had computed as much of the
// prompt as any other: then no other replica's cache is read. `hashes` is scratch.
ArrivalSighting SightAtArrival(const ComputeHistory& history,
                               const std::vector<KvCacheManager*>& replicas, int chosen,
                               const Request& request, std::vector<HashPair>* hashes);

// The causes of an admission: call between GetComputedBlocks(request), which returned `hit`, and
// the AllocateSlots that admits it. Reads the cache only. REQUIRES: MissAttributionEnabled.
MissAttribution AttributeMiss(KvCacheManager& manager, KvRequestHandle request,
                              const PrefixHit& hit, const ArrivalSighting& sighting);

}  // namespace kv
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_KV_MISS_ATTRIBUTION_H_
