// least_loaded: the replica with the fewest outstanding tokens (prompt tokens still to compute
// plus the context of running decodes, Simulator::OutstandingTokens); ties to the lowest index.
#include "sim/fleet/router.h"

namespace prefixsim {
namespace fleet {

int LeastLoadedReplica(const FleetView& fleet) {
  int best = 0;
  int64_t best_load = fleet.OutstandingTokens(0);
  for (int r = 1; r < fleet.num_replicas(); ++r) {
    const int64_t load = fleet.OutstandingTokens(r);
    if (load < best_load) {
      best = r;
      best_load = load;
    }
  }
  return best;
}

namespace {

class LeastLoadedRouter final : public Router {
 public:
  std::string_view name() const override { return "least_loaded"; }
  int Route(const Request& /*request*/, const FleetView& fleet) override {
    return LeastLoadedReplica(fleet);
  }
};

}  // namespace

std::unique_ptr<Router> MakeLeastLoadedRouter(const RouterConfig& /*config*/) {
  return std::make_unique<LeastLoadedRouter>();
}

}  // namespace fleet
}  // namespace prefixsim
