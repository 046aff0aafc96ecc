// Miss attribution (docs/design.md §7): the per-replica attributor and the fleet-wide sighting at
// arrival (miss_attribution.h).
#include "sim/kv/miss_attributor.h"

#include <algorithm>

#include "sim/kv/kv_cache_state.h"
#include "sim/kv/miss_attribution.h"
#include "sim/kv/routing.h"
#include "sim/util/status_macros.h"

namespace prefixsim::kv {

void MissAttributor::OnAdded(uint32_t slot) { At(slot) = Record{}; }

void MissAttributor::OnLookup(uint32_t slot, int64_t fine_hit, int64_t shadow_alive) {
  Record& r = At(slot);
  r.fine_hit = fine_hit;
  r.shadow_alive = shadow_alive;
}

void MissAttributor::OnAdmitted(uint32_t slot, const HashPair* fine, int64_t num_fine,
                                int64_t num_tokens, int64_t held) {
  OnFreed(slot, fine);
  Record& r = At(slot);
  r.in_flight_from = held;
  r.in_flight_to = std::max(r.in_flight_from,
                            std::min(num_tokens / shadow_->unit(), shadow_->BlocksOf(num_fine)));
  for (int64_t j = r.in_flight_from; j < r.in_flight_to; ++j) {
    ++in_flight_[shadow_->BlockHash(fine, j).hash];
  }
}

void MissAttributor::OnComputed(uint32_t slot, const HashPair* fine, int64_t from, int64_t to) {
  Record& r = At(slot);
  const int64_t end = std::min(to, r.in_flight_to);
  for (int64_t j = std::max(from, r.in_flight_from); j < end; ++j) {
    LeaveInFlight(shadow_->BlockHash(fine, j).hash);
  }
  r.in_flight_from = std::max(r.in_flight_from, std::min(to, r.in_flight_to));
}

void MissAttributor::OnFreed(uint32_t slot, const HashPair* fine) {
  Record& r = At(slot);
  for (int64_t j = r.in_flight_from; j < r.in_flight_to; ++j) {
    LeaveInFlight(shadow_->BlockHash(fine, j).hash);
  }
  r.in_flight_from = r.in_flight_to = 0;
}

void MissAttributor::LeaveInFlight(uint64_t hash) {
  auto it = in_flight_.find(hash);
  PREFIXSIM_CHECK(it != in_flight_.end() && it->second > 0);
  if (--it->second == 0) in_flight_.erase(it);
}

MissAttribution MissAttributor::Attribute(uint32_t slot, const HashPair* fine, int64_t num_fine,
                                          int64_t num_tokens, const PrefixHit& hit,
                                          const ArrivalSighting& sighting,
                                          absl::FunctionRef<int64_t(bool)> checkpointed_hit,
                                          absl::FunctionRef<int64_t()> tier_stored_end) const {
  const Record& r = At(slot);
  const int64_t unit = shadow_->unit();
  const int64_t drop = shadow_->drop_eagle() ? unit : 0;
  const int64_t max_blocks = num_tokens > 0 ? (num_tokens - 1) / unit : 0;
  const int64_t cap = std::max(hit.hit_tokens, max_blocks * unit - drop);
  // A prefix of b U-blocks known to some oracle could at best hit b blocks less the drop.
  auto usable = [&](int64_t tokens) {
    return std::clamp<int64_t>(tokens > 0 ? tokens - drop : 0, 0, cap);
  };
  const int64_t walk_limit = std::min(max_blocks, shadow_->BlocksOf(num_fine));
  const int64_t alive = std::min(r.shadow_alive, walk_limit);
  int64_t pending = alive;  // alive, then in flight
  while (pending < walk_limit && in_flight_.contains(shadow_->BlockHash(fine, pending).hash)) {
    ++pending;
  }
  // Alive implies computed here.
  const int64_t computed_here = shadow_->ComputedBlocks(fine, num_fine, alive, walk_limit);
  // Of the shadow's prefix, the part some holder was allowed to publish: past it, only the
  // round-down to S kept the blocks out of the cache (alignment); before it, a group failed to
  // keep what was published: memory lost what every group had checkpointed (evicted), and the
  // plan's groups never cached the rest (not_checkpointed).
  const int64_t fine_blocks = std::min(r.fine_hit / unit, alive);
  const int64_t published = shadow_->FirstUnpublished(fine, fine_blocks, alive);
  Thresholds t;
  t.hit = hit.hit_tokens;
  t.fine_hit = std::max(t.hit, std::min(r.fine_hit, cap));
  t.published = std::max(t.fine_hit, usable(published * unit));
  t.checkpointed =
      t.published > t.fine_hit
          ? std::clamp(std::min(checkpointed_hit(/*dense=*/false), cap), t.fine_hit, t.published)
          : t.fine_hit;
  t.dense =
      t.published > t.checkpointed
          ? std::clamp(std::min(checkpointed_hit(/*dense=*/true), cap), t.checkpointed, t.published)
          : t.checkpointed;
  t.shadow_hit = std::max(t.published, std::min(shadow_->HitTokens(alive), cap));
  t.in_flight = std::max(t.shadow_hit, usable(pending * unit));
  t.computed_here = std::max(t.in_flight, usable(computed_here * unit));
  // A router recovers only what another replica's own lookup would have hit (the regret's
  // definition); what another replica held but its plan could not serve there is the plan's loss.
  t.elsewhere = std::max(t.computed_here, std::min(sighting.routable_tokens, cap));
  t.held_elsewhere = std::max(t.elsewhere, usable(sighting.elsewhere_tokens));
  t.fleet_known = std::max(t.held_elsewhere, usable(sighting.fleet_known_tokens));
  MissAttribution m;
  auto set = [&m](MissCause cause, int64_t tokens) { m.tokens[static_cast<int>(cause)] = tokens; };
  set(MissCause::kHit, t.hit);
  set(MissCause::kAlignment,
      (t.fine_hit - t.hit) + (t.shadow_hit - t.published) + (t.held_elsewhere - t.elsewhere));
  set(MissCause::kNotCheckpointed, t.published - t.dense);
  set(MissCause::kSparseRetention, t.dense - t.checkpointed);
  set(MissCause::kInFlight, t.in_flight - t.shadow_hit);
  set(MissCause::kEvicted, (t.checkpointed - t.fine_hit) + (t.computed_here - t.in_flight) +
                               (t.fleet_known - t.held_elsewhere));
  set(MissCause::kElsewhere, t.elsewhere - t.computed_here);
  set(MissCause::kCompulsory, cap - t.fleet_known);
  set(MissCause::kTail, num_tokens - cap);
  m.evicted_on_other_replicas = t.fleet_known - t.held_elsewhere;
  // The tiers serve a prefix too, so the evicted tokens below where their hit would end on what
  // they ever stored were stored and dropped; the rest never reached a tier.
  if (const int64_t evicted = m.of(MissCause::kEvicted); evicted > 0) {
    if (const int64_t stored_end = tier_stored_end(); stored_end >= 0) {
      auto below = [stored_end](int64_t from, int64_t to) {
        return std::max<int64_t>(0, std::min(to, stored_end) - from);
      };
      m.tier_evicted = below(t.fine_hit, t.checkpointed) + below(t.in_flight, t.computed_here) +
                       below(t.held_elsewhere, t.fleet_known);
      m.tier_not_stored = evicted - m.tier_evicted;
    }
  }
  m.evicted_by = BreakerOfKind(plan_->groups[r.limiting_group].kind);
  if (t.elsewhere > t.computed_here) m.elsewhere_replica = sighting.elsewhere_replica;
  PREFIXSIM_CHECK(m.total() == num_tokens);
  return m;
}

// miss_attribution.h

void EnableMissAttribution(KvCacheManager& manager, int64_t max_record_blocks,
                           bool shadow_may_read_pool) {
  manager.impl()->EnableMissAttribution(max_record_blocks, shadow_may_read_pool);
}

bool MissAttributionEnabled(const KvCacheManager& manager) {
  return manager.impl()->attributor() != nullptr;
}

int64_t ForgottenComputedBlocks(const KvCacheManager& manager) {
  const MissAttributor* a = manager.impl()->attributor();
  return a != nullptr ? a->shadow().forgotten() : 0;
}

ArrivalSighting SightAtArrival(const std::vector<KvCacheManager*>& replicas, int chosen,
                               const Request& request, std::vector<HashPair>* hashes) {
  ArrivalSighting sight;
  const MissAttributor* attributor = replicas[chosen]->impl()->attributor();
  if (attributor == nullptr || replicas.size() < 2 || request.prompt_tokens <= 1) return sight;
  const ShadowIndex& mine = attributor->shadow();
  HashPrompt(*replicas[chosen], request, hashes);
  const HashPair* fine = hashes->data();
  const int64_t num_fine = static_cast<int64_t>(hashes->size());
  const int64_t unit = mine.unit();
  const int64_t limit = std::min((request.prompt_tokens - 1) / unit, mine.BlocksOf(num_fine));
  auto shadow_of = [&](size_t r) -> const ShadowIndex& {
    return replicas[r]->impl()->attributor()->shadow();
  };
  // What each replica computed is a prefix of the prompt (it computed the blocks before any it
  // computed), so the longest is found by asking each replica for one block past the longest so
  // far, and searching on where it has it.
  const int64_t here = mine.ComputedBlocks(fine, num_fine, 0, limit);
  int64_t known = here;
  for (size_t r = 0; r < replicas.size() && known < limit; ++r) {
    if (static_cast<int>(r) == chosen) continue;
    const ShadowIndex& other = shadow_of(r);
    if (other.HasComputed(fine, known)) {
      known = other.ComputedBlocks(fine, num_fine, known + 1, limit);
    }
  }
  sight.fleet_known_tokens = known * unit;
  if (here >= known) return sight;
  // Only a replica that computed the block where the chosen one's history ends can hold more.
  int64_t best = 0;
  for (size_t r = 0; r < replicas.size(); ++r) {
    if (static_cast<int>(r) == chosen) continue;
    const ShadowIndex& other = shadow_of(r);
    if (!other.HasComputed(fine, here)) continue;
    const int64_t alive = other.AliveBlocks(fine, num_fine, limit);
    best = std::max(best, alive);
  }
  sight.elsewhere_tokens = best * unit;
  return sight;
}

void SetRoutableHits(const std::vector<int64_t>& hits_at_arrival, int chosen,
                     ArrivalSighting* sighting) {
  sighting->routable_tokens = 0;
  sighting->elsewhere_replica = -1;
  for (size_t r = 0; r < hits_at_arrival.size(); ++r) {
    if (static_cast<int>(r) == chosen || hits_at_arrival[r] <= sighting->routable_tokens) continue;
    sighting->routable_tokens = hits_at_arrival[r];
    sighting->elsewhere_replica = static_cast<int>(r);
  }
}

MissAttribution AttributeMiss(KvCacheManager& manager, KvRequestHandle request,
                              const PrefixHit& hit, const ArrivalSighting& sighting) {
  return AttributeMiss(manager, request, hit, sighting, [] { return int64_t{-1}; });
}

MissAttribution AttributeMiss(KvCacheManager& manager, KvRequestHandle request,
                              const PrefixHit& hit, const ArrivalSighting& sighting,
                              absl::FunctionRef<int64_t()> tier_stored_end) {
  KvCacheState& state = *manager.impl();
  PREFIXSIM_CHECK(state.attributor() != nullptr);
  const RequestState& st = state.requests()[request];
  return state.attributor()->Attribute(
      request.slot, st.hashes.data(), static_cast<int64_t>(st.hashes.size()), st.num_tokens, hit,
      sighting, [&](bool dense) { return state.CheckpointedHit(st, dense); }, tier_stored_end);
}

}  // namespace prefixsim::kv
