// How a router sees the replicas' caches (docs/design.md §2 "Fleet", "Router views"): a separate
// knob from the routing rule. A view takes the replicas' store/remove events (or, without events,
// the router's own routing decisions) and, at each arrival, gives the prefix it believes each
// replica holds for the prompt. Real routers do not see the caches exactly: NVIDIA Dynamo's KV
// router drops non-attention groups' events (Dynamo #12169), events arrive late or get lost
// (Dynamo PR #13898), SGLang's cache-aware router keeps its own approximate tree with no engine
// events (sgl-project/sglang #16734). A view is one file in sim/fleet/views/ plus one
// registration line in sim/fleet/view_registry.cc; RouterViewConfig::kind selects it by name.
#ifndef PREFIXSIM_SIM_FLEET_CACHE_VIEW_H_
#define PREFIXSIM_SIM_FLEET_CACHE_VIEW_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "prefixsim/engine_config.h"
#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/request.h"
#include "sim/kv/block_hasher.h"
#include "sim/kv/fleet_index.h"

namespace prefixsim {
namespace fleet {

struct CacheViewConfig {
  RouterViewConfig view;  // the kind and its knobs (engine_config.h)
  int num_replicas = 1;
  uint64_t seed = 0;  // lossy: its own stream, derived from the replay's seed
  const KvPlan* plan = nullptr;
  // Every replica's lookup in one walk (ReplayTuning::fleet_one_walk; sim/kv/fleet_lookup.cc).
  bool one_walk = true;
};

class CacheView {
 public:
  virtual ~CacheView() = default;
  virtual std::string_view name() const = 0;
  // Whether the view reads the replicas' cache events (else OnStored/OnRemoved are not called).
  virtual bool reads_events() const { return true; }
  // Replica `replica`'s cache published / dropped a block under `key` (group `group` of the
  // plan) at simulated time `now_ns`.
  virtual void OnStored(int /*replica*/, uint64_t /*key*/, uint32_t /*tag*/, int /*group*/,
                        int64_t /*now_ns*/) {}
  virtual void OnRemoved(int /*replica*/, uint64_t /*key*/, int /*group*/, int64_t /*now_ns*/) {}
  // (*overlaps)[r]: the prompt tokens the router believes replica r would serve from its cache,
  // for `request` arriving at `now_ns`. `any_replica`: a replica's cache, for its lookup rule.
  // `hashes`: the prompt's block hashes at the plan's hash block H.
  virtual void Overlaps(KvCacheManager& any_replica, const Request& request,
                        const std::vector<kv::HashPair>& hashes, int64_t now_ns,
                        std::vector<int64_t>* overlaps) = 0;
  // The router sent `request` to `replica` (a view without events learns from this).
  virtual void Routed(const Request& /*request*/, const std::vector<kv::HashPair>& /*hashes*/,
                      int /*replica*/, int64_t /*now_ns*/) {}
};

// A view that keeps a fleet index (kv::FleetIndex) of the events it accepts and reads it with the
// replicas' own lookup rule, or, `primary_only`, with a hybrid-unaware router's (the run of the
// primary group's blocks: no other group, no alignment, no cap).
class IndexedView : public CacheView {
 public:
  IndexedView(const CacheViewConfig& config, bool primary_only)
      : index_(config.num_replicas), primary_only_(primary_only), one_walk_(config.one_walk) {}
  void Overlaps(KvCacheManager& any_replica, const Request& request,
                const std::vector<kv::HashPair>& hashes, int64_t now_ns,
                std::vector<int64_t>* overlaps) override;
  const kv::FleetIndex& index() const { return index_; }
  kv::FleetIndex& mutable_index() { return index_; }

 protected:
  // Delayed views apply the events due by `now_ns` here.
  virtual void CatchUp(int64_t /*now_ns*/) {}
  kv::FleetIndex index_;

 private:
  bool primary_only_;
  bool one_walk_;
};

// The view named `config.view.kind`; InvalidArgument (naming the registered ones) otherwise, or
// when a knob is out of range.
absl::StatusOr<std::unique_ptr<CacheView>> NewCacheView(const CacheViewConfig& config);
// InvalidArgument, naming the flag and the engine JSON field, when a view's knob is set but the
// fleet's router reads the caches on another view (`effective_view`) or, empty, not at all: the
// knob would do nothing; or when the delayed or lossy view has no delay or loss: it would be the
// exact view, reported under another name.
absl::Status CheckViewKnobs(const RouterViewConfig& view, std::string_view effective_view,
                            std::string_view router);
std::vector<std::string> RegisteredCacheViews();
// "unknown router view 'x'; did you mean ...?" for a name that is not registered, nullopt for one
// that is.
std::optional<std::string> UnknownCacheViewMessage(std::string_view name);

// Factories, one per file in views/.
std::unique_ptr<CacheView> MakeExactView(const CacheViewConfig& config);
std::unique_ptr<CacheView> MakeDelayedView(const CacheViewConfig& config);
std::unique_ptr<CacheView> MakeLossyView(const CacheViewConfig& config);
std::unique_ptr<CacheView> MakeAttentionOnlyView(const CacheViewConfig& config);
std::unique_ptr<CacheView> MakeApproximateView(const CacheViewConfig& config);

}  // namespace fleet
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_FLEET_CACHE_VIEW_H_
