// Routers: which replica of a fleet serves a request (docs/design.md §2 "Fleet"). A router is one
// file in sim/fleet/routers/ plus one registration line in sim/fleet/router_registry.cc; the engine
// JSON's "router" (FleetConfig::router) selects it by name.
#ifndef PREFIXSIM_SIM_FLEET_ROUTER_H_
#define PREFIXSIM_SIM_FLEET_ROUTER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "prefixsim/request.h"
#include "sim/engine/simulator.h"

namespace prefixsim {
namespace fleet {

// What a router may see of the fleet: each replica's outstanding work and, for routers with a
// cache view (Router::default_view), the prefix of the arriving prompt that the view believes
// each replica holds (cache_view.h).
class FleetView {
 public:
  FleetView(std::vector<std::unique_ptr<Simulator>>* replicas, const std::vector<int64_t>* overlaps)
      : replicas_(replicas), overlaps_(overlaps) {}
  int num_replicas() const { return static_cast<int>(replicas_->size()); }
  int64_t OutstandingTokens(int replica) const {
    return (*replicas_)[replica]->OutstandingTokens();
  }
  // REQUIRES: the router has a cache view.
  int64_t Overlap(int replica) const { return (*overlaps_)[replica]; }

 private:
  std::vector<std::unique_ptr<Simulator>>* replicas_;
  const std::vector<int64_t>* overlaps_;
};

struct RouterConfig {
  int num_replicas = 1;
  uint64_t seed = 0;          // random: its own stream, derived from the replay's seed
  double overlap_weight = 1;  // kv_aware routers
};

class Router {
 public:
  virtual ~Router() = default;
  virtual std::string_view name() const = 0;
  // Whether the router weighs cache overlap against load with RouterConfig::overlap_weight: the
  // fleet's report shows the weight only for routers that read it.
  virtual bool uses_overlap_weight() const { return false; }
  // The cache view (cache_view.h) the router reads FleetView::Overlap from unless the engine
  // names another; "" for routers that do not look at the caches.
  virtual std::string_view default_view() const { return ""; }
  // The replica, in [0, num_replicas), that serves `request`, which arrives now.
  virtual int Route(const Request& request, const FleetView& fleet) = 0;
  // Requests the router's rule could not place, so far, and where they went instead (e.g.
  // session's "without a session id went to the least loaded replica"): the report says so, as a
  // run whose trace defeats its router is not that router's result. "" for routers whose rule
  // places every request.
  virtual int64_t fallback_requests() const { return 0; }
  virtual std::string_view fallback() const { return ""; }
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
