// round_robin: replica 0, 1, ..., N-1, 0, ... in arrival order, blind to load and cache.
#include "sim/fleet/router.h"

namespace prefixsim {
namespace fleet {
namespace {

class RoundRobinRouter final : public Router {
 public:
  explicit RoundRobinRouter(const RouterConfig& config) : n_(config.num_replicas) {}
  std::string_view name() const override { return "round_robin"; }
  int Route(const Request& /*request*/, const FleetView& /*fleet*/) override {
    const int r = next_;
    next_ = (next_ + 1) % n_;
    return r;
  }

 private:
  int n_;
  int next_ = 0;
};

}  // namespace

std::unique_ptr<Router> MakeRoundRobinRouter(const RouterConfig& config) {
  return std::make_unique<RoundRobinRouter>(config);
}

}  // namespace fleet
}  // namespace prefixsim
