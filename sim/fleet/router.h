// Routers: which replica of a fleet serves a request (docs/design.md §2 "Fleet"). A router is one
// file in sim/fleet/routers/ plus one registration line in sim/fleet/router_registry.cc; the engine
// JSON's "router" (or --router) selects it by name.
#ifndef PREFIXSIM_SIM_FLEET_ROUTER_H_
#define PREFIXSIM_SIM_FLEET_ROUTER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/request.h"
#include "sim/engine/simulator.h"

namespace prefixsim {
namespace fleet {

// What a router may see of the fleet: each replica's outstanding work, and its KV cache (to
// subscribe to the cache's events and to run the replica's own lookup rule on a mirror).
class FleetView {
 public:
  explicit FleetView(std::vector<std::unique_ptr<Simulator>>* replicas) : replicas_(replicas) {}
  int num_replicas() const { return static_cast<int>(replicas_->size()); }
  int64_t OutstandingTokens(int replica) const {
    return (*replicas_)[replica]->OutstandingTokens();
  }
  KvCacheManager& kv(int replica) const { return (*replicas_)[replica]->kv(); }

 private:
  std::vector<std::unique_ptr<Simulator>>* replicas_;
};

struct RouterConfig {
  int num_replicas = 1;
  uint64_t seed = 0;          // random: its own stream, derived from --seed
  double overlap_weight = 1;  // kv_aware routers
  const KvPlan* plan = nullptr;
  // kv_aware routers: check every overlap read on a mirror against the replica's own cache.
  bool verify_index = false;
};

class Router {
 public:
  virtual ~Router() = default;
  virtual std::string_view name() const = 0;
  // Whether the router weighs cache overlap against load with RouterConfig::overlap_weight: the
  // fleet's report shows the weight only for routers that read it.
  virtual bool uses_overlap_weight() const { return false; }
  // Called once, before the first request: routers that watch the replicas' caches subscribe to
  // their events here.
  virtual void Attach(FleetView& /*fleet*/) {}
  // The replica, in [0, num_replicas), that serves `request`, which arrives now.
  virtual int Route(const Request& request, const FleetView& fleet) = 0;
  // Overlaps verified against the replicas' caches (RouterConfig::verify_index).
  virtual int64_t index_checks() const { return 0; }
};

// The replica with the fewest outstanding tokens; ties go to the lowest index.
int LeastLoadedReplica(const FleetView& fleet);

// The router registered under `name`; NotFound (naming the registered ones) otherwise.
absl::StatusOr<std::unique_ptr<Router>> NewRouter(std::string_view name,
                                                  const RouterConfig& config);
// "unknown router 'x'; did you mean ...? (registered: ...)" for a name that is not registered,
// nullopt for one that is.
std::optional<std::string> UnknownRouterMessage(std::string_view name);
std::vector<std::string> RegisteredRouters();

// Factories, one per file in routers/.
std::unique_ptr<Router> MakeRoundRobinRouter(const RouterConfig& config);
std::unique_ptr<Router> MakeRandomRouter(const RouterConfig& config);
std::unique_ptr<Router> MakeLeastLoadedRouter(const RouterConfig& config);
std::unique_ptr<Router> MakeSessionRouter(const RouterConfig& config);
std::unique_ptr<Router> MakeKvAwareRouter(const RouterConfig& config);
std::unique_ptr<Router> MakeKvAwareUnalignedRouter(const RouterConfig& config);

}  // namespace fleet
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_FLEET_ROUTER_H_
